// The host build of the kernels' conversion code (runtime/cuda/half_convert.h) is bit-identical to half.h.
#include "runtime/cuda/half_convert.h"

#include <gtest/gtest.h>

#include <cstdint>

#include "runtime/common/half.h"

namespace onnxamp::cuda {
namespace {

TEST(HalfConvert, SixteenBitToFloatOverAllPatterns) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const auto bits = static_cast<uint16_t>(b);
    ASSERT_EQ(FloatBits(HalfBitsToFloatHD(bits)), FloatBits(HalfBitsToFloat(bits))) << std::hex << b;
    ASSERT_EQ(FloatBits(BFloat16BitsToFloatHD(bits)), FloatBits(BFloat16BitsToFloat(bits))) << std::hex << b;
  }
}

// Every float whose low 7 bits are 0 or 1 (2^26 values): every sign, exponent and kept mantissa, every round bit,
// exact ties and ties plus the lowest sticky bit for both formats, subnormal inputs and outputs, NaN payloads.
TEST(HalfConvert, FloatToSixteenBitOverAllHighBits) {
  for (uint32_t high = 0; high < (1u << 25); ++high) {
    for (uint32_t low : {0x00u, 0x01u}) {
      const float f = BitsToFloat(high << 7 | low);
      ASSERT_EQ(FloatToHalfBitsHD(f), FloatToHalfBits(f)) << std::hex << (high << 7 | low);
      ASSERT_EQ(FloatToBFloat16BitsHD(f), FloatToBFloat16Bits(f)) << std::hex << (high << 7 | low);
    }
  }
}

}  // namespace
}  // namespace onnxamp::cuda
