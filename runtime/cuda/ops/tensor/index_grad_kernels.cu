// CUDA kernels of the index and movement gradient ops (declared in index_grad_launch.h).
//
// Scatter-adds with repeated targets (GatherGrad, GatherElementsGrad) are made deterministic by sorting: each source
// position gets a key (its target row or element; invalid indices get a key past the end), a stable radix sort
// groups equal keys with their source positions still ascending, and one thread per (segment, inner element) sums
// its segment in that order from zero: exactly the CPU reference's order of additions. The inverse-map adjoints
// (PadGrad, ResizeGrad nearest, and the per-axis linear/cubic passes) are gathers instead: one thread per dX element
// walks the output positions that read it, from host-built inverse tables, in the CPU's order.
#include <cstdint>
#include <type_traits>

#include "runtime/cuda/ops/cuda_common.cuh"
#include "runtime/cuda/ops/tensor/index_grad_launch.h"
#include "runtime/cuda/ops/tensor/sorted_segments.cuh"

namespace onnxamp::cuda {
namespace {

using segments::MakeSortScratch;
using segments::SegmentSumKernel;
using segments::SortKeys;
using segments::SortScratch;
using segments::WrapIndex;

// GatherGrad keys: the row each index selects, or `dim` when it is out of range.
template <typename I>
__global__ void GatherGradKeysKernel(const I* __restrict__ indices, int64_t count, int64_t dim,
                                     uint64_t* __restrict__ keys, int* __restrict__ positions) {
  for (int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < count;
       j += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = WrapIndex(indices[j], dim);
    keys[j] = static_cast<uint64_t>(r >= 0 && r < dim ? r : dim);
    positions[j] = static_cast<int>(j);
  }
}

// dX[v] for v over in_dims: the sum of dY over the product of the per-axis lists of output indices that read v.
template <typename T>
__global__ void MapAdjointKernel(const T* __restrict__ dy, T* __restrict__ dx, const int64_t* __restrict__ table,
                                 MapAdjointArgs a, int64_t total) {
  using A = ComputeType<T>;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t begin[kMaxGradRank], end[kMaxGradRank], at[kMaxGradRank];
    int64_t rest = e;
    bool empty = false;
    for (int k = a.rank - 1; k >= 0; --k) {
      const int64_t v = rest % a.in_dims[k];
      rest /= a.in_dims[k];
      begin[k] = table[a.starts[k] + v];
      end[k] = table[a.starts[k] + v + 1];
      at[k] = begin[k];
      empty |= begin[k] == end[k];
    }
    A acc = A(0);
    // Odometer over the lists, last axis fastest: ascending flat dY positions.
    while (!empty) {
      int64_t flat = 0;
      for (int k = 0; k < a.rank; ++k) flat += table[a.offsets[k] + at[k]] * a.dy_strides[k];
      acc += LoadValue<T>(dy[flat]);
      int k = a.rank - 1;
      for (; k >= 0; --k) {
        if (++at[k] < end[k]) break;
        at[k] = begin[k];
      }
      if (k < 0) break;
    }
    dx[e] = StoreValue<T>(acc);
  }
}

template <typename C>
__device__ __forceinline__ C MulRn(C a, C b) {
  if constexpr (std::is_same_v<C, double>) {
    return __dmul_rn(a, b);
  } else {
    return __fmul_rn(a, b);
  }
}
template <typename C>
__device__ __forceinline__ C AddRn(C a, C b) {
  if constexpr (std::is_same_v<C, double>) {
    return __dadd_rn(a, b);
  } else {
    return __fadd_rn(a, b);
  }
}

// One transposed separable pass: S is the source element type, D the destination's, C the compute type.
template <typename S, typename D, typename C>
__global__ void ResizeAdjointPassKernel(const S* __restrict__ src, D* __restrict__ dst, ResizeAdjointPassArgs a,
                                        const C* __restrict__ weights) {
  const int64_t total = a.outer * a.in * a.inner;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = e % a.inner;
    const int64_t v = (e / a.inner) % a.in;
    const int64_t b = e / (a.inner * a.in);
    C acc = C(0);
    for (int64_t t = a.bounds[v]; t < a.bounds[v + 1]; ++t) {
      const C s = static_cast<C>(LoadValue<S>(src[(b * a.out + a.entry_o[t]) * a.inner + i]));
      acc = AddRn(acc, MulRn(weights[t], s));
    }
    if constexpr (std::is_same_v<D, C>) {
      dst[e] = acc;
    } else {
      dst[e] = StoreValue<D>(acc);
    }
  }
}

}  // namespace

Status LaunchGatherGrad(DType dtype, void* dx, const void* dy, const void* indices, bool indices_int64, int64_t outer,
                        int64_t dim, int64_t count, int64_t inner, const GradScratchFn& scratch, cudaStream_t stream) {
  const size_t elem = static_cast<size_t>(DTypeBits(dtype) / 8);
  const int64_t dx_count = outer * dim * inner;
  if (dx_count == 0) return Status::Ok();
  ONNXAMP_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(dx, 0, static_cast<size_t>(dx_count) * elem, stream), "GatherGrad");
  if (count == 0 || outer * inner == 0) return Status::Ok();
  ONNXAMP_ASSIGN_OR_RETURN(const SortScratch s,
                           MakeSortScratch(count, static_cast<uint64_t>(dim), scratch, "GatherGrad"));
  if (indices_int64) {
    GatherGradKeysKernel<int64_t><<<GridFor(count), kThreadsPerBlock, 0, stream>>>(
        static_cast<const int64_t*>(indices), count, dim, s.keys_in, s.positions_in);
  } else {
    GatherGradKeysKernel<int32_t><<<GridFor(count), kThreadsPerBlock, 0, stream>>>(
        static_cast<const int32_t*>(indices), count, dim, s.keys_in, s.positions_in);
  }
  ONNXAMP_RETURN_IF_ERROR(CheckLaunch("GatherGrad keys"));
  ONNXAMP_RETURN_IF_ERROR(SortKeys(s, stream, "GatherGrad"));
  return DispatchFloat(dtype, "GatherGrad", [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    SegmentSumKernel<T><<<GridFor(outer * count * inner), kThreadsPerBlock, 0, stream>>>(
        static_cast<const T*>(dy), static_cast<T*>(dx), s.keys_out, s.positions_out, outer, count, dim, inner);
    return CheckLaunch("GatherGrad");
  });
}

Status LaunchGatherElementsGrad(DType dtype, void* dx, const void* dy, const void* indices, bool indices_int64,
                                const GatherElementsGradArgs& args, const GradScratchFn& scratch, cudaStream_t stream) {
  const size_t elem = static_cast<size_t>(DTypeBits(dtype) / 8);
  if (args.dx_count == 0) return Status::Ok();
  ONNXAMP_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(dx, 0, static_cast<size_t>(args.dx_count) * elem, stream),
                               "GatherElementsGrad");
  int64_t count = 1;
  for (int k = 0; k < args.rank; ++k) count *= args.idx_dims[k];
  if (count == 0) return Status::Ok();
  ONNXAMP_ASSIGN_OR_RETURN(const SortScratch s,
                           MakeSortScratch(count, static_cast<uint64_t>(args.dx_count), scratch, "GatherElementsGrad"));
  ONNXAMP_RETURN_IF_ERROR(segments::SortElementKeys(
      s, indices, indices_int64, args, static_cast<uint64_t>(args.dx_count), stream, "GatherElementsGrad"));
  // Every dY element is its own row: outer = inner = 1, the "rows" of dX are its elements.
  return DispatchFloat(dtype, "GatherElementsGrad", [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    SegmentSumKernel<T><<<GridFor(count), kThreadsPerBlock, 0, stream>>>(
        static_cast<const T*>(dy), static_cast<T*>(dx), s.keys_out, s.positions_out, 1, count, args.dx_count, 1);
    return CheckLaunch("GatherElementsGrad");
  });
}

Status LaunchMapAdjoint(DType dtype, void* dx, const void* dy, const int64_t* table, const MapAdjointArgs& args,
                        cudaStream_t stream) {
  int64_t total = 1;
  for (int k = 0; k < args.rank; ++k) total *= args.in_dims[k];
  if (total == 0) return Status::Ok();
  return DispatchFloat(dtype, "gradient gather", [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    MapAdjointKernel<T><<<GridFor(total), kThreadsPerBlock, 0, stream>>>(static_cast<const T*>(dy), static_cast<T*>(dx),
                                                                         table, args, total);
    return CheckLaunch("gradient gather");
  });
}

Status LaunchResizeAdjointPass(DType dtype, void* dst, const void* src, const ResizeAdjointPassArgs& args,
                               cudaStream_t stream) {
  const int64_t total = args.outer * args.in * args.inner;
  if (total == 0) return Status::Ok();
  return DispatchFloat(dtype, "ResizeGrad", [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    using C = ComputeType<T>;
    const C* w = static_cast<const C*>(args.entry_w);
    const unsigned int grid = GridFor(total);
    if (args.src_is_storage && args.dst_is_storage) {
      ResizeAdjointPassKernel<T, T, C>
          <<<grid, kThreadsPerBlock, 0, stream>>>(static_cast<const T*>(src), static_cast<T*>(dst), args, w);
    } else if (args.src_is_storage) {
      ResizeAdjointPassKernel<T, C, C>
          <<<grid, kThreadsPerBlock, 0, stream>>>(static_cast<const T*>(src), static_cast<C*>(dst), args, w);
    } else if (args.dst_is_storage) {
      ResizeAdjointPassKernel<C, T, C>
          <<<grid, kThreadsPerBlock, 0, stream>>>(static_cast<const C*>(src), static_cast<T*>(dst), args, w);
    } else {
      ResizeAdjointPassKernel<C, C, C>
          <<<grid, kThreadsPerBlock, 0, stream>>>(static_cast<const C*>(src), static_cast<C*>(dst), args, w);
    }
    return CheckLaunch("ResizeGrad");
  });
}

}  // namespace onnxamp::cuda
