// Float to integer conversion with Cast's semantics, one definition for the CPU kernels
// (runtime/ops/common/elementwise_convert.h) and the CUDA Cast kernel.
#pragma once

#include <limits>
#include <type_traits>

#include "runtime/common/host_device.h"

namespace onnxamp::ops {

// Float (or double) to integer I: truncation toward zero, saturating, NaN -> 0.
template <typename I, typename F>
ONNXAMP_HOST_DEVICE inline I FloatToInt(F v) {
  static_assert(std::is_integral_v<I> && std::is_floating_point_v<F>);
  if (!(v == v)) return I{0};
  // 2^digits: the first value above the range (exact in F; max() itself may round up to it).
  constexpr F kLimit = F(2) * static_cast<F>(std::numeric_limits<I>::max() / 2 + 1);
  constexpr F kLow = static_cast<F>(std::numeric_limits<I>::min());  // 0 or -2^digits, exact
  if (v >= kLimit) return std::numeric_limits<I>::max();
  if (v <= kLow) return std::numeric_limits<I>::min();
  return static_cast<I>(v);
}

}  // namespace onnxamp::ops
