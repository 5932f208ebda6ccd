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
  const ir::Attribute* axis = ctx.node().FindAttribute("axis");
  const DType t = ctx.TypeOf(ctx.X(0));
  ir::Value* shape = ctx.ShapeOf(ctx.X(0));
  // The length Compress reads along: the axis's dim, or the element count without an axis.
  ir::Value* length = axis ? ctx.Emit1("Gather", {shape, ctx.Ints({axis->i})})
                           : ctx.Emit1("ReduceProd", {shape}, {ir::Attribute::Int("keepdims", 1)});
  // The true positions of the condition, without those past that length (which the forward ignores).
  ir::Value* positions = ctx.Emit1("Reshape", {ctx.Emit1("NonZero", {ctx.X(1)}), ctx.Ints({-1})});
  positions =
      ctx.Emit1("Compress", {positions, ctx.Emit1("Less", {positions, length})}, {ir::Attribute::Int("axis", 0)});
  if (axis) {
    return ctx.SetDX(0, ctx.Emit(kGatherGradOp, {ctx.dY(0), positions, shape}, 1, {ir::Attribute::Int("axis", axis->i)},
                                 exec::kInternalDomain, t)[0]);
  }
  // Without an axis Compress reads the flattened input: scatter into its element count, then take X's shape.
  ir::Value* flat = ctx.Emit(kGatherGradOp, {ctx.dY(0), positions, length}, 1, {ir::Attribute::Int("axis", 0)},
                             exec::kInternalDomain, t)[0];
  return ctx.SetDX(0, ctx.Emit1("Reshape", {flat, shape}));
}

}  // namespace

void RegisterCompressOpInfos(OpInfoRegistry& r) {
  r.Add("NonZero").NotDifferentiable("int64 coordinates");
  r.Add("Compress").Gradient(9, INT64_MAX, &CompressGradient);
  r.Add("EyeLike").Gradient(9, INT64_MAX, &ZeroGradient);
}

}  // namespace onnxamp::ops
