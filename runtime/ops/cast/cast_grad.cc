// Gradient builders of Cast and CastLike: a Cast back to the input's type (from a master weight's fp16 copy to the
// fp32 master weight); CastLike's target only lends its type, so its gradient is zero. Also the OpInfos of cast/.
#include "runtime/ops/op_info.h"

namespace onnxamp::ops {
namespace {

Status Cast(GradContext& ctx) {
  const DType from = ctx.TypeOf(ctx.X(0));
  if (from == DType::kUndefined) return InvalidArgument("the element type of the Cast's input is unknown");
  if (ctx.TypeOf(ctx.Y(0)) == from) return ctx.SetDX(0, ctx.dY(0));
  return ctx.SetDX(0, ctx.Emit1("Cast", {ctx.dY(0)}, {ir::Attribute::Int("to", static_cast<int64_t>(from))}));
}

Status CastLike(GradContext& ctx) {
  if (ctx.NeedsDX(0)) {
    const DType from = ctx.TypeOf(ctx.X(0));
    if (from == DType::kUndefined) return InvalidArgument("the element type of the CastLike's input is unknown");
    ir::Value* g = ctx.dY(0);
    if (ctx.TypeOf(ctx.Y(0)) != from) {
      g = ctx.Emit1("Cast", {g}, {ir::Attribute::Int("to", static_cast<int64_t>(from))});
    }
    ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(0, g));
  }
  if (ctx.NeedsDX(1)) {
    const DType t = ctx.TypeOf(ctx.X(1));
    ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(1, ctx.Zeros(t, ctx.X(1))));
  }
  return Status::Ok();
}

}  // namespace

void RegisterCastOpInfos(OpInfoRegistry& r) {
  r.Add("Cast").Gradient(6, INT64_MAX, &Cast);
  r.Add("CastLike").Gradient(15, INT64_MAX, &CastLike);
}

}  // namespace onnxamp::ops
