// The OpInfos of MeanVarianceNormalization and LpNormalization (kept in FP32 by the converter: statistics over many
// elements) and their gradient builders: one com.onnxamp MeanVarianceNormalizationGrad or LpNormalizationGrad(dY, X)
// with the forward's attributes (runtime/ops/normalize/normalize_cpu.cc has the formulas).
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/normalize/normalize.h"
#include "runtime/ops/op_info.h"

namespace onnxamp::ops {
namespace {

template <const char* kGradOp>
Status NormalizeGradient(GradContext& ctx) {
  if (!ctx.NeedsDX(0) || !ctx.dY(0)) return Status::Ok();
  return ctx.SetDX(0, ctx.Emit(kGradOp, {ctx.dY(0), ctx.X(0)}, 1, ctx.node().attributes(), exec::kInternalDomain,
                               ctx.TypeOf(ctx.X(0)))[0]);
}

// MeanVarianceNormalizationGrad as ONNX ops, for its own gradient (second derivatives), the statistics computed again
// from X, in float32 for 16-bit types (the kernel computes in double). With Xc = X - mean, s = sqrt(variance) and
// d = s + 1e-9 over the axes: dX = (dY - mean(dY)) / d - Xc * mean(dY * Xc) / (d^2 s), the second term 0 where s = 0
// (Xc is 0 there: s is replaced by 1).
Status DecomposeMvnGrad(DecomposeContext& ctx) {
  ONNXAMP_ASSIGN_OR_RETURN(const DType c, ctx.ComputeTypeFor(ctx.X(1)));
  MvnSpec spec;
  ONNXAMP_RETURN_IF_ERROR(ParseMvnSpec(exec::KernelInfo{ctx.node(), 1, exec::Device::kCpu}, &spec));
  const std::vector<int64_t> axes = spec.all_axes ? std::vector<int64_t>{} : spec.axes;
  auto op = [&](const char* type, ir::Value* a, ir::Value* b) { return ctx.Emit1(type, {a, b}, {}, "", c); };
  ir::Value* dy = ctx.CastTo(ctx.X(0), c);
  ir::Value* x = ctx.CastTo(ctx.X(1), c);
  ir::Value* xc = op("Sub", x, ctx.EmitReduceMean(x, axes, true, c));
  ir::Value* s = ctx.Emit1("Sqrt", {ctx.EmitReduceMean(op("Mul", xc, xc), axes, true, c)}, {}, "", c);
  ir::Value* d = op("Add", s, ctx.Scalar(c, kMvnEpsilon));
  ir::Value* zero = ctx.Emit1("Equal", {s, ctx.Scalar(c, 0.0)}, {}, "", DType::kBool);
  ir::Value* s_safe = ctx.Emit1("Where", {zero, ctx.Scalar(c, 1.0), s}, {}, "", c);
  ir::Value* first = op("Div", op("Sub", dy, ctx.EmitReduceMean(dy, axes, true, c)), d);
  ir::Value* second = op("Div", op("Mul", xc, ctx.EmitReduceMean(op("Mul", dy, xc), axes, true, c)),
                         op("Mul", op("Mul", d, d), s_safe));
  const DType out = ctx.TypeOf(ctx.Y(0)) == DType::kUndefined ? ctx.TypeOf(ctx.X(1)) : ctx.TypeOf(ctx.Y(0));
  ctx.SetY(0, ctx.CastTo(op("Sub", first, second), out));
  return Status::Ok();
}

// LpNormalizationGrad as ONNX ops, for its own gradient: with n the norm along the axis (sqrt(sum(X^2)) or sum(|X|)),
// Y = X / n and g = Y (p 2) or Sign(X) (p 1): dX = (dY - g * sum(dY * Y)) / n, 0 where n = 0 (n replaced by 1 there
// and the result masked). A negative axis needs opset 11 (ReduceSum's negative axes).
Status DecomposeLpNormGrad(DecomposeContext& ctx) {
  ONNXAMP_ASSIGN_OR_RETURN(const DType c, ctx.ComputeTypeFor(ctx.X(1)));
  LpNormSpec spec;
  ONNXAMP_RETURN_IF_ERROR(ParseLpNormSpec(exec::KernelInfo{ctx.node(), 1, exec::Device::kCpu}, &spec));
  if (spec.axis < 0 && ctx.onnx_opset() < 11) {
    return InvalidArgument("axis ", spec.axis,
                           ": its decomposition reduces with a negative axis, which needs opset 11");
  }
  auto op = [&](const char* type, ir::Value* a, ir::Value* b) { return ctx.Emit1(type, {a, b}, {}, "", c); };
  ir::Value* dy = ctx.CastTo(ctx.X(0), c);
  ir::Value* x = ctx.CastTo(ctx.X(1), c);
  ir::Value* n = spec.p == 1 ? ctx.EmitReduceSum(ctx.Emit1("Abs", {x}, {}, "", c), {spec.axis}, true, c)
                             : ctx.Emit1("Sqrt", {ctx.EmitReduceSum(op("Mul", x, x), {spec.axis}, true, c)}, {}, "", c);
  ir::Value* zero = ctx.Emit1("Equal", {n, ctx.Scalar(c, 0.0)}, {}, "", DType::kBool);
  ir::Value* n_safe = ctx.Emit1("Where", {zero, ctx.Scalar(c, 1.0), n}, {}, "", c);
  ir::Value* y = op("Div", x, n_safe);
  ir::Value* g = spec.p == 1 ? ctx.Emit1("Sign", {x}, {}, "", c) : y;
  ir::Value* dot = ctx.EmitReduceSum(op("Mul", dy, y), {spec.axis}, true, c);
  ir::Value* dx = op("Div", op("Sub", dy, op("Mul", g, dot)), n_safe);
  dx = ctx.Emit1("Where", {zero, ctx.Scalar(c, 0.0), dx}, {}, "", c);
  const DType out = ctx.TypeOf(ctx.Y(0)) == DType::kUndefined ? ctx.TypeOf(ctx.X(1)) : ctx.TypeOf(ctx.Y(0));
  ctx.SetY(0, ctx.CastTo(dx, out));
  return Status::Ok();
}

}  // namespace

void RegisterNormalizeOpInfos(OpInfoRegistry& r) {
  r.Add("MeanVarianceNormalization")
      .Keep("mean and variance over many elements")
      .Gradient(9, INT64_MAX, &NormalizeGradient<kMeanVarianceNormalizationGradOp>);
  r.Add("LpNormalization")
      .Keep("a norm over many elements")
      .Gradient(1, INT64_MAX, &NormalizeGradient<kLpNormalizationGradOp>);
  r.Add(kMeanVarianceNormalizationGradOp, exec::kInternalDomain).Decompose(&DecomposeMvnGrad);
  r.Add(kLpNormalizationGradOp, exec::kInternalDomain).Decompose(&DecomposeLpNormGrad);
}

}  // namespace onnxamp::ops
