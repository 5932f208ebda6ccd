// fp16 and bfloat16 conversions (runtime/common/half.h) against exhaustive round trips and independent references.
#include "runtime/common/half.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace onnxamp {
namespace {

// The format of a binary floating-point storage type, for the reference rounding below.
struct Format {
  int mantissa_bits;  // stored fraction bits: 10 for fp16, 7 for bf16
  int min_exponent;   // exponent of the smallest normal: -14 for fp16, -126 for bf16
  double max_finite;  // 65504 for fp16
};
constexpr Format kHalf{10, -14, 65504.0};
const Format kBFloat16{7, -126, std::ldexp(2.0 - std::ldexp(1.0, -7), 127)};

// Rounds a finite float to the nearest value of `fmt`, ties to even, computed in double arithmetic with nearbyint
// (a different route from half.h's bit manipulation). Overflow gives infinity.
double ReferenceRound(float f, const Format& fmt) {
  const double x = std::fabs(static_cast<double>(f));
  if (x == 0 || std::isinf(x)) return static_cast<double>(f);
  const int exponent = std::max(std::ilogb(x), fmt.min_exponent);
  const double quantum = std::ldexp(1.0, exponent - fmt.mantissa_bits);  // spacing of values near x
  double r = std::nearbyint(x / quantum) * quantum;                      // x / quantum is exact: a power of two
  if (r > fmt.max_finite) r = std::numeric_limits<double>::infinity();
  return std::copysign(r, f);
}

// Same value and, for zeros and infinities, the same sign.
void ExpectSameValue(float got, double want, float input, const char* what) {
  EXPECT_EQ(static_cast<double>(got), want)
      << what << " of " << input << " (bits 0x" << std::hex << FloatBits(input) << ")";
  EXPECT_EQ(std::signbit(got), std::signbit(want)) << what << " of " << input;
}

// Floats that exercise rounding: a strided sweep over all bit patterns, every pattern with a few low-bit endings,
// and random values. Deterministic.
std::vector<float> FloatSweep() {
  std::vector<float> values;
  for (uint64_t u = 0; u <= 0xffffffffu; u += 1021) values.push_back(BitsToFloat(static_cast<uint32_t>(u)));
  for (uint32_t high = 0; high < (1u << 19); ++high) {
    for (uint32_t low : {0x0000u, 0x0001u, 0x0fffu, 0x1000u, 0x1001u, 0x1fffu}) {
      values.push_back(BitsToFloat(high << 13 | low));
    }
  }
  std::mt19937 rng(20240611);
  for (int i = 0; i < 300000; ++i) values.push_back(BitsToFloat(static_cast<uint32_t>(rng())));
  return values;
}

TEST(Half, EveryFp16PatternRoundTripsExactly) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const auto bits = static_cast<uint16_t>(h);
    const float f = HalfBitsToFloat(bits);
    const bool is_nan = (bits & 0x7c00) == 0x7c00 && (bits & 0x3ff) != 0;
    ASSERT_EQ(std::isnan(f), is_nan) << std::hex << h;
    if (is_nan) {
      // NaN stays NaN, with its payload and the quiet bit set.
      EXPECT_EQ(FloatToHalfBits(f), bits | 0x200) << std::hex << h;
      continue;
    }
    EXPECT_EQ(FloatToHalfBits(f), bits) << std::hex << h;
    // The decoded value is what the fields say: (-1)^s * 2^(e-15) * 1.m, or 2^-14 * 0.m for subnormals.
    const int e = (bits >> 10) & 0x1f;
    const int m = bits & 0x3ff;
    double want = e == 0 ? std::ldexp(m, -24) : e == 31 ? INFINITY : std::ldexp(1024 + m, e - 25);
    ExpectSameValue(f, (bits & 0x8000) ? -want : want, f, "HalfBitsToFloat");
  }
}

TEST(Half, EveryBf16PatternRoundTripsExactly) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const auto bits = static_cast<uint16_t>(b);
    const float f = BFloat16BitsToFloat(bits);
    EXPECT_EQ(FloatBits(f), b << 16);
    if (std::isnan(f)) {
      EXPECT_EQ(FloatToBFloat16Bits(f), bits | 0x40) << std::hex << b;
    } else {
      EXPECT_EQ(FloatToBFloat16Bits(f), bits) << std::hex << b;
    }
  }
}

TEST(Half, FloatToFp16MatchesReference) {
  for (float f : FloatSweep()) {
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(HalfBitsToFloat(FloatToHalfBits(f))));
      continue;
    }
    ExpectSameValue(HalfBitsToFloat(FloatToHalfBits(f)), ReferenceRound(f, kHalf), f, "fp16");
  }
}

TEST(Half, FloatToBf16MatchesReference) {
  for (float f : FloatSweep()) {
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(BFloat16BitsToFloat(FloatToBFloat16Bits(f))));
      continue;
    }
    ExpectSameValue(BFloat16BitsToFloat(FloatToBFloat16Bits(f)), ReferenceRound(f, kBFloat16), f, "bf16");
  }
}

// Every tie between neighbouring fp16 values, and the floats just either side of it.
TEST(Half, Fp16TiesRoundToEven) {
  for (uint32_t h = 0; h < 0x7c00; ++h) {  // positive finite values; the tie above 65504 is checked below
    const double lo = HalfBitsToFloat(static_cast<uint16_t>(h));
    const double hi = h + 1 < 0x7c00 ? HalfBitsToFloat(static_cast<uint16_t>(h + 1)) : 65536.0;
    const float mid = static_cast<float>((lo + hi) / 2);  // exact: fp16 spacing is far coarser than float's
    ASSERT_EQ(static_cast<double>(mid), (lo + hi) / 2);
    const uint16_t even = (h & 1) ? static_cast<uint16_t>(h + 1) : static_cast<uint16_t>(h);
    for (float sign : {1.0f, -1.0f}) {
      const uint16_t s = sign < 0 ? 0x8000 : 0;
      EXPECT_EQ(FloatToHalfBits(sign * mid), s | even) << mid;
      EXPECT_EQ(FloatToHalfBits(sign * std::nextafter(mid, 0.0f)), s | h) << mid;
      EXPECT_EQ(FloatToHalfBits(sign * std::nextafter(mid, INFINITY)), s | (h + 1)) << mid;
    }
  }
}

TEST(Half, Bf16TiesRoundToEven) {
  for (uint32_t b = 0; b < 0x7f80; ++b) {
    const uint32_t mid_bits = b << 16 | 0x8000;  // halfway to the next bf16 value
    const uint16_t even = (b & 1) ? static_cast<uint16_t>(b + 1) : static_cast<uint16_t>(b);
    for (uint32_t sign : {0u, 0x80000000u}) {
      const uint16_t s = sign ? 0x8000 : 0;
      EXPECT_EQ(FloatToBFloat16Bits(BitsToFloat(sign | mid_bits)), s | even) << std::hex << b;
      EXPECT_EQ(FloatToBFloat16Bits(BitsToFloat(sign | (mid_bits - 1))), s | b) << std::hex << b;
      EXPECT_EQ(FloatToBFloat16Bits(BitsToFloat(sign | (mid_bits + 1))), s | (b + 1)) << std::hex << b;
    }
  }
}

TEST(Half, Fp16Boundaries) {
  EXPECT_EQ(FloatToHalfBits(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToHalfBits(65519.99f), 0x7bff);  // just below the tie: largest finite
  EXPECT_EQ(FloatToHalfBits(65520.0f), 0x7c00);   // the tie rounds to even: infinity
  EXPECT_EQ(FloatToHalfBits(-65520.0f), 0xfc00);
  EXPECT_EQ(FloatToHalfBits(1.0e10f), 0x7c00);
  EXPECT_EQ(FloatToHalfBits(INFINITY), 0x7c00);
  EXPECT_EQ(FloatToHalfBits(-INFINITY), 0xfc00);
  EXPECT_EQ(FloatToHalfBits(std::ldexp(1.0f, -14)), 0x0400);     // smallest normal
  EXPECT_EQ(FloatToHalfBits(std::ldexp(1.0f, -24)), 0x0001);     // smallest subnormal
  EXPECT_EQ(FloatToHalfBits(std::ldexp(1.0f, -25)), 0x0000);     // tie with zero: even
  EXPECT_EQ(FloatToHalfBits(std::ldexp(1.5f, -25)), 0x0001);     // above the tie
  EXPECT_EQ(FloatToHalfBits(std::ldexp(3.0f, -25)), 0x0002);     // tie between 1 and 2 ulps: even
  EXPECT_EQ(FloatToHalfBits(std::ldexp(5.0f, -25)), 0x0002);     // tie between 2 and 3 ulps: even
  EXPECT_EQ(FloatToHalfBits(-std::ldexp(1.0f, -26)), 0x8000);    // negative underflow keeps the sign
  EXPECT_EQ(FloatToHalfBits(std::ldexp(1023.5f, -24)), 0x0400);  // subnormal rounding up into the normals
  EXPECT_EQ(FloatToHalfBits(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(FloatToHalfBits(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie: even (1.0)
  EXPECT_EQ(FloatToHalfBits(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(FloatToHalfBits(std::nanf("")) & 0x7e00, 0x7e00);
  EXPECT_EQ(FloatToHalfBits(BitsToFloat(0x7f800001u)), 0x7e00);  // signalling NaN, payload below fp16's: quiet NaN
  EXPECT_EQ(FloatToHalfBits(BitsToFloat(0xffa00000u)), 0xfe00 | 0x100);
}

TEST(Half, Bf16Boundaries) {
  EXPECT_EQ(FloatToBFloat16Bits(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBFloat16Bits(BitsToFloat(0x3f808000u)), 0x3f80);           // tie: even
  EXPECT_EQ(FloatToBFloat16Bits(BitsToFloat(0x3f818000u)), 0x3f82);           // tie: even (up)
  EXPECT_EQ(FloatToBFloat16Bits(std::numeric_limits<float>::max()), 0x7f80);  // rounds past the largest: infinity
  EXPECT_EQ(FloatToBFloat16Bits(BitsToFloat(0x7f7f7fffu)), 0x7f7f);
  EXPECT_EQ(FloatToBFloat16Bits(-INFINITY), 0xff80);
  EXPECT_EQ(FloatToBFloat16Bits(std::numeric_limits<float>::denorm_min()), 0x0000);  // tie with zero: even
  EXPECT_EQ(FloatToBFloat16Bits(BitsToFloat(0x00008001u)), 0x0001);                  // subnormals are kept
  EXPECT_EQ(FloatToBFloat16Bits(BitsToFloat(0x7f800001u)), 0x7fc0);                  // NaN with a low payload stays NaN
  EXPECT_EQ(FloatToBFloat16Bits(BitsToFloat(0xff810000u)), 0xffc1);
}

#if defined(__FLT16_MANT_DIG__)
// The compiler's own _Float16 (GCC 12 on x86-64: soft-float conversion in libgcc) as a second reference.
TEST(Half, FloatToFp16MatchesCompilerFloat16) {
  for (float f : FloatSweep()) {
    if (std::isnan(f)) continue;
    const _Float16 h = static_cast<_Float16>(f);
    uint16_t want;
    std::memcpy(&want, &h, sizeof(want));
    EXPECT_EQ(FloatToHalfBits(f), want) << f;
  }
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    _Float16 v;
    const auto bits = static_cast<uint16_t>(h);
    std::memcpy(&v, &bits, sizeof(v));
    if (std::isnan(static_cast<float>(v))) continue;
    EXPECT_EQ(HalfBitsToFloat(bits), static_cast<float>(v)) << std::hex << h;
  }
}
#endif

TEST(Half, StorageTypes) {
  EXPECT_EQ(Float16(1.5f).bits, 0x3e00);
  EXPECT_EQ(static_cast<float>(Float16::FromBits(0xc000)), -2.0f);
  EXPECT_EQ(BFloat16(1.5f).bits, 0x3fc0);
  EXPECT_EQ(static_cast<float>(BFloat16::FromBits(0xc000)), -2.0f);
}

}  // namespace
}  // namespace onnxamp
