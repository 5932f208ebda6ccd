// Gradient builder of Split (every opset: the split attribute of 2-12, the split input of 13+, num_outputs of 18+):
// Concat of the outputs' gradients along the axis, which does not depend on how the sizes were chosen. An output no
// gradient reaches contributes zeros of its run-time shape: Expand(0, Shape(Y_i)) (opset 8 or later).
#include "runtime/ops/op_info.h"

namespace onnxamp::ops {
namespace {

Status SplitGradient(GradContext& ctx) {
  if (!ctx.NeedsDX(0)) return Status::Ok();
  const int64_t axis = ctx.node().GetInt("axis", 0);
  const DType type = ctx.TypeOf(ctx.X(0));
  std::vector<ir::Value*> parts;
  for (size_t i = 0; i < ctx.node().outputs().size(); ++i) {
    if (ir::Value* dy = ctx.dY(i)) {
      parts.push_back(dy);
      continue;
    }
    if (ctx.onnx_opset() < 8) {
      return Unimplemented("the gradient of Split with output ", i,
                           " unused by the loss needs ONNX opset 8 or later (Expand)");
    }
    parts.push_back(ctx.Zeros(type, ctx.ForwardOutput(i)));
  }
  if (parts.empty()) return InvalidArgument("Split has no outputs");
  ir::Value* dx = parts.size() == 1 ? parts[0] : ctx.Emit1("Concat", parts, {ir::Attribute::Int("axis", axis)});
  return ctx.SetDX(0, dx);
}

}  // namespace

void RegisterSplitOpInfos(OpInfoRegistry& r) { r.Add("Split").Gradient(1, INT64_MAX, &SplitGradient); }

}  // namespace onnxamp::ops
