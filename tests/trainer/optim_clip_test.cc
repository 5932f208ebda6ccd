// Global gradient-norm clipping: norms against exact and float64 values, the clip coefficient as
// clip_grad_norm_ computes it, no change below max_norm, parameters without gradients left out, and non-finite
// norms reported without touching the gradients. Clipping by value as clip_grad_value_.
#include "trainer/optim/clip.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "trainer/optim/optim_math.h"

namespace onnxamp::trainer {
namespace {

using ::testing::HasSubstr;

// Parameters "a" [2], "b" [1], "c" [3] with gradients {3, 4}, {12} and none.
ParameterStore ThreeParameters() {
  ParameterStore store = ParameterStore::Create({{"a", {2}}, {"b", {1}}, {"c", {3}}}).value();
  store.grad(0)[0] = 3.0f;
  store.grad(0)[1] = 4.0f;
  store.grad(1)[0] = 12.0f;
  store.set_has_grad(0, true);
  store.set_has_grad(1, true);
  // c has no gradient; its slot holds values that must be neither counted nor scaled.
  for (float& g : store.grad(2)) g = 100.0f;
  return store;
}

TEST(OptimClipTest, NormOfNormsAndClipping) {
  ParameterStore store = ThreeParameters();
  EXPECT_EQ(GlobalGradNorm(store), 13.0f);  // norms 5 and 12 (exact), then sqrt(25 + 144)
  StatusOr<float> total = ClipGradNorm(store, 6.5);
  ASSERT_TRUE(total.ok()) << total.status().ToString();
  EXPECT_EQ(*total, 13.0f);
  // clip_coef = reciprocal(13 + 1e-6) * 6.5 in float32, just under 0.5.
  const float coef = (1.0f / (13.0f + 1e-6f)) * 6.5f;
  EXPECT_EQ(optim_math::ClipCoefficient(13.0f, 6.5f), coef);
  EXPECT_LT(coef, 0.5f);
  EXPECT_NEAR(coef, 6.5 / (13.0 + 1e-6), 1e-7);
  EXPECT_EQ(store.grad(0)[0], 3.0f * coef);
  EXPECT_EQ(store.grad(0)[1], 4.0f * coef);
  EXPECT_EQ(store.grad(1)[0], 12.0f * coef);
  EXPECT_NEAR(GlobalGradNorm(store), 6.5, 1e-5);
  for (float g : store.grad(2)) EXPECT_EQ(g, 100.0f);
}

TEST(OptimClipTest, BelowMaxNormNothingChanges) {
  ParameterStore store = ThreeParameters();
  StatusOr<float> total = ClipGradNorm(store, 100.0);
  ASSERT_TRUE(total.ok());
  EXPECT_EQ(*total, 13.0f);
  EXPECT_EQ(store.grad(0)[0], 3.0f);
  EXPECT_EQ(store.grad(0)[1], 4.0f);
  EXPECT_EQ(store.grad(1)[0], 12.0f);
  // Exactly at max_norm the coefficient is 13 / (13 + 1e-6) < 1: PyTorch clips by a hair, and so do we.
  ParameterStore at = ThreeParameters();
  ASSERT_TRUE(ClipGradNorm(at, 13.0).ok());
  EXPECT_LT(at.grad(1)[0], 12.0f);
}

TEST(OptimClipTest, LongVectorNormMatchesFloat64) {
  std::vector<float> values(1003);
  uint64_t state = 12345;
  double sum = 0.0;
  for (float& v : values) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    v = static_cast<float>(static_cast<double>(state >> 11) / static_cast<double>(1ULL << 53) * 2.0 - 1.0);
    sum += static_cast<double>(v) * v;
  }
  EXPECT_NEAR(L2Norm(values), std::sqrt(sum), 1e-6 * std::sqrt(sum));
  EXPECT_EQ(L2Norm({}), 0.0f);
}

TEST(OptimClipTest, NoGradientsGiveAZeroNorm) {
  ParameterStore store = ParameterStore::Create({{"a", {2}}}).value();
  StatusOr<float> total = ClipGradNorm(store, 1.0);
  ASSERT_TRUE(total.ok());
  EXPECT_EQ(*total, 0.0f);
}

TEST(OptimClipTest, NonFiniteNormIsReportedAndChangesNothing) {
  ParameterStore store = ThreeParameters();
  store.grad(1)[0] = std::numeric_limits<float>::quiet_NaN();
  StatusOr<float> total = ClipGradNorm(store, 1.0);
  EXPECT_EQ(total.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(total.status().message(), HasSubstr("parameter 'b'"));
  EXPECT_EQ(store.grad(0)[0], 3.0f);
  // Finite gradients whose squares overflow float32.
  ParameterStore big = ThreeParameters();
  big.grad(0)[0] = 3e19f;
  total = ClipGradNorm(big, 1.0);
  EXPECT_THAT(total.status().message(), HasSubstr("parameter 'a' is inf"));
  EXPECT_EQ(big.grad(0)[0], 3e19f);
  // Per-parameter norms that are finite but whose squares overflow in the norm of norms.
  ParameterStore two = ThreeParameters();
  two.grad(0)[0] = 1.5e19f;
  two.grad(0)[1] = 0.0f;
  two.grad(1)[0] = 1.5e19f;
  EXPECT_TRUE(std::isinf(GlobalGradNorm(two)));
  total = ClipGradNorm(two, 1.0);
  EXPECT_THAT(total.status().message(), HasSubstr("overflowed"));
}

TEST(OptimClipTest, RejectsBadMaxNorm) {
  ParameterStore store = ThreeParameters();
  EXPECT_THAT(ClipGradNorm(store, 0.0).status().message(), HasSubstr("max_norm"));
  EXPECT_FALSE(ClipGradNorm(store, std::numeric_limits<double>::infinity()).ok());
}

TEST(OptimClipTest, ClipByValueClampsEveryExistingGradient) {
  ParameterStore store = ThreeParameters();
  store.grad(0)[0] = -std::numeric_limits<float>::infinity();
  store.grad(1)[0] = std::nanf("");
  ASSERT_TRUE(ClipGradValue(store, 3.5).ok());
  EXPECT_EQ(store.grad(0)[0], -3.5f);
  EXPECT_EQ(store.grad(0)[1], 3.5f);
  EXPECT_TRUE(std::isnan(store.grad(1)[0]));           // torch.clamp keeps NaN (GradScaler skips such a step first)
  for (float g : store.grad(2)) EXPECT_EQ(g, 100.0f);  // no gradient: untouched
  // Inside the range nothing changes, bit for bit; the value rounds to float32 as ATen's scalar does.
  store.grad(0)[0] = 0.1f;
  store.grad(0)[1] = -0.1f;
  ASSERT_TRUE(ClipGradValue(store, 0.1).ok());
  EXPECT_EQ(store.grad(0)[0], 0.1f);
  EXPECT_EQ(store.grad(0)[1], -0.1f);
  EXPECT_EQ(optim_math::ClampElement(-0.0f, 1.0f), 0.0f);
  EXPECT_TRUE(std::signbit(optim_math::ClampElement(-0.0f, 1.0f)));
  for (double bad : {0.0, -1.0, std::nan(""), HUGE_VAL}) {
    EXPECT_THAT(ClipGradValue(store, bad).message(), HasSubstr("clip_value must be finite and > 0")) << bad;
  }
}

}  // namespace
}  // namespace onnxamp::trainer
