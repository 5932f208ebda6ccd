// Element-type dispatch for kernels: DType -> C++ type, and the type arithmetic is done in.
//
// Storage types fp16/bf16 compute in float (numerics policy: 16-bit storage, FP32 arithmetic, round to nearest
// even on store); every other type computes in itself.
#pragma once

#include <cstdint>
#include <type_traits>

#include "runtime/common/dtype.h"
#include "runtime/common/half.h"
#include "runtime/common/status.h"

namespace onnxamp::ops {

template <typename T>
struct TypeTag {
  using type = T;
};

template <typename T>
struct ComputeTypeOf {
  using type = T;
};
template <>
struct ComputeTypeOf<Float16> {
  using type = float;
};
template <>
struct ComputeTypeOf<BFloat16> {
  using type = float;
};
template <typename T>
using ComputeType = typename ComputeTypeOf<T>::type;

// Storage -> compute type.
template <typename T>
inline ComputeType<T> Load(T v) {
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
    return static_cast<float>(v);
  } else {
    return v;
  }
}

// Compute -> storage type (round to nearest even for fp16/bf16).
template <typename T>
inline T Store(ComputeType<T> v) {
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
    return T(v);
  } else {
    return static_cast<T>(v);
  }
}

template <typename T>
inline constexpr bool kIsFloatLike =
    std::is_floating_point_v<T> || std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>;

// Calls f(TypeTag<T>{}) with T the storage type of `t`, for float, float16, bfloat16 and double; other types
// give an Unimplemented status naming the type.
template <typename F>
Status DispatchFloat(DType t, F&& f) {
  switch (t) {
    case DType::kFloat32:
      return f(TypeTag<float>{});
    case DType::kFloat16:
      return f(TypeTag<Float16>{});
    case DType::kBFloat16:
      return f(TypeTag<BFloat16>{});
    case DType::kFloat64:
      return f(TypeTag<double>{});
    default:
      return Unimplemented("element type ", DTypeName(t), " is not supported (float, float16, bfloat16, double)");
  }
}

// Float types plus every fixed-width integer type (not bool).
template <typename F>
Status DispatchNumeric(DType t, F&& f) {
  switch (t) {
    case DType::kInt8:
      return f(TypeTag<int8_t>{});
    case DType::kUint8:
      return f(TypeTag<uint8_t>{});
    case DType::kInt16:
      return f(TypeTag<int16_t>{});
    case DType::kUint16:
      return f(TypeTag<uint16_t>{});
    case DType::kInt32:
      return f(TypeTag<int32_t>{});
    case DType::kUint32:
      return f(TypeTag<uint32_t>{});
    case DType::kInt64:
      return f(TypeTag<int64_t>{});
    case DType::kUint64:
      return f(TypeTag<uint64_t>{});
    default:
      return DispatchFloat(t, std::forward<F>(f));
  }
}

// DispatchNumeric plus bool (as bool).
template <typename F>
Status DispatchNumericOrBool(DType t, F&& f) {
  if (t == DType::kBool) return f(TypeTag<bool>{});
  return DispatchNumeric(t, std::forward<F>(f));
}

// The DType of a C++ storage type.
template <typename T>
constexpr DType DTypeOf() {
  if constexpr (std::is_same_v<T, float>) return DType::kFloat32;
  if constexpr (std::is_same_v<T, double>) return DType::kFloat64;
  if constexpr (std::is_same_v<T, Float16>) return DType::kFloat16;
  if constexpr (std::is_same_v<T, BFloat16>) return DType::kBFloat16;
  if constexpr (std::is_same_v<T, int8_t>) return DType::kInt8;
  if constexpr (std::is_same_v<T, uint8_t>) return DType::kUint8;
  if constexpr (std::is_same_v<T, int16_t>) return DType::kInt16;
  if constexpr (std::is_same_v<T, uint16_t>) return DType::kUint16;
  if constexpr (std::is_same_v<T, int32_t>) return DType::kInt32;
  if constexpr (std::is_same_v<T, uint32_t>) return DType::kUint32;
  if constexpr (std::is_same_v<T, int64_t>) return DType::kInt64;
  if constexpr (std::is_same_v<T, uint64_t>) return DType::kUint64;
  if constexpr (std::is_same_v<T, bool>) return DType::kBool;
  return DType::kUndefined;
}

}  // namespace onnxamp::ops
