// NonZero (opsets 9-25), Compress (9-25; negative axes from 11) and EyeLike (9-25) on the CPU.
//   NonZero(X) -> int64 [rank, count]: the coordinates of X's nonzero elements in row-major order (a scalar counts as
//     rank 1). Numeric types and bool.
//   Compress(input, condition, axis) -> the slices along `axis` (the flattened input without one) whose condition is
//     true; a condition shorter than the axis drops the slices past its end. Any element type.
//   EyeLike(X, dtype, k) -> X's 2-D shape with ones on diagonal k (k > 0 above the main one) and zeros elsewhere, of
//     type `dtype` (default: X's). Numeric types and bool.
#include <algorithm>
#include <optional>
#include <vector>

#include "runtime/executor/kernel.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/common/elementwise.h"
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/compress/eye_like.h"

namespace onnxamp::ops {
namespace {

class NonZeroCpu : public exec::OpKernel {
 public:
  NonZeroCpu(const exec::KernelInfo&, Status*) {}

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, 0, "X"));
    std::vector<int64_t> flat;
    ONNXAMP_RETURN_IF_ERROR(DispatchNumericOrBool(x->dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const auto v = x->values<T>();
      for (size_t i = 0; i < v.size(); ++i) {
        if (Load<T>(v[i]) != ComputeType<T>(0)) flat.push_back(static_cast<int64_t>(i));
      }
      return Status::Ok();
    }));
    const std::vector<int64_t> dims = x->rank() == 0 ? std::vector<int64_t>{1} : x->dims();
    const int64_t rank = static_cast<int64_t>(dims.size()), count = static_cast<int64_t>(flat.size());
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, DType::kInt64, {rank, count}));
    auto out = y->mutable_values<int64_t>();
    const std::vector<int64_t> strides = ContiguousStrides(dims);
    for (int64_t j = 0; j < count; ++j) {
      int64_t rest = flat[static_cast<size_t>(j)];
      for (int64_t d = 0; d < rank; ++d) {
        out[static_cast<size_t>(d * count + j)] = rest / strides[static_cast<size_t>(d)];
        rest %= strides[static_cast<size_t>(d)];
      }
    }
    return Status::Ok();
  }
};

class CompressCpu : public exec::OpKernel {
 public:
  CompressCpu(const exec::KernelInfo& info, Status* st) {
    auto axis = OptionalIntAttribute(info.node, "axis");
    if (!axis.ok()) {
      *st = axis.status();
      return;
    }
    axis_ = *axis;
  }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, 0, "input"));
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* cond, RequireInput(ctx, 1, "condition"));
    if (cond->dtype() != DType::kBool || cond->rank() != 1) {
      return InvalidArgument(InputLabel(ctx, 1, "condition"), " must be a 1-D bool tensor, got ",
                             DTypeName(cond->dtype()), " ", ShapeToString(cond->dims()));
    }
    // The input as [outer, n, inner] around the axis (the flattened input: [1, size, 1]).
    int64_t outer = 1, n = x->num_elements(), inner = 1;
    std::vector<int64_t> out_dims;
    int64_t axis = -1;
    if (axis_) {
      ONNXAMP_ASSIGN_OR_RETURN(axis, NormalizeAxis(*axis_, x->rank()));
      outer = DimProduct(x->dims(), 0, static_cast<size_t>(axis));
      n = x->dims()[static_cast<size_t>(axis)];
      inner = DimProduct(x->dims(), static_cast<size_t>(axis) + 1, x->dims().size());
    }
    const auto c = cond->values<bool>();
    std::vector<int64_t> kept;
    for (int64_t i = 0; i < std::min<int64_t>(n, static_cast<int64_t>(c.size())); ++i) {
      if (c[static_cast<size_t>(i)]) kept.push_back(i);
    }
    const int64_t count = static_cast<int64_t>(kept.size());
    if (axis_) {
      out_dims = x->dims();
      out_dims[static_cast<size_t>(axis)] = count;
    } else {
      out_dims = {count};
    }
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, AllocateAnyOutput(ctx, 0, x->dtype(), out_dims));
    return DispatchByElementSize(x->dtype(), "Compress", [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const T* src = ElementsOf<T>(*x);
      T* dst = MutableElementsOf<T>(*y);
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t j = 0; j < count; ++j) {
          const T* from = src + (o * n + kept[static_cast<size_t>(j)]) * inner;
          std::copy(from, from + inner, dst + (o * count + j) * inner);
        }
      }
      return Status::Ok();
    });
  }

 private:
  std::optional<int64_t> axis_;
};

class EyeLikeCpu : public exec::OpKernel {
 public:
  EyeLikeCpu(const exec::KernelInfo& info, Status* st) { *st = spec_.Parse(info.node); }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, 0, "input"));
    ONNXAMP_ASSIGN_OR_RETURN(const DType t, spec_.Resolve(ctx, *x));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, t, x->dims()));
    const int64_t rows = x->dims()[0], cols = x->dims()[1];
    return DispatchNumericOrBool(t, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      auto out = y->mutable_values<T>();
      std::fill(out.begin(), out.end(), Store<T>(ComputeType<T>(0)));
      for (int64_t i = 0; i < rows; ++i) {
        const int64_t j = i + spec_.k;
        if (j >= 0 && j < cols) out[static_cast<size_t>(i * cols + j)] = Store<T>(ComputeType<T>(1));
      }
      return Status::Ok();
    });
  }

 private:
  EyeLikeSpec spec_;
};

}  // namespace

void RegisterCompressKernels(exec::KernelRegistry& r) {
  r.Register({"NonZero", "", 9, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<NonZeroCpu>});
  r.Register({"Compress", "", 9, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<CompressCpu>});
  r.Register({"EyeLike", "", 9, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<EyeLikeCpu>});
}

}  // namespace onnxamp::ops
