// MaxUnpool and MaxUnpoolGrad on CUDA (unpool_launch.h).
#include "runtime/cuda/ops/cuda_common.cuh"
#include "runtime/cuda/ops/dnn/unpool_launch.h"
#include "runtime/ops/pool/unpool_offset.h"

namespace onnxamp::cuda {
namespace {

// The output offset of the position flat index `idx` names in the inferred shape (the CPU's mapping); -1 outside it.
__device__ __forceinline__ int64_t UnpoolOffset(const UnpoolArgs& a, int64_t idx) {
  return ops::UnpoolOffset(idx, a.rank, a.inferred_strides, a.out_strides, a.inferred_size);
}

__global__ void WinnerKernel(UnpoolArgs a, unsigned long long* __restrict__ winner) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < a.x_count;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t offset = UnpoolOffset(a, a.indices[e]);
    if (offset >= 0) atomicMax(winner + offset, static_cast<unsigned long long>(e + 1));
  }
}

template <typename U>
__global__ void ScatterGatherKernel(UnpoolArgs a, const unsigned long long* __restrict__ winner,
                                    const U* __restrict__ x, U* __restrict__ y) {
  for (int64_t o = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; o < a.out_count;
       o += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const unsigned long long w = winner[o];
    y[o] = w ? x[w - 1] : U(0);
  }
}

template <typename U>
__global__ void GradKernel(UnpoolArgs a, const U* __restrict__ dy, U* __restrict__ dx) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < a.x_count;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t offset = UnpoolOffset(a, a.indices[e]);
    dx[e] = offset >= 0 ? dy[offset] : U(0);
  }
}

}  // namespace

Status LaunchMaxUnpool(const UnpoolArgs& a, const GradScratchFn& scratch, cudaStream_t stream) {
  if (a.out_count == 0) return Status::Ok();
  ONNXAMP_ASSIGN_OR_RETURN(void* p, scratch(static_cast<size_t>(a.out_count) * sizeof(unsigned long long)));
  auto* winner = static_cast<unsigned long long*>(p);
  ONNXAMP_CUDA_RETURN_IF_ERROR(
      cudaMemsetAsync(winner, 0, static_cast<size_t>(a.out_count) * sizeof(unsigned long long), stream),
      "MaxUnpool: clearing its positions");
  if (a.x_count > 0) {
    WinnerKernel<<<GridFor(a.x_count), kThreadsPerBlock, 0, stream>>>(a, winner);
    ONNXAMP_RETURN_IF_ERROR(CheckLaunch("MaxUnpool"));
  }
  return DispatchBySize(a.dtype, "MaxUnpool", [&](auto tag) -> Status {
    using U = typename decltype(tag)::type;
    ScatterGatherKernel<U><<<GridFor(a.out_count), kThreadsPerBlock, 0, stream>>>(a, winner, static_cast<const U*>(a.x),
                                                                                  static_cast<U*>(a.y));
    return CheckLaunch("MaxUnpool");
  });
}

Status LaunchMaxUnpoolGrad(const UnpoolArgs& a, cudaStream_t stream) {
  if (a.x_count == 0) return Status::Ok();
  return DispatchBySize(a.dtype, "MaxUnpoolGrad", [&](auto tag) -> Status {
    using U = typename decltype(tag)::type;
    GradKernel<U>
        <<<GridFor(a.x_count), kThreadsPerBlock, 0, stream>>>(a, static_cast<const U*>(a.dy), static_cast<U*>(a.dx));
    return CheckLaunch("MaxUnpoolGrad");
  });
}

}  // namespace onnxamp::cuda
