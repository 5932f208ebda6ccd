// MatMul geometry on CUDA: numpy matmul shapes and how the batch dims map onto strided-batch GEMM calls, shared by
// MatMul and FusedMatMul (runtime/cuda/ops/linalg/matmul_cuda.cc).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "runtime/common/dtype.h"
#include "runtime/common/status.h"
#include "runtime/cuda/cuda_context.h"
#include "runtime/cuda/ops/linalg/cublaslt_gemm.h"
#include "runtime/executor/kernel.h"

namespace onnxamp::cuda {

struct MatMulGeometry {
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  std::vector<int64_t> out_dims;
  int64_t count = 1;  // output matrices
  // The product as calls of `inner` matrices each: call c reads A from element a_offsets[c] and B from b_offsets[c],
  // stepping stride_a / stride_b elements per matrix (0: one matrix for all), and writes output matrices
  // [c * inner, (c + 1) * inner).
  int64_t inner = 1;
  int64_t stride_a = 0, stride_b = 0;
  std::vector<int64_t> a_offsets, b_offsets;
  bool fold_m = false;  // each call is one [inner * m, k] x [k, n] product
};

// The geometry of A x B (numpy matmul; transA/transB only for 2-D operands). InvalidArgument with the CPU kernel's
// messages for ranks, inner dims and batch dims that do not fit.
StatusOr<MatMulGeometry> PlanMatMul(const std::vector<int64_t>& a_dims, const std::vector<int64_t>& b_dims,
                                    bool trans_a, bool trans_b);

// Enqueues y = act(alpha * A x B + bias) for geometry g (y dense in g.out_dims; bias [n] or null). y is of out_dtype
// (kUndefined: dtype; float for fp16/bf16 inputs without bias or activation); with bias_grad (one matrix, alpha 1, no
// bias or activation) bias_grad_out receives op(A) summed over k ([m]) or op(B) ([n]) in y's type. ReLU masks (y's
// rows, mask_row_bytes bytes each; a geometry of one call, as a 2-D B gives): relu_mask_out receives y's (act kRelu),
// relu_mask zeroes the products whose bit is clear, gelu_x (y's dims) scales them by the tanh GELU's derivative
// (GemmProblem).
Status RunMatMul(const CublasLtGemm& gemm, CudaContext& cuda, const MatMulGeometry& g, DType dtype, const void* a,
                 const void* b, void* y, double alpha, const void* bias, LinalgActivation act, std::string_view what,
                 DType out_dtype = DType::kUndefined, GemmBiasGrad bias_grad = GemmBiasGrad::kNone,
                 void* bias_grad_out = nullptr, const uint8_t* relu_mask = nullptr, uint8_t* relu_mask_out = nullptr,
                 int64_t mask_row_bytes = 0, const void* gelu_x = nullptr);

// MatMul (default domain) and FusedMatMul (com.onnxamp).
void RegisterCudaMatMulKernels(exec::KernelRegistry& r);

}  // namespace onnxamp::cuda
