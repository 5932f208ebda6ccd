// MaxUnpool (CPU, opsets 9-25): the inverse of MaxPool with its Indices. I holds MaxPool's flat indices (storage_order
// 0) into the unpooled shape, per spatial dim (in - 1) * stride + kernel - pad_begin - pad_end: Y is zeros with X's
// element e at the position I.flat[e] names there. With output_shape (input 2) that shape is padded with zeros at the
// end of each spatial dim (as the ONNX reference and ONNX Runtime do). An index outside the unpooled shape is an error
// naming the element. Float types. com.onnxamp MaxUnpoolGrad(dY, I, X_shape[, output_shape]) gathers dY back at those
// positions.
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/conv_geometry.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/pool/unpool.h"
#include "runtime/ops/pool/unpool_offset.h"

namespace onnxamp::ops {
namespace {

// `given`: output_shape (input shape_index), or null.
StatusOr<UnpoolShape> ResolveUnpoolShape(const exec::KernelContext& ctx, const WindowAttrs& attrs, const ir::Tensor& x,
                                         const ir::Tensor& indices, const std::vector<int64_t>* given,
                                         size_t shape_index) {
  const size_t spatial = attrs.kernel_shape.size();
  if (x.rank() != static_cast<int64_t>(spatial) + 2) {
    return InvalidArgument("X ", ShapeToString(x.dims()), " must have rank ", spatial + 2, " for kernel_shape of ",
                           spatial, " dims");
  }
  if (indices.dtype() != DType::kInt64 || indices.dims() != x.dims()) {
    return InvalidArgument("the indices must be int64 of X's shape ", ShapeToString(x.dims()), ", got ",
                           DTypeName(indices.dtype()), " ", ShapeToString(indices.dims()));
  }
  UnpoolShape s;
  s.inferred = {x.dims()[0], x.dims()[1]};
  for (size_t d = 0; d < spatial; ++d) {
    const int64_t stride = attrs.strides.empty() ? 1 : attrs.strides[d];
    const int64_t pads = attrs.pads.empty() ? 0 : attrs.pads[d] + attrs.pads[spatial + d];
    int64_t dim = 0;
    if (__builtin_mul_overflow(x.dims()[d + 2] - 1, stride, &dim) ||
        __builtin_add_overflow(dim, attrs.kernel_shape[d] - pads, &dim) || dim < 0) {
      return InvalidArgument("X ", ShapeToString(x.dims()), ": the unpooled dim ", d + 2, " is negative or overflows");
    }
    s.inferred.push_back(dim);
  }
  s.out = s.inferred;
  if (given) {
    bool ok = given->size() == s.inferred.size();
    for (size_t d = 0; ok && d < given->size(); ++d)
      ok = d < 2 ? (*given)[d] == s.inferred[d] : (*given)[d] >= s.inferred[d];
    if (!ok) {
      return InvalidArgument(InputLabel(ctx, shape_index, "output_shape"), " ", ShapeToString(*given),
                             " must keep N and C and be "
                             "at least the unpooled shape ",
                             ShapeToString(s.inferred));
    }
    s.out = *given;
  }
  return s;
}

}  // namespace

StatusOr<UnpoolShape> ResolveUnpool(const exec::KernelContext& ctx, const WindowAttrs& attrs, bool grad) {
  ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* first, RequireInput(ctx, 0, grad ? "dY" : "X"));
  ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* indices, RequireInput(ctx, 1, "I"));
  std::vector<int64_t> given;
  const ir::Tensor* shape_t = ctx.input(grad ? 3 : 2);
  if (shape_t) {
    ONNXAMP_ASSIGN_OR_RETURN(given, ReadInt64s(*shape_t, InputLabel(ctx, grad ? 3 : 2, "output_shape")));
  }
  // The forward's X: the input itself, or (backward) a tensor of I's shape standing for it.
  const ir::Tensor& x_like = grad ? *indices : *first;
  ONNXAMP_ASSIGN_OR_RETURN(UnpoolShape s,
                           ResolveUnpoolShape(ctx, attrs, x_like, *indices, shape_t ? &given : nullptr, grad ? 3 : 2));
  ONNXAMP_RETURN_IF_ERROR(CheckFitsInMemory(DType::kFloat64, s.out, "the unpooled output"));
  return s;
}

Status CheckUnpoolDy(const exec::KernelContext& ctx, const UnpoolShape& s) {
  const ir::Tensor* dy = ctx.input(0);
  if (dy->dims() != s.out) {
    return InvalidArgument(InputLabel(ctx, 0, "dY"), " has shape ", ShapeToString(dy->dims()), "; expected ",
                           ShapeToString(s.out));
  }
  return Status::Ok();
}

namespace {

// For each element e of the indices: the flat offset in `out` of the position I.flat[e] names in `inferred`.
StatusOr<std::vector<int64_t>> UnpoolOffsets(const exec::KernelContext& ctx, const ir::Tensor& indices,
                                             const UnpoolShape& s) {
  const std::vector<int64_t> from = ContiguousStrides(s.inferred), to = ContiguousStrides(s.out);
  const int64_t size = DimProduct(s.inferred, 0, s.inferred.size());
  const auto idx = indices.values<int64_t>();
  std::vector<int64_t> out(idx.size());
  for (size_t e = 0; e < idx.size(); ++e) {
    out[e] = UnpoolOffset(idx[e], static_cast<int>(from.size()), from.data(), to.data(), size);
    if (out[e] < 0) {
      return OutOfRange("index ", idx[e], " (element ", e, " of ", InputLabel(ctx, 1, "I"),
                        ") is outside the unpooled shape ", ShapeToString(s.inferred));
    }
  }
  return out;
}

class MaxUnpoolCpu : public exec::OpKernel {
 public:
  MaxUnpoolCpu(const exec::KernelInfo& info, Status* st) : grad_(info.node.op_type() == kMaxUnpoolGradOp) {
    *st = ParseWindowAttrs(info.node, WindowAttrSpec{/*kernel_shape_required=*/true, /*transpose=*/false}, &attrs_);
  }

  // MaxUnpool(X, I[, output_shape]) -> Y; MaxUnpoolGrad(dY, I, X_shape[, output_shape]) -> dX.
  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const UnpoolShape s, ResolveUnpool(ctx, attrs_, grad_));
    const ir::Tensor* first = ctx.input(0);
    const ir::Tensor* indices = ctx.input(1);
    ONNXAMP_ASSIGN_OR_RETURN(const std::vector<int64_t> offsets, UnpoolOffsets(ctx, *indices, s));
    if (grad_) ONNXAMP_RETURN_IF_ERROR(CheckUnpoolDy(ctx, s));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, first->dtype(), grad_ ? indices->dims() : s.out));
    return DispatchFloat(first->dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const auto in = first->values<T>();
      auto out = y->mutable_values<T>();
      if (grad_) {
        for (size_t e = 0; e < offsets.size(); ++e) out[e] = in[static_cast<size_t>(offsets[e])];
        return Status::Ok();
      }
      std::fill(out.begin(), out.end(), Store<T>(ComputeType<T>(0)));
      for (size_t e = 0; e < offsets.size(); ++e) out[static_cast<size_t>(offsets[e])] = in[e];
      return Status::Ok();
    });
  }

 private:
  bool grad_;
  WindowAttrs attrs_;
};

}  // namespace

void RegisterMaxUnpoolKernels(exec::KernelRegistry& r) {
  const std::vector<DType> types = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64};
  r.Register({"MaxUnpool", "", 9, 25, exec::Device::kCpu, types, 0, &exec::MakeKernel<MaxUnpoolCpu>});
  r.Register(
      {kMaxUnpoolGradOp, exec::kInternalDomain, 1, 1, exec::Device::kCpu, types, 0, &exec::MakeKernel<MaxUnpoolCpu>});
}

}  // namespace onnxamp::ops
