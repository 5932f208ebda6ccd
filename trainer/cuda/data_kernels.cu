#include "trainer/cuda/data_kernels.h"

#include <cuda_runtime.h>

#include <algorithm>

#include "runtime/cuda/cuda_check.h"
#include "trainer/optim/optim_math.h"

namespace onnxamp::trainer::cuda {
namespace {

template <typename Word>
__global__ void GatherRowsKernel(const Word* __restrict__ src, int64_t src_rows, int64_t row_words,
                                 const int64_t* __restrict__ indices, int64_t rows, Word* __restrict__ dst) {
  const int64_t total = rows * row_words;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / row_words;
    const int64_t w = i - r * row_words;
    int64_t s = indices[r];
    s = s < 0 ? 0 : (s >= src_rows ? src_rows - 1 : s);
    dst[i] = src[s * row_words + w];
  }
}

template <typename Word>
__global__ void CopyIfTakenKernel(const int32_t* __restrict__ found_inf, const float* __restrict__ weight,
                                  const Word* __restrict__ src, Word* __restrict__ dst, int64_t n) {
  if (*found_inf != 0 || (weight != nullptr && *weight == 0.0f)) return;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dst[i] = src[i];
  }
}

__global__ void LerpIfTakenKernel(const int32_t* __restrict__ found_inf, const float* __restrict__ weight,
                                  const float* __restrict__ src, float* __restrict__ dst, int64_t n) {
  const float w = *weight;
  if (*found_inf != 0 || w == 0.0f) return;  // a skipped step, or stochastic weight averaging before its start
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dst[i] = optim_math::Lerp(dst[i], src[i], w);
  }
}

int Blocks(int64_t n, int threads) { return static_cast<int>(std::min<int64_t>((n + threads - 1) / threads, 65535)); }

bool Aligned(const void* p, size_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

}  // namespace

Status GatherRows(const void* src, int64_t src_rows, size_t row_bytes, const int64_t* indices, int64_t rows, void* dst,
                  cudaStream_t stream) {
  if (rows <= 0 || row_bytes == 0) return Status::Ok();
  constexpr int kThreads = 256;
  if (row_bytes % 16 == 0 && Aligned(src, 16) && Aligned(dst, 16)) {
    const int64_t words = static_cast<int64_t>(row_bytes / 16);
    GatherRowsKernel<<<Blocks(rows * words, kThreads), kThreads, 0, stream>>>(
        static_cast<const uint4*>(src), src_rows, words, indices, rows, static_cast<uint4*>(dst));
  } else if (row_bytes % 4 == 0 && Aligned(src, 4) && Aligned(dst, 4)) {
    const int64_t words = static_cast<int64_t>(row_bytes / 4);
    GatherRowsKernel<<<Blocks(rows * words, kThreads), kThreads, 0, stream>>>(
        static_cast<const uint32_t*>(src), src_rows, words, indices, rows, static_cast<uint32_t*>(dst));
  } else {
    const int64_t words = static_cast<int64_t>(row_bytes);
    GatherRowsKernel<<<Blocks(rows * words, kThreads), kThreads, 0, stream>>>(
        static_cast<const uint8_t*>(src), src_rows, words, indices, rows, static_cast<uint8_t*>(dst));
  }
  ONNXAMP_CUDA_RETURN_IF_ERROR(cudaGetLastError(), "gathering a batch on the device");
  return Status::Ok();
}

Status CopyIfTaken(const int32_t* found_inf, const void* src, void* dst, size_t bytes, cudaStream_t stream,
                   const float* weight) {
  if (bytes == 0) return Status::Ok();
  constexpr int kThreads = 256;
  if (bytes % 4 == 0 && Aligned(src, 4) && Aligned(dst, 4)) {
    const int64_t n = static_cast<int64_t>(bytes / 4);
    CopyIfTakenKernel<<<Blocks(n, kThreads), kThreads, 0, stream>>>(
        found_inf, weight, static_cast<const uint32_t*>(src), static_cast<uint32_t*>(dst), n);
  } else {
    const int64_t n = static_cast<int64_t>(bytes);
    CopyIfTakenKernel<<<Blocks(n, kThreads), kThreads, 0, stream>>>(found_inf, weight, static_cast<const uint8_t*>(src),
                                                                    static_cast<uint8_t*>(dst), n);
  }
  ONNXAMP_CUDA_RETURN_IF_ERROR(cudaGetLastError(), "committing the running statistics");
  return Status::Ok();
}

Status LerpIfTaken(const int32_t* found_inf, const float* weight, const float* src, float* dst, int64_t n,
                   cudaStream_t stream) {
  if (n <= 0) return Status::Ok();
  constexpr int kThreads = 256;
  LerpIfTakenKernel<<<Blocks(n, kThreads), kThreads, 0, stream>>>(found_inf, weight, src, dst, n);
  ONNXAMP_CUDA_RETURN_IF_ERROR(cudaGetLastError(), "averaging the running statistics");
  return Status::Ok();
}

}  // namespace onnxamp::trainer::cuda
