// MatMul's gradient builder (numpy matmul): dA = dY B^T and dB = A^T dY over the matrix dims, summed to each operand's
// shape over broadcast batch dims (SumToShape). A 1-D A is a row [1, K] and a 1-D B a column [K, 1] whose unit dim Y
// drops: dY gets it back (Unsqueeze) and the unit dim goes with the sum. Both 1-D: Y = A . B, dA = dY B, dB = dY A.
//
// The builder needs the operands' ranks: declared shapes, initializers, or the autodiff's inference from the ops
// before (GradContext::RankOf). A rank nothing tells is taken as >= 2 and the transposes of the last two dims become
// Einsum "...ij->...ji" (opset 12+), so that a 1-D operand of unknown rank fails at run time, not silently. With a 2-D
// B and a batched A, dB is one GEMM over the flattened batch (no [batch, K, N] intermediate).
#include <string>
#include <vector>

#include "runtime/ops/matmul/fused_matmul.h"
#include "runtime/ops/op_info.h"

namespace onnxamp::ops {
namespace {

// `v` with its last two dims swapped (rank `rank`, or unknown and >= 2 when -1).
StatusOr<ir::Value*> SwapLastTwo(GradContext& ctx, ir::Value* v, int64_t rank) {
  if (rank == 2) return ctx.Emit1("Transpose", {v});
  if (rank > 2) {
    std::vector<int64_t> perm(static_cast<size_t>(rank));
    for (int64_t d = 0; d < rank; ++d) perm[static_cast<size_t>(d)] = d;
    std::swap(perm[static_cast<size_t>(rank - 2)], perm[static_cast<size_t>(rank - 1)]);
    return ctx.Emit1("Transpose", {v}, {ir::Attribute::Ints("perm", perm)});
  }
  if (ctx.onnx_opset() < 12) {
    return InvalidArgument("the rank of input '", v->name(),
                           "' is not declared: declare the shapes of MatMul's inputs, or use opset 12+ (Einsum)");
  }
  return ctx.Emit1("Einsum", {v}, {ir::Attribute::String("equation", "...ij->...ji")});
}

Status MatMulGradient(GradContext& ctx) {
  ir::Value* a = ctx.X(0);
  ir::Value* b = ctx.X(1);
  ir::Value* dy = ctx.dY(0);
  const int64_t ra = ctx.RankOf(a), rb = ctx.RankOf(b);
  if (ra == 0 || rb == 0) return InvalidArgument("MatMul's inputs must have rank >= 1");
  if ((ra < 0 || rb < 0) && ctx.onnx_opset() < 12) {
    return InvalidArgument(
        "the ranks of MatMul's inputs are not declared: declare their shapes, or use opset 12+ "
        "(the gradient then transposes with Einsum)");
  }
  // Axes counted from the end where the rank is unknown (opset 12+ here, where Unsqueeze takes negative axes).
  auto from_end = [](int64_t rank, int64_t k) { return rank < 0 ? -k : rank - k; };
  if (ra == 1 && rb == 1) {
    // Y = sum_k A[k] B[k], a scalar.
    if (ctx.NeedsDX(0)) ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(0, ctx.Emit1("Mul", {dy, b})));
    if (ctx.NeedsDX(1)) ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(1, ctx.Emit1("Mul", {dy, a})));
    return Status::Ok();
  }
  if (ra == 1) {
    // A as [1, K], Y [..., N]: dY as [..., 1, N] (rank rb).
    ir::Value* dy_row = ctx.EmitUnsqueeze(dy, {from_end(rb, 2)});
    if (ctx.NeedsDX(0)) {
      ONNXAMP_ASSIGN_OR_RETURN(ir::Value * bt, SwapLastTwo(ctx, b, rb));
      ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(0, ctx.SumToShape(ctx.Emit1("MatMul", {dy_row, bt}), a)));  // [..., 1, K]
    }
    if (ctx.NeedsDX(1)) {
      ir::Value* a_col = ctx.EmitUnsqueeze(a, {1});  // [K, 1]
      ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(1, ctx.SumToShape(ctx.Emit1("MatMul", {a_col, dy_row}), b)));
    }
    return Status::Ok();
  }
  if (rb == 1) {
    // B as [K, 1], Y [..., M] (rank ra - 1).
    if (ctx.NeedsDX(0)) {
      ir::Value* dy_col = ctx.EmitUnsqueeze(dy, {from_end(ra, 1)});  // [..., M, 1]
      ir::Value* b_row = ctx.EmitUnsqueeze(b, {0});                  // [1, K]
      ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(0, ctx.SumToShape(ctx.Emit1("MatMul", {dy_col, b_row}), a)));
    }
    if (ctx.NeedsDX(1)) {
      ir::Value* dy_row = ctx.EmitUnsqueeze(dy, {from_end(ra, 2)});                                // [..., 1, M]
      ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(1, ctx.SumToShape(ctx.Emit1("MatMul", {dy_row, a}), b)));  // [..., 1, K]
    }
    return Status::Ok();
  }
  // Both >= 2-D (or of unknown rank).
  if (ctx.NeedsDX(0)) {
    ONNXAMP_ASSIGN_OR_RETURN(ir::Value * bt, SwapLastTwo(ctx, b, rb));
    ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(0, ctx.SumToShape(ctx.Emit1("MatMul", {dy, bt}), a)));
  }
  if (ctx.NeedsDX(1)) {
    if (rb == 2 && ra > 2) {
      // Every batch matrix of A meets the same B: dB = A2^T dY2 with the batch flattened into the rows. Flatten
      // takes axis -1 from opset 11 (the CUDA rewrites match it to fuse a bias gradient of dY into this GEMM).
      const std::vector<ir::Attribute> axis = {ir::Attribute::Int("axis", ctx.onnx_opset() >= 11 ? -1 : ra - 1)};
      ir::Value* a2 = ctx.Emit1("Flatten", {a}, axis);
      ir::Value* dy2 = ctx.Emit1("Flatten", {dy}, axis);
      if (ctx.onnx_opset() >= 11) return ctx.SetDX(1, ctx.Emit1("Gemm", {a2, dy2}, {ir::Attribute::Int("transA", 1)}));
      return ctx.SetDX(1, ctx.Emit1("MatMul", {ctx.Emit1("Transpose", {a2}), dy2}));
    }
    ONNXAMP_ASSIGN_OR_RETURN(ir::Value * at, SwapLastTwo(ctx, a, ra));
    ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(1, ctx.SumToShape(ctx.Emit1("MatMul", {at, dy}), b)));
  }
  return Status::Ok();
}

}  // namespace

void RegisterMatMulOpInfos(OpInfoRegistry& r) {
  // One builder for every opset: 1, 9 (integer types), 13 (bfloat16).
  r.Add("MatMul")
      .Low("compute-bound; the fp16/bf16 kernels accumulate in FP32")
      .Gradient(1, INT64_MAX, &MatMulGradient);
  r.Add(kFusedMatMulOp, kFusedMatMulDomain)
      .NotDifferentiable("a CUDA session's fusion, made after the training graph is differentiated");
}

}  // namespace onnxamp::ops
