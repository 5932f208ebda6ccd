// Gemm's gradient builder: Y = alpha * op(A) op(B) + beta * C gives d op(A) = alpha * dY op(B)^T,
// d op(B) = alpha * op(A)^T dY (each transposed back when the forward transposed that operand) and dC = beta * dY
// summed to C's shape (scalar, [N], [M, 1], [M, N]...). The products are Gemm nodes from opset 11 (C optional),
// Transpose + MatMul (+ Mul by alpha) before. The attributes are read by the forward kernel's GemmSpec.
#include "runtime/executor/kernel.h"
#include "runtime/ops/gemm/gemm.h"
#include "runtime/ops/op_info.h"

namespace onnxamp::ops {
namespace {

// alpha * op(a) op(b) for 2-D a and b (op transposes when the flag says so), in `t`.
ir::Value* Product(GradContext& ctx, ir::Value* a, ir::Value* b, bool trans_a, bool trans_b, float alpha, DType t) {
  if (ctx.onnx_opset() >= 11) {
    std::vector<ir::Attribute> attrs;
    if (trans_a) attrs.push_back(ir::Attribute::Int("transA", 1));
    if (trans_b) attrs.push_back(ir::Attribute::Int("transB", 1));
    if (alpha != 1.0f) attrs.push_back(ir::Attribute::Float("alpha", alpha));
    return ctx.Emit1("Gemm", {a, b}, std::move(attrs));
  }
  if (trans_a) a = ctx.Emit1("Transpose", {a});
  if (trans_b) b = ctx.Emit1("Transpose", {b});
  ir::Value* y = ctx.Emit1("MatMul", {a, b});
  return alpha == 1.0f ? y : ctx.Emit1("Mul", {y, ctx.Scalar(t, alpha)});
}

Status GemmGradient(GradContext& ctx) {
  GemmSpec spec;
  ONNXAMP_RETURN_IF_ERROR(spec.Init(exec::KernelInfo{ctx.node(), ctx.opset(), exec::Device::kCpu}));
  const DType t = ctx.TypeOf(ctx.X(0));
  if (t == DType::kUndefined) return InvalidArgument("the element type of input A is unknown");
  ir::Value* dy = ctx.dY(0);
  const bool ta = spec.trans_a(), tb = spec.trans_b();
  const float alpha = spec.alpha(), beta = spec.beta();
  ir::Value* a = ctx.X(0);
  ir::Value* b = ctx.X(1);
  if (ctx.NeedsDX(0)) {
    // d op(A) = alpha dY op(B)^T [M, K]; with transA, dA = its transpose alpha op(B) dY^T [K, M].
    ir::Value* da = ta ? Product(ctx, b, dy, tb, true, alpha, t) : Product(ctx, dy, b, false, !tb, alpha, t);
    ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(0, da));
  }
  if (ctx.NeedsDX(1)) {
    // d op(B) = alpha op(A)^T dY [K, N]; with transB, dB = its transpose alpha dY^T op(A) [N, K].
    ir::Value* db = tb ? Product(ctx, dy, a, true, ta, alpha, t) : Product(ctx, a, dy, !ta, false, alpha, t);
    ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(1, db));
  }
  if (ctx.NeedsDX(2)) {
    ir::Value* dc = beta == 1.0f ? dy : ctx.Emit1("Mul", {dy, ctx.Scalar(t, beta)});
    ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(2, ctx.SumToShape(dc, ctx.X(2))));
  }
  return Status::Ok();
}

}  // namespace

void RegisterGemmOpInfos(OpInfoRegistry& r) {
  // One builder for every opset: 1-6 (C broadcast by attribute), 7-10 (C required), 11+ (C optional), 13 (bf16).
  r.Add("Gemm").Low("compute-bound; the fp16/bf16 kernels accumulate in FP32").Gradient(1, INT64_MAX, &GemmGradient);
}

}  // namespace onnxamp::ops
