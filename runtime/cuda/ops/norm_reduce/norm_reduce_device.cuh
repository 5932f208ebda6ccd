// Device helpers shared by the norm_reduce .cu files: warp shuffles for any accumulator type, reductions within a
// group of threads (a part of a warp, a warp, or the whole block), NaN-propagating max, uncontracted arithmetic, and
// the launch geometry of "one group per row" kernels.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "runtime/cuda/ops/cuda_common.cuh"

namespace onnxamp::cuda::norm_reduce {

inline constexpr int kWarp = 32;
// Threads of a block for row kernels; blocks are whole warps.
inline constexpr int kRowBlock = 256;

// __shfl_xor_sync for 1-, 2-, 4- and 8-byte values (integers, float, double) on their bits. Every lane of the warp
// must call it.
template <typename A>
__device__ __forceinline__ A ShflXor(A v, int lane_mask, int width = kWarp) {
  if constexpr (sizeof(A) == 8) {
    long long bits;
    memcpy(&bits, &v, 8);
    bits = __shfl_xor_sync(0xffffffffu, bits, lane_mask, width);
    memcpy(&v, &bits, 8);
    return v;
  } else if constexpr (sizeof(A) == 4) {
    int bits;
    memcpy(&bits, &v, 4);
    bits = __shfl_xor_sync(0xffffffffu, bits, lane_mask, width);
    memcpy(&v, &bits, 4);
    return v;
  } else {
    static_assert(std::is_integral_v<A>, "narrow shuffles are for integers");
    return static_cast<A>(__shfl_xor_sync(0xffffffffu, static_cast<int>(v), lane_mask, width));
  }
}

// Folds v over a group of `group` consecutive threads (a power of two: 1..32, or blockDim.x for the whole block)
// with `combine`; every thread of the group gets the result. Whole-block groups use `smem` (blockDim.x / 32
// values) and __syncthreads, so every thread of the block must call it the same number of times.
template <typename A, typename F>
__device__ __forceinline__ A GroupReduce(A v, int group, F combine, A* smem) {
  const int width = group < kWarp ? group : kWarp;
  for (int off = width / 2; off > 0; off /= 2) v = combine(v, ShflXor(v, off, width));
  if (group <= kWarp) return v;
  const int warp = threadIdx.x / kWarp;
  const int warps = blockDim.x / kWarp;
  __syncthreads();  // an earlier call may still be reading smem
  if (threadIdx.x % kWarp == 0) smem[warp] = v;
  __syncthreads();
  A r = smem[0];
  for (int w = 1; w < warps; ++w) r = combine(r, smem[w]);
  return r;
}

template <typename A>
__device__ __forceinline__ bool IsNanValue(A v) {
  if constexpr (std::is_floating_point_v<A>) {
    return v != v;
  } else {
    return false;
  }
}

// NaN-propagating maximum and minimum (a row holding NaN gives NaN), as the CPU kernels fold.
template <typename A>
__device__ __forceinline__ A MaxNan(A a, A b) {
  return ((a >= b) || IsNanValue(a)) ? a : b;
}
template <typename A>
__device__ __forceinline__ A MinNan(A a, A b) {
  return ((a <= b) || IsNanValue(a)) ? a : b;
}

template <typename A>
__device__ __forceinline__ A ExpOf(A x) {
  if constexpr (std::is_same_v<A, float>) {
    return expf(x);
  } else {
    return exp(x);
  }
}
template <typename A>
__device__ __forceinline__ A LogOf(A x) {
  if constexpr (std::is_same_v<A, float>) {
    return logf(x);
  } else {
    return log(x);
  }
}
template <typename A>
__device__ __forceinline__ A SqrtOf(A x) {
  if constexpr (std::is_same_v<A, float>) {
    return sqrtf(x);
  } else {
    return sqrt(x);
  }
}

// Products, sums and differences rounded one at a time, as the CPU references compute them: nvcc would otherwise
// contract `a + b * c` or `a - b * c` into one FMA, a last-bit difference that a cancellation can amplify.
__device__ __forceinline__ float Mul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double Mul(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float Add(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double Add(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ float Sub(float a, float b) { return __fsub_rn(a, b); }
__device__ __forceinline__ double Sub(double a, double b) { return __dsub_rn(a, b); }

// Threads per row for a row of n elements: a part of a warp for short rows, a warp, or the whole block.
inline int GroupForRow(int64_t n) {
  if (n <= 64) return 8;
  if (n <= 2048) return kWarp;
  return kRowBlock;
}

// Blocks of kRowBlock threads for `rows` rows handled by groups of `group` threads (capped; kernels loop).
inline unsigned int RowBlocks(int64_t rows, int group) {
  const int64_t per_block = kRowBlock / group;
  const int64_t blocks = (rows + per_block - 1) / per_block;
  constexpr int64_t kMaxBlocks = 65535;
  return static_cast<unsigned int>(blocks < 1 ? 1 : (blocks > kMaxBlocks ? kMaxBlocks : blocks));
}

// Rounds a scratch size up so that the next region starts 256-byte aligned.
inline size_t AlignScratch(size_t bytes) { return (bytes + 255) / 256 * 256; }

}  // namespace onnxamp::cuda::norm_reduce
