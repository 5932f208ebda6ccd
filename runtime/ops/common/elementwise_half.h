// Bulk conversions between fp16/bf16 storage and float, for kernels that compute 16-bit tensors in float blocks.
//
// Results are those of runtime/common/half.h's Float16/BFloat16 conversions (round to nearest even, overflow to
// inf, subnormals kept), computed faster: with the F16C instructions where the CPU has them (chosen at run time),
// with branch-free loops the compiler vectorizes otherwise. One difference is allowed: a signalling-NaN fp16 may
// come back as a quiet NaN (F16C quiets it); it is still a NaN with the same sign.
#pragma once

#include <cstdint>

#include "runtime/common/half.h"
#include "runtime/ops/common/dtype_dispatch.h"

namespace onnxamp::ops {

void HalfToFloat(const Float16* in, float* out, int64_t n);
void FloatToHalf(const float* in, Float16* out, int64_t n);
void BFloat16ToFloat(const BFloat16* in, float* out, int64_t n);
void FloatToBFloat16(const float* in, BFloat16* out, int64_t n);

// True when HalfToFloat/FloatToHalf use the F16C instructions on this machine.
bool HalfConversionUsesF16c();

// The portable fp16 loops, whatever the CPU (tests compare them with the F16C path and with half.h).
void HalfToFloatPortable(const Float16* in, float* out, int64_t n);
void FloatToHalfPortable(const float* in, Float16* out, int64_t n);

// Loads n storage values of T into their compute type (a copy for float, a conversion for fp16/bf16), and back.
template <typename T>
inline void LoadBlock(const T* in, ComputeType<T>* out, int64_t n) {
  if constexpr (std::is_same_v<T, Float16>) {
    HalfToFloat(in, out, n);
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    BFloat16ToFloat(in, out, n);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = in[i];
  }
}

template <typename T>
inline void StoreBlock(const ComputeType<T>* in, T* out, int64_t n) {
  if constexpr (std::is_same_v<T, Float16>) {
    FloatToHalf(in, out, n);
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    FloatToBFloat16(in, out, n);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = in[i];
  }
}

}  // namespace onnxamp::ops
