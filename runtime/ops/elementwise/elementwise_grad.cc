// Gradient builders of the elementwise ops (binary arithmetic with broadcasting, unary math and activations):
// compositions of ONNX ops, plus ReluGrad, EluGrad and GeluGrad. Broadcast inputs get SumToShape. Also the OpInfos
// of elementwise/ (comparisons and logic included).
#include <cmath>
#include <string>
#include <vector>

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

// ReluGrad's own gradient, for second derivatives (the Gradient operator, a gradient penalty): linear in dY with the
// same mask; the mask is piecewise constant in Y, so Y's gradient is zero (as PyTorch's double backward of relu).
Status ReluGradGradient(GradContext& ctx) {
  if (ctx.NeedsDX(0)) {
    ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(0, ctx.Emit1(kReluGradOp, {ctx.dY(0), ctx.X(1)}, {}, exec::kInternalDomain)));
  }
  if (ctx.NeedsDX(1)) ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(1, ctx.Zeros(ctx.TypeOf(ctx.X(1)), ctx.X(1))));
  return Status::Ok();
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

// A float attribute of the forward node, or its default.
double FloatAttr(GradContext& ctx, const char* name, double default_value) {
  const ir::Attribute* a = ctx.node().FindAttribute(name);
  return a && a->type() == ir::AttrType::kFloat ? a->f : default_value;
}

// LeakyRelu: dY where X > 0 (Y > 0 for alpha > 0 too, but X decides for any alpha), alpha * dY elsewhere. The slope
// is alpha + (1 - alpha) * (X > 0), without Where (opset 9), so that every opset of the kernel has the builder.
Status LeakyRelu(GradContext& ctx) {
  ONNXAMP_ASSIGN_OR_RETURN(DType t, FloatType(ctx));
  const double alpha = FloatAttr(ctx, "alpha", 0.01);
  ir::Value* positive = ctx.Emit1("Cast", {ctx.Emit1("Greater", {ctx.X(0), ctx.Scalar(t, 0)})},
                                  {ir::Attribute::Int("to", static_cast<int64_t>(t))});
  ir::Value* slope = ctx.Emit1("Add", {ctx.Emit1("Mul", {positive, ctx.Scalar(t, 1 - alpha)}), ctx.Scalar(t, alpha)});
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

// EluGrad's own gradient (second derivatives): EluGrad again in dY; in X, dY * alpha * exp(X) where X <= 0 (the
// branch EluGrad takes there), zero elsewhere. Without Where, so that every opset has it.
Status EluGradGradient(GradContext& ctx) {
  ONNXAMP_ASSIGN_OR_RETURN(DType t, FloatType(ctx));
  ir::Value* g = ctx.dY(0);
  ir::Value* x = ctx.X(1);
  std::vector<ir::Attribute> attrs;
  if (const ir::Attribute* a = ctx.node().FindAttribute("alpha")) attrs.push_back(*a);
  if (ctx.NeedsDX(0)) {
    ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(0, ctx.Emit1(kEluGradOp, {g, x}, attrs, exec::kInternalDomain)));
  }
  if (ctx.NeedsDX(1)) {
    ir::Value* positive = ctx.Emit1("Cast", {ctx.Emit1("Greater", {x, ctx.Scalar(t, 0)})},
                                    {ir::Attribute::Int("to", static_cast<int64_t>(t))});
    ir::Value* curve = ctx.Emit1("Mul", {ctx.Emit1("Exp", {x}), ctx.Scalar(t, FloatAttr(ctx, "alpha", 1.0))});
    ir::Value* second = ctx.Emit1("Mul", {curve, ctx.Emit1("Sub", {ctx.Scalar(t, 1), positive})});
    ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(1, ctx.Emit1("Mul", {ctx.Emit1("Mul", {g, ctx.X(0)}), second})));
  }
  return Status::Ok();
}

// GeluGrad's own gradient (second derivatives): GeluGrad again in dY; dY * Gelu''(X) in X. The exact form:
// Gelu'' = phi(X) (2 - X^2), phi the standard normal density. The tanh form, with u = c (X + k X^3), t = tanh(u),
// u' = c (1 + 3 k X^2): Gelu'' = (1 - t^2) (u' - X t u'^2 + 3 c k X^2), c = sqrt(2 / pi), k = 0.044715.
Status GeluGradGradient(GradContext& ctx) {
  ONNXAMP_ASSIGN_OR_RETURN(DType t, FloatType(ctx));
  ir::Value* g = ctx.dY(0);
  ir::Value* x = ctx.X(1);
  const std::string approximate = ctx.node().GetString("approximate", "none");
  if (ctx.NeedsDX(0)) {
    ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(
        0, ctx.Emit1(kGeluGradOp, {g, x}, {ir::Attribute::String("approximate", approximate)}, exec::kInternalDomain)));
  }
  if (!ctx.NeedsDX(1)) return Status::Ok();
  ir::Value* x2 = ctx.Emit1("Mul", {x, x});
  ir::Value* second = nullptr;
  if (approximate == "tanh") {
    const double c = std::sqrt(2.0 / M_PI), k = 0.044715;
    ir::Value* u = ctx.Emit1(
        "Mul",
        {ctx.Emit1("Add", {x, ctx.Emit1("Mul", {ctx.Emit1("Mul", {x2, x}), ctx.Scalar(t, k)})}), ctx.Scalar(t, c)});
    ir::Value* th = ctx.Emit1("Tanh", {u});
    ir::Value* du = ctx.Emit1("Add", {ctx.Emit1("Mul", {x2, ctx.Scalar(t, 3 * c * k)}), ctx.Scalar(t, c)});
    ir::Value* sech2 = ctx.Emit1("Sub", {ctx.Scalar(t, 1), ctx.Emit1("Mul", {th, th})});
    ir::Value* inner = ctx.Emit1(
        "Add", {ctx.Emit1("Sub", {du, ctx.Emit1("Mul", {ctx.Emit1("Mul", {x, th}), ctx.Emit1("Mul", {du, du})})}),
                ctx.Emit1("Mul", {x2, ctx.Scalar(t, 3 * c * k)})});
    second = ctx.Emit1("Mul", {sech2, inner});
  } else {
    ir::Value* phi = ctx.Emit1("Mul", {ctx.Emit1("Exp", {ctx.Emit1("Mul", {x2, ctx.Scalar(t, -0.5)})}),
                                       ctx.Scalar(t, 1.0 / std::sqrt(2.0 * M_PI))});
    second = ctx.Emit1("Mul", {phi, ctx.Emit1("Sub", {ctx.Scalar(t, 2), x2})});
  }
  return ctx.SetDX(1, ctx.Emit1("Mul", {ctx.Emit1("Mul", {g, ctx.X(0)}), second}));
}

// Where(condition, dY, 0): dY where the condition holds, zero elsewhere.
ir::Value* DyWhere(GradContext& ctx, DType t, ir::Value* condition) {
  return ctx.Emit1("Where", {condition, ctx.dY(0), ctx.Scalar(t, 0)});
}

// Floor, Ceil, Round, Sign: piecewise constant, so a zero gradient (as PyTorch gives), of X's run-time shape.
Status Sin(GradContext& ctx) {  // cos(X)
  return Unary(ctx, [&](DType) { return ctx.Emit1("Cos", {ctx.X(0)}); });
}

Status Cos(GradContext& ctx) {  // -sin(X)
  return Unary(ctx, [&](DType) { return ctx.Emit1("Neg", {ctx.Emit1("Sin", {ctx.X(0)})}); });
}

Status Tan(GradContext& ctx) {  // 1 + Y^2
  return Unary(ctx, [&](DType t) {
    return ctx.Emit1("Add", {ctx.Scalar(t, 1), ctx.Emit1("Mul", {ctx.Y(0), ctx.Y(0)})});
  });
}

// dY / sqrt(1 - X^2).
ir::Value* OverSqrtOneMinusSquare(GradContext& ctx, DType t) {
  ir::Value* x2 = ctx.Emit1("Mul", {ctx.X(0), ctx.X(0)});
  return ctx.Emit1("Div", {ctx.dY(0), ctx.Emit1("Sqrt", {ctx.Emit1("Sub", {ctx.Scalar(t, 1), x2})})});
}

Status Asin(GradContext& ctx) {  // 1 / sqrt(1 - X^2)
  ONNXAMP_ASSIGN_OR_RETURN(DType t, FloatType(ctx));
  return ctx.SetDX(0, OverSqrtOneMinusSquare(ctx, t));
}

Status Acos(GradContext& ctx) {  // -1 / sqrt(1 - X^2)
  ONNXAMP_ASSIGN_OR_RETURN(DType t, FloatType(ctx));
  return ctx.SetDX(0, ctx.Emit1("Neg", {OverSqrtOneMinusSquare(ctx, t)}));
}

// Asinh: 1 / sqrt(X^2 + 1) = 1 / cosh(Y); Acosh: 1 / sqrt(X^2 - 1) = 1 / sinh(Y). From Y, so that fp16 does not
// overflow X^2 above 256 (Y stays below 12 for every finite fp16 X).
Status Asinh(GradContext& ctx) { return ctx.SetDX(0, ctx.Emit1("Div", {ctx.dY(0), ctx.Emit1("Cosh", {ctx.Y(0)})})); }

Status Acosh(GradContext& ctx) { return ctx.SetDX(0, ctx.Emit1("Div", {ctx.dY(0), ctx.Emit1("Sinh", {ctx.Y(0)})})); }

// dY / (a + b X^2).
ir::Value* OverQuadratic(GradContext& ctx, DType t, double a, double b) {
  ir::Value* x2 = ctx.Emit1("Mul", {ctx.X(0), ctx.X(0)});
  return ctx.Emit1("Div", {ctx.dY(0), ctx.Emit1("Add", {ctx.Scalar(t, a), ctx.Emit1("Mul", {x2, ctx.Scalar(t, b)})})});
}

Status Atan(GradContext& ctx) {  // 1 / (1 + X^2)
  ONNXAMP_ASSIGN_OR_RETURN(DType t, FloatType(ctx));
  return ctx.SetDX(0, OverQuadratic(ctx, t, 1, 1));
}

Status Atanh(GradContext& ctx) {  // 1 / (1 - X^2)
  ONNXAMP_ASSIGN_OR_RETURN(DType t, FloatType(ctx));
  return ctx.SetDX(0, OverQuadratic(ctx, t, 1, -1));
}

Status Sinh(GradContext& ctx) {  // cosh(X)
  return Unary(ctx, [&](DType) { return ctx.Emit1("Cosh", {ctx.X(0)}); });
}

Status Cosh(GradContext& ctx) {  // sinh(X)
  return Unary(ctx, [&](DType) { return ctx.Emit1("Sinh", {ctx.X(0)}); });
}

Status Softsign(GradContext& ctx) {  // 1 / (1 + |X|)^2
  ONNXAMP_ASSIGN_OR_RETURN(DType t, FloatType(ctx));
  ir::Value* d = ctx.Emit1("Add", {ctx.Scalar(t, 1), ctx.Emit1("Abs", {ctx.X(0)})});
  return ctx.SetDX(0, ctx.Emit1("Div", {ctx.dY(0), ctx.Emit1("Mul", {d, d})}));
}

// Selu: gamma where X > 0, gamma alpha exp(X) elsewhere (from X, not from Y + gamma alpha, which cancels).
Status Selu(GradContext& ctx) {
  ONNXAMP_ASSIGN_OR_RETURN(DType t, FloatType(ctx));
  const double alpha = FloatAttr(ctx, "alpha", 1.67326319217681884765625);
  const double gamma = FloatAttr(ctx, "gamma", 1.05070102214813232421875);
  ir::Value* negative = ctx.Emit1("Mul", {ctx.Emit1("Exp", {ctx.X(0)}), ctx.Scalar(t, gamma * alpha)});
  ir::Value* slope =
      ctx.Emit1("Where", {ctx.Emit1("Greater", {ctx.X(0), ctx.Scalar(t, 0)}), ctx.Scalar(t, gamma), negative});
  return ctx.SetDX(0, ctx.Emit1("Mul", {ctx.dY(0), slope}));
}

// Celu: 1 where X > 0, exp(X / alpha) elsewhere.
Status Celu(GradContext& ctx) {
  ONNXAMP_ASSIGN_OR_RETURN(DType t, FloatType(ctx));
  const double alpha = FloatAttr(ctx, "alpha", 1.0);
  ir::Value* negative = ctx.Emit1("Exp", {ctx.Emit1("Div", {ctx.X(0), ctx.Scalar(t, alpha)})});
  ir::Value* slope =
      ctx.Emit1("Where", {ctx.Emit1("Greater", {ctx.X(0), ctx.Scalar(t, 0)}), ctx.Scalar(t, 1), negative});
  return ctx.SetDX(0, ctx.Emit1("Mul", {ctx.dY(0), slope}));
}

// HardSigmoid: alpha where the output is strictly between 0 and 1 (PyTorch's rule at the kinks), 0 elsewhere.
Status HardSigmoid(GradContext& ctx) {
  ONNXAMP_ASSIGN_OR_RETURN(DType t, FloatType(ctx));
  const double alpha = FloatAttr(ctx, "alpha", 0.2);
  ir::Value* inside = ctx.Emit1(
      "And", {ctx.Emit1("Greater", {ctx.Y(0), ctx.Scalar(t, 0)}), ctx.Emit1("Less", {ctx.Y(0), ctx.Scalar(t, 1)})});
  return ctx.SetDX(0, ctx.Emit1("Mul", {DyWhere(ctx, t, inside), ctx.Scalar(t, alpha)}));
}

// HardSwish: 0 below -3, X / 3 + 1/2 up to 3 (inclusive, as PyTorch), 1 above.
Status HardSwish(GradContext& ctx) {
  ONNXAMP_ASSIGN_OR_RETURN(DType t, FloatType(ctx));
  ir::Value* ramp = ctx.Emit1("Add", {ctx.Emit1("Div", {ctx.X(0), ctx.Scalar(t, 3)}), ctx.Scalar(t, 0.5)});
  ir::Value* upper =
      ctx.Emit1("Where", {ctx.Emit1("LessOrEqual", {ctx.X(0), ctx.Scalar(t, 3)}), ramp, ctx.Scalar(t, 1)});
  ir::Value* slope = ctx.Emit1("Where", {ctx.Emit1("Less", {ctx.X(0), ctx.Scalar(t, -3)}), ctx.Scalar(t, 0), upper});
  return ctx.SetDX(0, ctx.Emit1("Mul", {ctx.dY(0), slope}));
}

// X compared with a float attribute as the forward compares them: fp16 and bf16 X widened to float, not the attribute
// rounded to X's type (alpha 0.3 in fp16 is 0.30005, and X = 0.30005 passes the forward's X > 0.3f).
ir::Value* CompareWithAttribute(GradContext& ctx, DType t, const char* op, double value) {
  if (t == DType::kFloat16 || t == DType::kBFloat16) {
    ir::Value* wide = ctx.Emit1("Cast", {ctx.X(0)}, {ir::Attribute::Int("to", static_cast<int64_t>(DType::kFloat32))});
    return ctx.Emit1(op, {wide, ctx.Scalar(DType::kFloat32, value)});
  }
  return ctx.Emit1(op, {ctx.X(0), ctx.Scalar(t, value)});
}

// ThresholdedRelu: dY where X > alpha.
Status ThresholdedRelu(GradContext& ctx) {
  ONNXAMP_ASSIGN_OR_RETURN(DType t, FloatType(ctx));
  const double alpha = FloatAttr(ctx, "alpha", 1.0);
  return ctx.SetDX(0, DyWhere(ctx, t, CompareWithAttribute(ctx, t, "Greater", alpha)));
}

// Shrink: dY where |X| > lambd (the two shifted branches), 0 between.
Status Shrink(GradContext& ctx) {
  ONNXAMP_ASSIGN_OR_RETURN(DType t, FloatType(ctx));
  const double lambd = FloatAttr(ctx, "lambd", 0.5);
  ir::Value* outside =
      ctx.Emit1("Or", {CompareWithAttribute(ctx, t, "Less", -lambd), CompareWithAttribute(ctx, t, "Greater", lambd)});
  return ctx.SetDX(0, DyWhere(ctx, t, outside));
}

// Mish: tanh(sp) + X (1 - tanh(sp)^2) sigmoid(X), sp = softplus(X).
Status Mish(GradContext& ctx) {
  return Unary(ctx, [&](DType t) {
    ir::Value* th = ctx.Emit1("Tanh", {ctx.Emit1("Softplus", {ctx.X(0)})});
    ir::Value* sech2 = ctx.Emit1("Sub", {ctx.Scalar(t, 1), ctx.Emit1("Mul", {th, th})});
    ir::Value* rest = ctx.Emit1("Mul", {ctx.Emit1("Mul", {ctx.X(0), sech2}), ctx.Emit1("Sigmoid", {ctx.X(0)})});
    return ctx.Emit1("Add", {th, rest});
  });
}

// PRelu: dX = dY where X > 0, slope dY elsewhere; dSlope = X dY where X <= 0, summed to the slope's shape
// (PyTorch's rule: the slope gets nothing at 0).
Status PRelu(GradContext& ctx) {
  ONNXAMP_ASSIGN_OR_RETURN(DType t, FloatType(ctx));
  ir::Value* positive = ctx.Emit1("Greater", {ctx.X(0), ctx.Scalar(t, 0)});
  if (ctx.NeedsDX(0)) {
    ir::Value* scaled = ctx.Emit1("Mul", {ctx.dY(0), ctx.X(1)});
    ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(0, ctx.Emit1("Where", {positive, ctx.dY(0), scaled})));
  }
  if (ctx.NeedsDX(1)) {
    ir::Value* g = ctx.Emit1("Where", {positive, ctx.Scalar(t, 0), ctx.Emit1("Mul", {ctx.dY(0), ctx.X(0)})});
    ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(1, ctx.SumToShape(g, ctx.X(1))));
  }
  return Status::Ok();
}

// Mod of floats (fmod = 1, C's fmod: A - B trunc(A / B)): dA = dY, dB = -dY trunc(A / B), with trunc(q) =
// sign(q) floor(|q|) (PyTorch's fmod gradient).
Status Mod(GradContext& ctx) {
  if (ctx.NeedsDX(0)) ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(0, ctx.SumToShape(ctx.dY(0), ctx.X(0))));
  if (ctx.NeedsDX(1)) {
    ir::Value* q = ctx.Emit1("Div", {ctx.X(0), ctx.X(1)});
    ir::Value* trunc = ctx.Emit1("Mul", {ctx.Emit1("Sign", {q}), ctx.Emit1("Floor", {ctx.Emit1("Abs", {q})})});
    ir::Value* g = ctx.Emit1("Neg", {ctx.Emit1("Mul", {ctx.dY(0), trunc})});
    ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(1, ctx.SumToShape(g, ctx.X(1))));
  }
  return Status::Ok();
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
  r.Add("Sin").Gradient(7, INT64_MAX, &Sin);
  r.Add("Cos").Gradient(7, INT64_MAX, &Cos);
  r.Add("Tan").Keep("overflows fp16 near odd multiples of pi/2 (autocast keeps it FP32)").Gradient(7, INT64_MAX, &Tan);
  r.Add("Asin").Keep("its slope grows without bound near +-1 (autocast keeps it FP32)").Gradient(7, INT64_MAX, &Asin);
  r.Add("Acos").Keep("its slope grows without bound near +-1 (autocast keeps it FP32)").Gradient(7, INT64_MAX, &Acos);
  r.Add("Atan").Gradient(7, INT64_MAX, &Atan);
  r.Add("Sinh").Keep("overflows fp16 above 11 (autocast keeps it FP32)").Gradient(9, INT64_MAX, &Sinh);
  r.Add("Cosh").Keep("overflows fp16 above 11 (autocast keeps it FP32)").Gradient(9, INT64_MAX, &Cosh);
  r.Add("Asinh").Gradient(9, INT64_MAX, &Asinh);
  r.Add("Acosh").Gradient(9, INT64_MAX, &Acosh);
  r.Add("Atanh").Gradient(9, INT64_MAX, &Atanh);
  // The zero gradient is an Expand of 0 to X's shape (opset 8+).
  r.Add("Floor").Gradient(8, INT64_MAX, &ZeroGradient).GradientFloor("the zero gradient is an Expand (opset 8)");
  r.Add("Ceil").Gradient(8, INT64_MAX, &ZeroGradient).GradientFloor("the zero gradient is an Expand (opset 8)");
  r.Add("Round").Gradient(11, INT64_MAX, &ZeroGradient);
  r.Add("Sign").Gradient(9, INT64_MAX, &ZeroGradient);
  r.Add("Softsign").Gradient(6, INT64_MAX, &Softsign);
  // The builders below take Where (opset 9) and, for HardSwish, LessOrEqual (12).
  r.Add("Selu").Gradient(9, INT64_MAX, &Selu).GradientFloor("the gradient is a Where (opset 9)");
  r.Add("Celu").Gradient(12, INT64_MAX, &Celu);
  r.Add("HardSigmoid").Gradient(9, INT64_MAX, &HardSigmoid).GradientFloor("the gradient is a Where (opset 9)");
  r.Add("HardSwish").Gradient(14, INT64_MAX, &HardSwish);
  r.Add("ThresholdedRelu").Gradient(10, INT64_MAX, &ThresholdedRelu);
  r.Add("Shrink").Gradient(9, INT64_MAX, &Shrink);
  r.Add("Mish").Gradient(18, INT64_MAX, &Mish);
  r.Add("PRelu").Gradient(9, INT64_MAX, &PRelu).GradientFloor("the gradient is a Where (opset 9)");
  r.Add("Mod").Gradient(10, INT64_MAX, &Mod);
  for (const char* op : {"IsNaN", "IsInf"}) r.Add(op).NotDifferentiable("bool result");
  for (const char* op : {"Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual"}) {
    r.Add(op).NotDifferentiable("bool result");
  }
  for (const char* op : {"Not", "And", "Or", "Xor"}) r.Add(op).NotDifferentiable("bool");
  r.Add("BitShift").NotDifferentiable("unsigned integers");
  r.Add(kReluGradOp, exec::kInternalDomain).Gradient(1, INT64_MAX, &ReluGradGradient);
  r.Add(kEluGradOp, exec::kInternalDomain).Gradient(1, INT64_MAX, &EluGradGradient);
  r.Add(kGeluGradOp, exec::kInternalDomain).Gradient(1, INT64_MAX, &GeluGradGradient);
}

}  // namespace onnxamp::ops
