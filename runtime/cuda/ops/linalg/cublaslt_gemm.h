// Row-major (batched) GEMM on the device for the CUDA linalg kernels: cuBLASLt for float types (FP32 accumulation
// for fp32/fp16/bf16, FP64 for double), the tiled integer kernel for int32/int64/uint32/uint64, bias and activation
// epilogues, and a per-kernel cache of cuBLASLt descriptors and algorithms keyed by the problem's shape, so that a
// steady-state run makes no heuristic query.
#pragma once

#include <cublasLt.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string_view>
#include <tuple>

#include "runtime/common/dtype.h"
#include "runtime/common/status.h"
#include "runtime/cuda/cuda_context.h"
#include "runtime/cuda/ops/linalg/linalg_device.h"

namespace onnxamp::cuda {

// Which operand a bias gradient sums over the product's K: op(A) over its columns ([m]) or op(B) over its rows ([n]).
enum class GemmBiasGrad { kNone, kA, kB };

// for b < batch: D_b = act(alpha * op(A_b) op(B_b) + beta * D_b + bias), every matrix row-major. op(A) is [m, k]
// (A stored [k, m] when trans_a), op(B) is [k, n] (B stored [n, k] when trans_b); D is dense [m, n] per batch entry
// (ldd == n, stride_d == m * n). A stride of 0 reuses one matrix for every batch entry. D is of d_dtype: dtype, or
// float for fp16/bf16 dtype (FP32 accumulation stored unrounded; then no bias, activation or beta). With bias_grad
// (batch 1, no bias or activation, alpha 1), bias_grad_out receives op(A) summed over k ([m]) or op(B) summed over k
// ([n]) in d_dtype: cuBLASLt's BGRADB / BGRADA epilogue (its A is our B), else a separate reduction kernel.
// ReLU masks (runtime/ops/matmul/fused_matmul.h; batch 1, D of dtype, rows of mask_row_bytes bytes): with act kRelu,
// relu_mask_out receives D's mask; relu_mask (no bias, activation, beta or bias gradient) zeroes the products whose
// bit is clear, in cuBLASLt's DRELU epilogue (the mask is its bit mask, D's leading dim in bits mask_row_bytes * 8)
// or, where cuBLASLt has no algorithm for it, a separate kernel. gelu_x (the same restrictions): D times the tanh
// GELU's derivative at gelu_x (dense [m, n] of dtype), in cuBLASLt's DGELU epilogue (for n a multiple of 8) or a
// separate kernel.
struct GemmProblem {
  DType dtype = DType::kFloat32;
  DType d_dtype = DType::kUndefined;  // kUndefined: dtype
  int64_t batch = 1, m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  const void* a = nullptr;
  const void* b = nullptr;
  void* d = nullptr;
  int64_t lda = 0, ldb = 0;            // row-major leading dims in elements
  int64_t stride_a = 0, stride_b = 0;  // batch strides in elements
  double alpha = 1.0, beta = 0.0;      // beta != 0 reads D as C (in place)
  const void* bias = nullptr;          // [n] of dtype, added to every row; null: none
  LinalgActivation act = LinalgActivation::kNone;
  GemmBiasGrad bias_grad = GemmBiasGrad::kNone;
  void* bias_grad_out = nullptr;
  uint8_t* relu_mask_out = nullptr;
  const uint8_t* relu_mask = nullptr;
  int64_t mask_row_bytes = 0;
  const void* gelu_x = nullptr;
};

// Runs GemmProblems for one kernel, caching a cuBLASLt plan per distinct problem shape. Thread-safe. With `tf32`
// (the session's KernelOptions::cuda_tf32) fp32 GEMMs may use TF32 tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32); off
// by default because the CPU reference computes in true fp32.
class CublasLtGemm {
 public:
  explicit CublasLtGemm(bool tf32 = false);
  ~CublasLtGemm();
  CublasLtGemm(const CublasLtGemm&) = delete;
  CublasLtGemm& operator=(const CublasLtGemm&) = delete;

  // Enqueues the product on cuda.stream(). `what` names the node in errors.
  Status Run(CudaContext& cuda, const GemmProblem& p, std::string_view what) const;

 private:
  struct Plan;
  // dtype, batch, m, n, k, trans_a, trans_b, lda, ldb, stride_a, stride_b, beta != 0, bias, act, alignments of
  // A, B, D, bias or bias gradient (bytes), tf32, D's dtype, bias gradient, the alignment of the ReLU mask read
  // (0: none), its bytes per row, the alignment of the GELU's input (0: none).
  using Key =
      std::tuple<int, int64_t, int64_t, int64_t, int64_t, bool, bool, int64_t, int64_t, int64_t, int64_t, bool, bool,
                 int, uint32_t, uint32_t, uint32_t, uint32_t, bool, int, int, uint32_t, int64_t, uint32_t>;

  StatusOr<Plan*> GetPlan(CudaContext& cuda, const GemmProblem& p, const Key& key, std::string_view what) const;

  bool tf32_;
  mutable std::mutex mu_;
  mutable std::map<Key, std::unique_ptr<Plan>> plans_;
};

}  // namespace onnxamp::cuda
