// OpInfos of NonZero, Compress and EyeLike. Compress along an axis is Gather at the true positions of its condition,
// so its gradient is GatherGrad of dY at Reshape(NonZero(condition), [-1]) (the flattened input without an axis,
// then reshaped back); EyeLike's output does not depend on its input's values: a zero gradient.
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/op_info.h"

namespace onnxamp::ops {
namespace {

Status CompressGradient(GradContext& ctx) {
  if (!ctx.NeedsDX(0) || !ctx.dY(0)) return Status::Ok();
  ir::Value* positions = ctx.Emit1("Reshape", {ctx.Emit1("NonZero", {ctx.X(1)}), ctx.Ints({-1})});
  const ir::Attribute* axis = ctx.node().FindAttribute("axis");
  const DType t = ctx.TypeOf(ctx.X(0));
  if (axis) {
    return ctx.SetDX(0, ctx.Emit(kGatherGradOp, {ctx.dY(0), positions, ctx.ShapeOf(ctx.X(0))}, 1,
                                 {ir::Attribute::Int("axis", axis->i)}, exec::kInternalDomain, t)[0]);
  }
  // Without an axis Compress reads the flattened input: scatter into its element count, then take X's shape.
  ir::Value* count = ctx.Emit1("ReduceProd", {ctx.ShapeOf(ctx.X(0))}, {ir::Attribute::Int("keepdims", 1)});
  ir::Value* flat = ctx.Emit(kGatherGradOp, {ctx.dY(0), positions, count}, 1, {ir::Attribute::Int("axis", 0)},
                             exec::kInternalDomain, t)[0];
  return ctx.SetDX(0, ctx.Emit1("Reshape", {flat, ctx.ShapeOf(ctx.X(0))}));
}

Status EyeLikeGradient(GradContext& ctx) {
  if (!ctx.NeedsDX(0)) return Status::Ok();
  return ctx.SetDX(0, ctx.Zeros(ctx.TypeOf(ctx.X(0)), ctx.X(0)));
}

}  // namespace

void RegisterCompressOpInfos(OpInfoRegistry& r) {
  r.Add("NonZero").NotDifferentiable("int64 coordinates");
  r.Add("Compress").Gradient(9, INT64_MAX, &CompressGradient);
  r.Add("EyeLike").Gradient(9, INT64_MAX, &EyeLikeGradient);
}

}  // namespace onnxamp::ops
