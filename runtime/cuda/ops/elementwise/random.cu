// CUDA RandomUniform, RandomNormal (and the *Like forms) and Bernoulli: element i is a function of (seed, i) alone
// (runtime/ops/random/random_numbers.h, host and device code), computed in double and rounded once, as
// runtime/ops/random/random_cpu.cc does, so the values are the CPU's up to the device's log and cos in the normal
// numbers' Box-Muller step (an ulp of a double before rounding to the output type).
#include <cstdint>
#include <type_traits>

#include "runtime/cuda/ops/cuda_common.cuh"
#include "runtime/cuda/ops/elementwise/random_launch.h"
#include "runtime/ops/dropout/dropout_mask.h"
#include "runtime/ops/random/random_numbers.h"

namespace onnxamp::cuda::ew {
namespace {

// The largest value of float type T below finite `v` (as random_cpu.cc's NextBelow).
template <typename T>
__device__ __forceinline__ T NextBelow(T v) {
  if constexpr (std::is_same_v<T, float>) {
    return nextafterf(v, -INFINITY);
  } else if constexpr (std::is_same_v<T, double>) {
    return nextafter(v, -static_cast<double>(INFINITY));
  } else if constexpr (std::is_same_v<T, __half>) {
    return __ushort_as_half(ops::NextBelowHalfBits(__half_as_ushort(v)));
  } else {
    return __ushort_as_bfloat16(ops::NextBelowHalfBits(__bfloat16_as_ushort(v)));
  }
}

// v (a double) in T: through the compute type (float for fp16/bf16), as the CPU's Store<T>(ComputeType<T>(v)).
template <typename T>
__device__ __forceinline__ T FromDouble(double v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v != 0.0;
  } else {
    return StoreValue<T>(static_cast<ComputeType<T>>(v));
  }
}

template <typename T>
__global__ void RandomFillKernel(T* y, int64_t n, uint64_t seed, const uint64_t* device_step, bool normal, double a,
                                 double b, bool half_open) {
  if (device_step) seed = ops::DropoutSeedForStep(seed, *device_step);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const uint64_t k = static_cast<uint64_t>(i);
    // The product and the sum rounded separately, as the CPU computes them (nvcc would fuse them into one FMA).
    const double v = normal ? __dadd_rn(a, __dmul_rn(b, ops::NormalDouble(seed, k)))
                            : __dadd_rn(a, __dmul_rn(__dsub_rn(b, a), ops::UniformDouble(seed, k)));
    T out = FromDouble<T>(v);
    if (half_open && static_cast<double>(LoadValue(out)) >= b) {
      const T below = NextBelow(out);
      out = static_cast<double>(LoadValue(below)) >= a ? below : FromDouble<T>(a);
    }
    y[i] = out;
  }
}

template <typename P, typename T>
__global__ void BernoulliKernel(const P* p, T* y, int64_t n, uint64_t seed, const uint64_t* device_step) {
  if (device_step) seed = ops::DropoutSeedForStep(seed, *device_step);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const bool one = ops::UniformDouble(seed, static_cast<uint64_t>(i)) < static_cast<double>(LoadValue(p[i]));
    y[i] = FromDouble<T>(one ? 1.0 : 0.0);
  }
}

}  // namespace

Status LaunchRandomFill(DType dtype, void* y, int64_t n, uint64_t seed, bool normal, double a, double b, bool half_open,
                        cudaStream_t stream, std::string_view what, const uint64_t* device_step) {
  if (n <= 0) return Status::Ok();
  return DispatchFloat(dtype, what, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    RandomFillKernel<T><<<GridFor(n), kThreadsPerBlock, 0, stream>>>(static_cast<T*>(y), n, seed, device_step, normal,
                                                                     a, b, half_open && !normal);
    return CheckLaunch(what);
  });
}

Status LaunchBernoulli(DType p_type, const void* p, DType y_type, void* y, int64_t n, uint64_t seed,
                       cudaStream_t stream, std::string_view what, const uint64_t* device_step) {
  if (n <= 0) return Status::Ok();
  return DispatchFloat(p_type, what, [&](auto ptag) -> Status {
    using P = typename decltype(ptag)::type;
    return DispatchNumericOrBool(y_type, what, [&](auto ytag) -> Status {
      using T = typename decltype(ytag)::type;
      BernoulliKernel<P, T><<<GridFor(n), kThreadsPerBlock, 0, stream>>>(static_cast<const P*>(p), static_cast<T*>(y),
                                                                         n, seed, device_step);
      return CheckLaunch(what);
    });
  });
}

}  // namespace onnxamp::cuda::ew
