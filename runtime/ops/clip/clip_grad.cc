// Gradient builder of Clip, with PyTorch's clamp rule: dX = dY where min <= X <= max (the bounds themselves
// included), else 0. From opset 11 the bounds are optional inputs, and float bounds that need a gradient get the
// sum of dY over the elements they clipped: dmin where X < min (and min < max), dmax where X > max (or max < min,
// where every element becomes max). Before opset 11 the bounds are attributes (constants).
#include "runtime/ops/op_info.h"

namespace onnxamp::ops {
namespace {

// Cast `v` to `t` at the model's opset (Cast-1 names the type with a string).
ir::Value* CastTo(GradContext& ctx, ir::Value* v, DType t) {
  if (ctx.onnx_opset() >= 6) return ctx.Emit1("Cast", {v}, {ir::Attribute::Int("to", static_cast<int64_t>(t))});
  const char* name = t == DType::kFloat64 ? "DOUBLE" : t == DType::kFloat16 ? "FLOAT16" : "FLOAT";
  return ctx.Emit1("Cast", {v}, {ir::Attribute::String("to", name)});
}

// `g` where `mask` holds, else 0 (Where from opset 9; a multiplication by the mask before).
ir::Value* Masked(GradContext& ctx, ir::Value* mask, ir::Value* g, DType t) {
  if (ctx.onnx_opset() >= 9) return ctx.Emit1("Where", {mask, g, ctx.Scalar(t, 0)});
  return ctx.Emit1("Mul", {g, CastTo(ctx, mask, t)});
}

Status Clip(GradContext& ctx) {
  const DType t = ctx.TypeOf(ctx.X(0));
  if (t == DType::kUndefined) return InvalidArgument("the element type of input 0 is unknown");
  ir::Value* lo = nullptr;
  ir::Value* hi = nullptr;
  if (ctx.opset() < 11) {
    for (const char* name : {"min", "max"}) {
      const ir::Attribute* a = ctx.node().FindAttribute(name);
      if (!a) continue;
      if (a->type() != ir::AttrType::kFloat) return InvalidArgument("attribute '", name, "' must be a float");
      (name[1] == 'i' ? lo : hi) = ctx.Scalar(t, a->f);
    }
  } else {
    lo = ctx.X(1);
    hi = ctx.X(2);
  }
  // Comparisons with a scalar bound: before opset 7 the bound broadcasts only with attribute broadcast = 1.
  std::vector<ir::Attribute> legacy;
  if (ctx.onnx_opset() < 7) legacy.push_back(ir::Attribute::Int("broadcast", 1));
  ir::Value* below = lo ? ctx.Emit1("Less", {ctx.X(0), lo}, legacy) : nullptr;
  ir::Value* above = hi ? ctx.Emit1("Greater", {ctx.X(0), hi}, legacy) : nullptr;
  ir::Value* dy = ctx.dY(0);
  if (ctx.NeedsDX(0)) {
    ir::Value* inside = nullptr;
    if (below && above) {
      inside = ctx.Emit1("Not", {ctx.Emit1("Or", {below, above})});
    } else if (below || above) {
      inside = ctx.Emit1("Not", {below ? below : above});
    }
    ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(0, inside ? Masked(ctx, inside, dy, t) : dy));
  }
  // The bound inputs (opset 11+): scalars, so SumToShape sums the masked dY over every element.
  if (lo && ctx.opset() >= 11 && ctx.NeedsDX(1)) {
    ir::Value* pred = below;
    if (hi) pred = ctx.Emit1("And", {below, ctx.Emit1("Less", {lo, hi})});
    ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(1, ctx.SumToShape(Masked(ctx, pred, dy, t), lo)));
  }
  if (hi && ctx.opset() >= 11 && ctx.NeedsDX(2)) {
    ir::Value* pred = above;
    if (lo) pred = ctx.Emit1("Or", {above, ctx.Emit1("Less", {hi, lo})});
    ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(2, ctx.SumToShape(Masked(ctx, pred, dy, t), hi)));
  }
  return Status::Ok();
}

}  // namespace

void RegisterClipOpInfos(OpInfoRegistry& r) {
  // 1-5 only add the ignored consumed_inputs to 6-10's attributes; 11+ take the bounds as inputs.
  r.Add("Clip").Gradient(1, INT64_MAX, &Clip);
}

}  // namespace onnxamp::ops
