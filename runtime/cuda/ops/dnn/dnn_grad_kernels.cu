// Gradient kernels of the dnn family (launchers in dnn_grad_launch.h): per-channel sums for dB, the direct weight
// gradient of a convolution, MaxPoolGrad (a stable sort of the indices, then one thread per dX element summing its
// run), AveragePoolGrad (one thread per dX element gathering the windows that cover it), and the batch-normalization
// statistics and gradients. No float atomics: every sum has a fixed order (a thread's run, then a tree over the
// block), so results are the same bits run to run. The arithmetic follows the CPU kernels
// (runtime/ops/conv/conv_grad_cpu.cc, pool/pool_grad_cpu.cc, batch_norm/batch_norm_grad_cpu.cc).
#include <climits>
#include <cub/device/device_radix_sort.cuh>
#include <type_traits>

#include "runtime/cuda/ops/cuda_common.cuh"
#include "runtime/cuda/ops/dnn/dnn_device.cuh"
#include "runtime/cuda/ops/dnn/dnn_grad_launch.h"

namespace onnxamp::cuda::dnn {
namespace {

unsigned int BlocksFor(int64_t items) { return static_cast<unsigned int>(items < 65535 ? items : 65535); }

// ---- dB -----------------------------------------------------------------------------------------------------------

template <typename T>
__global__ void ChannelSumsKernel(int64_t n, int64_t channels, int64_t plane, const T* __restrict__ dy,
                                  T* __restrict__ db) {
  using A = Acc<T>;
  __shared__ A shared[kThreadsPerBlock];
  const int64_t count = n * plane;
  for (int64_t c = blockIdx.x; c < channels; c += gridDim.x) {
    A sum = 0;
    for (int64_t k = threadIdx.x; k < count; k += blockDim.x) {
      const int64_t i = k / plane, j = k % plane;
      sum += static_cast<A>(LoadValue(dy[(i * channels + c) * plane + j]));
    }
    const A total = BlockSum(sum, shared);
    if (threadIdx.x == 0) db[c] = StoreValue<T>(static_cast<ComputeType<T>>(total));
  }
}

// ---- dW (direct) --------------------------------------------------------------------------------------------------

template <typename T>
__global__ void ConvGradFilterKernel(int64_t total, WindowParams g, ConvSizes s, const T* __restrict__ dy,
                                     const T* __restrict__ x, T* __restrict__ dw) {
  using A = Acc<T>;
  const int64_t cg = s.c / s.group, mg = s.m / s.group;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t ki = e % g.kernel_size, row = e / g.kernel_size;
    const int64_t oc = row / cg, ic = row % cg, c = (oc / mg) * cg + ic;
    // The tap's offset along each dim.
    int64_t tap[kMaxSpatial];
    int64_t rest = ki;
    for (int d = g.nsp - 1; d >= 0; --d) {
      tap[d] = (rest % g.kernel[d]) * g.dilation[d] - g.pad_begin[d];
      rest /= g.kernel[d];
    }
    A sum = 0;
    for (int64_t img = 0; img < s.n; ++img) {
      const T* dyp = dy + (img * s.m + oc) * g.out_size;
      const T* xp = x + (img * s.c + c) * g.in_size;
      int64_t o[kMaxSpatial] = {};
      for (int64_t oi = 0; oi < g.out_size; ++oi) {
        bool inside = true;
        int64_t offset = 0;
        for (int d = 0; d < g.nsp; ++d) {
          const int64_t pos = o[d] * g.stride[d] + tap[d];
          inside = inside && pos >= 0 && pos < g.in[d];
          offset = offset * g.in[d] + pos;
        }
        if (inside) sum += static_cast<A>(LoadValue(dyp[oi])) * static_cast<A>(LoadValue(xp[offset]));
        for (int d = g.nsp - 1; d >= 0; --d) {  // next output position, row-major
          if (++o[d] < g.out[d]) break;
          o[d] = 0;
        }
      }
    }
    dw[e] = StoreValue<T>(static_cast<ComputeType<T>>(sum));
  }
}

// ---- MaxPoolGrad --------------------------------------------------------------------------------------------------

// keys[i] = indices[i] + 1 for an index inside [0, x_count), else 0 (dropped); vals[i] = i.
__global__ void MaxPoolGradKeysKernel(int64_t count, int64_t x_count, const int64_t* __restrict__ indices,
                                      uint64_t* __restrict__ keys, int* __restrict__ vals) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t at = indices[i];
    keys[i] = at >= 0 && at < x_count ? static_cast<uint64_t>(at) + 1 : 0;
    vals[i] = static_cast<int>(i);
  }
}

// The first position in keys[0..count) whose key is not below `key`.
__device__ int64_t LowerBound(const uint64_t* keys, int64_t count, uint64_t key) {
  int64_t lo = 0, hi = count;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (keys[mid] < key) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

template <typename T>
__global__ void MaxPoolGradSumKernel(int64_t x_count, int64_t count, const uint64_t* __restrict__ keys,
                                     const int* __restrict__ vals, const T* __restrict__ dy, T* __restrict__ dx) {
  using A = Acc<T>;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < x_count;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint64_t key = static_cast<uint64_t>(e) + 1;
    A sum = 0;
    // The sort is stable: the run holds the dy positions in increasing order, the CPU's order of addition.
    for (int64_t k = LowerBound(keys, count, key); k < count && keys[k] == key; ++k) {
      sum += static_cast<A>(LoadValue(dy[vals[k]]));
    }
    dx[e] = StoreValue<T>(static_cast<ComputeType<T>>(sum));
  }
}

// ---- AveragePoolGrad ----------------------------------------------------------------------------------------------

template <typename T>
__global__ void AveragePoolGradKernel(int64_t total, WindowParams g, bool count_include_pad, const T* __restrict__ dy,
                                      T* __restrict__ dx) {
  using A = Acc<T>;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t plane = i / g.in_size;
    int64_t pos[kMaxSpatial], lo[kMaxSpatial], hi[kMaxSpatial], o[kMaxSpatial];
    bool any = true;
    int64_t rest = i % g.in_size;
    for (int d = g.nsp - 1; d >= 0; --d) {
      pos[d] = rest % g.in[d];
      rest /= g.in[d];
    }
    // Per dim, the outputs whose window can reach pos: o * stride <= pos + pad_begin <= o * stride + (k - 1) * dil.
    for (int d = 0; d < g.nsp; ++d) {
      const int64_t reach = pos[d] + g.pad_begin[d];
      const int64_t first = reach - (g.kernel[d] - 1) * g.dilation[d];
      lo[d] = first <= 0 ? 0 : (first + g.stride[d] - 1) / g.stride[d];
      hi[d] = reach < 0 ? -1 : reach / g.stride[d];
      if (hi[d] > g.out[d] - 1) hi[d] = g.out[d] - 1;
      any = any && lo[d] <= hi[d];
      o[d] = lo[d];
    }
    A sum = 0;
    const T* dyp = dy + plane * g.out_size;
    // Row-major over the candidate outputs: increasing output position, the order the CPU adds the shares in.
    while (any) {
      bool covers = true;
      int64_t count = 1, oi = 0;
      for (int d = 0; d < g.nsp; ++d) {
        const int64_t r = pos[d] + g.pad_begin[d] - o[d] * g.stride[d];
        covers = covers && r % g.dilation[d] == 0 && r / g.dilation[d] < g.kernel[d];
        // The window's taps along d that count: inside the input, or inside the explicitly padded input.
        int64_t taps = 0;
        for (int64_t k = 0; k < g.kernel[d]; ++k) {
          const int64_t p = o[d] * g.stride[d] - g.pad_begin[d] + k * g.dilation[d];
          if (count_include_pad ? p < g.in[d] + g.pad_end[d] : (p >= 0 && p < g.in[d])) ++taps;
        }
        count *= taps;
        oi = oi * g.out[d] + o[d];
      }
      if (covers && count > 0) sum += static_cast<A>(LoadValue(dyp[oi])) / static_cast<A>(count);
      int d = g.nsp - 1;
      for (; d >= 0; --d) {
        if (++o[d] <= hi[d]) break;
        o[d] = lo[d];
      }
      any = d >= 0;
    }
    dx[i] = StoreValue<T>(static_cast<ComputeType<T>>(sum));
  }
}

// ---- batch normalization ------------------------------------------------------------------------------------------

template <typename T>
__global__ void BatchNormTrainingStatisticsKernel(int64_t batch, int64_t params, int64_t run, const T* __restrict__ x,
                                                  double momentum, double epsilon, BatchNormTrainingParams p) {
  __shared__ double shared[kThreadsPerBlock];
  const int64_t count = batch * run;
  for (int64_t c = blockIdx.x; c < params; c += gridDim.x) {
    double sum = 0;
    for (int64_t k = threadIdx.x; k < count; k += blockDim.x) {
      const int64_t n = k / run, j = k % run;
      sum += static_cast<double>(LoadValue(x[(n * params + c) * run + j]));
    }
    const double mu = BlockSum(sum, shared) / static_cast<double>(count);
    double dev = 0;
    for (int64_t k = threadIdx.x; k < count; k += blockDim.x) {
      const int64_t n = k / run, j = k % run;
      const double d = static_cast<double>(LoadValue(x[(n * params + c) * run + j])) - mu;
      dev = __fma_rn(d, d, dev);
    }
    const double var = BlockSum(dev, shared) / static_cast<double>(count);
    if (threadIdx.x == 0) {
      const double inv_std = 1.0 / sqrt(var + epsilon);
      const double unbias = static_cast<double>(count) / static_cast<double>(count - 1);
      p.mean[c] = mu;
      p.inv_std[c] = inv_std;
      p.scale_eff[c] = __dmul_rn(p.scale[c], inv_std);
      // Unfused multiply-adds, in the CPU's order.
      p.new_running_mean[c] = __dadd_rn(__dmul_rn(momentum, p.running_mean[c]), __dmul_rn(1 - momentum, mu));
      p.new_running_var[c] =
          __dadd_rn(__dmul_rn(momentum, p.running_var[c]), __dmul_rn(__dmul_rn(1 - momentum, var), unbias));
    }
  }
}

template <typename T>
__global__ void BatchNormGradSumsKernel(int64_t batch, int64_t params, int64_t run, const T* __restrict__ dy,
                                        const T* __restrict__ x, const double* __restrict__ mean,
                                        const double* __restrict__ inv_std, double* __restrict__ sum_dy,
                                        double* __restrict__ sum_dy_xhat) {
  __shared__ double shared[kThreadsPerBlock];
  const int64_t count = batch * run;
  for (int64_t c = blockIdx.x; c < params; c += gridDim.x) {
    const double mu = mean[c];
    double s = 0, sx = 0;
    for (int64_t k = threadIdx.x; k < count; k += blockDim.x) {
      const int64_t n = k / run, j = k % run;
      const int64_t at = (n * params + c) * run + j;
      const double gv = static_cast<double>(LoadValue(dy[at]));
      s += gv;
      sx = __fma_rn(gv, static_cast<double>(LoadValue(x[at])) - mu, sx);
    }
    const double total = BlockSum(s, shared);
    const double total_x = BlockSum(sx, shared);
    if (threadIdx.x == 0) {
      sum_dy[c] = total;
      sum_dy_xhat[c] = __dmul_rn(total_x, inv_std[c]);
    }
  }
}

template <typename T>
__global__ void BatchNormGradInputKernel(int64_t total, int64_t params, int64_t run, double count,
                                         const T* __restrict__ dy, const T* __restrict__ x,
                                         const double* __restrict__ scale, const double* __restrict__ mean,
                                         const double* __restrict__ inv_std, const double* __restrict__ sum_dy,
                                         const double* __restrict__ sum_dy_xhat, T* __restrict__ dx) {
  using A = Acc<T>;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = (i / run) % params;
    const A k = static_cast<A>(__dmul_rn(scale[c], inv_std[c]));
    const A mu = static_cast<A>(mean[c]), is = static_cast<A>(inv_std[c]);
    const A mean_dy = static_cast<A>(sum_dy[c] / count);
    const A mean_dy_xhat = static_cast<A>(sum_dy_xhat[c] / count);
    const A xhat = (static_cast<A>(LoadValue(x[i])) - mu) * is;
    const A g = static_cast<A>(LoadValue(dy[i]));
    dx[i] = StoreValue<T>(static_cast<ComputeType<T>>(k * (g - mean_dy - xhat * mean_dy_xhat)));
  }
}

size_t Align(size_t bytes) { return (bytes + 255) / 256 * 256; }

}  // namespace

Status LaunchChannelSums(cudaStream_t stream, DType dtype, int64_t n, int64_t channels, int64_t plane, const void* dy,
                         void* db) {
  if (channels == 0) return Status::Ok();
  return DispatchFloat(dtype, "convolution bias gradient", [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    ChannelSumsKernel<T><<<BlocksFor(channels), kThreadsPerBlock, 0, stream>>>(
        n, channels, plane, static_cast<const T*>(dy), static_cast<T*>(db));
    return CheckLaunch("convolution bias gradient");
  });
}

Status LaunchConvGradFilterDirect(cudaStream_t stream, DType dtype, const WindowParams& g, const ConvSizes& s,
                                  const void* dy, const void* x, void* dw) {
  if (s.channels_last) return Internal("LaunchConvGradFilterDirect takes NCHW tensors only");
  if (s.group <= 0) return Internal("LaunchConvGradFilterDirect: group must be positive, got ", s.group);
  const int64_t total = s.m * (s.c / s.group) * g.kernel_size;
  if (total == 0) return Status::Ok();
  return DispatchFloat(dtype, "convolution weight gradient", [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    ConvGradFilterKernel<T><<<GridFor(total), kThreadsPerBlock, 0, stream>>>(
        total, g, s, static_cast<const T*>(dy), static_cast<const T*>(x), static_cast<T*>(dw));
    return CheckLaunch("convolution weight gradient");
  });
}

Status LaunchMaxPoolGrad(cudaStream_t stream, DType dtype, int64_t dy_count, int64_t x_count, const void* dy,
                         const int64_t* indices, void* dx, const GradScratchFn& scratch) {
  if (x_count == 0) return Status::Ok();
  if (dy_count > INT_MAX) {
    return Unimplemented("MaxPoolGrad over ", dy_count, " dY elements is above the 2^31 - 1 the cuda sort takes");
  }
  return DispatchFloat(dtype, "MaxPoolGrad", [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    const int count = static_cast<int>(dy_count);
    uint64_t* keys_out = nullptr;
    int* vals_out = nullptr;
    if (count > 0) {
      // Keys 0..x_count: the sort needs only the bits of x_count.
      int end_bit = 1;
      while (end_bit < 64 && (static_cast<uint64_t>(x_count) >> end_bit) != 0) ++end_bit;
      size_t temp_bytes = 0;
      ONNXAMP_CUDA_RETURN_IF_ERROR(
          cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, static_cast<const uint64_t*>(nullptr),
                                          static_cast<uint64_t*>(nullptr), static_cast<const int*>(nullptr),
                                          static_cast<int*>(nullptr), count, 0, end_bit, stream),
          "MaxPoolGrad sort (temporary storage size)");
      const size_t key_bytes = Align(static_cast<size_t>(count) * sizeof(uint64_t));
      const size_t val_bytes = Align(static_cast<size_t>(count) * sizeof(int));
      ONNXAMP_ASSIGN_OR_RETURN(void* base_ptr, scratch(2 * key_bytes + 2 * val_bytes + temp_bytes));
      char* base = static_cast<char*>(base_ptr);
      uint64_t* keys_in = reinterpret_cast<uint64_t*>(base);
      keys_out = reinterpret_cast<uint64_t*>(base + key_bytes);
      int* vals_in = reinterpret_cast<int*>(base + 2 * key_bytes);
      vals_out = reinterpret_cast<int*>(base + 2 * key_bytes + val_bytes);
      void* temp = base + 2 * key_bytes + 2 * val_bytes;
      MaxPoolGradKeysKernel<<<GridFor(count), kThreadsPerBlock, 0, stream>>>(count, x_count, indices, keys_in, vals_in);
      ONNXAMP_RETURN_IF_ERROR(CheckLaunch("MaxPoolGrad keys"));
      ONNXAMP_CUDA_RETURN_IF_ERROR(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, keys_in, keys_out, vals_in,
                                                                   vals_out, count, 0, end_bit, stream),
                                   "MaxPoolGrad sort of ", count, " indices");
    }
    MaxPoolGradSumKernel<T><<<GridFor(x_count), kThreadsPerBlock, 0, stream>>>(
        x_count, count, keys_out, vals_out, static_cast<const T*>(dy), static_cast<T*>(dx));
    return CheckLaunch("MaxPoolGrad");
  });
}

Status LaunchAveragePoolGrad(cudaStream_t stream, DType dtype, int64_t planes, const WindowParams& g,
                             bool count_include_pad, const void* dy, void* dx) {
  const int64_t total = planes * g.in_size;
  if (total == 0) return Status::Ok();
  return DispatchFloat(dtype, "AveragePoolGrad", [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    AveragePoolGradKernel<T><<<GridFor(total), kThreadsPerBlock, 0, stream>>>(
        total, g, count_include_pad, static_cast<const T*>(dy), static_cast<T*>(dx));
    return CheckLaunch("AveragePoolGrad");
  });
}

Status LaunchBatchNormTrainingStatistics(cudaStream_t stream, DType dtype, int64_t batch, int64_t params, int64_t run,
                                         const void* x, double momentum, double epsilon,
                                         const BatchNormTrainingParams& p) {
  if (params == 0) return Status::Ok();
  return DispatchFloat(dtype, "BatchNormTraining", [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    BatchNormTrainingStatisticsKernel<T><<<BlocksFor(params), kThreadsPerBlock, 0, stream>>>(
        batch, params, run, static_cast<const T*>(x), momentum, epsilon, p);
    return CheckLaunch("BatchNormTraining statistics");
  });
}

Status LaunchBatchNormGradSums(cudaStream_t stream, DType dtype, int64_t batch, int64_t params, int64_t run,
                               const void* dy, const void* x, const double* mean, const double* inv_std, double* sum_dy,
                               double* sum_dy_xhat) {
  if (params == 0) return Status::Ok();
  return DispatchFloat(dtype, "BatchNormalizationGrad", [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    BatchNormGradSumsKernel<T><<<BlocksFor(params), kThreadsPerBlock, 0, stream>>>(
        batch, params, run, static_cast<const T*>(dy), static_cast<const T*>(x), mean, inv_std, sum_dy, sum_dy_xhat);
    return CheckLaunch("BatchNormalizationGrad sums");
  });
}

Status LaunchBatchNormGradInput(cudaStream_t stream, DType dtype, int64_t batch, int64_t params, int64_t run,
                                const void* dy, const void* x, const double* scale, const double* mean,
                                const double* inv_std, const double* sum_dy, const double* sum_dy_xhat, void* dx) {
  const int64_t total = batch * params * run;
  if (total == 0) return Status::Ok();
  return DispatchFloat(dtype, "BatchNormalizationGrad", [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    BatchNormGradInputKernel<T><<<GridFor(total), kThreadsPerBlock, 0, stream>>>(
        total, params, run, static_cast<double>(batch * run), static_cast<const T*>(dy), static_cast<const T*>(x),
        scale, mean, inv_std, sum_dy, sum_dy_xhat, static_cast<T*>(dx));
    return CheckLaunch("BatchNormalizationGrad");
  });
}

}  // namespace onnxamp::cuda::dnn
