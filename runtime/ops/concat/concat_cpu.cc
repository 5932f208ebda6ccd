// Concat (CPU): joins inputs along `axis`, any element type (strings included), opsets 1-25.
//
// Every input must have the same rank and the same dims except along the axis (inputs of size 0 along it are
// fine). Opset 1-3 defaults the axis to 1; from opset 4 it is required; negative axes from opset 11 (accepted at
// every opset). Each output row of the dims before the axis is a sequence of one contiguous block per input.
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/concat/concat.h"

namespace onnxamp::ops {
namespace {

class ConcatCpu : public exec::OpKernel {
 public:
  ConcatCpu(const exec::KernelInfo& info, Status* status) {
    StatusOr<int64_t> axis = ParseConcatAxis(info.node, info.opset);
    if (!axis.ok()) {
      *status = axis.status();
      return;
    }
    axis_ = *axis;
  }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ConcatParts parts, ResolveConcat(ctx, axis_));
    const DType dtype = parts.inputs[0]->dtype();
    return DispatchByElementSize(dtype, "Concat", [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, AllocateAnyOutput(ctx, 0, dtype, parts.out_dims));
      T* dst = MutableElementsOf<T>(*y);
      // One strided copy per input: rows of its block, from the input's row stride to the output's.
      for (size_t i = 0; i < parts.inputs.size(); ++i) {
        StridedCopy(dst + parts.offsets[i], ElementsOf<T>(*parts.inputs[i]), parts.PartPlan(i),
                    std::is_same_v<T, std::string> ? nullptr : &ctx.threads());
      }
      return Status::Ok();
    });
  }

 private:
  int64_t axis_ = 1;
};

}  // namespace

void RegisterConcatKernels(exec::KernelRegistry& r) {
  r.Register({"Concat", "", 1, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<ConcatCpu>});
}

}  // namespace onnxamp::ops
