// The CUDA reduction engine behind Reduce*: a reduction laid out as in ReduceLayout (norm_reduce_launch.h) is run by
//   - the row kernel when the innermost merged dimension is reduced: a group of threads (8 lanes, a warp or the
//     block, by the run length) folds each output with shuffles;
//   - the column kernel when it is kept: one thread per output, consecutive threads on consecutive outputs so that
//     loads coalesce, each looping over the reduced index space.
// When there are too few outputs to fill the device, the reduced index space is split into chunks: the kernels
// write per-chunk partial accumulators to scratch and a third kernel folds them in chunk order and finishes.
// Ops follow the CPU kernel (runtime/ops/reduce/reduce_cpu.cc): Init/Map/Combine on an accumulator type A, then a
// finish step (mean, sqrt, log, log + shift) and the store to the output type.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "runtime/cuda/ops/cuda_common.cuh"
#include "runtime/cuda/ops/norm_reduce/norm_reduce_device.cuh"
#include "runtime/cuda/ops/norm_reduce/norm_reduce_launch.h"

namespace onnxamp::cuda::norm_reduce {

template <typename T>
inline constexpr bool kIsInt = std::is_integral_v<T> && !std::is_same_v<T, bool>;

// Accumulators as on the CPU: integer sums in 64 bits (wrapping), float sums in the compute type; real-valued
// results of integers (L2, LogSum, LogSumExp) in double; extremes of bool in uint8.
template <typename T>
using SumAcc = std::conditional_t<kIsInt<T>, std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>,
                                  std::conditional_t<std::is_same_v<T, bool>, uint8_t, ComputeType<T>>>;
template <typename T>
using RealAcc = std::conditional_t<kIsInt<T>, double, ComputeType<T>>;
template <typename T>
using ExtremeAcc = std::conditional_t<std::is_same_v<T, bool>, uint8_t, ComputeType<T>>;

enum class MapKind { kIdentity, kSquare, kAbs, kExpShifted };
enum class CombineKind { kAdd, kMul, kMax, kMin };
enum class FinishKind { kNone, kMean, kSqrt, kLog, kLogShift };

// Integer sums and products wrap (two's complement) instead of overflowing.
template <typename A>
__device__ __forceinline__ A WrapAdd(A a, A b) {
  if constexpr (std::is_integral_v<A> && std::is_signed_v<A>) {
    using U = std::make_unsigned_t<A>;
    return static_cast<A>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}
template <typename A>
__device__ __forceinline__ A WrapMul(A a, A b) {
  if constexpr (std::is_integral_v<A> && std::is_signed_v<A>) {
    using U = std::make_unsigned_t<A>;
    return static_cast<A>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return a * b;
  }
}

template <typename T, typename A, MapKind M, CombineKind C>
struct ReduceOp {
  using Acc = A;
  const A* shift = nullptr;  // kExpShifted: per-output value subtracted before exp

  __device__ __forceinline__ A Init() const {
    if constexpr (C == CombineKind::kAdd) {
      return A(0);
    } else if constexpr (C == CombineKind::kMul) {
      return A(1);
    } else if constexpr (C == CombineKind::kMax) {
      if constexpr (std::numeric_limits<A>::has_infinity) {
        return -std::numeric_limits<A>::infinity();
      } else {
        return std::numeric_limits<A>::lowest();
      }
    } else {
      if constexpr (std::numeric_limits<A>::has_infinity) {
        return std::numeric_limits<A>::infinity();
      } else {
        return std::numeric_limits<A>::max();
      }
    }
  }

  __device__ __forceinline__ A Map(T v, int64_t o) const {
    const A a = static_cast<A>(LoadValue<T>(v));
    if constexpr (M == MapKind::kIdentity) {
      return a;
    } else if constexpr (M == MapKind::kSquare) {
      return WrapMul(a, a);
    } else if constexpr (M == MapKind::kAbs) {
      if constexpr (std::is_unsigned_v<A>) {
        return a;
      } else {
        return a < A(0) ? WrapMul(a, A(-1)) : a;
      }
    } else {
      return ExpOf<A>(a - shift[o]);
    }
  }

  __device__ __forceinline__ A Combine(A a, A b) const {
    if constexpr (C == CombineKind::kAdd) {
      return WrapAdd(a, b);
    } else if constexpr (C == CombineKind::kMul) {
      return WrapMul(a, b);
    } else if constexpr (C == CombineKind::kMax) {
      return MaxNan(a, b);
    } else {
      return MinNan(a, b);
    }
  }
};

// The finish step and the store of an accumulator as the output type Out (rounded to nearest even for fp16/bf16,
// saturated with NaN -> 0 when a real value goes to an integer type).
template <typename Out, typename A>
struct Finisher {
  FinishKind kind = FinishKind::kNone;
  int64_t n = 1;             // reduce count, for kMean
  const A* shift = nullptr;  // kLogShift: the per-output maxima

  __device__ __forceinline__ Out operator()(A v, int64_t o) const {
    if constexpr (std::is_floating_point_v<A>) {
      switch (kind) {
        case FinishKind::kMean:
          v = v / static_cast<A>(n);  // 0/0 = NaN for an empty set
          break;
        case FinishKind::kSqrt:
          v = SqrtOf(v);
          break;
        case FinishKind::kLog:
          v = LogOf(v);
          break;
        case FinishKind::kLogShift: {
          const A m = shift[o];
          v = isfinite(m) ? LogOf(v) + m : m;  // a non-finite maximum decides the result by itself
          break;
        }
        default:
          break;
      }
    } else if constexpr (kIsInt<A>) {
      if (kind == FinishKind::kMean) v = n == 0 ? A(0) : static_cast<A>(v / static_cast<A>(n));
    }
    return StoreAs(v);
  }

  __device__ __forceinline__ static Out StoreAs(A v) {
    if constexpr (std::is_same_v<Out, bool>) {
      return v != A(0);
    } else if constexpr (kIsInt<Out> && std::is_floating_point_v<A>) {
      if (v != v) return Out(0);
      if (v <= static_cast<A>(std::numeric_limits<Out>::lowest())) return std::numeric_limits<Out>::lowest();
      if (v >= static_cast<A>(std::numeric_limits<Out>::max())) return std::numeric_limits<Out>::max();
      return static_cast<Out>(v);
    } else if constexpr (std::is_same_v<Out, A>) {
      return v;
    } else {
      return StoreValue<Out>(static_cast<ComputeType<Out>>(v));
    }
  }
};

// Offset of `index` decomposed row-major over (dims, strides)[0..rank).
__device__ __forceinline__ int64_t MergedOffset(const int64_t* dims, const int64_t* strides, int rank, int64_t index) {
  int64_t offset = 0;
  for (int d = rank - 1; d >= 0; --d) {
    const int64_t i = index % dims[d];
    index /= dims[d];
    offset += i * strides[d];
  }
  return offset;
}

// Inner dimension reduced. Each item (output o, chunk c) is folded by a group of `group` threads over the reduced
// positions [c * chunk_len, min(total, (c + 1) * chunk_len)) of its total = red_count * inner positions.
template <typename T, typename Out, typename Op>
__global__ void RowReduceKernel(const T* __restrict__ x, Out* __restrict__ y, typename Op::Acc* __restrict__ partial,
                                ReduceLayout L, int64_t total, int64_t chunks, int64_t chunk_len, Op op,
                                Finisher<Out, typename Op::Acc> fin, int group) {
  using A = typename Op::Acc;
  __shared__ A smem[kRowBlock / kWarp];
  const int per_block = blockDim.x / group;
  const int gid = threadIdx.x / group, lane = threadIdx.x % group;
  const int64_t items = L.out_count * chunks;
  auto combine = [&op](A a, A b) { return op.Combine(a, b); };
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * per_block; base < items;
       base += static_cast<int64_t>(gridDim.x) * per_block) {
    const int64_t item = base + gid;
    const bool active = item < items;
    const int64_t o = active ? item / chunks : 0;
    const int64_t c = active ? item % chunks : 0;
    const int64_t f0 = c * chunk_len;
    const int64_t f1 = active ? min(total, f0 + chunk_len) : f0;
    const T* row = x + MergedOffset(L.kept_dims, L.kept_strides, L.kept_rank, o);
    A acc = op.Init();
    if (L.red_rank == 0) {
      for (int64_t f = f0 + lane; f < f1; f += group) acc = op.Combine(acc, op.Map(row[f], o));
    } else {
      for (int64_t f = f0 + lane; f < f1; f += group) {
        const int64_t r = f / L.inner, j = f - r * L.inner;
        acc = op.Combine(acc, op.Map(row[MergedOffset(L.red_dims, L.red_strides, L.red_rank, r) + j], o));
      }
    }
    acc = GroupReduce(acc, group, combine, smem);
    if (active && lane == 0) {
      if (partial) {
        partial[item] = acc;
      } else {
        y[o] = fin(acc, o);
      }
    }
  }
}

// Inner dimension kept. Thread per (output o, chunk c) folding the reduced runs [c * chunk_len, ...) of red_count.
template <typename T, typename Out, typename Op>
__global__ void ColumnReduceKernel(const T* __restrict__ x, Out* __restrict__ y, typename Op::Acc* __restrict__ partial,
                                   ReduceLayout L, int64_t red_count, int64_t chunks, int64_t chunk_len, Op op,
                                   Finisher<Out, typename Op::Acc> fin) {
  using A = typename Op::Acc;
  const int64_t outs = L.out_count;
  for (int64_t c = blockIdx.y; c < chunks; c += gridDim.y) {
    const int64_t r0 = c * chunk_len;
    const int64_t r1 = min(red_count, r0 + chunk_len);
    for (int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < outs;
         o += static_cast<int64_t>(gridDim.x) * blockDim.x) {
      const int64_t k = o / L.inner, i = o - k * L.inner;
      const T* col = x + MergedOffset(L.kept_dims, L.kept_strides, L.kept_rank, k) + i;
      A acc = op.Init();
      if (L.red_rank == 1) {
        const int64_t stride = L.red_strides[0];
        for (int64_t r = r0; r < r1; ++r) acc = op.Combine(acc, op.Map(col[r * stride], o));
      } else {
        for (int64_t r = r0; r < r1; ++r) {
          acc = op.Combine(acc, op.Map(col[MergedOffset(L.red_dims, L.red_strides, L.red_rank, r)], o));
        }
      }
      if (partial) {
        partial[o * chunks + c] = acc;
      } else {
        y[o] = fin(acc, o);
      }
    }
  }
}

// y[o] = fin(partial[o * chunks + 0] combined with ... partial[o * chunks + chunks - 1]), in chunk order.
template <typename Out, typename Op>
__global__ void CombinePartialsKernel(const typename Op::Acc* __restrict__ partial, Out* __restrict__ y, int64_t outs,
                                      int64_t chunks, Op op, Finisher<Out, typename Op::Acc> fin) {
  using A = typename Op::Acc;
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < outs;
       o += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const A* p = partial + o * chunks;
    A acc = p[0];
    for (int64_t c = 1; c < chunks; ++c) acc = op.Combine(acc, p[c]);
    y[o] = fin(acc, o);
  }
}

// How the reduced index space of a layout is split: `chunks` pieces of `chunk_len` (1 piece when the outputs alone
// fill the device or the reduction is short).
struct ChunkPlan {
  int64_t chunks = 1;
  int64_t chunk_len = 0;
  int group = kWarp;  // row kernel: threads per item
};

inline constexpr int64_t kTargetThreads = int64_t{1} << 18;  // enough resident threads to fill an H100
inline constexpr int64_t kMinRowChunk = 4096;                // reduced positions per row-kernel chunk, at least
inline constexpr int64_t kMinColumnChunk = 32;               // reduced runs per column-kernel chunk, at least
inline constexpr int64_t kMaxGridY = 65535;

inline int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

inline ChunkPlan PlanChunks(const ReduceLayout& L) {
  ChunkPlan p;
  const int64_t outs = std::max<int64_t>(L.out_count, 1);
  const int64_t len = L.reduce_count;  // row: positions per output; column: runs per output
  if (L.inner_reduced) {
    if (outs * GroupForRow(len) < kTargetThreads && len >= 2 * kMinRowChunk) {
      p.chunks = std::min(len / kMinRowChunk, CeilDiv(kTargetThreads, outs * kRowBlock));
      p.chunks = std::max<int64_t>(p.chunks, 1);
    }
  } else if (outs < kTargetThreads && len >= 2 * kMinColumnChunk) {
    p.chunks = std::max<int64_t>(1, std::min({len / kMinColumnChunk, CeilDiv(kTargetThreads, outs), kMaxGridY}));
  }
  p.chunk_len = p.chunks == 1 ? len : CeilDiv(len, p.chunks);
  if (p.chunk_len > 0) p.chunks = CeilDiv(len, p.chunk_len);
  p.group = GroupForRow(p.chunk_len);
  return p;
}

// Bytes of partial accumulators a reduction of `layout` with accumulators of acc_size bytes needs (0: none).
inline size_t PartialBytes(const ReduceLayout& L, size_t acc_size) {
  const ChunkPlan p = PlanChunks(L);
  return p.chunks > 1 ? static_cast<size_t>(L.out_count * p.chunks) * acc_size : 0;
}

// Runs the reduction of x under L with `op`, finishing into y. `partial` holds PartialBytes(L, sizeof(Acc)) bytes.
template <typename T, typename Out, typename Op>
Status RunReduceEngine(const T* x, Out* y, const ReduceLayout& L, const Op& op,
                       const Finisher<Out, typename Op::Acc>& fin, typename Op::Acc* partial, cudaStream_t stream,
                       const char* what) {
  const int64_t outs = L.out_count;
  if (outs == 0) return Status::Ok();
  const ChunkPlan p = PlanChunks(L);
  typename Op::Acc* part = p.chunks > 1 ? partial : nullptr;
  if (p.chunks > 1 && partial == nullptr) return Internal(what, ": no scratch for partial results");
  if (L.inner_reduced) {
    RowReduceKernel<T, Out, Op><<<RowBlocks(outs * p.chunks, p.group), kRowBlock, 0, stream>>>(
        x, y, part, L, L.reduce_count, p.chunks, p.chunk_len, op, fin, p.group);
  } else {
    const dim3 grid(GridFor(outs), static_cast<unsigned int>(std::min(p.chunks, kMaxGridY)));
    ColumnReduceKernel<T, Out, Op>
        <<<grid, kThreadsPerBlock, 0, stream>>>(x, y, part, L, L.reduce_count, p.chunks, p.chunk_len, op, fin);
  }
  ONNXAMP_RETURN_IF_ERROR(CheckLaunch(what));
  if (part) {
    CombinePartialsKernel<Out, Op><<<GridFor(outs), kThreadsPerBlock, 0, stream>>>(part, y, outs, p.chunks, op, fin);
    ONNXAMP_RETURN_IF_ERROR(CheckLaunch(what));
  }
  return Status::Ok();
}

}  // namespace onnxamp::cuda::norm_reduce
