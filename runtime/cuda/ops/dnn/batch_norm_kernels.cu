// BatchNormalization kernels: parameter conversion to and from double, per-parameter batch statistics (one block per
// parameter, two passes), the per-parameter coefficients and running statistics, and the elementwise affine. The
// arithmetic follows runtime/ops/batch_norm/batch_norm_cpu.cc: statistics accumulate in float (double for double X),
// coefficients are worked out in double and cast to the accumulation type, and Y rounds once on store.
#include <type_traits>

#include "runtime/cuda/ops/cuda_common.cuh"
#include "runtime/cuda/ops/dnn/dnn_device.cuh"
#include "runtime/cuda/ops/dnn/dnn_launch.h"

namespace onnxamp::cuda::dnn {
namespace {

template <typename P>
__global__ void ToDoubleKernel(int64_t count, const P* __restrict__ src, double* __restrict__ dst) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dst[i] = static_cast<double>(LoadValue(src[i]));
  }
}

template <typename P>
__global__ void FromDoubleKernel(int64_t count, const double* __restrict__ src, P* __restrict__ dst) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dst[i] = StoreValue<P>(static_cast<ComputeType<P>>(src[i]));
  }
}

template <typename T>
__global__ void BatchStatisticsKernel(int64_t batch, int64_t params, int64_t run, const T* __restrict__ x,
                                      double* __restrict__ mean, double* __restrict__ var) {
  using A = Acc<T>;
  __shared__ A shared[kThreadsPerBlock];
  const int64_t count = batch * run;
  for (int64_t p = blockIdx.x; p < params; p += gridDim.x) {
    A sum = 0;
    for (int64_t k = threadIdx.x; k < count; k += blockDim.x) {
      const int64_t n = k / run, j = k % run;
      sum += static_cast<A>(LoadValue(x[(n * params + p) * run + j]));
    }
    const A mu = BlockSum(sum, shared) / static_cast<A>(count);  // NaN for an empty batch, as on the CPU
    A dev = 0;
    for (int64_t k = threadIdx.x; k < count; k += blockDim.x) {
      const int64_t n = k / run, j = k % run;
      const A d = static_cast<A>(LoadValue(x[(n * params + p) * run + j])) - mu;
      dev += d * d;
    }
    const A v = BlockSum(dev, shared) / static_cast<A>(count);
    if (threadIdx.x == 0) {
      mean[p] = static_cast<double>(mu);
      var[p] = static_cast<double>(v);
    }
  }
}

__global__ void FinalizeKernel(int64_t params, bool training, double momentum, double epsilon, BatchNormParams p) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < params;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const double v = training ? p.batch_var[i] : p.var[i];
    p.scale_eff[i] = p.scale[i] / sqrt(v + epsilon);
    if (training) {
      p.running_mean[i] = p.mean[i] * momentum + p.batch_mean[i] * (1 - momentum);
      p.running_var[i] = p.var[i] * momentum + p.batch_var[i] * (1 - momentum);
    }
  }
}

template <typename T>
__global__ void ApplyKernel(int64_t total, int64_t params, int64_t run, const T* __restrict__ x,
                            const double* __restrict__ mean, const double* __restrict__ scale_eff,
                            const double* __restrict__ bias, T* __restrict__ y) {
  using A = Acc<T>;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t p = (i / run) % params;
    const A v = (static_cast<A>(LoadValue(x[i])) - static_cast<A>(mean[p])) * static_cast<A>(scale_eff[p]) +
                static_cast<A>(bias[p]);
    y[i] = StoreValue<T>(static_cast<ComputeType<T>>(v));
  }
}

}  // namespace

Status LaunchToDouble(cudaStream_t stream, DType dtype, int64_t count, const void* src, double* dst) {
  if (count == 0) return Status::Ok();
  return DispatchFloat(dtype, "BatchNormalization parameter", [&](auto tag) -> Status {
    using P = typename decltype(tag)::type;
    ToDoubleKernel<P><<<GridFor(count), kThreadsPerBlock, 0, stream>>>(count, static_cast<const P*>(src), dst);
    return CheckLaunch("BatchNormalization parameter");
  });
}

Status LaunchFromDouble(cudaStream_t stream, DType dtype, int64_t count, const double* src, void* dst) {
  if (count == 0) return Status::Ok();
  return DispatchFloat(dtype, "BatchNormalization statistic", [&](auto tag) -> Status {
    using P = typename decltype(tag)::type;
    FromDoubleKernel<P><<<GridFor(count), kThreadsPerBlock, 0, stream>>>(count, src, static_cast<P*>(dst));
    return CheckLaunch("BatchNormalization statistic");
  });
}

Status LaunchBatchStatistics(cudaStream_t stream, DType dtype, int64_t batch, int64_t params, int64_t run,
                             const void* x, double* mean, double* var) {
  if (params == 0) return Status::Ok();
  const unsigned int blocks = static_cast<unsigned int>(params < 65535 ? params : 65535);
  return DispatchFloat(dtype, "BatchNormalization", [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    BatchStatisticsKernel<T>
        <<<blocks, kThreadsPerBlock, 0, stream>>>(batch, params, run, static_cast<const T*>(x), mean, var);
    return CheckLaunch("BatchNormalization statistics");
  });
}

Status LaunchBatchNormFinalize(cudaStream_t stream, int64_t params, bool training, double momentum, double epsilon,
                               const BatchNormParams& p) {
  if (params == 0) return Status::Ok();
  FinalizeKernel<<<GridFor(params), kThreadsPerBlock, 0, stream>>>(params, training, momentum, epsilon, p);
  return CheckLaunch("BatchNormalization coefficients");
}

Status LaunchBatchNormApply(cudaStream_t stream, DType dtype, int64_t batch, int64_t params, int64_t run, const void* x,
                            const double* mean, const double* scale_eff, const double* bias, void* y) {
  const int64_t total = batch * params * run;
  if (total == 0) return Status::Ok();
  return DispatchFloat(dtype, "BatchNormalization", [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    ApplyKernel<T><<<GridFor(total), kThreadsPerBlock, 0, stream>>>(total, params, run, static_cast<const T*>(x), mean,
                                                                    scale_eff, bias, static_cast<T*>(y));
    return CheckLaunch("BatchNormalization");
  });
}

}  // namespace onnxamp::cuda::dnn
