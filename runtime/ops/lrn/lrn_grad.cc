// LRN's gradient builder: one com.onnxamp LRNGrad(dY, X) with the forward's attributes (the window sums are
// recomputed from X in double rather than stashed).
#include "runtime/executor/graph_optimizer.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/op_info.h"

namespace onnxamp::ops {
namespace {

Status LrnGradient(GradContext& ctx) {
  if (!ctx.NeedsDX(0) || !ctx.dY(0)) return Status::Ok();
  return ctx.SetDX(0, ctx.Emit(kLrnGradOp, {ctx.dY(0), ctx.X(0)}, 1, ctx.node().attributes(), exec::kInternalDomain,
                               ctx.TypeOf(ctx.X(0)))[0]);
}

}  // namespace

void RegisterLrnOpInfos(OpInfoRegistry& r) {
  r.Add("LRN")
      .Keep("sums of squares over channels: fp16 squares overflow above 256")
      .Gradient(1, INT64_MAX, &LrnGradient);
  r.Add(kLrnGradOp, exec::kInternalDomain).NotDifferentiable(kBackwardOpReason);
}

}  // namespace onnxamp::ops
