// CUDA launcher for TopK. Values are mapped to unsigned keys whose ascending order is the value order with NaN above
// +inf, NaNs equal and -0 equal to +0 (the CPU's nan_compare order); for `largest` the keys are inverted. Each slice
// (an (outer, inner) position's n values along the axis) is then sorted by (key, index):
//   n <= kSmallN: one block per slice, a bitonic sort of (key, index) pairs in shared memory;
//   larger n:     the slices are gathered contiguously and sorted by cub::DeviceSegmentedRadixSort (stable, so equal
//                 keys keep index order), temporary storage from scratch.
// The first k of each sorted slice are written out (sorted = 1 order, also a valid order for sorted = 0).
#include <cub/device/device_segmented_radix_sort.cuh>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <type_traits>

#include "runtime/cuda/ops/cuda_common.cuh"
#include "runtime/cuda/ops/norm_reduce/norm_reduce_device.cuh"
#include "runtime/cuda/ops/norm_reduce/norm_reduce_launch.h"

namespace onnxamp::cuda::norm_reduce {
namespace {

inline constexpr int kSmallN = 2048;
inline constexpr int kSortThreads = 256;

// The key type of T: 32 bits for types up to 32 bits (fp16/bf16 compared as float), 64 bits otherwise.
template <typename T>
using KeyOf = std::conditional_t<sizeof(T) == 8, unsigned long long, unsigned int>;

// Ascending key order == value order (NaN highest, -0 == +0).
template <typename T>
__device__ __forceinline__ KeyOf<T> OrderedKey(T v) {
  using K = KeyOf<T>;
  if constexpr (kIsFloatLike<T>) {
    auto a = LoadValue<T>(v);
    using A = decltype(a);
    if (a != a) return ~K(0);
    if (a == A(0)) a = A(0);
    if constexpr (sizeof(A) == 4) {
      const unsigned int u = __float_as_uint(a);
      return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    } else {
      const auto u = static_cast<unsigned long long>(__double_as_longlong(a));
      return (u >> 63) ? ~u : (u | (1ull << 63));
    }
  } else if constexpr (std::is_signed_v<T>) {
    using S = std::make_signed_t<K>;
    return static_cast<K>(static_cast<S>(v)) ^ (K(1) << (sizeof(K) * 8 - 1));
  } else {
    return static_cast<K>(v);
  }
}

template <typename T>
__device__ __forceinline__ KeyOf<T> SortKey(T v, bool largest) {
  const KeyOf<T> k = OrderedKey(v);
  return largest ? ~k : k;
}

// One block per slice s = (o, i): bitonic sort of (key, index) over the slice padded to a power of two, then the
// first k written out.
template <typename T>
__global__ void TopKSmallKernel(const T* __restrict__ x, int64_t slices, int64_t n, int64_t inner, int64_t k,
                                bool largest, T* __restrict__ values, int64_t* __restrict__ indices) {
  using K = KeyOf<T>;
  __shared__ K keys[kSmallN];
  __shared__ int idx[kSmallN];
  int padded = 1;
  while (padded < n) padded *= 2;
  for (int64_t s = blockIdx.x; s < slices; s += gridDim.x) {
    const int64_t o = s / inner, i = s - o * inner;
    const T* src = x + o * n * inner + i;
    for (int t = threadIdx.x; t < padded; t += blockDim.x) {
      if (t < n) {
        keys[t] = SortKey(src[t * inner], largest);
        idx[t] = t;
      } else {
        keys[t] = ~K(0);
        idx[t] = INT_MAX;
      }
    }
    __syncthreads();
    for (int size = 2; size <= padded; size *= 2) {
      for (int stride = size / 2; stride > 0; stride /= 2) {
        for (int t = threadIdx.x; t < padded; t += blockDim.x) {
          const int u = t ^ stride;
          if (u <= t) continue;
          const bool ascending = (t & size) == 0;
          const bool t_after_u = keys[t] > keys[u] || (keys[t] == keys[u] && idx[t] > idx[u]);
          if (t_after_u == ascending) {
            const K tk = keys[t];
            keys[t] = keys[u];
            keys[u] = tk;
            const int ti = idx[t];
            idx[t] = idx[u];
            idx[u] = ti;
          }
        }
        __syncthreads();
      }
    }
    const int64_t out_base = o * k * inner + i;
    for (int64_t j = threadIdx.x; j < k; j += blockDim.x) {
      const int64_t from = idx[j];
      if (values) values[out_base + j * inner] = src[from * inner];
      if (indices) indices[out_base + j * inner] = from;
    }
    __syncthreads();  // the next slice overwrites keys / idx
  }
}

// keys[s * n + j] = SortKey(x[o, j, i]), vals[s * n + j] = j for slice s = o * inner + i; offsets[s] = s * n.
template <typename T>
__global__ void GatherKeysKernel(const T* __restrict__ x, int64_t slices, int64_t n, int64_t inner, bool largest,
                                 KeyOf<T>* __restrict__ keys, int* __restrict__ vals, int* __restrict__ offsets) {
  const int64_t count = slices * n;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < count;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t s = e / n, j = e - s * n;
    const int64_t o = s / inner, i = s - o * inner;
    keys[e] = SortKey(x[(o * n + j) * inner + i], largest);
    vals[e] = static_cast<int>(j);
    if (j == 0) offsets[s] = static_cast<int>(e);
    if (e == count - 1) offsets[slices] = static_cast<int>(count);
  }
}

// The first k sorted indices of each slice, and their values, written to [outer, k, inner].
template <typename T>
__global__ void WriteTopKKernel(const T* __restrict__ x, const int* __restrict__ sorted, int64_t slices, int64_t n,
                                int64_t inner, int64_t k, T* __restrict__ values, int64_t* __restrict__ indices) {
  const int64_t count = slices * k;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < count;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t s = e / k, j = e - s * k;
    const int64_t o = s / inner, i = s - o * inner;
    const int64_t from = sorted[s * n + j];
    const int64_t out = (o * k + j) * inner + i;
    if (values) values[out] = x[(o * n + from) * inner + i];
    if (indices) indices[out] = from;
  }
}

template <typename T>
Status RunTopK(const T* x, int64_t outer, int64_t n, int64_t inner, int64_t k, bool largest, T* values,
               int64_t* indices, const ScratchFn& scratch, cudaStream_t stream) {
  using K = KeyOf<T>;
  const int64_t slices = outer * inner;
  if (n <= kSmallN) {
    const auto blocks = static_cast<unsigned int>(std::min<int64_t>(slices, 65535));
    TopKSmallKernel<T><<<blocks, kSortThreads, 0, stream>>>(x, slices, n, inner, k, largest, values, indices);
    return CheckLaunch("TopK");
  }
  const int64_t items = slices * n;
  if (items > INT_MAX || slices >= INT_MAX) {
    return Unimplemented("TopK over ", slices, " slices of ", n, " values (", items,
                         " in all) is above the 2^31 - 1 values the cuda sort takes");
  }
  // Scratch: keys in/out, indices in/out, segment offsets, then the sort's temporary storage.
  size_t temp_bytes = 0;
  ONNXAMP_CUDA_RETURN_IF_ERROR(cub::DeviceSegmentedRadixSort::SortPairs(
                                   nullptr, temp_bytes, static_cast<const K*>(nullptr), static_cast<K*>(nullptr),
                                   static_cast<const int*>(nullptr), static_cast<int*>(nullptr),
                                   static_cast<int>(items), static_cast<int>(slices), static_cast<const int*>(nullptr),
                                   static_cast<const int*>(nullptr), 0, static_cast<int>(sizeof(K) * 8), stream),
                               "TopK sort (temporary storage size)");
  const size_t key_bytes = AlignScratch(static_cast<size_t>(items) * sizeof(K));
  const size_t val_bytes = AlignScratch(static_cast<size_t>(items) * sizeof(int));
  const size_t off_bytes = AlignScratch(static_cast<size_t>(slices + 1) * sizeof(int));
  ONNXAMP_ASSIGN_OR_RETURN(void* base_ptr, scratch(2 * key_bytes + 2 * val_bytes + off_bytes + temp_bytes));
  char* base = static_cast<char*>(base_ptr);
  K* keys_in = reinterpret_cast<K*>(base);
  K* keys_out = reinterpret_cast<K*>(base + key_bytes);
  int* vals_in = reinterpret_cast<int*>(base + 2 * key_bytes);
  int* vals_out = reinterpret_cast<int*>(base + 2 * key_bytes + val_bytes);
  int* offsets = reinterpret_cast<int*>(base + 2 * key_bytes + 2 * val_bytes);
  void* temp = base + 2 * key_bytes + 2 * val_bytes + off_bytes;
  GatherKeysKernel<T>
      <<<GridFor(items), kThreadsPerBlock, 0, stream>>>(x, slices, n, inner, largest, keys_in, vals_in, offsets);
  ONNXAMP_RETURN_IF_ERROR(CheckLaunch("TopK keys"));
  ONNXAMP_CUDA_RETURN_IF_ERROR(
      cub::DeviceSegmentedRadixSort::SortPairs(temp, temp_bytes, keys_in, keys_out, vals_in, vals_out,
                                               static_cast<int>(items), static_cast<int>(slices), offsets, offsets + 1,
                                               0, static_cast<int>(sizeof(K) * 8), stream),
      "TopK sort of ", slices, " slices of ", n);
  WriteTopKKernel<T>
      <<<GridFor(slices * k), kThreadsPerBlock, 0, stream>>>(x, vals_out, slices, n, inner, k, values, indices);
  return CheckLaunch("TopK");
}

}  // namespace

Status LaunchTopK(DType dtype, const void* x, int64_t outer, int64_t n, int64_t inner, int64_t k, bool largest,
                  void* values, int64_t* indices, const ScratchFn& scratch, cudaStream_t stream) {
  if (k == 0 || outer * inner == 0 || (values == nullptr && indices == nullptr)) return Status::Ok();
  if (k > n) return Internal("TopK: k = ", k, " is above the axis length ", n);
  // Values are copied, never computed on: dispatch on the numeric type for the key mapping only.
  return DispatchNumeric(dtype, "TopK", [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    return RunTopK<T>(static_cast<const T*>(x), outer, n, inner, k, largest, static_cast<T*>(values), indices, scratch,
                      stream);
  });
}

}  // namespace onnxamp::cuda::norm_reduce
