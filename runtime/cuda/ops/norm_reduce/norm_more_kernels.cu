// CUDA launchers for LRN / LRNGrad, LpNormalization / MeanVarianceNormalization and their gradients, and Hardmax
// (declared in norm_more_launch.h).
//
// LRN: one thread per element, summing its channel window in channel order as the CPU does; LRNGrad first writes
// each element's term dY x s^(-beta - 1) to double scratch, then one thread per element adds the terms of the
// channels whose window holds it, in channel order. The grouped normalisations: one group of threads per
// normalised group (a reduction output of the layout), one thread when consecutive groups are consecutive in memory
// and there are enough of them (the CPU's sequential order, coalesced loads), else 8 lanes, a warp or the block
// folding in a fixed tree order (GroupReduce). Hardmax: LaunchArgExtreme's first maximum, then a one-hot write.
#include <cstdint>

#include "runtime/cuda/ops/cuda_common.cuh"
#include "runtime/cuda/ops/norm_reduce/norm_more_launch.h"
#include "runtime/cuda/ops/norm_reduce/norm_reduce_device.cuh"
#include "runtime/cuda/ops/norm_reduce/reduce_engine.cuh"

namespace onnxamp::cuda::norm_reduce {
namespace {

// ---- LRN ---------------------------------------------------------------------------------------------------------

// Element p of x [n, c, run]: its channel and the offset of its (sample, position) column's channel 0.
struct LrnElement {
  int64_t col, ch;
};
__device__ __forceinline__ LrnElement LrnAt(const LrnArgs& a, int64_t p) {
  const int64_t plane = a.c * a.run;
  return {p / plane * plane + p % a.run, p / a.run % a.c};
}

// s = bias + scale * (the sum of x^2 over the window of channel ch, in channel order), rounded as the CPU rounds.
template <typename T>
__device__ __forceinline__ double LrnDenominator(const LrnArgs& a, const T* __restrict__ x, LrnElement e) {
  const int64_t from = e.ch - a.lo < 0 ? 0 : e.ch - a.lo, to = e.ch + a.hi > a.c - 1 ? a.c - 1 : e.ch + a.hi;
  double sum = 0;
  for (int64_t i = from; i <= to; ++i) {
    const double v = static_cast<double>(LoadValue<T>(x[e.col + i * a.run]));
    sum = Add(sum, Mul(v, v));
  }
  return Add(a.bias, Mul(a.scale, sum));
}

template <typename T>
__device__ __forceinline__ double LoadDouble(const T* __restrict__ p, int64_t i) {
  return static_cast<double>(LoadValue<T>(p[i]));
}

template <typename T>
__device__ __forceinline__ T StoreDouble(double v) {
  return StoreValue<T>(static_cast<ComputeType<T>>(v));
}

template <typename T>
__global__ void LrnKernel(LrnArgs a, int64_t count) {
  const T* x = static_cast<const T*>(a.x);
  T* y = static_cast<T*>(a.y);
  for (int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < count;
       p += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const double s = LrnDenominator(a, x, LrnAt(a, p));
    y[p] = StoreDouble<T>(Mul(LoadDouble(x, p), pow(s, -a.beta)));
  }
}

// terms[p] = dY x s^(-beta - 1) at element p.
template <typename T>
__global__ void LrnGradTermsKernel(LrnArgs a, int64_t count, double* __restrict__ terms) {
  const T* x = static_cast<const T*>(a.x);
  const T* dy = static_cast<const T*>(a.dy);
  for (int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < count;
       p += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const double s = LrnDenominator(a, x, LrnAt(a, p));
    terms[p] = Mul(Mul(LoadDouble(dy, p), LoadDouble(x, p)), pow(s, -a.beta - 1));
  }
}

// dX at element p of channel i: dY s_i^-beta - 2 scale beta x_i * (the terms of channels [i - hi, i + lo] clipped).
template <typename T>
__global__ void LrnGradKernel(LrnArgs a, int64_t count, const double* __restrict__ terms) {
  const T* x = static_cast<const T*>(a.x);
  const T* dy = static_cast<const T*>(a.dy);
  T* dx = static_cast<T*>(a.y);
  for (int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < count;
       p += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const LrnElement e = LrnAt(a, p);
    const int64_t from = e.ch - a.hi < 0 ? 0 : e.ch - a.hi, to = e.ch + a.lo > a.c - 1 ? a.c - 1 : e.ch + a.lo;
    double sum = 0;
    for (int64_t ch = from; ch <= to; ++ch) sum += terms[e.col + ch * a.run];
    const double s = LrnDenominator(a, x, e);
    const double k = Mul(Mul(Mul(2.0, a.scale), a.beta), LoadDouble(x, p));
    dx[p] = StoreDouble<T>(Sub(Mul(LoadDouble(dy, p), pow(s, -a.beta)), Mul(k, sum)));
  }
}

template <typename T>
Status RunLrn(const LrnArgs& a, const ScratchFn& scratch, cudaStream_t stream) {
  const int64_t count = a.n * a.c * a.run;
  if (count == 0) return Status::Ok();
  if (!a.dy) {
    LrnKernel<T><<<GridFor(count), kThreadsPerBlock, 0, stream>>>(a, count);
    return CheckLaunch("LRN");
  }
  ONNXAMP_ASSIGN_OR_RETURN(void* terms_ptr, scratch(static_cast<size_t>(count) * sizeof(double)));
  double* terms = static_cast<double*>(terms_ptr);
  LrnGradTermsKernel<T><<<GridFor(count), kThreadsPerBlock, 0, stream>>>(a, count, terms);
  ONNXAMP_RETURN_IF_ERROR(CheckLaunch("LRNGrad terms"));
  LrnGradKernel<T><<<GridFor(count), kThreadsPerBlock, 0, stream>>>(a, count, terms);
  return CheckLaunch("LRNGrad");
}

// ---- LpNormalization, MeanVarianceNormalization ----------------------------------------------------------------

// The offset of group (reduction output) o's first element, and of member r relative to it (layout's row-major
// orders, the innermost merged dimension kept or reduced).
__device__ __forceinline__ int64_t GroupOffset(const ReduceLayout& L, int64_t o) {
  if (L.inner_reduced) return MergedOffset(L.kept_dims, L.kept_strides, L.kept_rank, o);
  return MergedOffset(L.kept_dims, L.kept_strides, L.kept_rank, o / L.inner) + o % L.inner;
}
__device__ __forceinline__ int64_t MemberOffset(const ReduceLayout& L, int64_t r) {
  if (!L.inner_reduced) return MergedOffset(L.red_dims, L.red_strides, L.red_rank, r);
  return MergedOffset(L.red_dims, L.red_strides, L.red_rank, r / L.inner) + r % L.inner;
}

template <typename T>
__global__ void GroupNormalizeKernel(GroupNormalizeArgs a, int group) {
  __shared__ double smem[kRowBlock / kWarp];
  auto add = [](double u, double v) { return u + v; };
  const T* x = static_cast<const T*>(a.x);
  const T* dy = static_cast<const T*>(a.dy);
  T* y = static_cast<T*>(a.y);
  const ReduceLayout& L = a.layout;
  const bool grad = dy != nullptr;
  const int per_block = blockDim.x / group;
  const int gid = threadIdx.x / group, lane = threadIdx.x % group;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * per_block; base < L.out_count;
       base += static_cast<int64_t>(gridDim.x) * per_block) {
    const int64_t o = base + gid;
    const bool active = o < L.out_count;
    const int64_t len = active ? L.reduce_count : 0;
    const int64_t off = active ? GroupOffset(L, o) : 0;
    const double n = static_cast<double>(L.reduce_count);
    if (a.kind == GroupNormKind::kMeanVariance) {
      double mean = 0;
      for (int64_t r = lane; r < len; r += group) mean += LoadDouble(x, off + MemberOffset(L, r));
      mean = GroupReduce(mean, group, add, smem) / n;
      double var = 0;
      for (int64_t r = lane; r < len; r += group) {
        const double xc = Sub(LoadDouble(x, off + MemberOffset(L, r)), mean);
        var = Add(var, Mul(xc, xc));
      }
      var = GroupReduce(var, group, add, smem);
      const double s = sqrt(var / n), d = s + a.epsilon;
      double mean_dy = 0, mean_dyxc = 0;
      if (grad) {
        for (int64_t r = lane; r < len; r += group) {
          const int64_t at = off + MemberOffset(L, r);
          const double g = LoadDouble(dy, at);
          mean_dy += g;
          mean_dyxc = Add(mean_dyxc, Mul(g, Sub(LoadDouble(x, at), mean)));
        }
        mean_dy = GroupReduce(mean_dy, group, add, smem) / n;
        mean_dyxc = GroupReduce(mean_dyxc, group, add, smem) / n;
      }
      const double k = s > 0 ? mean_dyxc / Mul(Mul(d, d), s) : 0.0;
      for (int64_t r = lane; r < len; r += group) {
        const int64_t at = off + MemberOffset(L, r);
        const double xc = Sub(LoadDouble(x, at), mean);
        y[at] = StoreDouble<T>(grad ? Sub(Sub(LoadDouble(dy, at), mean_dy) / d, Mul(xc, k)) : xc / d);
      }
      continue;
    }
    const bool l1 = a.kind == GroupNormKind::kLp1;
    double norm = 0;
    for (int64_t r = lane; r < len; r += group) {
      const double v = LoadDouble(x, off + MemberOffset(L, r));
      norm = l1 ? norm + fabs(v) : Add(norm, Mul(v, v));
    }
    norm = GroupReduce(norm, group, add, smem);
    if (!l1) norm = sqrt(norm);
    double dot = 0;  // sum(dY * Y)
    if (grad) {
      for (int64_t r = lane; r < len; r += group) {
        const int64_t at = off + MemberOffset(L, r);
        dot += Mul(LoadDouble(dy, at), LoadDouble(x, at)) / norm;
      }
      dot = GroupReduce(dot, group, add, smem);
    }
    for (int64_t r = lane; r < len; r += group) {
      const int64_t at = off + MemberOffset(L, r);
      const double v = LoadDouble(x, at);
      double out = 0;
      if (norm != 0 && !grad) {
        out = v / norm;
      } else if (norm != 0) {
        const double g = l1 ? (v > 0 ? 1.0 : v < 0 ? -1.0 : 0.0) : v / norm;
        out = Sub(LoadDouble(dy, at), Mul(g, dot)) / norm;
      }
      y[at] = StoreDouble<T>(out);
    }
  }
}

template <typename T>
Status RunGroupNormalize(const GroupNormalizeArgs& a, cudaStream_t stream) {
  const ReduceLayout& L = a.layout;
  if (L.out_count == 0 || L.reduce_count == 0) return Status::Ok();
  // Consecutive groups at consecutive addresses (the innermost dim kept) and enough of them: a thread per group.
  constexpr int64_t kEnoughGroups = 2048;
  const int group = !L.inner_reduced && L.out_count >= kEnoughGroups ? 1 : GroupForRow(L.reduce_count);
  GroupNormalizeKernel<T><<<RowBlocks(L.out_count, group), kRowBlock, 0, stream>>>(a, group);
  return CheckLaunch(a.kind == GroupNormKind::kMeanVariance ? "MeanVarianceNormalization" : "LpNormalization");
}

// ---- Hardmax -----------------------------------------------------------------------------------------------------

template <typename T>
__global__ void OneHotAtKernel(const int64_t* __restrict__ index, T* __restrict__ y, int64_t count, int64_t n,
                               int64_t inner) {
  for (int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < count;
       p += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = p % inner, k = p / inner % n, o = p / (inner * n);
    y[p] = StoreValue<T>(static_cast<ComputeType<T>>(index[o * inner + i] == k ? 1 : 0));
  }
}

}  // namespace

Status LaunchLrn(const LrnArgs& args, const ScratchFn& scratch, cudaStream_t stream) {
  return DispatchFloat(args.dtype, args.dy ? "LRNGrad" : "LRN",
                       [&](auto tag) -> Status { return RunLrn<typename decltype(tag)::type>(args, scratch, stream); });
}

Status LaunchGroupNormalize(const GroupNormalizeArgs& args, cudaStream_t stream) {
  return DispatchFloat(args.dtype, "normalization", [&](auto tag) -> Status {
    return RunGroupNormalize<typename decltype(tag)::type>(args, stream);
  });
}

Status LaunchHardmax(DType dtype, const void* x, void* y, int64_t outer, int64_t n, int64_t inner,
                     const ScratchFn& scratch, cudaStream_t stream) {
  const int64_t count = outer * n * inner;
  if (count == 0) return Status::Ok();
  ONNXAMP_ASSIGN_OR_RETURN(void* index_ptr, scratch(static_cast<size_t>(outer * inner) * sizeof(int64_t)));
  int64_t* index = static_cast<int64_t*>(index_ptr);
  ONNXAMP_RETURN_IF_ERROR(LaunchArgExtreme(true, dtype, x, index, outer, n, inner, false, stream));
  return DispatchFloat(dtype, "Hardmax", [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    OneHotAtKernel<T><<<GridFor(count), kThreadsPerBlock, 0, stream>>>(index, static_cast<T*>(y), count, n, inner);
    return CheckLaunch("Hardmax");
  });
}

}  // namespace onnxamp::cuda::norm_reduce
