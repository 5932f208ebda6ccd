// com.onnxamp FusedMatMul: a matrix product with what cuBLASLt can do in the same call (bias, activation, a wider
// output type, a bias gradient). CUDA sessions make it (runtime/cuda/graph_rewrite.h) and run it on cuBLASLt
// (runtime/cuda/ops/linalg/matmul_cuda.cc); the CPU kernel (fused_matmul_cpu.cc) is the plain reference the CUDA
// kernel is tested against.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/common/dtype.h"
#include "runtime/common/status.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/gemm_util.h"

namespace onnxamp::ops {

// FusedMatMul (domain com.onnxamp, version 1): Y = activation(alpha * op(A) op(B) + bias), and optionally the bias
// gradient of one operand.
// Inputs A, B (numpy matmul shapes as MatMul; transA / transB, ints 0 or 1, transpose 2-D operands as Gemm does),
// bias (optional): a row vector of N values ([N] or [1, N]) added to every row. Attributes: alpha (float, default 1),
// activation: "" (none), "Relu", "Gelu" (the erf form, 0.5 x (1 + erf(x / sqrt 2))) or "GeluTanh" (Gelu with
// approximate = "tanh"). Float types only; A, B and bias of one type T.
// output_type (int, an ONNX element type; default T): Y's type, T or, for fp16/bf16 T, float: the product is then
// accumulated in FP32 and stored without rounding to T (no bias or activation with a wider output).
// bias_grad ("" default, "A" or "B"): a second output, op(A) summed over its columns ([M]: A's bias gradient when A
// is dY^T) or op(B) summed over its rows ([N]: B is dY), both sums over the product's K, in Y's type. Needs 2-D A
// and B, alpha 1, and no bias or activation.
inline constexpr char kFusedMatMulOp[] = "FusedMatMul";
inline constexpr char kFusedMatMulDomain[] = "com.onnxamp";

enum class FusedActivation { kNone, kRelu, kGelu /* erf form */, kGeluTanh };
enum class FusedBiasGrad { kNone, kA, kB };

// The attributes of a FusedMatMul node, checked.
struct FusedMatMulAttrs {
  float alpha = 1.0f;
  bool trans_a = false, trans_b = false;
  FusedActivation activation = FusedActivation::kNone;
  DType output_type = DType::kUndefined;  // kUndefined: the inputs' type
  FusedBiasGrad bias_grad = FusedBiasGrad::kNone;

  // InvalidArgument naming the attribute for values outside the contract above (what can be checked without the
  // inputs).
  Status Init(const ir::Node& node);
  // Y's element type for inputs of type `t`: InvalidArgument when output_type is neither t nor (for fp16/bf16 t)
  // float, or when a wider output comes with a bias.
  StatusOr<DType> OutputType(DType t, bool has_bias) const;
  // InvalidArgument for a bias (null: none) not of A's type or not a row vector of the product's n values (or with a
  // 1-D B), and for a bias gradient with A or B not 2-D or with a bias. The CPU and CUDA kernels share it.
  Status CheckOperands(const ir::Tensor& a, const ir::Tensor& b, const ir::Tensor* bias, int64_t n) const;
};

// The shapes of A x B as MatMul (numpy matmul) and FusedMatMul (transA / transB only for 2-D operands) take them:
// the product's M, N, K, the broadcast batch dims, and Y's dims. InvalidArgument naming both shapes for ranks,
// inner dims and batch dims that do not fit. The CPU and CUDA kernels share it.
struct MatMulShapes {
  int64_t m = 0, n = 0, k = 0;
  BatchBroadcast batch;
  std::vector<int64_t> out_dims;
};
StatusOr<MatMulShapes> PlanMatMulShapes(const std::vector<int64_t>& a_dims, const std::vector<int64_t>& b_dims,
                                        bool trans_a, bool trans_b);

}  // namespace onnxamp::ops
