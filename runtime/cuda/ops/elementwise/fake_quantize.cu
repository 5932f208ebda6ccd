// Device kernels of com.onnxamp FakeQuantize and FakeQuantizeGrad (fake_quantize_launch.h): the CPU kernels'
// arithmetic (runtime/ops/quantize/quantize_cpu.cc) element for element; the step-size sums in double, reduced in a
// fixed order.
#include <cmath>
#include <utility>

#include "runtime/cuda/ops/cuda_common.cuh"
#include "runtime/cuda/ops/elementwise/fake_quantize_launch.h"
#include "runtime/ops/quantize/quantized_types.h"

namespace onnxamp::cuda::ew {
namespace {

constexpr int kReduceThreads = 256;

template <typename Z>
__device__ __forceinline__ float ZeroPointAt(const Z* zp, int64_t c) {
  return zp ? static_cast<float>(zp[c]) : 0.0f;
}

__device__ __forceinline__ int64_t ChannelOf(const FakeQuantLayout& l, int64_t k) {
  return l.per_tensor ? 0 : (k / l.inner) % l.dim;
}

// v = nearbyint(x / s) + z, in the compute type C.
template <typename C>
__device__ __forceinline__ C Level(C x, C s, C z) {
  return nearbyint(x / s) + z;
}

template <typename T, typename Z>
__global__ void FakeQuantizeKernel(const T* x, const T* scale, const Z* zp, float qmin, float qmax, T* y,
                                   FakeQuantLayout l) {
  using C = ComputeType<T>;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const C lo = static_cast<C>(qmin), hi = static_cast<C>(qmax);
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < l.n; k += stride) {
    const int64_t c = ChannelOf(l, k);
    const C s = LoadValue(scale[c]);
    const C z = static_cast<C>(ZeroPointAt(zp, c));
    const C v = Level(LoadValue(x[k]), s, z);
    y[k] = StoreValue<T>(((isnan(v) ? lo : (v < lo ? lo : (v > hi ? hi : v))) - z) * s);
  }
}

// One element's dx (written when dx) and its step-size term.
template <typename T, typename Z>
__device__ __forceinline__ double GradElement(const T* dy, const T* x, const T* scale, const Z* zp, float qmin,
                                              float qmax, T* dx, int64_t c, int64_t k) {
  using C = ComputeType<T>;
  const C lo = static_cast<C>(qmin), hi = static_cast<C>(qmax);
  const C s = LoadValue(scale[c]);
  const C z = static_cast<C>(ZeroPointAt(zp, c));
  const C xs = LoadValue(x[k]) / s;
  const C v = nearbyint(xs) + z;
  const bool inside = v >= lo && v <= hi;
  if (dx) dx[k] = inside ? dy[k] : StoreValue<T>(C(0));
  if (isnan(v)) return 0.0;
  const double g = static_cast<double>(LoadValue(dy[k]));
  if (inside) return g * (static_cast<double>(v - z) - static_cast<double>(xs));
  return g * static_cast<double>((v < lo ? lo : hi) - z);
}

// Sum of `v` over the block (kReduceThreads threads), in a fixed tree order; the result in thread 0.
__device__ double BlockSum(double v) {
  __shared__ double sums[kReduceThreads];
  sums[threadIdx.x] = v;
  __syncthreads();
  for (int width = kReduceThreads / 2; width > 0; width /= 2) {
    if (static_cast<int>(threadIdx.x) < width) sums[threadIdx.x] += sums[threadIdx.x + width];
    __syncthreads();
  }
  return sums[0];
}

// dx for every element (no dscale).
template <typename T, typename Z>
__global__ void FakeQuantizeDxKernel(const T* dy, const T* x, const T* scale, const Z* zp, float qmin, float qmax,
                                     T* dx, FakeQuantLayout l) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < l.n; k += stride) {
    GradElement(dy, x, scale, zp, qmin, qmax, dx, ChannelOf(l, k), k);
  }
}

// Per axis: block a handles scale a's elements (o, a, i), thread t those with (o * inner + i) = t mod the block size.
template <typename T, typename Z>
__global__ void FakeQuantizePerAxisGradKernel(const T* dy, const T* x, const T* scale, const Z* zp, float qmin,
                                              float qmax, T* dx, T* dscale, FakeQuantLayout l) {
  const int64_t a = blockIdx.x;
  const int64_t count = l.outer * l.inner;
  double sum = 0;
  for (int64_t j = threadIdx.x; j < count; j += blockDim.x) {
    const int64_t o = j / l.inner, i = j % l.inner;
    sum += GradElement(dy, x, scale, zp, qmin, qmax, dx, a, (o * l.dim + a) * l.inner + i);
  }
  const double total = BlockSum(sum);
  if (threadIdx.x == 0) dscale[a] = StoreValue<T>(static_cast<ComputeType<T>>(total));
}

// Per tensor, stage 1: block b sums the elements [n b / B, n (b + 1) / B) into partial[b].
template <typename T, typename Z>
__global__ void FakeQuantizePartialKernel(const T* dy, const T* x, const T* scale, const Z* zp, float qmin, float qmax,
                                          T* dx, double* partial, FakeQuantLayout l) {
  const int64_t blocks = gridDim.x, b = blockIdx.x;
  const int64_t begin = l.n * b / blocks, end = l.n * (b + 1) / blocks;
  double sum = 0;
  for (int64_t k = begin + threadIdx.x; k < end; k += blockDim.x) {
    sum += GradElement(dy, x, scale, zp, qmin, qmax, dx, 0, k);
  }
  const double total = BlockSum(sum);
  if (threadIdx.x == 0) partial[b] = total;
}

// Per tensor, stage 2: the partial sums in order.
template <typename T>
__global__ void FakeQuantizeFinishKernel(const double* partial, int count, T* dscale) {
  double sum = 0;
  for (int j = threadIdx.x; j < count; j += blockDim.x) sum += partial[j];
  const double total = BlockSum(sum);
  if (threadIdx.x == 0) dscale[0] = StoreValue<T>(static_cast<ComputeType<T>>(total));
}

// Calls f with the zero point's device type: ops::DispatchQuantized's, int8_t for none (its pointer is null then).
template <typename F>
Status DispatchZeroPoint(DType t, const void* zp, std::string_view what, F&& f) {
  if (!zp) return f(TypeTag<int8_t>{});
  return ops::DispatchQuantized(t, false, StrCat(what, ": the zero point"), std::forward<F>(f));
}

}  // namespace

int FakeQuantizePartialBlocks(int64_t n) {
  const int64_t blocks = (n + 64 * kReduceThreads - 1) / (64 * kReduceThreads);
  return static_cast<int>(blocks < 1 ? 1 : (blocks > 1024 ? 1024 : blocks));
}

Status LaunchFakeQuantize(DType dtype, const void* x, const FakeQuantParams& p, void* y, const FakeQuantLayout& l,
                          cudaStream_t stream, std::string_view what) {
  if (l.n == 0) return Status::Ok();
  return DispatchFloat(dtype, what, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    return DispatchZeroPoint(p.zero_point_type, p.zero_point, what, [&](auto ztag) -> Status {
      using Z = typename decltype(ztag)::type;
      FakeQuantizeKernel<T, Z><<<GridFor(l.n), kThreadsPerBlock, 0, stream>>>(
          static_cast<const T*>(x), static_cast<const T*>(p.scale), static_cast<const Z*>(p.zero_point), p.qmin, p.qmax,
          static_cast<T*>(y), l);
      return CheckLaunch(what);
    });
  });
}

Status LaunchFakeQuantizeGrad(DType dtype, const void* dy, const void* x, const FakeQuantParams& p, void* dx,
                              void* dscale, double* workspace, int partial_blocks, const FakeQuantLayout& l,
                              cudaStream_t stream, std::string_view what) {
  return DispatchFloat(dtype, what, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    return DispatchZeroPoint(p.zero_point_type, p.zero_point, what, [&](auto ztag) -> Status {
      using Z = typename decltype(ztag)::type;
      const T* pdy = static_cast<const T*>(dy);
      const T* px = static_cast<const T*>(x);
      const T* ps = static_cast<const T*>(p.scale);
      const Z* pz = static_cast<const Z*>(p.zero_point);
      T* pdx = static_cast<T*>(dx);
      T* pds = static_cast<T*>(dscale);
      if (!pds) {
        if (l.n == 0 || !pdx) return Status::Ok();
        FakeQuantizeDxKernel<T, Z>
            <<<GridFor(l.n), kThreadsPerBlock, 0, stream>>>(pdy, px, ps, pz, p.qmin, p.qmax, pdx, l);
        return CheckLaunch(what);
      }
      if (!l.per_tensor) {
        if (l.dim == 0) return Status::Ok();
        FakeQuantizePerAxisGradKernel<T, Z><<<static_cast<unsigned int>(l.dim), kReduceThreads, 0, stream>>>(
            pdy, px, ps, pz, p.qmin, p.qmax, pdx, pds, l);
        return CheckLaunch(what);
      }
      FakeQuantizePartialKernel<T, Z><<<static_cast<unsigned int>(partial_blocks), kReduceThreads, 0, stream>>>(
          pdy, px, ps, pz, p.qmin, p.qmax, pdx, workspace, l);
      ONNXAMP_RETURN_IF_ERROR(CheckLaunch(what));
      FakeQuantizeFinishKernel<T><<<1, kReduceThreads, 0, stream>>>(workspace, partial_blocks, pds);
      return CheckLaunch(what);
    });
  });
}

}  // namespace onnxamp::cuda::ew
