// Gradient builders of the pooling ops. MaxPool: MaxPoolGrad(dY, Indices, Shape(X)) with the forward's Indices output
// (turned on when the model omitted it), so X itself is not kept for the backward pass. AveragePool:
// AveragePoolGrad(dY, Shape(X)) with the forward's attributes. The global pools compose ONNX ops:
// GlobalAveragePool's dX = Expand(dY * (N*C / size(X)), Shape(X)); GlobalMaxPool's dX spreads dY evenly over the
// positions equal to the maximum (as torch.amax does with ties), the mask X == Y made right after the forward node.
// The per-plane shares are computed in float (double for double X) and rounded to X's type once: float16 holds no
// size above 65504, so N*C*H*W cast to float16 would be infinite (and every gradient zero) from modest batches on.
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/op_info.h"
#include "runtime/ops/pool/pool.h"

namespace onnxamp::ops {
namespace {

StatusOr<DType> InputType(GradContext& ctx) {
  const DType t = ctx.TypeOf(ctx.X(0));
  if (t == DType::kUndefined) return InvalidArgument("the element type of input X is unknown");
  return t;
}

Status MaxPoolGradient(GradContext& ctx) {
  if (ctx.opset() < 8) {
    return InvalidArgument("MaxPool before opset 8 has no Indices output, which its gradient reads: use opset 8+");
  }
  PoolAttrs attrs;
  ONNXAMP_RETURN_IF_ERROR(ParsePoolAttrs(ctx.node(), /*max=*/true, &attrs));
  if (attrs.storage_order != 0) {
    return InvalidArgument("attribute 'storage_order' = ", attrs.storage_order,
                           " has no gradient: MaxPoolGrad reads row-major Indices (storage_order = 0)");
  }
  ONNXAMP_ASSIGN_OR_RETURN(const DType t, InputType(ctx));
  ir::Value* indices = ctx.ForwardOutput(1);
  ir::Value* dx =
      ctx.Emit(kMaxPoolGradOp, {ctx.dY(0), indices, ctx.ShapeOf(ctx.X(0))}, 1, {}, exec::kInternalDomain, t)[0];
  return ctx.SetDX(0, dx);
}

Status AveragePoolGradient(GradContext& ctx) {
  PoolAttrs attrs;
  ONNXAMP_RETURN_IF_ERROR(ParsePoolAttrs(ctx.node(), /*max=*/false, &attrs));
  ONNXAMP_ASSIGN_OR_RETURN(const DType t, InputType(ctx));
  ir::Value* dx = ctx.Emit(kAveragePoolGradOp, {ctx.dY(0), ctx.ShapeOf(ctx.X(0))}, 1, ctx.node().attributes(),
                           exec::kInternalDomain, t)[0];
  return ctx.SetDX(0, dx);
}

// The type the shares are computed in: double for double X, float otherwise.
DType ShareType(DType t) { return t == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32; }

ir::Value* CastTo(GradContext& ctx, ir::Value* v, DType t) {
  return ctx.Emit1("Cast", {v}, {ir::Attribute::Int("to", static_cast<int64_t>(t))});
}

// 1 / (elements per plane) = size(per_plane_value) / size(full), as `acc` (ShareType): the size of a [N, C, 1...]
// value over that of an [N, C, spatial...] one. `full_size` is Size of the full tensor.
ir::Value* InversePlaneSize(GradContext& ctx, DType acc, ir::Value* per_plane_value, ir::Value* full_size) {
  return ctx.Emit1("Div", {CastTo(ctx, ctx.Emit1("Size", {per_plane_value}), acc), CastTo(ctx, full_size, acc)});
}

// `v` (of type `t`) as `acc`, and back: no Cast where the types agree.
ir::Value* ToShareType(GradContext& ctx, ir::Value* v, DType t, DType acc) {
  return t == acc ? v : CastTo(ctx, v, acc);
}
ir::Value* FromShareType(GradContext& ctx, ir::Value* v, DType t, DType acc) {
  return t == acc ? v : CastTo(ctx, v, t);
}

Status GlobalAveragePoolGradient(GradContext& ctx) {
  ONNXAMP_ASSIGN_OR_RETURN(const DType t, InputType(ctx));
  const DType acc = ShareType(t);
  ir::Value* x_size = ctx.EmitAfterForward("Size", {ctx.X(0)}, 1)[0];
  // dY / (elements per plane) on the [N, C, 1...] gradient, rounded to `t` once, then spread over the planes.
  ir::Value* share =
      ctx.Emit1("Mul", {ToShareType(ctx, ctx.dY(0), t, acc), InversePlaneSize(ctx, acc, ctx.dY(0), x_size)});
  return ctx.SetDX(0, ctx.Emit1("Expand", {FromShareType(ctx, share, t, acc), ctx.ShapeOf(ctx.X(0))}));
}

Status GlobalMaxPoolGradient(GradContext& ctx) {
  ONNXAMP_ASSIGN_OR_RETURN(const DType t, InputType(ctx));
  const DType acc = ShareType(t);
  // The mask of the maxima, stashed as bool instead of keeping X.
  ir::Value* is_max = ctx.EmitAfterForward("Equal", {ctx.X(0), ctx.Y(0)}, 1)[0];
  ir::Value* mask = CastTo(ctx, is_max, t);
  // Per plane, in `acc`: share = (number of maxima) / (elements per plane), and dY / (number of maxima) =
  // dY * (1 / elements per plane) / share.
  ir::Value* share = ctx.Emit1("GlobalAveragePool", {t == acc ? mask : CastTo(ctx, is_max, acc)});
  ir::Value* scaled = ctx.Emit1(
      "Mul", {ToShareType(ctx, ctx.dY(0), t, acc), InversePlaneSize(ctx, acc, ctx.dY(0), ctx.Emit1("Size", {mask}))});
  ir::Value* per_max = FromShareType(ctx, ctx.Emit1("Div", {scaled, share}), t, acc);
  return ctx.SetDX(0, ctx.Emit1("Mul", {mask, per_max}));
}

// MaxUnpool's gradient: com.onnxamp MaxUnpoolGrad gathers dY at the positions the indices name (through the padding
// output_shape adds).
Status MaxUnpoolGradient(GradContext& ctx) {
  if (!ctx.NeedsDX(0) || !ctx.dY(0)) return Status::Ok();
  std::vector<ir::Value*> inputs = {ctx.dY(0), ctx.X(1), ctx.ShapeOf(ctx.X(0))};
  if (ctx.X(2)) inputs.push_back(ctx.X(2));
  return ctx.SetDX(0, ctx.Emit(kMaxUnpoolGradOp, inputs, 1, ctx.node().attributes(), exec::kInternalDomain,
                               ctx.TypeOf(ctx.X(0)))[0]);
}

// MaxUnpoolGrad's own gradient: linear in dY, a gather at the indices, so its adjoint adds the incoming gradient at
// the flat positions they name (indices repeat where MaxPool windows overlap): MaxPoolGrad into dY's shape. Not
// MaxUnpool, which writes each position once. With output_shape the positions are remapped through its padding,
// which MaxPoolGrad does not do: refused.
Status MaxUnpoolGradGradient(GradContext& ctx) {
  if (!ctx.NeedsDX(0)) return Status::Ok();
  if (ctx.X(3)) {
    return Unimplemented(
        "the second derivative of a MaxUnpool with output_shape (its indices remapped through the "
        "padding) has no builder");
  }
  if (!ctx.dY(0)) return ctx.SetDX(0, ctx.Zeros(ctx.TypeOf(ctx.X(0)), ctx.X(0)));
  return ctx.SetDX(0, ctx.Emit(kMaxPoolGradOp, {ctx.dY(0), ctx.X(1), ctx.ShapeOf(ctx.X(0))}, 1, {},
                               exec::kInternalDomain, ctx.TypeOf(ctx.X(0)))[0]);
}

// The pooling backward ops' own gradients, for second derivatives (a gradient penalty through a pooling layer). Both
// are linear in dY. MaxPoolGrad adds each dY element at the flat position Indices names; its adjoint reads the
// incoming gradient there: Gather(Reshape(G, [-1]), Indices). AveragePoolGrad spreads each dY element evenly over its
// window; its adjoint averages over the window again: AveragePool(G) with the same attributes.
Status MaxPoolGradGradient(GradContext& ctx) {
  if (!ctx.NeedsDX(0)) return Status::Ok();
  ir::Value* g = ctx.dY(0);
  if (!g) return ctx.SetDX(0, ctx.Zeros(ctx.TypeOf(ctx.X(0)), ctx.X(0)));
  return ctx.SetDX(0, ctx.Emit1("Gather", {ctx.Emit1("Reshape", {g, ctx.Ints({-1})}), ctx.X(1)}));
}

Status AveragePoolGradGradient(GradContext& ctx) {
  if (!ctx.NeedsDX(0)) return Status::Ok();
  ir::Value* g = ctx.dY(0);
  if (!g) return ctx.SetDX(0, ctx.Zeros(ctx.TypeOf(ctx.X(0)), ctx.X(0)));
  return ctx.SetDX(0, ctx.Emit1("AveragePool", {g}, ctx.node().attributes()));
}

}  // namespace

void RegisterPoolOpInfos(OpInfoRegistry& r) {
  r.Add("MaxUnpool").Gradient(9, INT64_MAX, &MaxUnpoolGradient);
  // MaxPool: Indices from opset 8 (earlier opsets are refused with that reason); 10 adds ceil_mode and dilations, 12
  // int types (no gradient). AveragePool: attributes only change (7 count_include_pad, 10 ceil_mode, 19 dilations),
  // all passed to AveragePoolGrad. GlobalAveragePool needs Expand (8+), GlobalMaxPool Equal on floats (11+).
  r.Add("MaxPool").Gradient(1, INT64_MAX, &MaxPoolGradient);
  r.Add("AveragePool").Gradient(1, INT64_MAX, &AveragePoolGradient);
  r.Add("GlobalAveragePool")
      .Gradient(8, INT64_MAX, &GlobalAveragePoolGradient)
      .GradientFloor("the gradient broadcasts dY back with Expand (opset 8)");
  r.Add("GlobalMaxPool")
      .Gradient(11, INT64_MAX, &GlobalMaxPoolGradient)
      .GradientFloor("the gradient finds the maxima with Equal on floats (opset 11)");
  r.Add(kMaxPoolGradOp, exec::kInternalDomain).Gradient(1, INT64_MAX, &MaxPoolGradGradient);
  r.Add(kMaxUnpoolGradOp, exec::kInternalDomain).Gradient(1, INT64_MAX, &MaxUnpoolGradGradient);
  r.Add(kAveragePoolGradOp, exec::kInternalDomain).Gradient(1, INT64_MAX, &AveragePoolGradGradient);
}

}  // namespace onnxamp::ops
