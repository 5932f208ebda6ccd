// Device helpers shared by the dnn .cu files (batch_norm_kernels.cu, dnn_grad_kernels.cu): the accumulation type of
// a sum over T values and a fixed-order block sum, so that per-channel statistics and gradient sums are the same bits
// run to run.
#pragma once

#include <cuda_runtime.h>

#include <type_traits>

namespace onnxamp::cuda::dnn {

// The accumulation type of T's sums: float, or double for double.
template <typename T>
using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;

// Sum over a block of one value per thread, as a fixed tree; valid in every thread. blockDim.x must be a power of two
// and `shared` hold blockDim.x values.
template <typename A>
__device__ A BlockSum(A v, A* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (unsigned int half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) shared[threadIdx.x] += shared[threadIdx.x + half];
    __syncthreads();
  }
  const A total = shared[0];
  __syncthreads();  // shared is reused by the next call
  return total;
}

}  // namespace onnxamp::cuda::dnn
