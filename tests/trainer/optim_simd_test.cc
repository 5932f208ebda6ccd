// The AVX2 optimizer loops (trainer/optim/optim_simd.h) against the scalar functions of optim_math.h: the same bits
// for every option combination, on values that include zeros, denormals, huge magnitudes, inf and NaN (NaN where
// the scalar gives NaN; its payload is not compared).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "trainer/optim/optim_math.h"
#include "trainer/optim/optim_simd.h"

namespace onnxamp::trainer {
namespace {

using optim_math::AdamScalars;
using optim_math::SgdScalars;

std::vector<float> Values(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(gen);
  const float special[] = {0.0f,
                           -0.0f,
                           1e-40f,
                           -3e-39f,
                           3e38f,
                           -2e38f,
                           std::numeric_limits<float>::infinity(),
                           std::numeric_limits<float>::quiet_NaN()};
  for (size_t i = 0; i < sizeof(special) / sizeof(special[0]) && 3 * i < n; ++i) v[3 * i + seed % 3] = special[i];
  return v;
}

void ExpectSameBits(const std::vector<float>& want, const std::vector<float>& got, const std::string& what) {
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i]) && std::isnan(got[i])) continue;  // NaN payloads may follow operand order
    ASSERT_EQ(std::bit_cast<uint32_t>(want[i]), std::bit_cast<uint32_t>(got[i]))
        << what << " element " << i << ": scalar " << want[i] << ", simd " << got[i];
  }
}

class OptimSimd : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!optim_simd::Enabled()) GTEST_SKIP() << "the CPU has no AVX2/FMA: the scalar loops run";
  }
  void TearDown() override { optim_simd::SetEnabled(true); }
};

TEST_F(OptimSimd, AdamMatchesTheScalarBitForBit) {
  constexpr size_t n = 77;  // 9 vectors and a tail the caller runs
  int cases = 0;
  for (bool decoupled : {false, true}) {
    for (double weight_decay : {0.0, 0.01}) {
      for (bool amsgrad : {false, true}) {
        for (double beta1 : {0.9, 0.3}) {  // lerp weight 0.1 and 0.7: both branches of Lerp
          for (int64_t step : {1, 7}) {
            const AdamScalars s =
                optim_math::ComputeAdamScalars(1e-3, beta1, 0.999, 1e-8, weight_decay, decoupled, amsgrad, step);
            std::vector<float> p0 = Values(n, 1), g = Values(n, 2), m0 = Values(n, 3), v0 = Values(n, 4);
            for (float& x : v0) x = std::fabs(x);
            std::vector<float> vmax0 = v0;
            for (size_t i = 0; i < n; i += 2) vmax0[i] *= 1.5f;
            // Scalar reference.
            std::vector<float> p = p0, m = m0, v = v0, vmax = vmax0;
            for (size_t j = 0; j < n; ++j) p[j] = optim_math::AdamElement(p[j], g[j], &m[j], &v[j], &vmax[j], s);
            // SIMD loop plus the scalar tail, as adam.cc runs them.
            std::vector<float> q = p0, m2 = m0, v2 = v0, vmax2 = vmax0;
            const size_t done = optim_simd::AdamSteps(q.data(), g.data(), m2.data(), v2.data(), vmax2.data(), n, s);
            EXPECT_EQ(done, n / 8 * 8);
            for (size_t j = done; j < n; ++j) q[j] = optim_math::AdamElement(q[j], g[j], &m2[j], &v2[j], &vmax2[j], s);
            const std::string what = std::string(decoupled ? "adamw" : "adam") + " wd " + std::to_string(weight_decay) +
                                     " amsgrad " + std::to_string(amsgrad) + " beta1 " + std::to_string(beta1) +
                                     " step " + std::to_string(step);
            ExpectSameBits(p, q, what + " param");
            ExpectSameBits(m, m2, what + " exp_avg");
            ExpectSameBits(v, v2, what + " exp_avg_sq");
            if (amsgrad) ExpectSameBits(vmax, vmax2, what + " max_exp_avg_sq");
            ++cases;
          }
        }
      }
    }
  }
  EXPECT_EQ(cases, 32);
}

TEST_F(OptimSimd, SgdMatchesTheScalarBitForBit) {
  constexpr size_t n = 45;
  int cases = 0;
  for (double weight_decay : {0.0, 0.05}) {
    for (double momentum : {0.0, 0.9}) {
      for (bool nesterov : {false, true}) {
        for (bool first_step : {true, false}) {
          SgdScalars s;
          s.has_weight_decay = weight_decay != 0.0;
          s.weight_decay = static_cast<float>(weight_decay);
          s.has_momentum = momentum != 0.0;
          s.momentum = static_cast<float>(momentum);
          s.one_minus_dampening = static_cast<float>(1.0 - 0.25);
          s.nesterov = nesterov;
          s.neg_lr = static_cast<float>(-0.1);
          std::vector<float> p0 = Values(n, 5), g = Values(n, 6), buf0 = Values(n, 7);
          std::vector<float> p = p0, buf = buf0;
          for (size_t j = 0; j < n; ++j) p[j] = optim_math::SgdElement(p[j], g[j], &buf[j], first_step, s);
          std::vector<float> q = p0, buf2 = buf0;
          const size_t done = optim_simd::SgdSteps(q.data(), g.data(), buf2.data(), n, first_step, s);
          EXPECT_EQ(done, n / 8 * 8);
          for (size_t j = done; j < n; ++j) q[j] = optim_math::SgdElement(q[j], g[j], &buf2[j], first_step, s);
          const std::string what = "sgd wd " + std::to_string(weight_decay) + " momentum " + std::to_string(momentum) +
                                   " nesterov " + std::to_string(nesterov) + " first " + std::to_string(first_step);
          ExpectSameBits(p, q, what + " param");
          if (s.has_momentum) ExpectSameBits(buf, buf2, what + " momentum_buffer");
          ++cases;
        }
      }
    }
  }
  EXPECT_EQ(cases, 16);
}

TEST_F(OptimSimd, RmspropMatchesTheScalarBitForBit) {
  constexpr size_t n = 45;
  int cases = 0;
  for (double weight_decay : {0.0, 0.05}) {
    for (double momentum : {0.0, 0.9}) {
      for (bool centered : {false, true}) {
        const optim_math::RmspropScalars s =
            optim_math::ComputeRmspropScalars(0.01, 0.9, 1e-8, weight_decay, momentum, centered);
        // Square averages are >= 0 in a run: the values' magnitudes (NaN and inf kept).
        std::vector<float> p0 = Values(n, 8), g = Values(n, 9), v0 = Values(n, 10), m0 = Values(n, 11),
                           b0 = Values(n, 12);
        for (float& x : v0) x = std::fabs(x);
        std::vector<float> p = p0, v = v0, m = m0, b = b0;
        for (size_t j = 0; j < n; ++j) p[j] = optim_math::RmspropElement(p[j], g[j], &v[j], &m[j], &b[j], s);
        std::vector<float> q = p0, v2 = v0, m2 = m0, b2 = b0;
        const size_t done = optim_simd::RmspropSteps(q.data(), g.data(), v2.data(), m2.data(), b2.data(), n, s);
        EXPECT_EQ(done, n / 8 * 8);
        for (size_t j = done; j < n; ++j) q[j] = optim_math::RmspropElement(q[j], g[j], &v2[j], &m2[j], &b2[j], s);
        const std::string what = "rmsprop wd " + std::to_string(weight_decay) + " momentum " +
                                 std::to_string(momentum) + " centered " + std::to_string(centered);
        ExpectSameBits(p, q, what + " param");
        ExpectSameBits(v, v2, what + " square_avg");
        if (centered) ExpectSameBits(m, m2, what + " grad_avg");
        if (s.has_momentum) ExpectSameBits(b, b2, what + " momentum_buffer");
        ++cases;
      }
    }
  }
  EXPECT_EQ(cases, 8);
}

TEST_F(OptimSimd, RadamMatchesTheScalarBitForBit) {
  constexpr size_t n = 45;
  for (double weight_decay : {0.0, 0.05, -0.05}) {  // -0.05: 0.05 decoupled
    for (int64_t step : {2, 9}) {                   // beta2 0.9: momentum SGD at step 2, rectified at step 9
      const optim_math::RadamScalars s =
          optim_math::ComputeRadamScalars(0.01, 0.9, 0.9, 1e-8, std::fabs(weight_decay), step, weight_decay < 0);
      std::vector<float> p0 = Values(n, 19), g = Values(n, 20), m0 = Values(n, 21), v0 = Values(n, 22);
      for (float& x : v0) x = std::fabs(x);
      std::vector<float> p = p0, m = m0, v = v0;
      for (size_t j = 0; j < n; ++j) p[j] = optim_math::RadamElement(p[j], g[j], &m[j], &v[j], s);
      std::vector<float> q = p0, m2 = m0, v2 = v0;
      const size_t done = optim_simd::RadamSteps(q.data(), g.data(), m2.data(), v2.data(), n, s);
      EXPECT_EQ(done, n / 8 * 8);
      for (size_t j = done; j < n; ++j) q[j] = optim_math::RadamElement(q[j], g[j], &m2[j], &v2[j], s);
      const std::string what = "radam wd " + std::to_string(weight_decay) + " step " + std::to_string(step);
      ExpectSameBits(p, q, what + " param");
      ExpectSameBits(m, m2, what + " exp_avg");
      ExpectSameBits(v, v2, what + " exp_avg_sq");
    }
  }
}

TEST_F(OptimSimd, NadamMatchesTheScalarBitForBit) {
  constexpr size_t n = 45;
  for (double weight_decay : {0.0, 0.05, -0.05}) {  // -0.05: 0.05 decoupled
    for (int64_t step : {1, 7}) {
      const optim_math::NadamScalars s =
          optim_math::ComputeNadamScalars(0.01, 0.9, 0.99, 1e-8, std::fabs(weight_decay), 4e-3, weight_decay < 0, step);
      std::vector<float> p0 = Values(n, 23), g = Values(n, 24), m0 = Values(n, 25), v0 = Values(n, 26);
      for (float& x : v0) x = std::fabs(x);
      std::vector<float> p = p0, m = m0, v = v0;
      for (size_t j = 0; j < n; ++j) p[j] = optim_math::NadamElement(p[j], g[j], &m[j], &v[j], s);
      std::vector<float> q = p0, m2 = m0, v2 = v0;
      const size_t done = optim_simd::NadamSteps(q.data(), g.data(), m2.data(), v2.data(), n, s);
      EXPECT_EQ(done, n / 8 * 8);
      for (size_t j = done; j < n; ++j) q[j] = optim_math::NadamElement(q[j], g[j], &m2[j], &v2[j], s);
      const std::string what = "nadam wd " + std::to_string(weight_decay) + " step " + std::to_string(step);
      ExpectSameBits(p, q, what + " param");
      ExpectSameBits(m, m2, what + " exp_avg");
      ExpectSameBits(v, v2, what + " exp_avg_sq");
    }
  }
}

TEST_F(OptimSimd, AdagradMatchesTheScalarBitForBit) {
  constexpr size_t n = 45;
  for (double weight_decay : {0.0, 0.05}) {
    for (bool first_step : {true, false}) {
      const optim_math::AdagradScalars s = optim_math::ComputeAdagradScalars(0.01, 0.1, weight_decay, 0.25, 1e-10, 3);
      std::vector<float> p0 = Values(n, 16), g = Values(n, 17), sum0 = Values(n, 18);
      for (float& x : sum0) x = std::fabs(x);
      std::vector<float> p = p0, sum = sum0;
      for (size_t j = 0; j < n; ++j) p[j] = optim_math::AdagradElement(p[j], g[j], &sum[j], first_step, s);
      std::vector<float> q = p0, sum2 = sum0;
      const size_t done = optim_simd::AdagradSteps(q.data(), g.data(), sum2.data(), n, first_step, s);
      EXPECT_EQ(done, n / 8 * 8);
      for (size_t j = done; j < n; ++j) q[j] = optim_math::AdagradElement(q[j], g[j], &sum2[j], first_step, s);
      const std::string what = "adagrad wd " + std::to_string(weight_decay) + " first " + std::to_string(first_step);
      ExpectSameBits(p, q, what + " param");
      ExpectSameBits(sum, sum2, what + " sum");
    }
  }
}

TEST_F(OptimSimd, LionMatchesTheScalarBitForBit) {
  constexpr size_t n = 45;
  for (double weight_decay : {0.0, 0.1}) {
    const optim_math::LionScalars s = optim_math::ComputeLionScalars(3e-4, 0.9, 0.99, weight_decay);
    std::vector<float> p0 = Values(n, 13), g = Values(n, 14), m0 = Values(n, 15);
    g[5] = 0.0f;  // with m0[5] == 0 below: a zero update, sign 0
    m0[5] = 0.0f;
    g[6] = -0.0f;
    m0[6] = -0.0f;
    std::vector<float> p = p0, m = m0;
    for (size_t j = 0; j < n; ++j) p[j] = optim_math::LionElement(p[j], g[j], &m[j], s);
    std::vector<float> q = p0, m2 = m0;
    const size_t done = optim_simd::LionSteps(q.data(), g.data(), m2.data(), n, s);
    EXPECT_EQ(done, n / 8 * 8);
    for (size_t j = done; j < n; ++j) q[j] = optim_math::LionElement(q[j], g[j], &m2[j], s);
    const std::string what = "lion wd " + std::to_string(weight_decay);
    ExpectSameBits(p, q, what + " param");
    ExpectSameBits(m, m2, what + " exp_avg");
  }
}

// The moving average's lerp, for weights on either side of 0.5 (the two forms of Lerp), with infinities and NaNs.
TEST_F(OptimSimd, LerpMatchesTheScalarBitForBit) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  const size_t n = 103;
  std::vector<float> start(n), end(n);
  for (size_t i = 0; i < n; ++i) {
    start[i] = normal(rng);
    end[i] = normal(rng);
  }
  start[4] = std::numeric_limits<float>::infinity();
  end[9] = std::numeric_limits<float>::quiet_NaN();
  end[17] = -0.0f;
  for (float w : {0.001f, 0.1f, 0.4999f, 0.5f, 0.9f, 1.0f}) {
    std::vector<float> simd = start, scalar = start;
    const size_t done = optim_simd::LerpSteps(simd.data(), end.data(), n, w);
    EXPECT_EQ(done, n / 8 * 8);
    for (size_t j = done; j < n; ++j) simd[j] = optim_math::Lerp(simd[j], end[j], w);
    for (size_t j = 0; j < n; ++j) scalar[j] = optim_math::Lerp(scalar[j], end[j], w);
    ExpectSameBits(scalar, simd, "lerp weight " + std::to_string(w));
  }
}

TEST_F(OptimSimd, DisabledRunsNothing) {
  optim_simd::SetEnabled(false);
  std::vector<float> p(16, 1.0f), g(16, 1.0f), m(16), v(16);
  EXPECT_EQ(optim_simd::AdamSteps(p.data(), g.data(), m.data(), v.data(), nullptr, 16, AdamScalars{}), 0u);
  EXPECT_EQ(optim_simd::SgdSteps(p.data(), g.data(), nullptr, 16, false, SgdScalars{}), 0u);
  EXPECT_EQ(optim_simd::LerpSteps(p.data(), g.data(), 16, 0.5f), 0u);
  EXPECT_EQ(optim_simd::RmspropSteps(p.data(), g.data(), m.data(), nullptr, nullptr, 16, {}), 0u);
  EXPECT_EQ(optim_simd::LionSteps(p.data(), g.data(), m.data(), 16, {}), 0u);
  EXPECT_EQ(optim_simd::AdagradSteps(p.data(), g.data(), m.data(), 16, true, {}), 0u);
  EXPECT_EQ(optim_simd::RadamSteps(p.data(), g.data(), m.data(), v.data(), 16, {}), 0u);
  EXPECT_EQ(optim_simd::NadamSteps(p.data(), g.data(), m.data(), v.data(), 16, {}), 0u);
  EXPECT_EQ(p[0], 1.0f);
}

}  // namespace
}  // namespace onnxamp::trainer
