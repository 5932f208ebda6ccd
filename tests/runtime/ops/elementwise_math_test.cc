// The vectorizable float math (exp, tanh, erf, sigmoid, gelu) against double precision over dense sweeps, and the
// bulk fp16/bf16 conversions (F16C and portable paths) against half.h's element conversions, exhaustively for
// fp16 -> float and over every rounding boundary for float -> fp16.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "runtime/common/half.h"
#include "runtime/ops/common/elementwise_half.h"
#include "runtime/ops/common/elementwise_math.h"

namespace onnxamp::ops {
namespace {

// The largest error of f against ref over n + 1 evenly spaced points of [lo, hi], in units of the float ulp of the
// reference value.
template <typename F, typename R>
double MaxUlpError(F f, R ref, float lo, float hi, int n = 200000) {
  double worst = 0;
  for (int i = 0; i <= n; ++i) {
    const float x = lo + (hi - lo) * static_cast<float>(i) / static_cast<float>(n);
    const double want = ref(static_cast<double>(x));
    const float wf = static_cast<float>(want);
    const double ulp = std::nextafter(std::fabs(wf), std::numeric_limits<float>::infinity()) - std::fabs(wf);
    if (!(ulp > 0) || std::isinf(ulp)) continue;
    const double err = std::fabs(static_cast<double>(f(x)) - want) / ulp;
    worst = std::max(worst, err);
    if (!(err <= worst)) return INFINITY;  // NaN
  }
  return worst;
}

TEST(ElementwiseMath, Exp) {
  EXPECT_LE(MaxUlpError(
                FastExp, [](double x) { return std::exp(x); }, -87, 88.7f),
            2);
  EXPECT_LE(MaxUlpError(
                FastExp, [](double x) { return std::exp(x); }, -1, 1),
            2);
  // Subnormal results, overflow, special values.
  EXPECT_NEAR(FastExp(-100), std::exp(-100.0f), 1e-45);
  EXPECT_EQ(FastExp(-103.5f), std::exp(-103.5f));
  EXPECT_EQ(FastExp(-200), 0.0f);
  EXPECT_EQ(FastExp(89), std::numeric_limits<float>::infinity());
  EXPECT_EQ(FastExp(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(FastExp(std::numeric_limits<float>::infinity()), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(FastExp(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(FastExp(0), 1.0f);
}

TEST(ElementwiseMath, TanhErfSigmoid) {
  EXPECT_LE(MaxUlpError(
                FastTanh, [](double x) { return std::tanh(x); }, -10, 10),
            8);
  EXPECT_LE(MaxUlpError(
                FastTanh, [](double x) { return std::tanh(x); }, -0.01f, 0.01f),
            8);
  EXPECT_LE(MaxUlpError(
                FastErf, [](double x) { return std::erf(x); }, -5, 5),
            10);
  EXPECT_LE(MaxUlpError(
                FastErf, [](double x) { return std::erf(x); }, -0.01f, 0.01f),
            8);
  EXPECT_LE(MaxUlpError(
                FastSigmoid, [](double x) { return 1 / (1 + std::exp(-x)); }, -100, 100),
            4);
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(FastTanh(inf), 1.0f);
  EXPECT_EQ(FastTanh(-inf), -1.0f);
  EXPECT_EQ(FastErf(-inf), -1.0f);
  EXPECT_EQ(FastSigmoid(-inf), 0.0f);
  EXPECT_EQ(FastSigmoid(inf), 1.0f);
  EXPECT_TRUE(std::isnan(FastTanh(nan)));
  EXPECT_TRUE(std::isnan(FastErf(nan)));
  EXPECT_TRUE(std::isnan(FastSigmoid(nan)));
  // Odd functions keep -0 and tiny values exact.
  EXPECT_TRUE(std::signbit(FastTanh(-0.0f)));
  EXPECT_EQ(FastTanh(1e-30f), 1e-30f);
}

TEST(ElementwiseMath, GeluKeepsRelativePrecisionForNegativeInputs) {
  // The erfc tail below x = -1: relative error within 1e-5 down to x = -9 (results near -1e-18; the float rounding
  // of x^2 / 2 in the exponent grows the relative error like x^2 * 1e-7 further out).
  double worst = 0;
  for (int i = 0; i <= 150000; ++i) {
    const float x = -9.0f + 15.0f * static_cast<float>(i) / 150000.0f;
    const double want = 0.5 * x * std::erfc(-x / std::sqrt(2.0));
    if (want != 0) worst = std::max(worst, std::fabs(FastGelu(x) - want) / std::fabs(want));
  }
  EXPECT_LT(worst, 1e-5);
  EXPECT_LE(MaxUlpError(
                FastErfcNonNegative, [](double z) { return std::erfc(z); }, 0, 3),
            40);
}

TEST(ElementwiseMath, GeluErfIsTheErfFormToFloatPrecision) {
  // 0.5 x (1 + erf(x / sqrt 2)) in double, against the float form: within 1e-6 of max(|x|, 1) everywhere (the
  // cancellation of 1 + erf for negative x costs relative, not absolute, precision), and -0 below about -5.4.
  double worst = 0;
  for (int i = 0; i <= 160000; ++i) {
    const float x = -10.0f + 20.0f * static_cast<float>(i) / 160000.0f;
    const double want = 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    worst = std::max(worst, std::fabs(FastGeluErf(x) - want) / std::max(1.0, std::fabs(static_cast<double>(x))));
  }
  EXPECT_LT(worst, 1e-6);
  EXPECT_EQ(FastGeluErf(0.0f), 0.0f);
  EXPECT_EQ(FastGeluErf(-6.0f), 0.0f);
  EXPECT_EQ(FastGeluErf(6.0f), 6.0f);
}

TEST(ElementwiseMath, GeluTanhKeepsRelativePrecisionForNegativeInputs) {
  // 0.5 (1 + tanh(y)) = 1 / (1 + e^-2y), which stays precise in double where 1 + tanh(y) would not.
  auto ref = [](double x) { return x / (1 + std::exp(-2 * std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); };
  // The float rounding of the argument y alone moves e^-|y| by |y| * 6e-8 relative (49 at x = -8), so the bound is
  // relative, not in ulp: what matters is that no cancellation wipes the small results out.
  double worst = 0;
  for (int i = 0; i <= 140000; ++i) {
    const float x = -8.0f + 14.0f * static_cast<float>(i) / 140000.0f;
    const double want = ref(x);
    if (want != 0) worst = std::max(worst, std::fabs(FastGeluTanh(x) - want) / std::fabs(want));
  }
  EXPECT_LT(worst, 1e-5);
}

TEST(ElementwiseMath, ArraysMatchElementFunctionsBitForBit) {
  // Whatever instruction set the arrays use here, they give the element functions' exact bits (odd length: the
  // vector body and the scalar tail both run).
  std::vector<float> x(100003);
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> u(-12, 12);
  for (float& v : x) v = u(rng);
  x[0] = std::numeric_limits<float>::quiet_NaN();
  x[1] = std::numeric_limits<float>::infinity();
  x[2] = -std::numeric_limits<float>::infinity();
  x[3] = -0.0f;
  x[4] = 1e-40f;
  std::vector<float> y(x.size());
  struct Case {
    const char* name;
    void (*array)(const float*, float*, int64_t);
    float (*element)(float);
  };
  const Case cases[] = {{"exp", ExpArray, FastExp},
                        {"tanh", TanhArray, FastTanh},
                        {"erf", ErfArray, FastErf},
                        {"sigmoid", SigmoidArray, FastSigmoid},
                        {"gelu", GeluArray, FastGelu},
                        {"gelu_erf", GeluErfArray, FastGeluErf},
                        {"gelu_tanh", GeluTanhArray, FastGeluTanh},
                        {"sqrt", SqrtArray, [](float v) { return std::sqrt(v); }},
                        {"relu", ReluArray, [](float v) { return v < 0.0f ? 0.0f : v; }}};
  for (const Case& c : cases) {
    c.array(x.data(), y.data(), static_cast<int64_t>(x.size()));
    for (size_t i = 0; i < x.size(); ++i) {
      const float want = c.element(x[i]);
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(y[i])) << c.name << " at " << x[i];
      } else {
        ASSERT_EQ(FloatBits(y[i]), FloatBits(want)) << c.name << " at " << x[i] << ": " << y[i] << " vs " << want;
      }
    }
  }
}

TEST(HalfConversion, HalfToFloatExhaustive) {
  std::vector<Float16> h(65536);
  for (uint32_t i = 0; i < 65536; ++i) h[i] = Float16::FromBits(static_cast<uint16_t>(i));
  std::vector<float> fast(65536), portable(65536);
  HalfToFloat(h.data(), fast.data(), 65536);
  HalfToFloatPortable(h.data(), portable.data(), 65536);
  for (uint32_t i = 0; i < 65536; ++i) {
    const float want = static_cast<float>(h[i]);
    if (std::isnan(want)) {  // signalling NaNs may come back quiet
      ASSERT_TRUE(std::isnan(fast[i]) && std::signbit(fast[i]) == std::signbit(want)) << i;
      ASSERT_TRUE(std::isnan(portable[i]) && std::signbit(portable[i]) == std::signbit(want)) << i;
      continue;
    }
    ASSERT_EQ(FloatBits(fast[i]), FloatBits(want)) << "fp16 bits " << i;
    ASSERT_EQ(FloatBits(portable[i]), FloatBits(want)) << "fp16 bits " << i;
  }
}

// Floats around every fp16 rounding boundary (each half value, the midpoints to its neighbour and one float ulp
// either side of them), plus random bit patterns of every exponent.
std::vector<float> HalfBoundaryFloats() {
  std::vector<float> v;
  for (uint32_t i = 0; i < 0x7c00; ++i) {
    const float lo = HalfBitsToFloat(static_cast<uint16_t>(i));
    const float hi = i + 1 < 0x7c00 ? HalfBitsToFloat(static_cast<uint16_t>(i + 1)) : 65520.0f;
    const float mid = static_cast<float>((static_cast<double>(lo) + hi) / 2);
    for (float x : {lo, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
      v.push_back(x);
      v.push_back(-x);
    }
  }
  std::mt19937 rng(5);
  for (int i = 0; i < 200000; ++i) v.push_back(BitsToFloat(static_cast<uint32_t>(rng())));
  const float inf = std::numeric_limits<float>::infinity();
  for (float x : {inf, -inf, std::numeric_limits<float>::quiet_NaN(), 65519.996f, 65520.0f, 1e-45f, 3e-8f}) {
    v.push_back(x);
  }
  return v;
}

TEST(HalfConversion, FloatToHalfMatchesElementConversion) {
  const std::vector<float> v = HalfBoundaryFloats();
  std::vector<Float16> fast(v.size()), portable(v.size());
  FloatToHalf(v.data(), fast.data(), static_cast<int64_t>(v.size()));
  FloatToHalfPortable(v.data(), portable.data(), static_cast<int64_t>(v.size()));
  for (size_t i = 0; i < v.size(); ++i) {
    const uint16_t want = Float16(v[i]).bits;
    ASSERT_EQ(fast[i].bits, want) << "float bits " << std::hex << FloatBits(v[i]);
    ASSERT_EQ(portable[i].bits, want) << "float bits " << std::hex << FloatBits(v[i]);
  }
}

// The rounding of a float kernel's output to float16 values (FusedConv's and BlockedConv's round_to): each value is
// Float16(v) widened back, and the ranges a pool of threads takes give the same bits.
TEST(HalfConversion, RoundToHalfInPlaceOnThreads) {
  std::mt19937 gen(7);
  std::uniform_int_distribution<uint32_t> bits;
  std::vector<float> values(100003);  // several ranges of 16K, not a multiple of any vector width
  for (float& v : values) v = std::bit_cast<float>(bits(gen));
  values[0] = 65520.0f;  // rounds to inf in float16
  values[1] = 1e-8f;     // a float16 subnormal
  values[2] = -std::numeric_limits<float>::quiet_NaN();
  std::vector<float> want(values.size());
  for (size_t i = 0; i < values.size(); ++i) want[i] = static_cast<float>(Float16(values[i]));
  std::vector<float> single = values, threaded = values;
  RoundToHalfInPlace(single.data(), static_cast<int64_t>(single.size()));
  exec::ThreadPool pool(2);
  RoundToHalfInPlace(threaded.data(), static_cast<int64_t>(threaded.size()), pool);
  EXPECT_TRUE(std::isinf(single[0]));
  for (size_t i = 0; i < values.size(); ++i) {
    if (std::isnan(want[i])) {
      ASSERT_TRUE(std::isnan(single[i]) && std::isnan(threaded[i])) << i;
      continue;
    }
    ASSERT_EQ(std::bit_cast<uint32_t>(single[i]), std::bit_cast<uint32_t>(want[i])) << i << ": " << values[i];
    ASSERT_EQ(std::bit_cast<uint32_t>(threaded[i]), std::bit_cast<uint32_t>(single[i])) << i;
  }
}

TEST(HalfConversion, BFloat16MatchesElementConversion) {
  std::vector<float> v = HalfBoundaryFloats();
  for (uint32_t i = 0; i < 65536; ++i) {
    const float x = BFloat16BitsToFloat(static_cast<uint16_t>(i));
    v.push_back(x);
    v.push_back(BitsToFloat(FloatBits(x) + 0x8000u));  // a tie
    v.push_back(BitsToFloat(FloatBits(x) + 0x8001u));
  }
  // Every float NaN class (quiet and signalling, both signs, payloads in the low and the high bits).
  for (uint32_t bits : {0x7f800001u, 0x7fbfffffu, 0x7fc00000u, 0x7fffffffu, 0xff800001u, 0xffc00001u, 0xffffffffu}) {
    v.push_back(BitsToFloat(bits));
  }
  v.push_back(1.0f);  // an odd count: every path's tail loop runs
  auto check = [&](const char* path, const std::vector<BFloat16>& b, const std::vector<float>& back) {
    for (size_t i = 0; i < v.size(); ++i) {
      ASSERT_EQ(b[i].bits, BFloat16(v[i]).bits) << path << ": float bits " << std::hex << FloatBits(v[i]);
      ASSERT_EQ(FloatBits(back[i]), FloatBits(static_cast<float>(b[i]))) << path;
    }
  };
  std::vector<BFloat16> b(v.size());
  std::vector<float> back(v.size());
  FloatToBFloat16(v.data(), b.data(), static_cast<int64_t>(v.size()));
  BFloat16ToFloat(b.data(), back.data(), static_cast<int64_t>(v.size()));
  check(BFloat16ConversionIsa(), b, back);
  // Each loop this CPU can run, whichever the dispatch picks.
  for (const char* isa : {"portable", "avx2", "avx512"}) {
    std::fill(b.begin(), b.end(), BFloat16());
    if (!BFloat16ConversionsUsing(isa, v.data(), b.data(), back.data(), static_cast<int64_t>(v.size()))) {
      std::printf("bf16 conversions: no %s on this CPU\n", isa);
      continue;
    }
    check(isa, b, back);
  }
}

TEST(HalfConversion, OddLengthsAndF16cReport) {
  // Lengths around the 8-wide F16C step take the tail loop; results equal the element conversions.
  for (int n : {0, 1, 7, 8, 9, 17}) {
    std::vector<float> f(n);
    for (int i = 0; i < n; ++i) f[i] = 0.1f * static_cast<float>(i) - 0.3f;
    std::vector<Float16> h(n);
    FloatToHalf(f.data(), h.data(), n);
    std::vector<float> back(n);
    HalfToFloat(h.data(), back.data(), n);
    for (int i = 0; i < n; ++i) EXPECT_EQ(back[i], static_cast<float>(Float16(f[i])));
  }
  // Informative: which paths this machine takes.
  std::printf("fp16 conversions use F16C: %s; bf16 conversions: %s; float math arrays: %s\n",
              HalfConversionUsesF16c() ? "yes" : "no", BFloat16ConversionIsa(), MathArraysIsa());
}

}  // namespace
}  // namespace onnxamp::ops
