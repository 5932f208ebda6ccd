// Element conversions with Cast's semantics, shared by Cast, CastLike and the mixed-type elementwise ops.
//
// - to fp16/bf16: through float, rounded to nearest even (double is rounded to float first, as ONNX Runtime does);
// - float to integer: truncation toward zero, saturating at the integer's range, NaN -> 0 (what CUDA's
//   __float2int_rz family computes, so that the CPU and GPU backends agree; in-range values are exact);
// - integer to integer: two's complement wrap (static_cast);
// - to bool: value != 0 (NaN is true); from bool: 0 or 1.
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

#include "runtime/common/half.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/common/float_to_int.h"

namespace onnxamp::ops {

// Converts one storage value From -> To with the rules above.
template <typename To, typename From>
inline To ConvertValue(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<From, Float16> || std::is_same_v<From, BFloat16>) {
    return ConvertValue<To, float>(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, Float16> || std::is_same_v<To, BFloat16>) {
    if constexpr (std::is_same_v<From, bool>) {
      return To(v ? 1.0f : 0.0f);
    } else {
      return To(static_cast<float>(v));
    }
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    return FloatToInt<To>(v);
  } else {
    return static_cast<To>(v);
  }
}

}  // namespace onnxamp::ops
