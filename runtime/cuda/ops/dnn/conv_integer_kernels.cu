// ConvInteger's and QLinearConv's element-wise parts on CUDA (conv_integer_launch.h).
#include "runtime/cuda/ops/cuda_common.cuh"
#include "runtime/cuda/ops/dnn/conv_integer_launch.h"
#include "runtime/cuda/ops/linalg/requantize_device.cuh"

namespace onnxamp::cuda::dnn {
namespace {

template <typename I>
__global__ void CenterKernel(const I* __restrict__ src, int64_t count, const double* __restrict__ zp, int64_t groups,
                             int64_t run, double* __restrict__ dst) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < count;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dst[e] = static_cast<double>(src[e]) - zp[groups == 1 ? 0 : (e / run) % groups];
  }
}

__device__ __forceinline__ int32_t Wrap32(double acc) {
  return static_cast<int32_t>(static_cast<uint32_t>(static_cast<int64_t>(acc)));
}

__global__ void Int32Kernel(const double* __restrict__ acc, int64_t count, int32_t* __restrict__ y) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < count;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y[e] = Wrap32(acc[e]);
  }
}

template <typename Q>
__global__ void RequantizeKernel(const double* __restrict__ acc, int64_t count, int64_t plane, int64_t channels,
                                 const float* __restrict__ scales, int64_t scale_count, double zero_point, double lo,
                                 double hi, Q* __restrict__ y) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < count;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float scale = scales[scale_count == 1 ? 0 : (e / plane) % channels];
    y[e] = static_cast<Q>(RequantizeValue(Wrap32(acc[e]), scale, zero_point, lo, hi));
  }
}

}  // namespace

Status LaunchCenterToDouble(DType dtype, const void* src, int64_t count, const double* zp, int64_t groups, int64_t run,
                            double* dst, cudaStream_t stream) {
  if (count == 0) return Status::Ok();
  if (dtype == DType::kInt8) {
    CenterKernel<<<GridFor(count), kThreadsPerBlock, 0, stream>>>(static_cast<const int8_t*>(src), count, zp, groups,
                                                                  run, dst);
  } else {
    CenterKernel<<<GridFor(count), kThreadsPerBlock, 0, stream>>>(static_cast<const uint8_t*>(src), count, zp, groups,
                                                                  run, dst);
  }
  return CheckLaunch("ConvInteger");
}

Status LaunchIntegerConvOutput(const double* acc, int64_t count, int64_t plane, int64_t channels, const float* scales,
                               int64_t scale_count, DType out, double zero_point, void* y, cudaStream_t stream) {
  if (count == 0) return Status::Ok();
  if (!scales) {
    Int32Kernel<<<GridFor(count), kThreadsPerBlock, 0, stream>>>(acc, count, static_cast<int32_t*>(y));
  } else if (out == DType::kInt8) {
    RequantizeKernel<<<GridFor(count), kThreadsPerBlock, 0, stream>>>(
        acc, count, plane, channels, scales, scale_count, zero_point, -128.0, 127.0, static_cast<int8_t*>(y));
  } else {
    RequantizeKernel<<<GridFor(count), kThreadsPerBlock, 0, stream>>>(acc, count, plane, channels, scales, scale_count,
                                                                      zero_point, 0.0, 255.0, static_cast<uint8_t*>(y));
  }
  return CheckLaunch(scales ? "QLinearConv" : "ConvInteger");
}

}  // namespace onnxamp::cuda::dnn
