// Expand (CPU): broadcasts the input to the broadcast of its shape and the `shape` input, any element type,
// opsets 8-25. The copy reads the input with stride 0 along broadcast dims; a result too large for memory is
// refused by the output allocation (ResourceExhausted naming its byte size), an overflowing one with OutOfRange.
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/expand/expand.h"

namespace onnxamp::ops {
namespace {

class ExpandCpu : public exec::OpKernel {
 public:
  ExpandCpu(const exec::KernelInfo&, Status*) {}

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, 0, "input"));
    ONNXAMP_ASSIGN_OR_RETURN(const ExpandShape e, ResolveExpand(ctx, *x));
    return DispatchByElementSize(x->dtype(), "Expand", [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, AllocateAnyOutput(ctx, 0, x->dtype(), e.out_dims));
      StridedCopy(MutableElementsOf<T>(*y), ElementsOf<T>(*x),
                  MakeCopyPlan(e.out_dims, ContiguousStrides(e.out_dims), e.src_strides),
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
