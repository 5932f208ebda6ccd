// Gradient builder of TopK (every opset): the gradient of Values scattered into zeros of X's run-time shape at
// Indices along the axis, with com.onnxamp GatherElementsGrad (Values = GatherElements(X, Indices, axis)). Indices
// (int64) get no gradient; the Indices output is created when the model omitted it. k is an integer.
#include "runtime/executor/graph_optimizer.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/op_info.h"

namespace onnxamp::ops {
namespace {

Status TopKGradient(GradContext& ctx) {
  if (!ctx.NeedsDX(0) || !ctx.dY(0)) return Status::Ok();
  const int64_t axis = ctx.node().GetInt("axis", -1);
  ir::Value* dx = ctx.Emit(kGatherElementsGradOp, {ctx.dY(0), ctx.ForwardOutput(1), ctx.ShapeOf(ctx.X(0))}, 1,
                           {ir::Attribute::Int("axis", axis)}, exec::kInternalDomain, ctx.TypeOf(ctx.X(0)))[0];
  return ctx.SetDX(0, dx);
}

}  // namespace

void RegisterTopKOpInfos(OpInfoRegistry& r) {
  r.Add("TopK").Keep("rounding makes ties that change which elements it picks").Gradient(1, INT64_MAX, &TopKGradient);
}

}  // namespace onnxamp::ops
