// Pooling kernels: MaxPool (NaN wins, the Indices output, storage_order) and AveragePool (count_include_pad) with one
// thread per output element over any window the ONNX attributes describe (asymmetric pads, ceil_mode, dilations),
// in NCHW or channels-last (a flag of the same kernel), the global pools with one block per plane, and the
// channels-last GlobalAveragePool with one thread per (image, channel). Same semantics as runtime/ops/pool/pool_cpu.cc:
// windows skip the padding, an empty max window gives -inf (the lowest value for integers) and index -1, and averages
// accumulate in FP32 (FP64 for double) and round once on store.
#include <limits>
#include <type_traits>

#include "runtime/cuda/ops/cuda_common.cuh"
#include "runtime/cuda/ops/dnn/dnn_launch.h"

namespace onnxamp::cuda::dnn {
namespace {

template <typename C>
__device__ __forceinline__ bool IsNan(C v) {
  if constexpr (std::is_floating_point_v<C>) {
    return v != v;
  } else {
    return false;
  }
}

template <typename C>
__device__ __forceinline__ C EmptyMax() {
  if constexpr (std::numeric_limits<C>::has_infinity) {
    return -std::numeric_limits<C>::infinity();
  } else {
    return std::numeric_limits<C>::lowest();
  }
}

template <typename T>
__global__ void PoolKernel(int64_t total, WindowParams g, PoolMode mode, const T* __restrict__ x, T* __restrict__ y,
                           int64_t* __restrict__ indices) {
  using C = ComputeType<T>;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    // NCHW: i = plane * out_size + o, plane = image * C + channel, the plane's input contiguous. Channels-last:
    // i = (image * out_size + o) * C + channel, the plane's input elements C apart.
    int64_t plane, oi, x_stride;
    const T* xp;
    if (mode.channels_last) {
      const int64_t channel = i % mode.channels;
      const int64_t r = i / mode.channels;
      oi = r % g.out_size;
      const int64_t image = r / g.out_size;
      plane = image * mode.channels + channel;
      xp = x + image * g.in_size * mode.channels + channel;
      x_stride = mode.channels;
    } else {
      plane = i / g.out_size;
      oi = i % g.out_size;
      xp = x + plane * g.in_size;
      x_stride = 1;
    }
    int64_t start[kMaxSpatial];
    int64_t rest = oi;
    for (int d = g.nsp - 1; d >= 0; --d) {
      start[d] = (rest % g.out[d]) * g.stride[d] - g.pad_begin[d];
      rest /= g.out[d];
    }
    bool found = false;
    C best = C(0);
    int64_t best_index = -1;
    C sum = C(0);
    int64_t count = 0;
    int64_t kk[kMaxSpatial] = {};
    for (int64_t ki = 0; ki < g.kernel_size; ++ki) {
      bool inside = true, in_padded = true;
      int64_t offset = 0;
      for (int d = 0; d < g.nsp; ++d) {
        const int64_t pos = start[d] + kk[d] * g.dilation[d];
        inside = inside && pos >= 0 && pos < g.in[d];
        in_padded = in_padded && pos < g.in[d] + g.pad_end[d];
        offset = offset * g.in[d] + pos;
      }
      for (int d = g.nsp - 1; d >= 0; --d) {  // next tap, row-major
        if (++kk[d] < g.kernel[d]) break;
        kk[d] = 0;
      }
      if (!mode.max && mode.count_include_pad && in_padded) ++count;
      if (!inside) continue;
      const C v = LoadValue(xp[offset * x_stride]);
      if (mode.max) {
        if (!found || v > best || (IsNan(v) && !IsNan(best))) {
          best = v;
          best_index = offset;
          found = true;
        }
      } else {
        sum += v;
        if (!mode.count_include_pad) ++count;
      }
    }
    if (mode.max) {
      y[i] = StoreValue<T>(found ? best : EmptyMax<C>());
      if (indices) {
        int64_t index = best_index;
        if (found && mode.storage_order == 1) {
          // Column-major: the first spatial dim varies fastest.
          int64_t coord[kMaxSpatial];
          int64_t r = best_index;
          for (int d = g.nsp - 1; d >= 0; --d) {
            coord[d] = r % g.in[d];
            r /= g.in[d];
          }
          index = 0;
          for (int d = g.nsp - 1; d >= 0; --d) index = index * g.in[d] + coord[d];
        }
        indices[i] = found ? plane * g.in_size + index : -1;
      }
    } else {
      // count may be 0 for a window entirely in the padding: 0 / 0 as on the CPU.
      y[i] = StoreValue<T>(sum / static_cast<C>(count));
    }
  }
}

// Channels-last GlobalAveragePool: thread i = image * c + channel sums its channel over the positions; a warp reads
// consecutive channels of one position, so its loads coalesce.
template <typename T>
__global__ void GlobalAveragePoolChannelsLastKernel(int64_t n, int64_t c, int64_t size, const T* __restrict__ x,
                                                    T* __restrict__ y) {
  using C = ComputeType<T>;
  const int64_t total = n * c;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t image = i / c, channel = i % c;
    const T* xp = x + image * size * c + channel;
    C sum = C(0);
    for (int64_t j = 0; j < size; ++j) sum += LoadValue(xp[j * c]);
    y[i] = StoreValue<T>(static_cast<C>(sum / static_cast<C>(size)));
  }
}

// One block per plane (grid-stride over planes); the block reduces its plane in shared memory.
template <typename T, bool kMax>
__global__ void GlobalPoolKernel(int64_t planes, int64_t size, const T* __restrict__ x, T* __restrict__ y) {
  using C = ComputeType<T>;
  __shared__ C partial[kThreadsPerBlock];
  for (int64_t plane = blockIdx.x; plane < planes; plane += gridDim.x) {
    const T* xp = x + plane * size;
    C acc = kMax ? EmptyMax<C>() : C(0);
    for (int64_t j = threadIdx.x; j < size; j += blockDim.x) {
      const C v = LoadValue(xp[j]);
      if constexpr (kMax) {
        if (v > acc || (IsNan(v) && !IsNan(acc))) acc = v;
      } else {
        acc += v;
      }
    }
    partial[threadIdx.x] = acc;
    __syncthreads();
    for (unsigned int half = blockDim.x / 2; half > 0; half /= 2) {
      if (threadIdx.x < half) {
        const C other = partial[threadIdx.x + half];
        C mine = partial[threadIdx.x];
        if constexpr (kMax) {
          if (other > mine || (IsNan(other) && !IsNan(mine))) mine = other;
        } else {
          mine += other;
        }
        partial[threadIdx.x] = mine;
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      const C r = partial[0];
      y[plane] = StoreValue<T>(kMax ? r : static_cast<C>(r / static_cast<C>(size)));
    }
    __syncthreads();  // partial[0] is read before the next plane overwrites it
  }
}

}  // namespace

Status LaunchPool(cudaStream_t stream, DType dtype, const PoolMode& mode, int64_t planes, const WindowParams& g,
                  const void* x, void* y, int64_t* indices) {
  const int64_t total = planes * g.out_size;
  if (total == 0) return Status::Ok();
  if (mode.channels_last && (indices != nullptr || mode.channels < 1)) {
    return Internal("channels-last pooling takes no Indices output and at least one channel");
  }
  auto run = [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    PoolKernel<T><<<GridFor(total), kThreadsPerBlock, 0, stream>>>(total, g, mode, static_cast<const T*>(x),
                                                                   static_cast<T*>(y), indices);
    return CheckLaunch(mode.max ? "MaxPool" : "AveragePool");
  };
  if (mode.max && dtype == DType::kInt8) return run(TypeTag<int8_t>{});
  if (mode.max && dtype == DType::kUint8) return run(TypeTag<uint8_t>{});
  return DispatchFloat(dtype, mode.max ? "MaxPool" : "AveragePool", run);
}

Status LaunchGlobalPool(cudaStream_t stream, DType dtype, bool max, int64_t planes, int64_t size, const void* x,
                        void* y) {
  if (planes == 0 || size == 0) return Status::Ok();
  const unsigned int blocks = static_cast<unsigned int>(planes < 65535 ? planes : 65535);
  return DispatchFloat(dtype, max ? "GlobalMaxPool" : "GlobalAveragePool", [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    if (max) {
      GlobalPoolKernel<T, true>
          <<<blocks, kThreadsPerBlock, 0, stream>>>(planes, size, static_cast<const T*>(x), static_cast<T*>(y));
    } else {
      GlobalPoolKernel<T, false>
          <<<blocks, kThreadsPerBlock, 0, stream>>>(planes, size, static_cast<const T*>(x), static_cast<T*>(y));
    }
    return CheckLaunch(max ? "GlobalMaxPool" : "GlobalAveragePool");
  });
}

Status LaunchGlobalAveragePoolChannelsLast(cudaStream_t stream, DType dtype, int64_t n, int64_t c, int64_t size,
                                           const void* x, void* y) {
  const int64_t total = n * c;
  if (total == 0 || size == 0) return Status::Ok();
  return DispatchFloat(dtype, "GlobalAveragePool", [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    GlobalAveragePoolChannelsLastKernel<T>
        <<<GridFor(total), kThreadsPerBlock, 0, stream>>>(n, c, size, static_cast<const T*>(x), static_cast<T*>(y));
    return CheckLaunch("GlobalAveragePool (channels-last)");
  });
}

}  // namespace onnxamp::cuda::dnn
