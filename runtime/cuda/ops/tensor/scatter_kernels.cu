// CUDA kernels of GatherND, ScatterND, ScatterElements and GatherNDGrad (declared in scatter_launch.h). The scatters
// sort their sources by destination (sorted_segments.cuh) and apply each destination's sources in index order; see
// scatter_launch.h for what happens to an index out of range.
#include <cstdint>
#include <type_traits>

#include "runtime/cuda/ops/cuda_common.cuh"
#include "runtime/cuda/ops/tensor/scatter_launch.h"
#include "runtime/cuda/ops/tensor/sorted_segments.cuh"
#include "runtime/ops/common/wrap_arith.h"

namespace onnxamp::cuda {
namespace {

using ::onnxamp::ops::WrapType;
using segments::MakeSortScratch;
using segments::SortScratch;

// The data row index tuple t addresses, or -1 when a coordinate is out of range.
template <typename I>
__device__ __forceinline__ int64_t TupleRow(const I* __restrict__ indices, int64_t t, const NdIndexArgs& a) {
  const I* c = indices + t * a.m;
  int64_t row = (t / a.tuples) * a.batch_rows;
  for (int j = 0; j < a.m; ++j) {
    const int64_t v = segments::WrapIndex(c[j], a.dims[j]);
    if (v < 0 || v >= a.dims[j]) return -1;
    row += v * a.row_strides[j];
  }
  return row;
}

template <typename I, typename U>
__global__ void GatherNDKernel(U* __restrict__ dst, const U* __restrict__ src, const I* __restrict__ indices,
                               NdIndexArgs a, int64_t count, int64_t slice_units) {
  const int64_t total = count * slice_units;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = TupleRow(indices, e / slice_units, a);
    dst[e] = row < 0 ? U{} : src[row * slice_units + e % slice_units];
  }
}

// Keys of the tuples: the row each addresses, or a.rows.
template <typename I>
__global__ void TupleKeysKernel(const I* __restrict__ indices, NdIndexArgs a, int64_t count,
                                uint64_t* __restrict__ keys, int* __restrict__ positions) {
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < count;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = TupleRow(indices, t, a);
    keys[t] = static_cast<uint64_t>(row < 0 ? a.rows : row);
    positions[t] = static_cast<int>(t);
  }
}

// Sorted tuple keys for `count` tuples into a fresh scratch.
StatusOr<SortScratch> SortTuples(const void* indices, bool indices_int64, const NdIndexArgs& a, int64_t count,
                                 const GradScratchFn& scratch, cudaStream_t stream, std::string_view what) {
  ONNXAMP_ASSIGN_OR_RETURN(const SortScratch s, MakeSortScratch(count, static_cast<uint64_t>(a.rows), scratch, what));
  if (indices_int64) {
    TupleKeysKernel<int64_t><<<GridFor(count), kThreadsPerBlock, 0, stream>>>(static_cast<const int64_t*>(indices), a,
                                                                              count, s.keys_in, s.positions_in);
  } else {
    TupleKeysKernel<int32_t><<<GridFor(count), kThreadsPerBlock, 0, stream>>>(static_cast<const int32_t*>(indices), a,
                                                                              count, s.keys_in, s.positions_in);
  }
  ONNXAMP_RETURN_IF_ERROR(CheckLaunch(what));
  ONNXAMP_RETURN_IF_ERROR(segments::SortKeys(s, stream, what));
  return s;
}

// dst combined with src as scatter_cpu.cc's Combine does it: fp16/bf16 in float and rounded, integers wrapping, max
// and min keeping dst only when it wins the comparison (a NaN in dst is replaced, one in src kept), bool OR/AND.
template <ScatterCombine R, typename T>
__device__ __forceinline__ T CombineValue(T dst, T src) {
  if constexpr (std::is_same_v<T, bool>) {
    return R == ScatterCombine::kAdd || R == ScatterCombine::kMax ? (dst || src) : (dst && src);
  } else {
    using C = ComputeType<T>;
    const C a = LoadValue<T>(dst), b = LoadValue<T>(src);
    C v = b;
    if constexpr (R == ScatterCombine::kAdd) {
      v = static_cast<C>(static_cast<WrapType<C>>(a) + static_cast<WrapType<C>>(b));
    } else if constexpr (R == ScatterCombine::kMul) {
      // Integers narrower than int multiply in unsigned int (ops::WrapMul).
      using M = std::conditional_t<std::is_integral_v<C> && (sizeof(C) < sizeof(int)), unsigned, WrapType<C>>;
      v = static_cast<C>(static_cast<M>(a) * static_cast<M>(b));
    } else if constexpr (R == ScatterCombine::kMax) {
      v = a > b ? a : b;
    } else if constexpr (R == ScatterCombine::kMin) {
      v = a < b ? a : b;
    }
    return StoreValue<T>(v);
  }
}

// out[key * inner + i] for each segment of equal sorted keys (below `rows`): without a reduction the segment's last
// source, else data's value combined with each source of the segment in order.
template <ScatterCombine R, typename T>
__global__ void ScatterSegmentKernel(T* __restrict__ out, const T* __restrict__ updates,
                                     const uint64_t* __restrict__ keys, const int* __restrict__ positions,
                                     int64_t count, int64_t rows, int64_t inner) {
  const int64_t total = count * inner;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = e % inner;
    const int64_t p = e / inner;
    const uint64_t key = keys[p];
    if (key >= static_cast<uint64_t>(rows) || (p > 0 && keys[p - 1] == key)) continue;
    T* dst = out + static_cast<int64_t>(key) * inner + i;
    if constexpr (R == ScatterCombine::kNone) {
      int64_t q = p;
      while (q + 1 < count && keys[q + 1] == key) ++q;
      *dst = updates[static_cast<int64_t>(positions[q]) * inner + i];
    } else {
      T acc = *dst;
      for (int64_t q = p; q < count && keys[q] == key; ++q) {
        acc = CombineValue<R>(acc, updates[static_cast<int64_t>(positions[q]) * inner + i]);
      }
      *dst = acc;
    }
  }
}

// Applies the sorted sources of `s` to out [rows, inner].
Status ApplyScatter(DType dtype, ScatterCombine combine, void* out, const void* updates, const SortScratch& s,
                    int64_t rows, int64_t inner, cudaStream_t stream, std::string_view what) {
  const unsigned int grid = GridFor(s.count * inner);
  if (combine == ScatterCombine::kNone) {
    return DispatchBySize(dtype, what, [&](auto tag) -> Status {
      using U = typename decltype(tag)::type;
      ScatterSegmentKernel<ScatterCombine::kNone, U><<<grid, kThreadsPerBlock, 0, stream>>>(
          static_cast<U*>(out), static_cast<const U*>(updates), s.keys_out, s.positions_out, s.count, rows, inner);
      return CheckLaunch(what);
    });
  }
  return DispatchNumericOrBool(dtype, what, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    auto launch = [&](auto kernel) {
      kernel<<<grid, kThreadsPerBlock, 0, stream>>>(static_cast<T*>(out), static_cast<const T*>(updates), s.keys_out,
                                                    s.positions_out, s.count, rows, inner);
      return CheckLaunch(what);
    };
    switch (combine) {
      case ScatterCombine::kAdd:
        return launch(ScatterSegmentKernel<ScatterCombine::kAdd, T>);
      case ScatterCombine::kMul:
        return launch(ScatterSegmentKernel<ScatterCombine::kMul, T>);
      case ScatterCombine::kMax:
        return launch(ScatterSegmentKernel<ScatterCombine::kMax, T>);
      default:
        return launch(ScatterSegmentKernel<ScatterCombine::kMin, T>);
    }
  });
}

}  // namespace

Status LaunchGatherND(void* dst, const void* data, const void* indices, bool indices_int64, const NdIndexArgs& args,
                      int64_t count, int64_t slice_units, size_t unit, cudaStream_t stream) {
  const int64_t total = count * slice_units;
  if (total == 0) return Status::Ok();
  return DispatchBySize(unit, "GatherND", [&](auto tag) -> Status {
    using U = typename decltype(tag)::type;
    if (indices_int64) {
      GatherNDKernel<int64_t, U><<<GridFor(total), kThreadsPerBlock, 0, stream>>>(
          static_cast<U*>(dst), static_cast<const U*>(data), static_cast<const int64_t*>(indices), args, count,
          slice_units);
    } else {
      GatherNDKernel<int32_t, U><<<GridFor(total), kThreadsPerBlock, 0, stream>>>(
          static_cast<U*>(dst), static_cast<const U*>(data), static_cast<const int32_t*>(indices), args, count,
          slice_units);
    }
    return CheckLaunch("GatherND");
  });
}

Status LaunchGatherNDGrad(DType dtype, void* dx, const void* dy, const void* indices, bool indices_int64,
                          const NdIndexArgs& args, int64_t count, int64_t slice, const GradScratchFn& scratch,
                          cudaStream_t stream) {
  const int64_t dx_count = args.rows * slice;
  if (dx_count == 0) return Status::Ok();
  const size_t elem = static_cast<size_t>(DTypeBits(dtype) / 8);
  ONNXAMP_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(dx, 0, static_cast<size_t>(dx_count) * elem, stream), "GatherNDGrad");
  if (count == 0) return Status::Ok();
  ONNXAMP_ASSIGN_OR_RETURN(const SortScratch s,
                           SortTuples(indices, indices_int64, args, count, scratch, stream, "GatherNDGrad"));
  return DispatchFloat(dtype, "GatherNDGrad", [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    segments::SegmentSumKernel<T><<<GridFor(count * slice), kThreadsPerBlock, 0, stream>>>(
        static_cast<const T*>(dy), static_cast<T*>(dx), s.keys_out, s.positions_out, 1, count, args.rows, slice);
    return CheckLaunch("GatherNDGrad");
  });
}

Status LaunchScatterND(DType dtype, ScatterCombine combine, void* out, const void* updates, const void* indices,
                       bool indices_int64, const NdIndexArgs& args, int64_t count, int64_t slice,
                       const GradScratchFn& scratch, cudaStream_t stream) {
  if (count == 0 || slice == 0) return Status::Ok();
  ONNXAMP_ASSIGN_OR_RETURN(const SortScratch s,
                           SortTuples(indices, indices_int64, args, count, scratch, stream, "ScatterND"));
  return ApplyScatter(dtype, combine, out, updates, s, args.rows, slice, stream, "ScatterND");
}

Status LaunchScatterElements(DType dtype, ScatterCombine combine, void* out, const void* updates, const void* indices,
                             bool indices_int64, const GatherElementsGradArgs& args, const GradScratchFn& scratch,
                             cudaStream_t stream) {
  int64_t count = 1;
  for (int k = 0; k < args.rank; ++k) count *= args.idx_dims[k];
  if (count == 0 || args.dx_count == 0) return Status::Ok();
  ONNXAMP_ASSIGN_OR_RETURN(const SortScratch s,
                           MakeSortScratch(count, static_cast<uint64_t>(args.dx_count), scratch, "ScatterElements"));
  ONNXAMP_RETURN_IF_ERROR(segments::SortElementKeys(s, indices, indices_int64, args,
                                                    static_cast<uint64_t>(args.dx_count), stream, "ScatterElements"));
  return ApplyScatter(dtype, combine, out, updates, s, args.dx_count, 1, stream, "ScatterElements");
}

}  // namespace onnxamp::cuda
