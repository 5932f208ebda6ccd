// The integer storage types of QuantizeLinear and DequantizeLinear, shared by their CPU kernels and the CUDA
// FakeQuantize kernels (a light header: .cu files include it).
#pragma once

#include <cstdint>
#include <string_view>

#include "runtime/common/dtype.h"
#include "runtime/common/status.h"

namespace onnxamp::ops {

template <typename T>
struct QuantizedTag {
  using type = T;
};

// Calls f(QuantizedTag<T>{}) for the quantized storage types (and int32 when `with_int32`).
template <typename F>
Status DispatchQuantized(DType t, bool with_int32, std::string_view what, F&& f) {
  switch (t) {
    case DType::kInt8:
      return f(QuantizedTag<int8_t>{});
    case DType::kUint8:
      return f(QuantizedTag<uint8_t>{});
    case DType::kInt16:
      return f(QuantizedTag<int16_t>{});
    case DType::kUint16:
      return f(QuantizedTag<uint16_t>{});
    case DType::kInt32:
      if (with_int32) return f(QuantizedTag<int32_t>{});
      [[fallthrough]];
    default:
      return Unimplemented(what, " is ", DTypeName(t), ": supported are int8, uint8, int16, uint16",
                           with_int32 ? " and int32" : "");
  }
}

}  // namespace onnxamp::ops
