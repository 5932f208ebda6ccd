// Gradient builders of ReduceSum, ReduceMean, ReduceSumSquare, ReduceMax, ReduceMin, ReduceProd, ReduceLogSum,
// ReduceLogSumExp, ReduceL1 and ReduceL2: dY broadcast back over the reduced dims (with the reduced axes put back first
// when keepdims is 0), scaled by the op's derivative. Also the OpInfos of reduce/.
#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/op_info.h"
#include "runtime/ops/reduce/reduce_spec.h"

namespace onnxamp::ops {
namespace {

// A Reduce* node's reduction as the backward pass needs it.
struct Reduction {
  ReduceSpec spec;
  ir::Value* axes = nullptr;  // the axes input (from the opset that takes them as input; null when omitted)
  bool identity = false;      // reduces nothing: noop_with_empty_axes with the axes omitted
};

StatusOr<Reduction> ParseReduction(GradContext& ctx, int64_t axes_input_since) {
  Reduction r;
  ONNXAMP_RETURN_IF_ERROR(
      ParseReduceSpec(exec::KernelInfo{ctx.node(), ctx.opset(), exec::Device::kCpu}, axes_input_since, &r.spec));
  r.axes = r.spec.axes_input ? ctx.X(1) : nullptr;
  r.identity = r.spec.axes_input && r.spec.noop_with_empty_axes && !r.axes;
  return r;
}

// `v` (shaped like the node's output) with the reduced axes put back as dims of 1 when keepdims is 0.
ir::Value* KeepDims(GradContext& ctx, const Reduction& r, ir::Value* v) {
  if (r.spec.keepdims) return v;
  if (r.axes) {
    // The axes as given (from opset 13 Unsqueeze takes them as an input too, and reads negative axes against the
    // output's rank, which is X's): run-time axes work, and empty axes (everything reduced, or nothing with
    // noop_with_empty_axes) unsqueeze nothing.
    return ctx.Emit1("Unsqueeze", {v, r.axes});
  }
  if (!r.spec.axes.empty()) return ctx.EmitUnsqueeze(v, r.spec.axes);
  return v;  // everything reduced: a scalar, which broadcasts
}

// `v` summed over the node's reduced axes with keepdims = 1 (a ReduceSum at the model's opset).
ir::Value* SumLikeForward(GradContext& ctx, const Reduction& r, ir::Value* v) {
  if (!r.spec.axes_input) return ctx.EmitReduceSum(v, r.spec.axes, true);
  std::vector<ir::Value*> inputs = {v};
  if (r.axes) inputs.push_back(r.axes);
  return ctx.Emit1("ReduceSum", inputs,
                   {ir::Attribute::Int("keepdims", 1),
                    ir::Attribute::Int("noop_with_empty_axes", r.spec.noop_with_empty_axes ? 1 : 0)});
}

// Attributes of a binary op whose second operand broadcasts to the first: before opset 7 that takes broadcast = 1
// (the legacy rule: B's dims match A's trailing dims or are 1).
std::vector<ir::Attribute> Bcast(GradContext& ctx) {
  if (ctx.onnx_opset() >= 7) return {};
  return {ir::Attribute::Int("broadcast", 1)};
}

// `v` (keepdims-shaped) broadcast to X's shape.
StatusOr<ir::Value*> ToInputShape(GradContext& ctx, ir::Value* v) {
  if (ctx.onnx_opset() >= 8) return ctx.Emit1("Expand", {v, ctx.ShapeOf(ctx.X(0))});
  // Before Expand (opset 8): broadcast by adding to zeros shaped like X.
  const DType t = ctx.TypeOf(ctx.X(0));
  if (t == DType::kUndefined) return InvalidArgument("the element type of input 0 is unknown");
  return ctx.Emit1("Add", {ctx.Emit1("Mul", {ctx.X(0), ctx.Scalar(t, 0)}, Bcast(ctx)), v}, Bcast(ctx));
}

// dY with the shape of the reduction with keepdims = 1, then broadcast to X's shape. Sets *identity when the node
// reduced nothing (noop_with_empty_axes with empty axes).
StatusOr<ir::Value*> BroadcastBack(GradContext& ctx, int64_t axes_input_since, bool* identity) {
  ONNXAMP_ASSIGN_OR_RETURN(Reduction r, ParseReduction(ctx, axes_input_since));
  *identity = r.identity;
  if (*identity) return ctx.dY(0);
  return ToInputShape(ctx, KeepDims(ctx, r, ctx.dY(0)));
}

Status ReduceSum(GradContext& ctx) {
  bool identity = false;
  ONNXAMP_ASSIGN_OR_RETURN(ir::Value * g, BroadcastBack(ctx, 13, &identity));
  return ctx.SetDX(0, g);
}

Status ReduceMean(GradContext& ctx) {
  ONNXAMP_ASSIGN_OR_RETURN(Reduction r, ParseReduction(ctx, 18));
  if (r.identity) return ctx.SetDX(0, ctx.dY(0));
  const DType t = ctx.TypeOf(ctx.X(0));
  if (t == DType::kUndefined) return InvalidArgument("the element type of input 0 is unknown");
  // Each input element's share: Size(Y) / Size(X), from the shapes of this run, in float (double for double X):
  // float16 holds no size above 65504, so the sizes cast to float16 would be infinite and the gradient zero. dY times
  // the share is rounded to `t` once, on Y's shape, before it is broadcast back.
  const DType acc = t == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
  const std::vector<ir::Attribute> to_acc = {ir::Attribute::Int("to", static_cast<int64_t>(acc))};
  ir::Value* size_x = ctx.EmitAfterForward("Size", {ctx.X(0)}, 1)[0];
  ir::Value* size_y = ctx.EmitAfterForward("Size", {ctx.Y(0)}, 1)[0];
  ir::Value* share = ctx.Emit1("Div", {ctx.Emit1("Cast", {size_y}, to_acc), ctx.Emit1("Cast", {size_x}, to_acc)});
  ir::Value* dy = t == acc ? ctx.dY(0) : ctx.Emit1("Cast", {ctx.dY(0)}, to_acc);
  ir::Value* scaled = ctx.Emit1("Mul", {dy, share}, Bcast(ctx));
  if (t != acc) scaled = ctx.Emit1("Cast", {scaled}, {ir::Attribute::Int("to", static_cast<int64_t>(t))});
  ONNXAMP_ASSIGN_OR_RETURN(ir::Value * g, ToInputShape(ctx, KeepDims(ctx, r, scaled)));
  return ctx.SetDX(0, g);
}

Status ReduceSumSquare(GradContext& ctx) {  // 2 X dY
  bool identity = false;
  ONNXAMP_ASSIGN_OR_RETURN(ir::Value * g, BroadcastBack(ctx, 18, &identity));
  const DType t = ctx.TypeOf(ctx.X(0));
  if (t == DType::kUndefined) return InvalidArgument("the element type of input 0 is unknown");
  ir::Value* two_x = ctx.Emit1("Mul", {ctx.X(0), ctx.Scalar(t, 2)}, Bcast(ctx));
  return ctx.SetDX(0, ctx.Emit1("Mul", {g, two_x}));
}

// Cast `v` to `t` at the model's opset (Cast-1 names the type with a string).
ir::Value* CastTo(GradContext& ctx, ir::Value* v, DType t) {
  if (ctx.onnx_opset() >= 6) return ctx.Emit1("Cast", {v}, {ir::Attribute::Int("to", static_cast<int64_t>(t))});
  const char* name = t == DType::kFloat64 ? "DOUBLE" : t == DType::kFloat16 ? "FLOAT16" : "FLOAT";
  return ctx.Emit1("Cast", {v}, {ir::Attribute::String("to", name)});
}

StatusOr<DType> InputType(GradContext& ctx) {
  const DType t = ctx.TypeOf(ctx.X(0));
  if (t == DType::kUndefined) return InvalidArgument("the element type of input 0 is unknown");
  return t;
}

// ReduceMax / ReduceMin: dY to the elements equal to the result, split evenly among ties (as torch.amax/amin):
// dX = hit * dY / count, hit = (X == Y) written as not (X < Y) for Max (a NaN result counts every element as hit),
// count = the hits summed over the reduced axes.
template <bool kMax>
Status ReduceExtreme(GradContext& ctx) {
  ONNXAMP_ASSIGN_OR_RETURN(Reduction r, ParseReduction(ctx, 18));
  if (r.identity) return ctx.SetDX(0, ctx.dY(0));
  ONNXAMP_ASSIGN_OR_RETURN(DType t, InputType(ctx));
  ir::Value* y = KeepDims(ctx, r, ctx.Y(0));
  ir::Value* beaten = ctx.Emit1(kMax ? "Less" : "Greater", {ctx.X(0), y}, Bcast(ctx));
  ir::Value* hit = CastTo(ctx, ctx.Emit1("Not", {beaten}), t);
  ir::Value* g = ctx.Emit1("Mul", {hit, KeepDims(ctx, r, ctx.dY(0))}, Bcast(ctx));
  return ctx.SetDX(0, ctx.Emit1("Div", {g, SumLikeForward(ctx, r, hit)}, Bcast(ctx)));
}

// ReduceProd: dX = dY * (product of the other elements of the group), from exclusive products (ReduceProdGrad), so
// zeros in X need no division.
Status ReduceProd(GradContext& ctx) {
  ONNXAMP_ASSIGN_OR_RETURN(Reduction r, ParseReduction(ctx, 18));
  if (r.identity) return ctx.SetDX(0, ctx.dY(0));
  return ctx.SetDX(0, ctx.Emit1(kReduceProdGradOp, {KeepDims(ctx, r, ctx.dY(0)), ctx.X(0)}, {}, exec::kInternalDomain));
}

// ReduceLogSum: Y = log(S), S = sum X: dX = dY / S = dY / exp(Y).
Status ReduceLogSum(GradContext& ctx) {
  ONNXAMP_ASSIGN_OR_RETURN(Reduction r, ParseReduction(ctx, 18));
  if (r.identity) return ctx.SetDX(0, ctx.Emit1("Div", {ctx.dY(0), ctx.X(0)}));
  ONNXAMP_ASSIGN_OR_RETURN(ir::Value * g, ToInputShape(ctx, KeepDims(ctx, r, ctx.dY(0))));
  return ctx.SetDX(0, ctx.Emit1("Div", {g, ctx.Emit1("Exp", {KeepDims(ctx, r, ctx.Y(0))})}, Bcast(ctx)));
}

// ReduceLogSumExp: dX = dY * softmax = dY * exp(X - Y), which never overflows (X <= Y).
Status ReduceLogSumExp(GradContext& ctx) {
  ONNXAMP_ASSIGN_OR_RETURN(Reduction r, ParseReduction(ctx, 18));
  if (r.identity) return ctx.SetDX(0, ctx.dY(0));
  ir::Value* p = ctx.Emit1("Exp", {ctx.Emit1("Sub", {ctx.X(0), KeepDims(ctx, r, ctx.Y(0))}, Bcast(ctx))});
  return ctx.SetDX(0, ctx.Emit1("Mul", {p, KeepDims(ctx, r, ctx.dY(0))}, Bcast(ctx)));
}

// sign(X) in X's type: Cast(X > 0) - Cast(X < 0) (0 at 0, as torch.sign).
ir::Value* Sign(GradContext& ctx, DType t) {
  ir::Value* zero = ctx.Scalar(t, 0);
  return ctx.Emit1("Sub", {CastTo(ctx, ctx.Emit1("Greater", {ctx.X(0), zero}, Bcast(ctx)), t),
                           CastTo(ctx, ctx.Emit1("Less", {ctx.X(0), zero}, Bcast(ctx)), t)});
}

// ReduceL1: Y = sum |X|: dX = dY * sign(X) (0 at X = 0, as torch.norm(p=1) and torch.abs).
Status ReduceL1(GradContext& ctx) {
  ONNXAMP_ASSIGN_OR_RETURN(Reduction r, ParseReduction(ctx, 18));
  ONNXAMP_ASSIGN_OR_RETURN(DType t, InputType(ctx));
  return ctx.SetDX(0, ctx.Emit1("Mul", {Sign(ctx, t), KeepDims(ctx, r, ctx.dY(0))}, Bcast(ctx)));
}

// ReduceL2: Y = sqrt(sum X^2): dX = X * dY / Y, and 0 where Y = 0 (torch.norm(p=2)'s masked_fill: the gradient of a
// zero group is zero, not NaN). Without Where and float Equal (opsets before 9 and 11): with pos = (Y > 0),
// dY / (Y + 1 - pos) * pos, which is dY / Y where Y > 0 and 0 where Y = 0.
Status ReduceL2(GradContext& ctx) {
  ONNXAMP_ASSIGN_OR_RETURN(Reduction r, ParseReduction(ctx, 18));
  ONNXAMP_ASSIGN_OR_RETURN(DType t, InputType(ctx));
  if (r.identity) {  // Y = |X|
    return ctx.SetDX(0, ctx.Emit1("Mul", {Sign(ctx, t), ctx.dY(0)}));
  }
  ir::Value* y = KeepDims(ctx, r, ctx.Y(0));
  ir::Value* pos = CastTo(ctx, ctx.Emit1("Greater", {y, ctx.Scalar(t, 0)}, Bcast(ctx)), t);
  ir::Value* den = ctx.Emit1("Add", {ctx.Emit1("Sub", {y, pos}), ctx.Scalar(t, 1)}, Bcast(ctx));
  ir::Value* scale = ctx.Emit1("Mul", {ctx.Emit1("Div", {KeepDims(ctx, r, ctx.dY(0)), den}), pos});
  return ctx.SetDX(0, ctx.Emit1("Mul", {ctx.X(0), scale}, Bcast(ctx)));
}

}  // namespace

// SumToShape's own gradient, for second derivatives: the sum's adjoint, dY broadcast back to G's shape (Expand, opset
// 8; the target shape is an int64 input and takes none).
Status SumToShapeGradient(GradContext& ctx) {
  return ctx.SetDX(0, ctx.Emit1("Expand", {ctx.dY(0), ctx.ShapeOf(ctx.X(0))}));
}

void RegisterReduceOpInfos(OpInfoRegistry& r) {
  constexpr char kSum[] = "a sum over many elements: fp16 cannot hold its range and precision";
  r.Add("ReduceSum").Keep(kSum).Gradient(1, INT64_MAX, &ReduceSum);
  r.Add("ReduceMean").Keep(kSum).Gradient(1, INT64_MAX, &ReduceMean);
  r.Add("ReduceSumSquare").Keep(kSum).Gradient(1, INT64_MAX, &ReduceSumSquare);
  r.Add("ReduceMax").Gradient(1, INT64_MAX, &ReduceExtreme<true>);
  r.Add("ReduceMin").Gradient(1, INT64_MAX, &ReduceExtreme<false>);
  r.Add("ReduceProd").Keep("a product over many elements overflows fp16").Gradient(1, INT64_MAX, &ReduceProd);
  r.Add("ReduceLogSum").Keep(kSum).Gradient(1, INT64_MAX, &ReduceLogSum);
  r.Add("ReduceLogSumExp").Keep(kSum).Gradient(1, INT64_MAX, &ReduceLogSumExp);
  r.Add("ReduceL1").Keep(kSum).Gradient(1, INT64_MAX, &ReduceL1);
  r.Add("ReduceL2").Keep(kSum).Gradient(1, INT64_MAX, &ReduceL2);
  r.Add(kReduceProdGradOp, exec::kInternalDomain).NotDifferentiable(kBackwardOpReason);
  r.Add(kSumToShapeOp, exec::kInternalDomain).Gradient(1, INT64_MAX, &SumToShapeGradient);
}

}  // namespace onnxamp::ops
