// Matrix products with few rows ("GEMV" shapes: a batch-1 Linear layer): C = alpha * A * op(B) + beta * C for
// m <= kGemvMaxM, with A and C in float and B in float, fp16 or bf16 read as it is stored.
//
// Such a product is bound by the memory traffic of B: every element of B is used m times only. The kernels stream B
// once, converting 16-bit values to float in registers (F16C for fp16, a 16-bit shift for bf16), and accumulate in
// FP32, so an fp16 weight matrix costs half the bytes of a float one and is never converted as a whole. Three
// versions of the same contract, chosen at run time: AVX-512 intrinsics where the CPU has AVX-512 (F, BW, VL), AVX2
// intrinsics (with FMA and F16C) where it has those, and a portable one (B converted in short blocks, float loops
// the compiler vectorizes for the baseline ISA). They differ from GemmReference only in summation order.
#pragma once

#include <cstdint>

#include "runtime/common/half.h"
#include "runtime/executor/thread_pool.h"

namespace onnxamp::ops {

// The most rows of A (and C) the GEMV kernels take.
inline constexpr int64_t kGemvMaxM = 4;

// C[i, j] = alpha * sum_p A[i, p] * op(B)[p, j] + beta * C[i, j] for i < m (1 <= m <= kGemvMaxM), j < n, p < k.
// A is row-major [m, k] with leading dimension lda; op(B) is B ([k, n], ldb) or, when trans_b, B^T with B stored
// [n, k]; C is row-major [m, n] with ldc. beta == 0 makes C write-only (old contents, NaN included, are ignored).
template <typename TB>
struct GemvArgs {
  int64_t m = 0, n = 0, k = 0;
  const float* a = nullptr;
  int64_t lda = 0;
  const TB* b = nullptr;
  int64_t ldb = 0;
  bool trans_b = false;
  float* c = nullptr;
  int64_t ldc = 0;
  float alpha = 1.0f;
  float beta = 0.0f;
};

// Runs g (TB: float, Float16 or BFloat16), split over `threads` by columns of C when it is large enough.
template <typename TB>
void Gemv(const GemvArgs<TB>& g, exec::ThreadPool& threads);

// The kernels Gemv runs: the widest the CPU has, up to the cap SetGemvMaxIsa sets (kAvx512, the default, lets
// the CPU decide; tests lower it to check each version the machine can run).
enum class GemvIsa { kPortable, kAvx2, kAvx512 };
GemvIsa GemvActiveIsa();
void SetGemvMaxIsa(GemvIsa cap);
const char* GemvIsaName(GemvIsa isa);

}  // namespace onnxamp::ops
