// Gradient builder of Slice (every opset): com.onnxamp SliceGrad scatters dY into zeros of X's run-time shape
// (Shape(X), stashed after X's producer) at the positions the Slice read. Opsets 1-9 pass their starts/ends/axes
// attributes as constants; from 10 the forward's own starts/ends/axes/steps inputs are passed on, so the kernel
// resolves them (negative, clamped, INT64_MAX-like bounds, negative steps) exactly as the forward did. Those inputs
// are integers and get no gradient.
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/op_info.h"

namespace onnxamp::ops {
namespace {

Status SliceGradient(GradContext& ctx) {
  if (!ctx.NeedsDX(0) || !ctx.dY(0)) return Status::Ok();
  std::vector<ir::Value*> inputs = {ctx.dY(0), ctx.ShapeOf(ctx.X(0))};
  if (ctx.opset() < 10) {
    const ir::Attribute* starts = ctx.node().FindAttribute("starts");
    const ir::Attribute* ends = ctx.node().FindAttribute("ends");
    if (!starts || !ends) return InvalidArgument("Slice-", ctx.opset(), " needs the attributes 'starts' and 'ends'");
    inputs.push_back(ctx.Ints(starts->ints));
    inputs.push_back(ctx.Ints(ends->ints));
    if (const ir::Attribute* axes = ctx.node().FindAttribute("axes")) inputs.push_back(ctx.Ints(axes->ints));
  } else {
    for (size_t i = 1; i <= 4; ++i) inputs.push_back(ctx.X(i));
    while (!inputs.back()) inputs.pop_back();  // trailing omitted axes/steps
  }
  ir::Value* dx = ctx.Emit(kSliceGradOp, inputs, 1, {}, exec::kInternalDomain, ctx.TypeOf(ctx.X(0)))[0];
  return ctx.SetDX(0, dx);
}

// SliceGrad's own gradient (second derivatives): linear in dY, its adjoint reads the incoming gradient where the
// Slice read: Slice again, with the same starts, ends, axes and steps (as inputs: opset 10+).
Status SliceGradGradient(GradContext& ctx) {
  if (!ctx.NeedsDX(0)) return Status::Ok();
  if (!ctx.dY(0)) return ctx.SetDX(0, ctx.Zeros(ctx.TypeOf(ctx.X(0)), ctx.X(0)));
  if (ctx.onnx_opset() < 10) {
    return InvalidArgument(
        "the second derivative of a Slice is a Slice with starts and ends as inputs (opset 10+); "
        "the model's opset is ",
        ctx.onnx_opset());
  }
  std::vector<ir::Value*> inputs = {ctx.dY(0)};
  for (size_t i = 2; i < ctx.node().inputs().size(); ++i) inputs.push_back(ctx.X(i));
  return ctx.SetDX(0, ctx.Emit1("Slice", inputs));
}

}  // namespace

void RegisterSliceOpInfos(OpInfoRegistry& r) {
  r.Add("Slice").Gradient(1, INT64_MAX, &SliceGradient);
  r.Add(kSliceGradOp, exec::kInternalDomain).Gradient(1, INT64_MAX, &SliceGradGradient);
}

}  // namespace onnxamp::ops
