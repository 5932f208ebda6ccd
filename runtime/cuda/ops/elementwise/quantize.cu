// Device kernels of QuantizeLinear and DequantizeLinear (quantize_launch.h): the CPU kernels' arithmetic
// (runtime/ops/quantize/quantize_cpu.cc) element for element, so the results are the CPU's bits.
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "runtime/cuda/ops/cuda_common.cuh"
#include "runtime/cuda/ops/elementwise/quantize_launch.h"
#include "runtime/ops/quantize/quantized_types.h"

namespace onnxamp::cuda::ew {
namespace {

__device__ __forceinline__ int64_t ScaleIndex(const QuantIndex& l, int64_t k) {
  if (l.per_tensor) return 0;
  const int64_t i = k % l.inner;
  const int64_t r = k / l.inner;
  const int64_t a = r % l.dim;
  if (l.block == 0) return a;
  const int64_t o = r / l.dim;
  const int64_t blocks = l.dim == 0 ? 0 : 1 + (l.dim - 1) / l.block;
  return (o * blocks + a / l.block) * l.inner + i;
}

// x as float (an int32 x rounds to float, as the CPU's double -> float).
template <typename X>
__device__ __forceinline__ float XAsFloat(X v) {
  if constexpr (std::is_same_v<X, int32_t>) {
    return static_cast<float>(static_cast<double>(v));
  } else {
    return static_cast<float>(LoadValue(v));
  }
}

template <typename X, typename S, typename Q>
__global__ void QuantizeKernel(const X* x, const S* scale, const Q* zp, Q* y, QuantIndex l) {
  constexpr float lo = static_cast<float>(std::numeric_limits<Q>::min());
  constexpr float hi = static_cast<float>(std::numeric_limits<Q>::max());
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < l.n; k += stride) {
    const int64_t q = ScaleIndex(l, k);
    const float s = static_cast<float>(LoadValue(scale[q]));
    const float z = zp ? static_cast<float>(zp[q]) : 0.0f;
    const float v = nearbyintf(XAsFloat(x[k]) / s) + z;
    y[k] = static_cast<Q>(isnan(v) ? lo : (v < lo ? lo : (v > hi ? hi : v)));
  }
}

template <typename Q, typename S, typename T>
__global__ void DequantizeKernel(const Q* x, const S* scale, const Q* zp, T* y, QuantIndex l) {
  using C = ComputeType<T>;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < l.n; k += stride) {
    const int64_t q = ScaleIndex(l, k);
    const double s = static_cast<double>(LoadValue(scale[q]));
    const double z = zp ? static_cast<double>(zp[q]) : 0.0;
    y[k] = StoreValue<T>((static_cast<C>(x[k]) - static_cast<C>(z)) * static_cast<C>(s));
  }
}

// Calls f(TypeTag<X>{}) for QuantizeLinear's x types.
template <typename F>
Status DispatchQuantizeInput(DType t, std::string_view what, F&& f) {
  if (t == DType::kInt32) return f(TypeTag<int32_t>{});
  if (t == DType::kFloat64) return Unimplemented(what, ": x of type double");
  return DispatchFloat(t, what, std::forward<F>(f));
}

constexpr int kRangeThreads = 256;

// Per block: the min and max of its slice [n b / B, n (b + 1) / B) into partial[2 b], partial[2 b + 1] (fminf/fmaxf:
// a NaN is skipped, as the range of the remaining values).
__global__ void RangePartialKernel(const float* x, int64_t n, float* partial) {
  __shared__ float lo_s[kRangeThreads], hi_s[kRangeThreads];
  const int64_t blocks = gridDim.x, b = blockIdx.x;
  const int64_t begin = n * b / blocks, end = n * (b + 1) / blocks;
  float lo = 0.0f, hi = 0.0f;  // the range always holds 0
  for (int64_t k = begin + threadIdx.x; k < end; k += blockDim.x) {
    lo = fminf(lo, x[k]);
    hi = fmaxf(hi, x[k]);
  }
  lo_s[threadIdx.x] = lo;
  hi_s[threadIdx.x] = hi;
  __syncthreads();
  for (int width = kRangeThreads / 2; width > 0; width /= 2) {
    if (static_cast<int>(threadIdx.x) < width) {
      lo_s[threadIdx.x] = fminf(lo_s[threadIdx.x], lo_s[threadIdx.x + width]);
      hi_s[threadIdx.x] = fmaxf(hi_s[threadIdx.x], hi_s[threadIdx.x + width]);
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    partial[2 * b] = lo_s[0];
    partial[2 * b + 1] = hi_s[0];
  }
}

// y from the partial ranges of `blocks` blocks (every block of this kernel recombines them: a few hundred floats);
// block 0 thread 0 also writes the scale and zero point.
__global__ void DynamicQuantizeKernel(const float* x, int64_t n, const float* partial, int blocks, uint8_t* y,
                                      float* scale_out, uint8_t* zero_out) {
  float lo = 0.0f, hi = 0.0f;
  for (int b = 0; b < blocks; ++b) {
    lo = fminf(lo, partial[2 * b]);
    hi = fmaxf(hi, partial[2 * b + 1]);
  }
  const float scale = hi == lo ? 1.0f : (hi - lo) / 255.0f;
  const float zero = fminf(fmaxf(nearbyintf(-lo / scale), 0.0f), 255.0f);
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    if (scale_out) *scale_out = scale;
    if (zero_out) *zero_out = static_cast<uint8_t>(zero);
  }
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < n; k += stride) {
    const float v = nearbyintf(x[k] / scale) + zero;
    y[k] = static_cast<uint8_t>(isnan(v) ? 0.0f : fminf(fmaxf(v, 0.0f), 255.0f));
  }
}

}  // namespace

int DynamicQuantizeBlocks(int64_t n) {
  const int64_t blocks = (n + 64 * kRangeThreads - 1) / (64 * kRangeThreads);
  return static_cast<int>(blocks < 1 ? 1 : (blocks > 256 ? 256 : blocks));
}

Status LaunchDynamicQuantize(const float* x, int64_t n, uint8_t* y, float* scale, uint8_t* zero_point, float* workspace,
                             cudaStream_t stream, std::string_view what) {
  const int blocks = DynamicQuantizeBlocks(n);
  RangePartialKernel<<<static_cast<unsigned int>(blocks), kRangeThreads, 0, stream>>>(x, n, workspace);
  ONNXAMP_RETURN_IF_ERROR(CheckLaunch(what));
  DynamicQuantizeKernel<<<GridFor(n > 0 ? n : 1), kThreadsPerBlock, 0, stream>>>(x, n, workspace, blocks, y, scale,
                                                                                 zero_point);
  return CheckLaunch(what);
}

Status LaunchQuantizeLinear(DType x_type, const void* x, DType scale_type, const void* scale, const void* zero_point,
                            DType y_type, void* y, const QuantIndex& l, cudaStream_t stream, std::string_view what) {
  if (l.n == 0) return Status::Ok();
  if (scale_type == DType::kFloat64) return Unimplemented(what, ": a double scale");
  return DispatchQuantizeInput(x_type, what, [&](auto xtag) -> Status {
    using X = typename decltype(xtag)::type;
    return DispatchFloat(scale_type, what, [&](auto stag) -> Status {
      using S = typename decltype(stag)::type;
      return ops::DispatchQuantized(y_type, false, what, [&](auto qtag) -> Status {
        using Q = typename decltype(qtag)::type;
        QuantizeKernel<X, S, Q>
            <<<GridFor(l.n), kThreadsPerBlock, 0, stream>>>(static_cast<const X*>(x), static_cast<const S*>(scale),
                                                            static_cast<const Q*>(zero_point), static_cast<Q*>(y), l);
        return CheckLaunch(what);
      });
    });
  });
}

Status LaunchDequantizeLinear(DType x_type, const void* x, DType scale_type, const void* scale, const void* zero_point,
                              DType y_type, void* y, const QuantIndex& l, cudaStream_t stream, std::string_view what) {
  if (l.n == 0) return Status::Ok();
  return ops::DispatchQuantized(x_type, true, what, [&](auto qtag) -> Status {
    using Q = typename decltype(qtag)::type;
    return DispatchFloat(scale_type, what, [&](auto stag) -> Status {
      using S = typename decltype(stag)::type;
      return DispatchFloat(y_type, what, [&](auto ytag) -> Status {
        using T = typename decltype(ytag)::type;
        DequantizeKernel<Q, S, T>
            <<<GridFor(l.n), kThreadsPerBlock, 0, stream>>>(static_cast<const Q*>(x), static_cast<const S*>(scale),
                                                            static_cast<const Q*>(zero_point), static_cast<T*>(y), l);
        return CheckLaunch(what);
      });
    });
  });
}

}  // namespace onnxamp::cuda::ew
