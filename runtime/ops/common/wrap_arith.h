// Wrapping integer arithmetic: the type to compute a signed integer operation in so that it wraps (two's complement)
// instead of overflowing, which is undefined. Header-only and host/device neutral, so the CPU kernels and the CUDA
// kernels (compiled by nvcc) share one definition.
#pragma once

#include <type_traits>

namespace onnxamp::ops {

// Signed overflow is undefined: wrapping arithmetic goes through the unsigned type of the same width (types narrower
// than int promote to int, where the operation cannot overflow, and wrap when stored back).
template <typename C, bool kWrap = std::is_integral_v<C>&& std::is_signed_v<C> && (sizeof(C) >= sizeof(int))>
struct WrapTypeOf {
  using type = C;
};
template <typename C>
struct WrapTypeOf<C, true> {
  using type = std::make_unsigned_t<C>;
};
template <typename C>
using WrapType = typename WrapTypeOf<C>::type;

// a + b and a * b, wrapping for integers (host code: Add, CumSum, ScatterND and ScatterElements' reductions).
template <typename C>
inline C WrapAdd(C a, C b) {
  return static_cast<C>(static_cast<WrapType<C>>(a) + static_cast<WrapType<C>>(b));
}
// Integers narrower than int multiply in unsigned int: promoted to int, 65535 * 65535 would overflow it.
template <typename C>
inline C WrapMul(C a, C b) {
  using M = std::conditional_t<std::is_integral_v<C> && (sizeof(C) < sizeof(int)), unsigned, WrapType<C>>;
  return static_cast<C>(static_cast<M>(a) * static_cast<M>(b));
}

}  // namespace onnxamp::ops
