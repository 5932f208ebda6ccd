// Gradient builders of Gather (every opset) and GatherElements (11+): GatherGrad / GatherElementsGrad of dY and the
// indices into data's shape (Shape(data), stashed after data's producer), with the forward's axis. Indices are
// integers and get no gradient. Also the OpInfos of gather/.
#include "runtime/executor/graph_optimizer.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/op_info.h"

namespace onnxamp::ops {
namespace {

Status GatherGradient(GradContext& ctx) {
  if (!ctx.NeedsDX(0) || !ctx.dY(0)) return Status::Ok();
  // Gather's only attribute, read as GatherCpu reads it (range-checked by the kernels against the run's rank).
  const int64_t axis = ctx.node().GetInt("axis", 0);
  ir::Value* dx = ctx.Emit(kGatherGradOp, {ctx.dY(0), ctx.X(1), ctx.ShapeOf(ctx.X(0))}, 1,
                           {ir::Attribute::Int("axis", axis)}, exec::kInternalDomain, ctx.TypeOf(ctx.X(0)))[0];
  return ctx.SetDX(0, dx);
}

Status GatherElementsGradient(GradContext& ctx) {
  if (!ctx.NeedsDX(0) || !ctx.dY(0)) return Status::Ok();
  const int64_t axis = ctx.node().GetInt("axis", 0);
  ir::Value* dx = ctx.Emit(kGatherElementsGradOp, {ctx.dY(0), ctx.X(1), ctx.ShapeOf(ctx.X(0))}, 1,
                           {ir::Attribute::Int("axis", axis)}, exec::kInternalDomain, ctx.TypeOf(ctx.X(0)))[0];
  return ctx.SetDX(0, dx);
}

// The backward ops' own gradients (second derivatives): both are linear in dY, and their adjoints gather the incoming
// gradient at the same indices, along the same axis: Gather and GatherElements again.
template <bool kElements>
Status GatherGradGradient(GradContext& ctx) {
  if (!ctx.NeedsDX(0)) return Status::Ok();
  if (!ctx.dY(0)) return ctx.SetDX(0, ctx.Zeros(ctx.TypeOf(ctx.X(0)), ctx.X(0)));
  return ctx.SetDX(0, ctx.Emit1(kElements ? "GatherElements" : "Gather", {ctx.dY(0), ctx.X(1)},
                                {ir::Attribute::Int("axis", ctx.node().GetInt("axis", 0))}));
}

}  // namespace

void RegisterGatherOpInfos(OpInfoRegistry& r) {
  // Opset 11 allowed negative indices, 13 bfloat16: GatherGrad handles both.
  r.Add("Gather").Gradient(1, INT64_MAX, &GatherGradient);
  r.Add("GatherElements").Gradient(11, INT64_MAX, &GatherElementsGradient);
  r.Add(kGatherGradOp, exec::kInternalDomain).Gradient(1, INT64_MAX, &GatherGradGradient<false>);
  r.Add(kGatherElementsGradOp, exec::kInternalDomain).Gradient(1, INT64_MAX, &GatherGradGradient<true>);
}

}  // namespace onnxamp::ops
