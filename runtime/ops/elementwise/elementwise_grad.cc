// Gradient builders of the elementwise ops (binary arithmetic with broadcasting, unary math and activations):
// compositions of ONNX ops, plus ReluGrad, EluGrad and GeluGrad. Broadcast inputs get SumToShape. Also the OpInfos
// of elementwise/ (comparisons and logic included).
#include <cmath>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/op_info.h"

namespace onnxamp::ops {

namespace {

// The element type of input 0, which every float op here computes in; an error when the autodiff could not tell.
StatusOr<DType> FloatType(GradContext& ctx) {
  const DType t = ctx.TypeOf(ctx.X(0));
  if (t == DType::kUndefined) return InvalidArgument("the element type of input 0 is unknown");
  return t;
}

// Opsets before 7 broadcast only with the `broadcast` attribute, and with `axis` in a way numpy rules do not describe.
Status CheckLegacyBroadcast(GradContext& ctx) {
  if (ctx.node().FindAttribute("axis")) {
    return Unimplemented("the legacy broadcast with attribute 'axis' (opset ", ctx.opset(), ") has no gradient");
  }
  return Status::Ok();
}

Status Add(GradContext& ctx) {
  ONNXAMP_RETURN_IF_ERROR(CheckLegacyBroadcast(ctx));
  for (size_t i = 0; i < 2; ++i) {
    if (ctx.NeedsDX(i)) ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(i, ctx.SumToShape(ctx.dY(0), ctx.X(i))));
  }
  return Status::Ok();
}

Status Sub(GradContext& ctx) {
  ONNXAMP_RETURN_IF_ERROR(CheckLegacyBroadcast(ctx));
  if (ctx.NeedsDX(0)) ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(0, ctx.SumToShape(ctx.dY(0), ctx.X(0))));
  if (ctx.NeedsDX(1)) {
    ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(1, ctx.SumToShape(ctx.Emit1("Neg", {ctx.dY(0)}), ctx.X(1))));
  }
  return Status::Ok();
}

Status Mul(GradContext& ctx) {
  ONNXAMP_RETURN_IF_ERROR(CheckLegacyBroadcast(ctx));
  for (size_t i = 0; i < 2; ++i) {
    if (!ctx.NeedsDX(i)) continue;
    ir::Value* g = ctx.Emit1("Mul", {ctx.dY(0), ctx.X(1 - i)});
    ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(i, ctx.SumToShape(g, ctx.X(i))));
  }
  return Status::Ok();
}

// Y = A / B: dA = dY / B, dB = -dY * Y / B.
Status Div(GradContext& ctx) {
  ONNXAMP_RETURN_IF_ERROR(CheckLegacyBroadcast(ctx));
  ir::Value* dy_over_b = ctx.Emit1("Div", {ctx.dY(0), ctx.X(1)});
  if (ctx.NeedsDX(0)) ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(0, ctx.SumToShape(dy_over_b, ctx.X(0))));
  if (ctx.NeedsDX(1)) {
    ir::Value* g = ctx.Emit1("Neg", {ctx.Emit1("Mul", {dy_over_b, ctx.Y(0)})});
    ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(1, ctx.SumToShape(g, ctx.X(1))));
  }
  return Status::Ok();
}

// Y = A ^ B: dA = dY * B * A ^ (B - 1), dB = dY * Y * log(A) (real only where A > 0, as in every framework).
Status Pow(GradContext& ctx) {
  ONNXAMP_ASSIGN_OR_RETURN(DType t, FloatType(ctx));
  if (ctx.NeedsDX(0)) {
    ir::Value* exponent = ctx.X(1);
    if (ctx.TypeOf(exponent) != t) {
      exponent = ctx.Emit1("Cast", {exponent}, {ir::Attribute::Int("to", static_cast<int64_t>(t))});
    }
    ir::Value* b_minus_1 = ctx.Emit1("Sub", {exponent, ctx.Scalar(t, 1)});
    ir::Value* g = ctx.Emit1("Mul", {ctx.Emit1("Mul", {ctx.dY(0), exponent}), ctx.Emit1("Pow", {ctx.X(0), b_minus_1})});
    ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(0, ctx.SumToShape(g, ctx.X(0))));
  }
  if (ctx.NeedsDX(1)) {
    ir::Value* g = ctx.Emit1("Mul", {ctx.Emit1("Mul", {ctx.dY(0), ctx.Y(0)}), ctx.Emit1("Log", {ctx.X(0)})});
    if (ctx.TypeOf(ctx.X(1)) != t) {
      g = ctx.Emit1("Cast", {g}, {ir::Attribute::Int("to", static_cast<int64_t>(ctx.TypeOf(ctx.X(1))))});
    }
    ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(1, ctx.SumToShape(g, ctx.X(1))));
  }
  return Status::Ok();
}

Status Neg(GradContext& ctx) { return ctx.SetDX(0, ctx.Emit1("Neg", {ctx.dY(0)})); }

Status Relu(GradContext& ctx) {
  return ctx.SetDX(0, ctx.Emit1(kReluGradOp, {ctx.dY(0), ctx.Y(0)}, {}, exec::kInternalDomain));
}

// dX = dY * f'(X), f' given as a function of X and Y.
template <typename F>
Status Unary(GradContext& ctx, F derivative) {
  ONNXAMP_ASSIGN_OR_RETURN(DType t, FloatType(ctx));
  return ctx.SetDX(0, ctx.Emit1("Mul", {ctx.dY(0), derivative(t)}));
}

Status Sqrt(GradContext& ctx) {  // 0.5 / Y
  return Unary(ctx, [&](DType t) { return ctx.Emit1("Div", {ctx.Scalar(t, 0.5), ctx.Y(0)}); });
}

Status Exp(GradContext& ctx) {  // Y
  return Unary(ctx, [&](DType) { return ctx.Y(0); });
}

Status Log(GradContext& ctx) {  // 1 / X
  return ctx.SetDX(0, ctx.Emit1("Div", {ctx.dY(0), ctx.X(0)}));
}

Status Tanh(GradContext& ctx) {  // 1 - Y^2
  return Unary(ctx, [&](DType t) {
    return ctx.Emit1("Sub", {ctx.Scalar(t, 1), ctx.Emit1("Mul", {ctx.Y(0), ctx.Y(0)})});
  });
}

Status Sigmoid(GradContext& ctx) {  // Y (1 - Y)
  return Unary(ctx, [&](DType t) {
    return ctx.Emit1("Mul", {ctx.Y(0), ctx.Emit1("Sub", {ctx.Scalar(t, 1), ctx.Y(0)})});
  });
}

Status Erf(GradContext& ctx) {  // 2 / sqrt(pi) exp(-X^2)
  return Unary(ctx, [&](DType t) {
    ir::Value* e = ctx.Emit1("Exp", {ctx.Emit1("Neg", {ctx.Emit1("Mul", {ctx.X(0), ctx.X(0)})})});
    return ctx.Emit1("Mul", {e, ctx.Scalar(t, 2.0 / std::sqrt(M_PI))});
  });
}

Status Reciprocal(GradContext& ctx) {  // -Y^2
  return Unary(ctx, [&](DType) { return ctx.Emit1("Neg", {ctx.Emit1("Mul", {ctx.Y(0), ctx.Y(0)})}); });
}

Status Abs(GradContext& ctx) {  // sign(X): (X > 0) - (X < 0), 0 at 0 as in PyTorch
  return Unary(ctx, [&](DType t) {
    const std::vector<ir::Attribute> to = {ir::Attribute::Int("to", static_cast<int64_t>(t))};
    ir::Value* pos = ctx.Emit1("Cast", {ctx.Emit1("Greater", {ctx.X(0), ctx.Scalar(t, 0)})}, to);
    ir::Value* neg = ctx.Emit1("Cast", {ctx.Emit1("Less", {ctx.X(0), ctx.Scalar(t, 0)})}, to);
    return ctx.Emit1("Sub", {pos, neg});
  });
}

Status Softplus(GradContext& ctx) {  // sigmoid(X)
  return Unary(ctx, [&](DType) { return ctx.Emit1("Sigmoid", {ctx.X(0)}); });
}

// LeakyRelu: dY where X > 0 (Y > 0 for alpha > 0 too, but X decides for any alpha), alpha * dY elsewhere.
Status LeakyRelu(GradContext& ctx) {
  ONNXAMP_ASSIGN_OR_RETURN(DType t, FloatType(ctx));
  const ir::Attribute* a = ctx.node().FindAttribute("alpha");
  const double alpha = a && a->type() == ir::AttrType::kFloat ? a->f : 0.01;
  ir::Value* positive = ctx.Emit1("Greater", {ctx.X(0), ctx.Scalar(t, 0)});
  ir::Value* slope = ctx.Emit1("Where", {positive, ctx.Scalar(t, 1), ctx.Scalar(t, alpha)});
  return ctx.SetDX(0, ctx.Emit1("Mul", {ctx.dY(0), slope}));
}

// Elu: EluGrad(dY, X) with the forward's alpha.
Status Elu(GradContext& ctx) {
  std::vector<ir::Attribute> attrs;
  if (const ir::Attribute* a = ctx.node().FindAttribute("alpha")) attrs.push_back(*a);
  return ctx.SetDX(0, ctx.Emit1(kEluGradOp, {ctx.dY(0), ctx.X(0)}, std::move(attrs), exec::kInternalDomain));
}

// Gelu: GeluGrad(dY, X) with the forward's approximation ("none" or "tanh").
Status Gelu(GradContext& ctx) {
  std::vector<ir::Attribute> attrs;
  if (const ir::Attribute* a = ctx.node().FindAttribute("approximate")) attrs.push_back(*a);
  return ctx.SetDX(0, ctx.Emit1(kGeluGradOp, {ctx.dY(0), ctx.X(0)}, std::move(attrs), exec::kInternalDomain));
}

}  // namespace

void RegisterElementwiseOpInfos(OpInfoRegistry& r) {
  r.Add("Add").Gradient(1, INT64_MAX, &Add);
  r.Add("Sub").Gradient(1, INT64_MAX, &Sub);
  r.Add("Mul").Gradient(1, INT64_MAX, &Mul);
  r.Add("Div").Gradient(1, INT64_MAX, &Div);
  r.Add("Pow")
      .Keep("overflows fp16's range for moderate bases and exponents")
      .Gradient(7, INT64_MAX, &Pow)
      .GradientFloor("Pow-1 broadcasts with the legacy broadcast attribute");
  r.Add("Neg").Gradient(6, INT64_MAX, &Neg);
  r.Add("Relu").Gradient(6, INT64_MAX, &Relu);
  r.Add("Sqrt").Gradient(6, INT64_MAX, &Sqrt);
  r.Add("Exp").Keep("overflows fp16 above 11").Gradient(6, INT64_MAX, &Exp);
  r.Add("Log").Keep("loses precision near 1 and underflows for tiny inputs").Gradient(6, INT64_MAX, &Log);
  r.Add("Tanh").Gradient(6, INT64_MAX, &Tanh);
  r.Add("Sigmoid").Gradient(6, INT64_MAX, &Sigmoid);
  r.Add("Erf").Gradient(9, INT64_MAX, &Erf);
  r.Add("Reciprocal").Keep("overflows fp16 for inputs below 2^-16").Gradient(6, INT64_MAX, &Reciprocal);
  r.Add("Abs").Gradient(6, INT64_MAX, &Abs);
  r.Add("Softplus").Keep("an exp inside: overflows fp16").Gradient(1, INT64_MAX, &Softplus);
  r.Add("LeakyRelu").Gradient(6, INT64_MAX, &LeakyRelu);
  r.Add("Elu").Gradient(1, INT64_MAX, &Elu);  // 1-5 only add the ignored consumed_inputs
  r.Add("Gelu").Gradient(20, INT64_MAX, &Gelu);
  r.Add(kGeluOp, exec::kInternalDomain).Gradient(1, 1, &Gelu);
  for (const char* op : {"Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual"}) {
    r.Add(op).NotDifferentiable("bool result");
  }
  for (const char* op : {"Not", "And", "Or", "Xor"}) r.Add(op).NotDifferentiable("bool");
  r.Add(kReluGradOp, exec::kInternalDomain).NotDifferentiable(kBackwardOpReason);
  r.Add(kEluGradOp, exec::kInternalDomain).NotDifferentiable(kBackwardOpReason);
  r.Add(kGeluGradOp, exec::kInternalDomain).NotDifferentiable(kBackwardOpReason);
}

}  // namespace onnxamp::ops
