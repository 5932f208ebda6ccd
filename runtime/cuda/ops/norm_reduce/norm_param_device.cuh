// The parameter expansion shared by the normalisation kernels (norm_kernels.cu) and their gradients
// (norm_grad_kernels.cu): a Scale / bias / statistics tensor of any float type, read through its ParamView, copied
// into a flat array of the kernel's accumulator type.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "runtime/common/status.h"
#include "runtime/cuda/ops/cuda_common.cuh"
#include "runtime/cuda/ops/norm_reduce/norm_reduce_launch.h"

namespace onnxamp::cuda::norm_reduce {

// dst[e] = (A) the element of `view` at e (row-major over its dims, through its strides), e < count.
template <typename S, typename A>
__global__ void ExpandParamKernel(const S* __restrict__ src, A* __restrict__ dst, int64_t count, ParamView view) {
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < count;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t rem = e, offset = 0;
    for (int d = view.rank - 1; d >= 0; --d) {
      const int64_t i = rem % view.dims[d];
      rem /= view.dims[d];
      offset += i * view.strides[d];
    }
    dst[e] = static_cast<A>(LoadValue<S>(src[offset]));
  }
}

// Launches ExpandParamKernel on `stream` for the `count` values of `view` (nothing for 0); `what` names the work in
// errors.
template <typename A>
Status ExpandParam(const ParamView& view, A* dst, int64_t count, cudaStream_t stream, const char* what) {
  if (count == 0) return Status::Ok();
  return DispatchFloat(view.dtype, what, [&](auto tag) -> Status {
    using S = typename decltype(tag)::type;
    ExpandParamKernel<S, A>
        <<<GridFor(count), kThreadsPerBlock, 0, stream>>>(static_cast<const S*>(view.data), dst, count, view);
    return CheckLaunch(what);
  });
}

}  // namespace onnxamp::cuda::norm_reduce
