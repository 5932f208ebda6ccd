// OneHot (CPU, opsets 9 and 11): output[..., j at `axis`, ...] = values[1] where j equals the index at that position,
// values[0] elsewhere. Indices and depth of any numeric type (floats truncated toward zero, as ONNX Runtime does);
// from opset 11 an index in [-depth, -1] counts from the end (opset 9: an index outside [0, depth) sets no element).
// An index outside [-depth, depth) sets no element. Values of any element type.
#include <cmath>

#include "runtime/executor/kernel.h"
#include "runtime/ops/common/elementwise.h"
#include "runtime/ops/common/shape_util.h"

namespace onnxamp::ops {
namespace {

// The elements of a numeric tensor as int64 (floats truncated; NaN and out-of-range floats to INT64_MIN, which no
// depth reaches).
StatusOr<std::vector<int64_t>> ReadAsInt64(const ir::Tensor& t, const std::string& label) {
  std::vector<int64_t> out(static_cast<size_t>(t.num_elements()));
  Status st = DispatchNumeric(t.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    const auto v = t.values<T>();
    for (size_t i = 0; i < out.size(); ++i) {
      if constexpr (kIsFloatLike<T>) {
        const double d = static_cast<double>(Load(v[i]));
        out[i] = std::isfinite(d) && std::fabs(d) < 9.2e18 ? static_cast<int64_t>(d) : INT64_MIN;
      } else if constexpr (std::is_unsigned_v<T>) {
        out[i] = v[i] > static_cast<T>(INT64_MAX) ? INT64_MIN : static_cast<int64_t>(v[i]);
      } else {
        out[i] = static_cast<int64_t>(v[i]);
      }
    }
    return Status::Ok();
  });
  if (!st.ok()) return InvalidArgument(label, ": ", st.message());
  return out;
}

class OneHotCpu : public exec::OpKernel {
 public:
  OneHotCpu(const exec::KernelInfo& info, Status* st) : negative_from_end_(info.opset >= 11) {
    auto a = IntAttribute(info.node, "axis", -1);
    if (!a.ok()) {
      *st = a.status();
    } else {
      axis_ = *a;
    }
  }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* indices, RequireInput(ctx, 0, "indices"));
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* depth_t, RequireInput(ctx, 1, "depth"));
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* values, RequireInput(ctx, 2, "values"));
    const std::string depth_label = InputLabel(ctx, 1, "depth");
    if (depth_t->num_elements() != 1) {
      return InvalidArgument(depth_label, " must hold one value, got ", depth_t->num_elements());
    }
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<int64_t> depths, ReadAsInt64(*depth_t, depth_label));
    const int64_t depth = depths[0];
    if (depth < 1) return InvalidArgument(depth_label, " is ", depth, ", expected at least 1");
    if (values->num_elements() != 2) {
      return InvalidArgument(InputLabel(ctx, 2, "values"), " must hold two values (off, on), got ",
                             values->num_elements());
    }
    const int64_t rank = indices->rank() + 1;
    if (axis_ < -rank || axis_ >= rank) {
      return InvalidArgument("attribute 'axis' is ", axis_, ", outside [", -rank, ", ", rank - 1, "]");
    }
    const int64_t axis = axis_ < 0 ? axis_ + rank : axis_;
    std::vector<int64_t> dims = indices->dims();
    dims.insert(dims.begin() + axis, depth);
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < indices->rank(); ++d) (d < axis ? outer : inner) *= indices->dims()[d];
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<int64_t> idx, ReadAsInt64(*indices, InputLabel(ctx, 0, "indices")));
    const bool negative_from_end = negative_from_end_;
    return DispatchByElementSize(values->dtype(), "OneHot", [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, AllocateAnyOutput(ctx, 0, values->dtype(), dims));
      const T* v = ElementsOf<T>(*values);
      T* out = MutableElementsOf<T>(*y);
      const int64_t n = outer * depth * inner;
      for (int64_t i = 0; i < n; ++i) out[i] = v[0];
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t i = 0; i < inner; ++i) {
          int64_t k = idx[o * inner + i];
          if (negative_from_end && k < 0 && k >= -depth) k += depth;
          if (k >= 0 && k < depth) out[(o * depth + k) * inner + i] = v[1];
        }
      }
      return Status::Ok();
    });
  }

 private:
  bool negative_from_end_;
  int64_t axis_ = -1;
};

}  // namespace

void RegisterOneHotKernels(exec::KernelRegistry& r) {
  r.Register({"OneHot", "", 9, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<OneHotCpu>});
}

}  // namespace onnxamp::ops
