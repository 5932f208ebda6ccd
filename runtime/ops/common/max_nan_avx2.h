// The NaN-keeping maximum of 8 floats shared by the AVX2 max-pooling kernels (runtime/ops/layout/blocked_pool_avx2.cc
// and runtime/ops/pool/pool_cpu.cc): NaN wins, as in the reference MaxPool. For x86-64 builds with GCC or Clang, in
// code compiled where those kernels are.
#pragma once

#include <immintrin.h>

namespace onnxamp::ops {

// max(best, v), where a NaN in v or already in best wins; of equal values, best.
__attribute__((target("avx2"))) inline __m256 MaxNan(__m256 best, __m256 v) {
  // max_ps returns its second operand when either is NaN (or both are equal), which keeps a NaN already in best; a NaN
  // in v is blended in.
  return _mm256_blendv_ps(_mm256_max_ps(v, best), v, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
}

}  // namespace onnxamp::ops
