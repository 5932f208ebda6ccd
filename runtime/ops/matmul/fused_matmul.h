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
// The ReLU mask, for training (a forward product with its ReLU and the backward product that meets ReluGrad there):
// - relu_mask (int, 0 default): with activation "Relu", a second output Mask, uint8 [R, ReluMaskRowBytes(N)] with R
//   the rows of Y (every dim but the last): bit j % 8 of byte [r, j / 8] is set where the stored Y[r, j] > 0, the
//   bytes past N's bits zero. This is cuBLASLt's ReLU bit mask (its row-major view: a leading dim of a multiple of
//   128 bits per row), which its DRELU epilogue reads.
// - activation_grad ("" default, "Relu"): input 3 is such a Mask of Y's rows and N, and Y = the product where its bit
//   is set, else 0: ReluGrad(product, forward Y) in one node. No bias, activation or bias_grad; Y of the inputs' type.
// Either needs a 2-D B (the product is then one GEMM over Y's rows).
// The GELU gradient: activation_grad "GeluTanh": input 3 is X, the GELU's input (of A's type and Y's dims), and Y =
// the product times Gelu'(X) of the tanh form, in float (double for double), stored once: GeluGrad(product, X,
// approximate "tanh") in one node (cuBLASLt's DGELU epilogue). The same restrictions, and a 2-D B.
inline constexpr char kFusedMatMulOp[] = "FusedMatMul";
inline constexpr char kFusedMatMulDomain[] = "com.onnxamp";

enum class FusedActivation { kNone, kRelu, kGelu /* erf form */, kGeluTanh };
enum class FusedBiasGrad { kNone, kA, kB };

// Bytes per row of a ReLU mask of N columns: N bits rounded up to a multiple of 128.
inline int64_t ReluMaskRowBytes(int64_t n) { return (n + 127) / 128 * 16; }

// The attributes of a FusedMatMul node, checked.
struct FusedMatMulAttrs {
  float alpha = 1.0f;
  bool trans_a = false, trans_b = false;
  FusedActivation activation = FusedActivation::kNone;
  DType output_type = DType::kUndefined;  // kUndefined: the inputs' type
  FusedBiasGrad bias_grad = FusedBiasGrad::kNone;
  bool relu_mask = false;  // output 1 is the ReLU mask
  bool relu_grad = false;  // activation_grad "Relu": input 3 is a ReLU mask applied to the product
  bool gelu_grad = false;  // activation_grad "GeluTanh": input 3 is the GELU's input X

  // InvalidArgument naming the attribute for values outside the contract above (what can be checked without the
  // inputs).
  Status Init(const ir::Node& node);
  // Y's element type for inputs of type `t`: InvalidArgument when output_type is neither t nor (for fp16/bf16 t)
  // float, or when a wider output comes with a bias.
  StatusOr<DType> OutputType(DType t, bool has_bias) const;
  // InvalidArgument for a bias (null: none) not of A's type or not a row vector of the product's n values (or with a
  // 1-D B), for a bias gradient with A or B not 2-D or with a bias, and for a ReLU mask (relu_mask or relu_grad) with
  // a B not 2-D or (relu_grad) a bias. The CPU and CUDA kernels share it.
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
// The dims of the ReLU mask of a Y of `y_dims`: [rows, ReluMaskRowBytes(N)].
std::vector<int64_t> ReluMaskDims(const std::vector<int64_t>& y_dims);
// InvalidArgument naming input 3 unless `mask` (null: missing) is uint8 of ReluMaskDims(y_dims).
Status CheckReluMaskInput(const ir::Tensor* mask, const std::vector<int64_t>& y_dims);
// InvalidArgument naming input 3 unless `x` (null: missing) is of type `t` and dims `y_dims` (activation_grad
// "GeluTanh").
Status CheckGeluInput(const ir::Tensor* x, DType t, const std::vector<int64_t>& y_dims);

StatusOr<MatMulShapes> PlanMatMulShapes(const std::vector<int64_t>& a_dims, const std::vector<int64_t>& b_dims,
                                        bool trans_a, bool trans_b);

}  // namespace onnxamp::ops
