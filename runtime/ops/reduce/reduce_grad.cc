// Gradient builders of ReduceSum, ReduceMean and ReduceSumSquare: dY broadcast back over the reduced dims (with the
// reduced axes put back first when keepdims is 0), scaled by the op's derivative.
#include "runtime/executor/kernel.h"
#include "runtime/ops/gradient.h"
#include "runtime/ops/reduce/reduce_spec.h"

namespace onnxamp::ops {
namespace {

// dY with the shape of the reduction with keepdims = 1, then broadcast to X's shape. Sets *identity when the node
// reduced nothing (noop_with_empty_axes with empty axes).
StatusOr<ir::Value*> BroadcastBack(GradContext& ctx, int64_t axes_input_since, bool* identity) {
  ReduceSpec spec;
  ONNXAMP_RETURN_IF_ERROR(
      ParseReduceSpec(exec::KernelInfo{ctx.node(), ctx.opset(), exec::Device::kCpu}, axes_input_since, &spec));
  ir::Value* axes_value = spec.axes_input ? ctx.X(1) : nullptr;
  *identity = spec.axes_input && spec.noop_with_empty_axes && !axes_value;
  if (*identity) return ctx.dY(0);
  ir::Value* g = ctx.dY(0);
  if (!spec.keepdims) {
    if (axes_value) {
      // The axes as given (from opset 13 Unsqueeze takes them as an input too, and reads negative axes against the
      // output's rank, which is X's): run-time axes work, and empty axes (everything reduced, or nothing with
      // noop_with_empty_axes) unsqueeze nothing.
      g = ctx.Emit1("Unsqueeze", {g, axes_value});
    } else if (!spec.axes.empty()) {
      g = ctx.EmitUnsqueeze(g, spec.axes);
    }
  }
  if (ctx.onnx_opset() >= 8) return ctx.Emit1("Expand", {g, ctx.ShapeOf(ctx.X(0))});
  // Before Expand (opset 8): broadcast by adding to zeros shaped like X.
  const DType t = ctx.TypeOf(ctx.X(0));
  if (t == DType::kUndefined) return InvalidArgument("the element type of input 0 is unknown");
  return ctx.Emit1("Add", {ctx.Emit1("Mul", {ctx.X(0), ctx.Scalar(t, 0)}), g});
}

Status ReduceSum(GradContext& ctx) {
  bool identity = false;
  ONNXAMP_ASSIGN_OR_RETURN(ir::Value * g, BroadcastBack(ctx, 13, &identity));
  return ctx.SetDX(0, g);
}

Status ReduceMean(GradContext& ctx) {
  bool identity = false;
  ONNXAMP_ASSIGN_OR_RETURN(ir::Value * g, BroadcastBack(ctx, 18, &identity));
  if (identity) return ctx.SetDX(0, g);
  const DType t = ctx.TypeOf(ctx.X(0));
  if (t == DType::kUndefined) return InvalidArgument("the element type of input 0 is unknown");
  // Each input element's share: Size(Y) / Size(X), from the shapes of this run.
  const std::vector<ir::Attribute> to = {ir::Attribute::Int("to", static_cast<int64_t>(t))};
  ir::Value* size_x = ctx.EmitAfterForward("Size", {ctx.X(0)}, 1)[0];
  ir::Value* size_y = ctx.EmitAfterForward("Size", {ctx.Y(0)}, 1)[0];
  ir::Value* share = ctx.Emit1("Div", {ctx.Emit1("Cast", {size_y}, to), ctx.Emit1("Cast", {size_x}, to)});
  return ctx.SetDX(0, ctx.Emit1("Mul", {g, share}));
}

Status ReduceSumSquare(GradContext& ctx) {  // 2 X dY
  bool identity = false;
  ONNXAMP_ASSIGN_OR_RETURN(ir::Value * g, BroadcastBack(ctx, 18, &identity));
  const DType t = ctx.TypeOf(ctx.X(0));
  if (t == DType::kUndefined) return InvalidArgument("the element type of input 0 is unknown");
  ir::Value* two_x = ctx.Emit1("Mul", {ctx.X(0), ctx.Scalar(t, 2)});
  return ctx.SetDX(0, ctx.Emit1("Mul", {g, two_x}));
}

}  // namespace

void RegisterReduceGradients(GradientRegistry& r) {
  r.Register({"ReduceSum", "", 1, INT64_MAX, &ReduceSum});
  r.Register({"ReduceMean", "", 1, INT64_MAX, &ReduceMean});
  r.Register({"ReduceSumSquare", "", 1, INT64_MAX, &ReduceSumSquare});
}

}  // namespace onnxamp::ops
