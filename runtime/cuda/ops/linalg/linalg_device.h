// The device side of the CUDA linalg kernels (runtime/cuda/ops/linalg/linalg_device.cu), callable from host code:
// the epilogue kernel (scale, bias row vector, activation), the C broadcast of Gemm, the integer GEMM, and the
// general Einsum kernel (which also serves as the permuting copy of the Einsum fast path). Every launcher returns
// at once for an empty problem and checks its launch.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string_view>

#include "runtime/common/dtype.h"
#include "runtime/common/status.h"

namespace onnxamp::cuda {

// Activations a GEMM epilogue applies after the bias.
enum class LinalgActivation { kNone, kRelu, kGelu /* erf form */, kGeluTanh };

// y[r, j] = act(scale * y[r, j] + bias[j]) for r < rows, j < n (y dense [rows, n]; bias null: no bias). Float types
// (fp32, fp16, bf16 computed in float, rounded once; double in double). With relu_mask (act kRelu only) the ReLU
// mask of the stored y too (runtime/ops/matmul/fused_matmul.h): bit j % 8 of byte [r, j / 8] set where y[r, j] > 0,
// rows of mask_row_bytes bytes, the bytes past n's bits zero.
Status LaunchBiasActivation(DType dtype, void* y, int64_t rows, int64_t n, double scale, const void* bias,
                            LinalgActivation act, cudaStream_t stream, std::string_view what,
                            uint8_t* relu_mask = nullptr, int64_t mask_row_bytes = 0);

// y[r, j] = 0 where bit j % 8 of mask byte [r, j / 8] is clear (y dense [rows, n], rows of mask_row_bytes bytes): the
// ReLU gradient of a product that cuBLASLt's DRELU epilogue did not apply. Float types.
Status LaunchApplyReluMask(DType dtype, void* y, int64_t rows, int64_t n, const uint8_t* mask, int64_t mask_row_bytes,
                           cudaStream_t stream, std::string_view what);

// Sums of a row-major matrix x [rows, cols] (leading dim ld): over_rows gives y[j] = sum_i x[i, j] ([cols]), else
// y[i] = sum_j x[i, j] ([rows]), accumulated in float (double for double) in a fixed order and stored once as
// out_dtype: dtype, or float for fp16/bf16 (a GEMM's bias gradient when cuBLASLt has no epilogue for it).
Status LaunchMatrixSum(DType dtype, DType out_dtype, const void* x, int64_t rows, int64_t cols, int64_t ld,
                       bool over_rows, void* y, cudaStream_t stream, std::string_view what);

// y[i, j] = c[i * c_stride0 + j * c_stride1] for i < m, j < n (y dense [m, n]): C broadcast to [M, N]. Any element
// type of 1, 2, 4 or 8 bytes.
Status LaunchBroadcast2D(DType dtype, const void* c, int64_t c_stride0, int64_t c_stride1, void* y, int64_t m,
                         int64_t n, cudaStream_t stream, std::string_view what);

// A row-major batched GEMM on integers (int32, int64, uint32, uint64), arithmetic modulo 2^64 cast back to the
// element type as the CPU reference does: for b < batch, D_b = alpha * op(A_b) op(B_b) + beta * D_b (D read only
// when beta != 0). A_b = a + b * stride_a, with leading dims lda / ldb / ldd in elements.
struct IntegerGemmArgs {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  const void* a = nullptr;
  const void* b = nullptr;
  void* d = nullptr;
  int64_t lda = 0, ldb = 0, ldd = 0;
  int64_t stride_a = 0, stride_b = 0, stride_d = 0;
  int64_t alpha = 1, beta = 0;
};
Status LaunchIntegerGemm(DType dtype, const IntegerGemmArgs& args, cudaStream_t stream, std::string_view what);

// y[e] = x[e] - zp[(e / run) % count] as int32 for e < n, x of int8 or uint8 (`dtype`) and the zero point of x's type
// (null: 0; count 1: one value): MatMulInteger's operands centered (A per row: run K, count M; B per column: run 1,
// count N), exactly.
Status LaunchCenterEightBit(DType dtype, const void* x, const void* zp, int64_t count, int64_t run, int64_t n,
                            int32_t* y, cudaStream_t stream, std::string_view what);

// QLinearMatMul's requantization: y[e] = saturate(nearbyint(float(acc[e]) * s) + y_zp) as `y_type` (int8 or uint8)
// for e < n, acc the int32 products of an [.., m, n] output, s = a_scale * b_scale / y_scale in float with a_scale per
// row (a_count m) or one value, b_scale per column (b_count n) or one value (not both per axis), the scales of
// `scale_type` (float, float16 or bfloat16) and y_zp one value of y_type, all in device memory; the CPU's arithmetic,
// NaN to the type's lowest value.
struct RequantizeArgs {
  const int32_t* acc = nullptr;
  int64_t n = 0, rows = 1, cols = 1;
  DType a_scale_type = DType::kFloat32, b_scale_type = DType::kFloat32, y_scale_type = DType::kFloat32;
  const void* a_scale = nullptr;
  const void* b_scale = nullptr;
  const void* y_scale = nullptr;
  int64_t a_count = 1, b_count = 1;
  DType y_type = DType::kUint8;
  const void* y_zero_point = nullptr;
  void* y = nullptr;
};
Status LaunchRequantize(const RequantizeArgs& args, cudaStream_t stream, std::string_view what);

// The general Einsum: y[o] = sum over s of prod_i in_i[offset_i(o, s)], with o ranging over the output labels
// (row-major over out_dims) and s over the summed labels (row-major over sum_dims); an input's offset is the sum of
// its per-label strides times the label values (0 for labels it lacks or broadcasts). Accumulates in float (fp16,
// bf16, float), double, or modulo 2^64 for integers, as the CPU reference does. With one input and no summed
// labels this is a permuting (or diagonal-taking) copy.
inline constexpr int kEinsumMaxInputs = 8;
inline constexpr int kEinsumMaxLabels = 16;  // per side: output labels, summed labels
struct EinsumArgs {
  int num_inputs = 0;
  const void* inputs[kEinsumMaxInputs] = {};
  int out_rank = 0;
  int64_t out_dims[kEinsumMaxLabels] = {};
  int sum_rank = 0;
  int64_t sum_dims[kEinsumMaxLabels] = {};
  int64_t out_strides[kEinsumMaxInputs][kEinsumMaxLabels] = {};
  int64_t sum_strides[kEinsumMaxInputs][kEinsumMaxLabels] = {};
  int64_t out_count = 1, sum_count = 1;
};
// Float types and the integers int8..int64, uint8..uint64.
Status LaunchEinsum(DType dtype, const EinsumArgs& args, void* y, cudaStream_t stream, std::string_view what);

}  // namespace onnxamp::cuda
