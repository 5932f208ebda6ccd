// Split (CPU): cuts the input along `axis` (default 0) into the node's outputs, any element type, opsets 1-25.
//
// Where the sizes come from: opset 1 the optional input 1 or the `split` attribute, opsets 2-12 the `split`
// attribute, 13+ the optional input 1. Without sizes the dim is split evenly over the outputs (it must divide);
// from opset 18 `num_outputs` may be given instead: then every part has ceil(dim / num_outputs) elements except
// the last, which takes what is left.
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/split/split.h"

namespace onnxamp::ops {
namespace {

class SplitCpu : public exec::OpKernel {
 public:
  SplitCpu(const exec::KernelInfo& info, Status* status) { *status = spec_.Parse(info.node, info.opset); }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, 0, "input"));
    ONNXAMP_ASSIGN_OR_RETURN(const SplitParts parts, spec_.Resolve(ctx, *x));
    return DispatchByElementSize(x->dtype(), "Split", [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      for (size_t i = 0; i < parts.sizes.size(); ++i) {
        if (!ctx.output_requested(i)) continue;
        ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, AllocateAnyOutput(ctx, i, x->dtype(), parts.PartDims(x->dims(), i)));
        StridedCopy(MutableElementsOf<T>(*y), ElementsOf<T>(*x) + parts.offsets[i], parts.PartPlan(i),
                    std::is_same_v<T, std::string> ? nullptr : &ctx.threads());
      }
      return Status::Ok();
    });
  }

 private:
  SplitSpec spec_;
};

}  // namespace

void RegisterSplitKernels(exec::KernelRegistry& r) {
  r.Register({"Split", "", 1, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<SplitCpu>});
}

}  // namespace onnxamp::ops
