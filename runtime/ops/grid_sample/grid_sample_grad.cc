// GridSample's gradient builder: one com.onnxamp GridSampleGrad(dY, X, grid) whose outputs dX and dGrid are requested
// only for the inputs that need them.
#include "runtime/executor/graph_optimizer.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/op_info.h"

namespace onnxamp::ops {
namespace {

Status GridSampleGradient(GradContext& ctx) {
  if (!ctx.dY(0)) return Status::Ok();
  return ctx.EmitInputGradients(kGridSampleGradOp, {ctx.dY(0), ctx.X(0), ctx.X(1)}, {ctx.NeedsDX(0), ctx.NeedsDX(1)},
                                ctx.node().attributes(), ctx.TypeOf(ctx.X(0)));
}

}  // namespace

void RegisterGridSampleOpInfos(OpInfoRegistry& r) {
  r.Add("GridSample")
      .Keep("sampling coordinates: fp16 resolves the [-1, 1] grid to about 1e-3 (torch.autocast runs it in FP32)")
      .Gradient(16, INT64_MAX, &GridSampleGradient);
  r.Add(kGridSampleGradOp, exec::kInternalDomain).NotDifferentiable(kBackwardOpReason);
}

}  // namespace onnxamp::ops
