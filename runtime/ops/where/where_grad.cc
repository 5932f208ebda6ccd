// Gradient builder of Where (opsets 9+): dX = Where(condition, dY, 0) and dY_input = Where(condition, 0, dY), each
// summed to its input's shape (SumToShape) where Where broadcast it. The condition is bool and gets no gradient.
#include "runtime/ops/op_info.h"

namespace onnxamp::ops {
namespace {

Status WhereGradient(GradContext& ctx) {
  const bool need_x = ctx.NeedsDX(1), need_y = ctx.NeedsDX(2);
  if (!ctx.dY(0) || !(need_x || need_y)) return Status::Ok();
  DType type = ctx.TypeOf(ctx.X(need_x ? 1 : 2));
  if (type == DType::kUndefined) type = ctx.TypeOf(ctx.dY(0));
  if (type == DType::kUndefined) return InvalidArgument("the element type of inputs X and Y is unknown");
  ir::Value* zero = ctx.Scalar(type, 0.0);
  if (need_x) {
    ir::Value* masked = ctx.Emit("Where", {ctx.X(0), ctx.dY(0), zero}, 1, {}, "", type)[0];
    ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(1, ctx.SumToShape(masked, ctx.X(1))));
  }
  if (need_y) {
    ir::Value* masked = ctx.Emit("Where", {ctx.X(0), zero, ctx.dY(0)}, 1, {}, "", type)[0];
    ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(2, ctx.SumToShape(masked, ctx.X(2))));
  }
  return Status::Ok();
}

}  // namespace

void RegisterWhereOpInfos(OpInfoRegistry& r) {
  // Opset 16 only added bfloat16.
  r.Add("Where").Gradient(9, INT64_MAX, &WhereGradient);
}

}  // namespace onnxamp::ops
