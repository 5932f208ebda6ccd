// The centering kernel of the CUDA MatMulInteger (linalg_device.h): an 8-bit operand minus its zero point, as int32.
#include <cstdint>

#include "runtime/cuda/ops/cuda_common.cuh"
#include "runtime/cuda/ops/linalg/linalg_device.h"

namespace onnxamp::cuda {
namespace {

template <typename Q>
__global__ void CenterKernel(const Q* x, const Q* zp, int64_t count, int64_t run, int64_t n, int32_t* y) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += stride) {
    const int32_t z = zp ? static_cast<int32_t>(zp[count == 1 ? 0 : (e / run) % count]) : 0;
    y[e] = static_cast<int32_t>(x[e]) - z;
  }
}

}  // namespace

Status LaunchCenterEightBit(DType dtype, const void* x, const void* zp, int64_t count, int64_t run, int64_t n,
                            int32_t* y, cudaStream_t stream, std::string_view what) {
  if (n <= 0) return Status::Ok();
  if (count < 1 || run < 1) return Internal(what, ": bad zero-point layout (", count, " values, runs of ", run, ")");
  if (dtype == DType::kInt8) {
    CenterKernel<int8_t><<<GridFor(n), kThreadsPerBlock, 0, stream>>>(static_cast<const int8_t*>(x),
                                                                      static_cast<const int8_t*>(zp), count, run, n, y);
  } else if (dtype == DType::kUint8) {
    CenterKernel<uint8_t><<<GridFor(n), kThreadsPerBlock, 0, stream>>>(
        static_cast<const uint8_t*>(x), static_cast<const uint8_t*>(zp), count, run, n, y);
  } else {
    return Unimplemented(what, ": element type ", DTypeName(dtype), " is not int8 or uint8");
  }
  return CheckLaunch(what);
}

}  // namespace onnxamp::cuda
