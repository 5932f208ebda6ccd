// SliceGrad (CPU), com.onnxamp version 1: the backward of Slice (runtime/ops/gradient_ops.h).
//
// SliceGrad(dY, x_shape: int64[r], starts, ends[, axes[, steps]]) -> dX of shape x_shape and dY's type: zeros, with
// dY written into the elements the Slice took. starts/ends/axes/steps are read and resolved exactly as Slice-10's
// inputs are (slice_spec.cc: negative, clamped and INT64_MAX-like bounds, negative steps), so the view is the
// forward's. A slice never takes an element twice, so the scatter is a strided copy.
#include <algorithm>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/slice/slice.h"

namespace onnxamp::ops {
namespace {

class SliceGradCpu : public exec::OpKernel {
 public:
  SliceGradCpu(const exec::KernelInfo&, Status*) {}

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* dy, RequireInput(ctx, 0, "dY"));
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* shape_t, RequireInput(ctx, 1, "x_shape"));
    const std::string shape_label = InputLabel(ctx, 1, "x_shape");
    ONNXAMP_ASSIGN_OR_RETURN(const std::vector<int64_t> x_dims, ReadInt64s(*shape_t, shape_label));
    for (int64_t d : x_dims) {
      if (d < 0) return InvalidArgument(shape_label, " has a negative dim: ", ShapeToString(x_dims));
    }
    ONNXAMP_ASSIGN_OR_RETURN(const SliceView v, ResolveSliceInputs(ctx, 2, x_dims));
    if (dy->dims() != v.out_dims) {
      return InvalidArgument(InputLabel(ctx, 0, "dY"), " has shape ", ShapeToString(dy->dims()), "; expected ",
                             ShapeToString(v.out_dims), " (Slice's output for input ", ShapeToString(x_dims), ")");
    }
    return DispatchFloat(dy->dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * dx, ctx.AllocateOutput(0, dy->dtype(), x_dims));
      T* out = dx->mutable_values<T>().data();
      std::fill_n(out, dx->num_elements(), Store<T>(ComputeType<T>(0)));
      // dX's view (the forward's source view) receives dY, read contiguously.
      StridedCopy(out + v.offset, dy->values<T>().data(),
                  MakeCopyPlan(v.out_dims, v.src_strides, ContiguousStrides(v.out_dims)), &ctx.threads());
      return Status::Ok();
    });
  }
};

}  // namespace

void RegisterSliceGradKernels(exec::KernelRegistry& r) {
  const std::vector<DType> types = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64};
  r.Register(
      {kSliceGradOp, exec::kInternalDomain, 1, 1, exec::Device::kCpu, types, 0, &exec::MakeKernel<SliceGradCpu>});
}

}  // namespace onnxamp::ops
