// Expand (CPU): broadcasts the input to the broadcast of its shape and the `shape` input, any element type,
// opsets 8-25. The copy reads the input with stride 0 along broadcast dims; a result too large for memory is
// refused by the output allocation (ResourceExhausted naming its byte size), an overflowing one with OutOfRange.
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/broadcast.h"
#include "runtime/ops/common/shape_util.h"

namespace onnxamp::ops {
namespace {

class ExpandCpu : public exec::OpKernel {
 public:
  ExpandCpu(const exec::KernelInfo&, Status*) {}

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, 0, "input"));
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* s, RequireInput(ctx, 1, "shape"));
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<int64_t> shape, ReadInt64s(*s, InputLabel(ctx, 1, "shape")));
    for (int64_t d : shape) {
      if (d < 0) return InvalidArgument(InputLabel(ctx, 1, "shape"), " ", ShapeToString(shape), " has a negative dim");
    }
    StatusOr<std::vector<int64_t>> out = BroadcastShapes(x->dims(), shape);
    if (!out.ok()) {
      return InvalidArgument("cannot expand input ", ShapeToString(x->dims()), " to ", ShapeToString(shape), ": ",
                             out.status().message());
    }
    const std::vector<int64_t> src_strides = BroadcastStrides(x->dims(), *out);
    return DispatchByElementSize(x->dtype(), "Expand", [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, AllocateAnyOutput(ctx, 0, x->dtype(), *out));
      StridedCopy(MutableElementsOf<T>(*y), ElementsOf<T>(*x), MakeCopyPlan(*out, ContiguousStrides(*out), src_strides),
                  std::is_same_v<T, std::string> ? nullptr : &ctx.threads());
      return Status::Ok();
    });
  }
};

}  // namespace

void RegisterExpandKernels(exec::KernelRegistry& r) {
  r.Register({"Expand", "", 8, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<ExpandCpu>});
}

}  // namespace onnxamp::ops
