// CUDA Cast between every numeric type and bool, bit for bit as the CPU (runtime/ops/common/elementwise_convert.h):
// to fp16/bf16 through float rounded to nearest even with runtime/cuda/half_convert.h (the same steps as half.h, NaN
// payloads included; double is rounded to float first), float to integer truncating and saturating with NaN -> 0,
// integer to integer wrapping, to bool value != 0 (NaN is true), from bool 0 or 1.
#include <cstdint>
#include <limits>
#include <type_traits>

#include "runtime/cuda/half_convert.h"
#include "runtime/cuda/ops/elementwise/elementwise_engine.cuh"
#include "runtime/ops/common/float_to_int.h"

namespace onnxamp::cuda::ew {
namespace {

// A non-16-bit value From (float, double, integer, bool) as float, rounded once (double and 64-bit integers round to
// nearest, as the host's static_cast).
template <typename From>
__device__ __forceinline__ float ToFloat(From v) {
  if constexpr (std::is_same_v<From, bool>) {
    return v ? 1.0f : 0.0f;
  } else {
    return static_cast<float>(v);
  }
}

template <typename To, typename From>
struct CastF {
  __device__ __forceinline__ To operator()(From v) const {
    if constexpr (std::is_same_v<From, __half>) {
      return Convert(HalfBitsToFloatHD(__half_as_ushort(v)));
    } else if constexpr (std::is_same_v<From, __nv_bfloat16>) {
      return Convert(BFloat16BitsToFloatHD(__bfloat16_as_ushort(v)));
    } else {
      return Convert(v);
    }
  }

  // From a non-16-bit type F (16-bit sources arrive here as their exact float value).
  template <typename F>
  __device__ __forceinline__ static To Convert(F v) {
    if constexpr (std::is_same_v<To, F>) {
      return v;
    } else if constexpr (std::is_same_v<To, __half>) {
      return __ushort_as_half(FloatToHalfBitsHD(ToFloat(v)));
    } else if constexpr (std::is_same_v<To, __nv_bfloat16>) {
      return __ushort_as_bfloat16(FloatToBFloat16BitsHD(ToFloat(v)));
    } else if constexpr (std::is_same_v<To, bool>) {
      return v != F(0);
    } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<F>) {
      return ops::FloatToInt<To>(v);
    } else {
      return static_cast<To>(v);
    }
  }
};

}  // namespace

Status LaunchCast(DType from, DType to, const void* x, void* y, int64_t n, cudaStream_t stream, std::string_view what) {
  return DispatchNumericOrBool(to, what, [&](auto tt) -> Status {
    using To = typename decltype(tt)::type;
    return DispatchNumericOrBool(from, what, [&](auto tf) -> Status {
      using From = typename decltype(tf)::type;
      return RunUnary(CastF<To, From>{}, static_cast<const From*>(x), static_cast<To*>(y), n, stream, what);
    });
  });
}

}  // namespace onnxamp::cuda::ew
