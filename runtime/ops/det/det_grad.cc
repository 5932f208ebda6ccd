// The OpInfo of Det and its gradient builder: one com.onnxamp DetGrad(dY, X) -> dY * adj(X)^T (det/det_cpu.cc).
#include "runtime/executor/graph_optimizer.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/op_info.h"

namespace onnxamp::ops {
namespace {

Status DetGradient(GradContext& ctx) {
  if (!ctx.NeedsDX(0) || !ctx.dY(0)) return Status::Ok();
  return ctx.SetDX(0,
                   ctx.Emit(kDetGradOp, {ctx.dY(0), ctx.X(0)}, 1, {}, exec::kInternalDomain, ctx.TypeOf(ctx.X(0)))[0]);
}

}  // namespace

void RegisterDetOpInfos(OpInfoRegistry& r) {
  r.Add("Det")
      .Keep("a product of M pivots: overflows fp16 already for moderate M")
      .Gradient(11, INT64_MAX, &DetGradient);
  r.Add(kDetGradOp, exec::kInternalDomain).NotDifferentiable(kBackwardOpReason);
}

}  // namespace onnxamp::ops
