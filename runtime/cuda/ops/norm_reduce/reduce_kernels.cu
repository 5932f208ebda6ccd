// CUDA launchers for Reduce* (on the engine of reduce_engine.cuh) and ArgMax/ArgMin.
#include <cstdint>
#include <type_traits>

#include "runtime/cuda/ops/cuda_common.cuh"
#include "runtime/cuda/ops/norm_reduce/norm_reduce_device.cuh"
#include "runtime/cuda/ops/norm_reduce/norm_reduce_launch.h"
#include "runtime/cuda/ops/norm_reduce/reduce_engine.cuh"

namespace onnxamp::cuda::norm_reduce {
namespace {

// A one-pass reduction with `op`, finished by `finish`; scratch for partial results when the engine splits.
template <typename T, typename Op>
Status RunOnePass(const void* x, void* y, const ReduceLayout& L, const Op& op, FinishKind finish,
                  const ScratchFn& scratch, cudaStream_t stream) {
  using A = typename Op::Acc;
  const Finisher<T, A> fin{finish, L.reduce_count, nullptr};
  A* partial = nullptr;
  if (const size_t bytes = PartialBytes(L, sizeof(A)); bytes > 0) {
    ONNXAMP_ASSIGN_OR_RETURN(void* p, scratch(bytes));
    partial = static_cast<A*>(p);
  }
  return RunReduceEngine<T, T, Op>(static_cast<const T*>(x), static_cast<T*>(y), L, op, fin, partial, stream, "Reduce");
}

// ReduceLogSumExp: the per-output maximum m (NaN-propagating), then log(sum(exp(x - m))) + m with m replaced by 0
// in the exponent when it is not finite (the result is then m itself), as the CPU kernel does.
template <typename T>
Status RunLogSumExp(const void* x, void* y, const ReduceLayout& L, const ScratchFn& scratch, cudaStream_t stream) {
  using A = RealAcc<T>;
  using MaxOp = ReduceOp<T, A, MapKind::kIdentity, CombineKind::kMax>;
  using SumExpOp = ReduceOp<T, A, MapKind::kExpShifted, CombineKind::kAdd>;
  if (L.out_count == 0) return Status::Ok();
  const size_t max_bytes = AlignScratch(static_cast<size_t>(L.out_count) * sizeof(A));
  const size_t partial_bytes = PartialBytes(L, sizeof(A));
  ONNXAMP_ASSIGN_OR_RETURN(void* base, scratch(max_bytes + partial_bytes));
  A* max = static_cast<A*>(base);
  A* partial = partial_bytes > 0 ? reinterpret_cast<A*>(static_cast<char*>(base) + max_bytes) : nullptr;
  const T* xt = static_cast<const T*>(x);
  const Status st =
      RunReduceEngine<T, A, MaxOp>(xt, max, L, MaxOp{}, Finisher<A, A>{}, partial, stream, "ReduceLogSumExp (maximum)");
  if (!st.ok()) return st;
  SumExpOp sum_exp;
  sum_exp.shift = max;
  const Finisher<T, A> fin{FinishKind::kLogShift, L.reduce_count, max};
  return RunReduceEngine<T, T, SumExpOp>(xt, static_cast<T*>(y), L, sum_exp, fin, partial, stream, "ReduceLogSumExp");
}

template <typename T>
Status RunExtreme(bool max, const void* x, void* y, const ReduceLayout& L, const ScratchFn& scratch,
                  cudaStream_t stream) {
  using A = ExtremeAcc<T>;
  if (max) return RunOnePass<T>(x, y, L, ReduceOp<T, A, MapKind::kIdentity, CombineKind::kMax>{}, {}, scratch, stream);
  return RunOnePass<T>(x, y, L, ReduceOp<T, A, MapKind::kIdentity, CombineKind::kMin>{}, {}, scratch, stream);
}

template <typename T>
Status RunKind(ReduceKind kind, const void* x, void* y, const ReduceLayout& L, const ScratchFn& scratch,
               cudaStream_t stream) {
  using S = SumAcc<T>;
  using R = RealAcc<T>;
  switch (kind) {
    case ReduceKind::kSum:
      return RunOnePass<T>(x, y, L, ReduceOp<T, S, MapKind::kIdentity, CombineKind::kAdd>{}, FinishKind::kNone, scratch,
                           stream);
    case ReduceKind::kMean:
      return RunOnePass<T>(x, y, L, ReduceOp<T, S, MapKind::kIdentity, CombineKind::kAdd>{}, FinishKind::kMean, scratch,
                           stream);
    case ReduceKind::kProd:
      return RunOnePass<T>(x, y, L, ReduceOp<T, S, MapKind::kIdentity, CombineKind::kMul>{}, FinishKind::kNone, scratch,
                           stream);
    case ReduceKind::kL1:
      return RunOnePass<T>(x, y, L, ReduceOp<T, S, MapKind::kAbs, CombineKind::kAdd>{}, FinishKind::kNone, scratch,
                           stream);
    case ReduceKind::kSumSquare:
      return RunOnePass<T>(x, y, L, ReduceOp<T, S, MapKind::kSquare, CombineKind::kAdd>{}, FinishKind::kNone, scratch,
                           stream);
    case ReduceKind::kL2:
      return RunOnePass<T>(x, y, L, ReduceOp<T, R, MapKind::kSquare, CombineKind::kAdd>{}, FinishKind::kSqrt, scratch,
                           stream);
    case ReduceKind::kLogSum:
      return RunOnePass<T>(x, y, L, ReduceOp<T, R, MapKind::kIdentity, CombineKind::kAdd>{}, FinishKind::kLog, scratch,
                           stream);
    case ReduceKind::kMax:
      return RunExtreme<T>(true, x, y, L, scratch, stream);
    case ReduceKind::kMin:
      return RunExtreme<T>(false, x, y, L, scratch, stream);
    case ReduceKind::kLogSumExp:
      return RunLogSumExp<T>(x, y, L, scratch, stream);
  }
  return Internal("unknown reduction kind");
}

// ---- ArgMax / ArgMin ----------------------------------------------------------------------------------------------

// Folds candidate (v2, i2) into (v, i), candidates coming from disjoint index sets (i < 0: no candidate): the more
// extreme value wins, NaN being the extreme; between equal values (or two NaNs) the smaller index, or the larger
// when select_last. Applied in index order this is the CPU's running-extreme rule.
template <bool kMax, typename A>
__device__ __forceinline__ void PickExtreme(A& v, int64_t& i, A v2, int64_t i2, bool select_last) {
  if (i2 < 0) return;
  bool take;
  if (i < 0) {
    take = true;
  } else {
    const bool nan1 = IsNanValue(v), nan2 = IsNanValue(v2);
    if (nan1 || nan2) {
      take = nan1 && nan2 ? (select_last ? i2 > i : i2 < i) : nan2;
    } else if (kMax ? v2 > v : v2 < v) {
      take = true;
    } else {
      take = v2 == v && (select_last ? i2 > i : i2 < i);
    }
  }
  if (take) {
    v = v2;
    i = i2;
  }
}

// inner == 1: a group of threads per row of n values.
template <bool kMax, typename T>
__global__ void ArgRowKernel(const T* __restrict__ x, int64_t* __restrict__ out, int64_t rows, int64_t n,
                             bool select_last, int group) {
  using A = ComputeType<T>;
  __shared__ A smem_v[kRowBlock / kWarp];
  __shared__ int64_t smem_i[kRowBlock / kWarp];
  const int per_block = blockDim.x / group;
  const int gid = threadIdx.x / group, lane = threadIdx.x % group;
  const int width = group < kWarp ? group : kWarp;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * per_block; base < rows;
       base += static_cast<int64_t>(gridDim.x) * per_block) {
    const int64_t row = base + gid;
    const bool active = row < rows;
    A v{};
    int64_t index = -1;
    if (active) {
      const T* r = x + row * n;
      for (int64_t j = lane; j < n; j += group) PickExtreme<kMax>(v, index, LoadValue<T>(r[j]), j, select_last);
    }
    for (int off = width / 2; off > 0; off /= 2) {
      const A v2 = ShflXor(v, off, width);
      const int64_t i2 = ShflXor(index, off, width);
      PickExtreme<kMax>(v, index, v2, i2, select_last);
    }
    if (group > kWarp) {
      const int warp = threadIdx.x / kWarp;
      __syncthreads();
      if (threadIdx.x % kWarp == 0) {
        smem_v[warp] = v;
        smem_i[warp] = index;
      }
      __syncthreads();
      v = smem_v[0];
      index = smem_i[0];
      for (int w = 1; w < static_cast<int>(blockDim.x) / kWarp; ++w) {
        PickExtreme<kMax>(v, index, smem_v[w], smem_i[w], select_last);
      }
    }
    if (active && lane == 0) out[row] = index;
  }
}

// inner > 1: a thread per (outer, inner) position, scanning the n values in index order.
template <bool kMax, typename T>
__global__ void ArgColumnKernel(const T* __restrict__ x, int64_t* __restrict__ out, int64_t outer, int64_t n,
                                int64_t inner, bool select_last) {
  using A = ComputeType<T>;
  const int64_t count = outer * inner;
  for (int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < count;
       p += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t o = p / inner, i = p - o * inner;
    const T* col = x + o * n * inner + i;
    A v{};
    int64_t index = -1;
    for (int64_t j = 0; j < n; ++j) PickExtreme<kMax>(v, index, LoadValue<T>(col[j * inner]), j, select_last);
    out[p] = index;
  }
}

template <bool kMax, typename T>
Status RunArg(const void* x, int64_t* out, int64_t outer, int64_t n, int64_t inner, bool select_last,
              cudaStream_t stream) {
  const T* xt = static_cast<const T*>(x);
  if (inner == 1) {
    const int group = GroupForRow(n);
    ArgRowKernel<kMax, T><<<RowBlocks(outer, group), kRowBlock, 0, stream>>>(xt, out, outer, n, select_last, group);
  } else {
    ArgColumnKernel<kMax, T>
        <<<GridFor(outer * inner), kThreadsPerBlock, 0, stream>>>(xt, out, outer, n, inner, select_last);
  }
  return CheckLaunch(kMax ? "ArgMax" : "ArgMin");
}

}  // namespace

Status LaunchReduce(ReduceKind kind, DType dtype, const void* x, void* y, const ReduceLayout& layout,
                    const ScratchFn& scratch, cudaStream_t stream) {
  if (layout.out_count == 0) return Status::Ok();
  const bool extreme = kind == ReduceKind::kMax || kind == ReduceKind::kMin;
  // The element types registered for Reduce* (8-bit integers and bool for ReduceMax/ReduceMin only).
  switch (dtype) {
    case DType::kFloat32:
      return RunKind<float>(kind, x, y, layout, scratch, stream);
    case DType::kFloat16:
      return RunKind<__half>(kind, x, y, layout, scratch, stream);
    case DType::kBFloat16:
      return RunKind<__nv_bfloat16>(kind, x, y, layout, scratch, stream);
    case DType::kFloat64:
      return RunKind<double>(kind, x, y, layout, scratch, stream);
    case DType::kInt32:
      return RunKind<int32_t>(kind, x, y, layout, scratch, stream);
    case DType::kInt64:
      return RunKind<int64_t>(kind, x, y, layout, scratch, stream);
    case DType::kUint32:
      return RunKind<uint32_t>(kind, x, y, layout, scratch, stream);
    case DType::kUint64:
      return RunKind<uint64_t>(kind, x, y, layout, scratch, stream);
    case DType::kInt8:
      if (extreme) return RunExtreme<int8_t>(kind == ReduceKind::kMax, x, y, layout, scratch, stream);
      break;
    case DType::kUint8:
      if (extreme) return RunExtreme<uint8_t>(kind == ReduceKind::kMax, x, y, layout, scratch, stream);
      break;
    case DType::kBool:
      if (extreme) return RunExtreme<bool>(kind == ReduceKind::kMax, x, y, layout, scratch, stream);
      break;
    default:
      break;
  }
  return Unimplemented("element type ", DTypeName(dtype), " is not supported on cuda");
}

Status LaunchArgExtreme(bool max, DType dtype, const void* x, int64_t* out, int64_t outer, int64_t n, int64_t inner,
                        bool select_last, cudaStream_t stream) {
  if (outer * inner == 0) return Status::Ok();
  if (n <= 0) return Internal(max ? "ArgMax" : "ArgMin", ": empty axis");
  return DispatchNumeric(dtype, max ? "ArgMax" : "ArgMin", [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    return max ? RunArg<true, T>(x, out, outer, n, inner, select_last, stream)
               : RunArg<false, T>(x, out, outer, n, inner, select_last, stream);
  });
}

}  // namespace onnxamp::cuda::norm_reduce
