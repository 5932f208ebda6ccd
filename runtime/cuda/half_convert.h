// fp16/bf16 <-> float conversions callable from host and device code, bit-identical to runtime/common/half.h
// (round to nearest even, overflow to infinity, subnormals kept, NaN quieted with its payload kept). The kernels
// use these; tests run the host build of the same code against half.h without a GPU.
#pragma once

#include <cstdint>
#include <cstring>

#include "runtime/common/host_device.h"

namespace onnxamp::cuda {

ONNXAMP_HOST_DEVICE inline uint32_t FloatToBits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
#endif
}

ONNXAMP_HOST_DEVICE inline float BitsToFloatValue(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
#endif
}

// The same steps as FloatToHalfBits in half.h.
ONNXAMP_HOST_DEVICE inline uint16_t FloatToHalfBitsHD(float f) {
  const uint32_t x = FloatToBits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or NaN; a NaN gets the quiet bit and keeps the top of its payload
    return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? (0x200u | ((abs >> 13) & 0x3ffu)) : 0u));
  }
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (abs < 0x38800000u) {                                               // below 2^-14: subnormal or zero
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);           // <= 2^-25 rounds to zero
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - (abs >> 23);  // 14..24
    const uint32_t rounded = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1u);
    const uint32_t r = rounded + ((rem > half || (rem == half && (rounded & 1u))) ? 1u : 0u);
    return static_cast<uint16_t>(sign | r);
  }
  uint32_t v = abs - 0x38000000u;  // rebias the exponent from 127 to 15
  const uint32_t rem = v & 0x1fffu;
  v >>= 13;
  if (rem > 0x1000u || (rem == 0x1000u && (v & 1u))) ++v;  // a carry into the exponent is correct
  return static_cast<uint16_t>(sign | v);
}

// The same steps as HalfBitsToFloat in half.h.
ONNXAMP_HOST_DEVICE inline float HalfBitsToFloatHD(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    if (mant == 0) return BitsToFloatValue(sign);
    const float v = static_cast<float>(mant) * 5.9604644775390625e-08f;  // mant * 2^-24, exact
    return sign ? -v : v;
  }
  if (exp == 31) return BitsToFloatValue(sign | 0x7f800000u | (mant << 13));
  return BitsToFloatValue(sign | ((exp + 112u) << 23) | (mant << 13));
}

// The same steps as FloatToBFloat16Bits in half.h.
ONNXAMP_HOST_DEVICE inline uint16_t FloatToBFloat16BitsHD(float f) {
  const uint32_t x = FloatToBits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  const uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

ONNXAMP_HOST_DEVICE inline float BFloat16BitsToFloatHD(uint16_t b) {
  return BitsToFloatValue(static_cast<uint32_t>(b) << 16);
}

}  // namespace onnxamp::cuda
