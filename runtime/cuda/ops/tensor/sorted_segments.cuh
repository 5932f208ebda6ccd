// Deterministic scatters by sorting, shared by the index gradient kernels (index_grad_kernels.cu: GatherGrad,
// GatherElementsGrad) and the scatter kernels (scatter_kernels.cu: ScatterND, ScatterElements, GatherNDGrad). Included
// by .cu files only.
//
// Each source position (an index, or an index tuple) gets a key: the destination row it goes to, or a key past the
// last row when its index is out of range. A stable cub::DeviceRadixSort groups equal keys with their source
// positions still ascending, so one thread per (segment, inner element) can walk its segment in index order: the order
// in which the CPU reference applies the same sources. No atomics: the same bits on every run.
#pragma once

#include <cub/device/device_radix_sort.cuh>

#include <climits>
#include <cstdint>
#include <string_view>

#include "runtime/cuda/ops/cuda_common.cuh"
#include "runtime/cuda/ops/tensor/index_grad_launch.h"

namespace onnxamp::cuda::segments {

// Rounded to a multiple of 256 bytes, so that consecutive scratch regions stay aligned.
inline size_t Align256(size_t bytes) { return (bytes + 255) / 256 * 256; }

// The number of bits that hold every key in [0, max_key].
inline int KeyBits(uint64_t max_key) {
  int bits = 1;
  while (bits < 64 && (max_key >> bits) != 0) ++bits;
  return bits;
}

template <typename I>
__device__ __forceinline__ int64_t WrapIndex(I raw, int64_t dim) {
  const int64_t v = static_cast<int64_t>(raw);
  return v < 0 ? v + dim : v;
}

// Element-wise keys along one axis (GatherElementsGrad, ScatterElements), addressed as GatherElementsGradArgs
// (index_grad_launch.h) says: the source has dims idx_dims[0..rank), and source element e goes to its own position
// with the axis coordinate replaced by indices[e] (negative from the end) in a destination of `data_strides`; an index
// outside [-dim, dim) gets the key `invalid_key`.
using ElementKeyArgs = GatherElementsGradArgs;

template <typename I>
__global__ void ElementKeysKernel(const I* __restrict__ indices, int64_t count, ElementKeyArgs a, uint64_t invalid_key,
                                  uint64_t* __restrict__ keys, int* __restrict__ positions) {
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < count;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = WrapIndex(indices[e], a.dim);
    int64_t rest = e, target = 0;
    for (int k = a.rank - 1; k >= 0; --k) {
      const int64_t c = rest % a.idx_dims[k];
      rest /= a.idx_dims[k];
      target += (k == a.axis ? r : c) * a.data_strides[k];
    }
    keys[e] = r >= 0 && r < a.dim ? static_cast<uint64_t>(target) : invalid_key;
    positions[e] = static_cast<int>(e);
  }
}

// dst[(o * dim + key) * inner + i] = the sum over the segment of equal keys starting at sorted position p of
// src[(o * count + positions[q]) * inner + i], q ascending, from zero in the compute type. Threads at a position that
// does not start a segment, or whose key is the out-of-range key `dim`, do nothing.
template <typename T>
__global__ void SegmentSumKernel(const T* __restrict__ src, T* __restrict__ dst, const uint64_t* __restrict__ keys,
                                 const int* __restrict__ positions, int64_t outer, int64_t count, int64_t dim,
                                 int64_t inner) {
  using A = ComputeType<T>;
  const int64_t total = outer * count * inner;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = e % inner;
    const int64_t p = (e / inner) % count;
    const int64_t o = e / (inner * count);
    const uint64_t key = keys[p];
    if (key >= static_cast<uint64_t>(dim) || (p > 0 && keys[p - 1] == key)) continue;
    A acc = A(0);
    for (int64_t q = p; q < count && keys[q] == key; ++q) {
      acc += LoadValue<T>(src[(o * count + positions[q]) * inner + i]);
    }
    dst[(o * dim + static_cast<int64_t>(key)) * inner + i] = StoreValue<T>(acc);
  }
}

// The scratch of a sorted scatter of `count` entries with keys in [0, max_key]: keys and positions before (`*_in`,
// which the caller fills) and after (`*_out`) the sort, and the sort's storage.
struct SortScratch {
  int64_t count = 0;
  uint64_t max_key = 0;
  uint64_t* keys_in = nullptr;
  uint64_t* keys_out = nullptr;
  int* positions_in = nullptr;
  int* positions_out = nullptr;
  void* temp = nullptr;
  size_t temp_bytes = 0;
};

// Takes the scratch for `count` entries (Unimplemented above 2^31 - 1, what cub's sort takes) from `scratch`.
inline StatusOr<SortScratch> MakeSortScratch(int64_t count, uint64_t max_key, const GradScratchFn& scratch,
                                             std::string_view what) {
  if (count > INT_MAX) {
    return Unimplemented(what, ": ", count, " indices are above the 2^31 - 1 the cuda sort takes");
  }
  SortScratch s;
  s.count = count;
  s.max_key = max_key;
  ONNXAMP_CUDA_RETURN_IF_ERROR(cub::DeviceRadixSort::SortPairs(
                                   nullptr, s.temp_bytes, static_cast<const uint64_t*>(nullptr),
                                   static_cast<uint64_t*>(nullptr), static_cast<const int*>(nullptr),
                                   static_cast<int*>(nullptr), static_cast<int>(count), 0, KeyBits(max_key), nullptr),
                               what, ": sort storage size");
  const size_t key_bytes = Align256(static_cast<size_t>(count) * sizeof(uint64_t));
  const size_t pos_bytes = Align256(static_cast<size_t>(count) * sizeof(int));
  ONNXAMP_ASSIGN_OR_RETURN(void* base_ptr, scratch(2 * key_bytes + 2 * pos_bytes + s.temp_bytes));
  char* base = static_cast<char*>(base_ptr);
  s.keys_in = reinterpret_cast<uint64_t*>(base);
  s.keys_out = reinterpret_cast<uint64_t*>(base + key_bytes);
  s.positions_in = reinterpret_cast<int*>(base + 2 * key_bytes);
  s.positions_out = reinterpret_cast<int*>(base + 2 * key_bytes + pos_bytes);
  s.temp = base + 2 * key_bytes + 2 * pos_bytes;
  return s;
}

// Sorts the filled keys_in/positions_in of `s` stably by key into keys_out/positions_out.
inline Status SortKeys(const SortScratch& s, cudaStream_t stream, std::string_view what) {
  size_t temp_bytes = s.temp_bytes;
  ONNXAMP_CUDA_RETURN_IF_ERROR(
      cub::DeviceRadixSort::SortPairs(s.temp, temp_bytes, s.keys_in, s.keys_out, s.positions_in, s.positions_out,
                                      static_cast<int>(s.count), 0, KeyBits(s.max_key), stream),
      what, ": sort of ", s.count, " indices");
  return Status::Ok();
}

// Element keys of `count` int32/int64 indices (ElementKeysKernel) into s, then the sort.
inline Status SortElementKeys(const SortScratch& s, const void* indices, bool indices_int64, const ElementKeyArgs& a,
                              uint64_t invalid_key, cudaStream_t stream, std::string_view what) {
  if (indices_int64) {
    ElementKeysKernel<int64_t><<<GridFor(s.count), kThreadsPerBlock, 0, stream>>>(
        static_cast<const int64_t*>(indices), s.count, a, invalid_key, s.keys_in, s.positions_in);
  } else {
    ElementKeysKernel<int32_t><<<GridFor(s.count), kThreadsPerBlock, 0, stream>>>(
        static_cast<const int32_t*>(indices), s.count, a, invalid_key, s.keys_in, s.positions_in);
  }
  ONNXAMP_RETURN_IF_ERROR(CheckLaunch(what));
  return SortKeys(s, stream, what);
}

}  // namespace onnxamp::cuda::segments
