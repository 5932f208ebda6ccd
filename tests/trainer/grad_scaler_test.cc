// GradScaler against torch.amp.GradScaler's rules, replayed step by step with literal expected values worked out by
// hand (and, for the non-power-of-two factors, with Python's float64 arithmetic rounded to float32): unscaling by
// (float)(1.0/(double)scale), the non-finite check over every element, backoff, growth every growth_interval clean
// steps, growth refused at float32 overflow; plus min_scale, static scale, disabled mode and state round trips.
#include "trainer/optim/grad_scaler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "trainer/state/parameter_store.h"

namespace onnxamp::trainer {
namespace {

using ::testing::HasSubstr;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

GradScaler MakeScaler(const GradScalerOptions& options) {
  StatusOr<GradScaler> scaler = GradScaler::Create(options);
  EXPECT_TRUE(scaler.ok()) << scaler.status().ToString();
  return std::move(scaler).value();
}

TEST(GradScalerTest, DefaultsArePyTorchs) {
  GradScaler scaler = MakeScaler({});
  EXPECT_TRUE(scaler.enabled());
  EXPECT_EQ(scaler.scale(), 65536.0f);
  EXPECT_EQ(scaler.inv_scale(), 1.0f / 65536.0f);
  EXPECT_EQ(scaler.growth_tracker(), 0);
  std::optional<GradScalerState> state = scaler.State();
  ASSERT_TRUE(state.has_value());
  EXPECT_EQ(state->scale, 65536.0f);
  EXPECT_EQ(state->growth_factor, 2.0);
  EXPECT_EQ(state->backoff_factor, 0.5);
  EXPECT_EQ(state->growth_interval, 2000);
  EXPECT_EQ(state->growth_tracker, 0);
}

TEST(GradScalerTest, UnscaleMultipliesByTheInverseRoundedFromDouble) {
  GradScalerOptions options;
  options.init_scale = 3.0;
  GradScaler scaler = MakeScaler(options);
  EXPECT_EQ(Bits(scaler.inv_scale()), 0x3EAAAAABu);  // (float)(1.0 / 3.0) = 0.3333333432674408
  std::vector<float> grads = {5.0f, 7.0f, 3.0f, -6.0f};
  EXPECT_FALSE(scaler.UnscaleAndCheck(grads.data(), grads.size()));
  // 5 * 0.33333334f = 1.6666667163... rounds to 0x3FD55556, whereas 5 / 3 in float32 is 0x3FD55555: a division
  // would fail here.
  EXPECT_EQ(Bits(grads[0]), 0x3FD55556u);
  EXPECT_NE(Bits(5.0f / 3.0f), 0x3FD55556u);
  EXPECT_EQ(Bits(grads[1]), 0x40155556u);  // 7 / 3 would be 0x40155555
  EXPECT_EQ(grads[2], 1.0f);               // 1.0000000298 rounds to 1
  EXPECT_EQ(Bits(grads[3]), 0xC0000000u);  // -2
}

TEST(GradScalerTest, UnscaleChecksAndMultipliesEveryElement) {
  GradScalerOptions options;
  options.init_scale = 2.0;
  GradScaler scaler = MakeScaler(options);
  std::vector<float> grads = {1.0f, kInf, 2.0f, kNan, -kInf, 4.0f};
  EXPECT_TRUE(scaler.UnscaleAndCheck(grads.data(), grads.size()));
  EXPECT_EQ(grads[0], 0.5f);
  EXPECT_EQ(grads[1], kInf);
  EXPECT_EQ(grads[2], 1.0f);
  EXPECT_TRUE(std::isnan(grads[3]));
  EXPECT_EQ(grads[4], -kInf);
  EXPECT_EQ(grads[5], 2.0f);  // elements after the first non-finite one are still unscaled
  // The largest finite float is finite; a NaN alone is found.
  std::vector<float> big = {std::numeric_limits<float>::max()};
  EXPECT_FALSE(scaler.UnscaleAndCheck(big.data(), big.size()));
  std::vector<float> nan_only = {0.0f, kNan};
  EXPECT_TRUE(scaler.UnscaleAndCheck(nan_only.data(), nan_only.size()));
}

// One scripted step of the replay: which element of the gradients to poison (if any) and the expected state after
// Update.
struct ReplayStep {
  int poison_index;  // -1: clean gradients
  float poison;
  bool expected_found_inf;
  float expected_scale;
  int32_t expected_tracker;
};

TEST(GradScalerTest, DynamicReplayWithInjectedInfAndNan) {
  GradScalerOptions options;
  options.growth_interval = 3;
  GradScaler scaler = MakeScaler(options);
  // torch.amp.GradScaler(init_scale=65536, growth_factor=2, backoff_factor=0.5, growth_interval=3).
  const std::vector<ReplayStep> script = {
      {-1, 0, false, 65536.0f, 1},  {-1, 0, false, 65536.0f, 2},  {-1, 0, false, 131072.0f, 0},  // grows
      {1, kInf, true, 65536.0f, 0},                                                              // backs off
      {-1, 0, false, 65536.0f, 1},  {0, kNan, true, 32768.0f, 0}, {2, -kInf, true, 16384.0f, 0},
      {-1, 0, false, 16384.0f, 1},  {-1, 0, false, 16384.0f, 2},  {-1, 0, false, 32768.0f, 0},
      {-1, 0, false, 32768.0f, 1},  {-1, 0, false, 32768.0f, 2},  {1, kNan, true, 16384.0f, 0},  // tracker reset
      {-1, 0, false, 16384.0f, 1},
  };
  for (size_t k = 0; k < script.size(); ++k) {
    const ReplayStep& step = script[k];
    const float scale = scaler.scale();
    // Gradients of a loss seeded with `scale`: the true gradients {1, -2, 0.25} times scale.
    std::vector<float> grads = {1.0f * scale, -2.0f * scale, 0.25f * scale};
    if (step.poison_index >= 0) grads[step.poison_index] = step.poison;
    const bool found_inf = scaler.UnscaleAndCheck(grads.data(), grads.size());
    EXPECT_EQ(found_inf, step.expected_found_inf) << "step " << k + 1;
    if (!found_inf) {
      EXPECT_EQ(grads[0], 1.0f) << "step " << k + 1;
      EXPECT_EQ(grads[1], -2.0f) << "step " << k + 1;
      EXPECT_EQ(grads[2], 0.25f) << "step " << k + 1;
    }
    scaler.Update(found_inf);
    EXPECT_EQ(scaler.scale(), step.expected_scale) << "step " << k + 1;
    EXPECT_EQ(scaler.growth_tracker(), step.expected_tracker) << "step " << k + 1;
  }
}

TEST(GradScalerTest, GrowthThatOverflowsIsRefused) {
  GradScalerOptions options;
  options.init_scale = 1.7014118346046923e38;  // 2^127
  options.growth_interval = 1;
  GradScaler scaler = MakeScaler(options);
  scaler.Update(false);  // 2^128 is inf in float32: kept at 2^127, tracker reset
  EXPECT_EQ(scaler.scale(), 1.7014118346046923e38f);
  EXPECT_EQ(scaler.growth_tracker(), 0);
}

TEST(GradScalerTest, NonPowerOfTwoFactorsMultiplyInDoubleAndRoundOnce) {
  // Expected values: Python float products rounded by struct.pack('f', ...). A float32 product would give
  // 0x40533334 for the first growth and 0x474F5C28 for the second backoff.
  GradScalerOptions grow;
  grow.init_scale = 3.0;
  grow.growth_factor = 1.1;
  grow.growth_interval = 1;
  GradScaler g = MakeScaler(grow);
  g.Update(false);
  EXPECT_EQ(Bits(g.scale()), 0x40533333u);  // float32(3.0 * 1.1) = 3.299999952316284
  g.Update(false);
  EXPECT_EQ(Bits(g.scale()), 0x406851EBu);  // float32(3.299999952316284 * 1.1) = 3.629999876022339
  GradScalerOptions back;
  back.backoff_factor = 0.9;
  GradScaler b = MakeScaler(back);
  b.Update(true);
  EXPECT_EQ(Bits(b.scale()), 0x47666666u);  // 58982.3984375
  b.Update(true);
  EXPECT_EQ(Bits(b.scale()), 0x474F5C29u);  // 53084.16015625
}

TEST(GradScalerTest, MinScaleFloorsTheBackoff) {
  GradScalerOptions options;
  options.init_scale = 4.0;
  options.min_scale = 1.5;
  options.growth_interval = 2;
  GradScaler scaler = MakeScaler(options);
  const std::vector<std::pair<bool, float>> script = {{true, 2.0f},  {true, 1.5f},  {true, 1.5f},
                                                      {false, 1.5f}, {false, 3.0f}, {true, 1.5f}};
  for (size_t k = 0; k < script.size(); ++k) {
    scaler.Update(script[k].first);
    EXPECT_EQ(scaler.scale(), script[k].second) << "step " << k + 1;
  }
}

TEST(GradScalerTest, WithoutAFloorRepeatedOverflowReachesZero) {
  // PyTorch's behaviour: nothing stops the backoff. 2^-149 is the smallest subnormal; half of it rounds to 0.
  GradScalerOptions options;
  options.init_scale = 1.0;
  GradScaler scaler = MakeScaler(options);
  for (int k = 0; k < 149; ++k) scaler.Update(true);
  EXPECT_EQ(scaler.scale(), std::ldexp(1.0f, -149));
  scaler.Update(true);
  EXPECT_EQ(scaler.scale(), 0.0f);
}

TEST(GradScalerTest, StaticScaleNeverChangesButStillDetects) {
  GradScalerOptions options;
  options.mode = LossScaleMode::kStatic;
  options.init_scale = 1024.0;
  GradScaler scaler = MakeScaler(options);
  std::vector<float> grads = {2048.0f, kInf};
  EXPECT_TRUE(scaler.UnscaleAndCheck(grads.data(), grads.size()));
  EXPECT_EQ(grads[0], 2.0f);
  scaler.Update(true);
  EXPECT_EQ(scaler.scale(), 1024.0f);
  for (int k = 0; k < 5000; ++k) scaler.Update(false);
  EXPECT_EQ(scaler.scale(), 1024.0f);
  EXPECT_EQ(scaler.growth_tracker(), 0);
}

TEST(GradScalerTest, DisabledIsPlainTraining) {
  GradScalerOptions options;
  options.mode = LossScaleMode::kDisabled;
  GradScaler scaler = MakeScaler(options);
  EXPECT_FALSE(scaler.enabled());
  EXPECT_EQ(scaler.scale(), 1.0f);
  std::vector<float> grads = {3.0f, kInf};
  EXPECT_FALSE(scaler.UnscaleAndCheck(grads.data(), grads.size()));
  EXPECT_EQ(grads[0], 3.0f);
  EXPECT_EQ(grads[1], kInf);
  scaler.Update(true);
  EXPECT_EQ(scaler.scale(), 1.0f);
  EXPECT_FALSE(scaler.State().has_value());
  EXPECT_TRUE(scaler.Restore(GradScalerState{}).ok());
}

TEST(GradScalerTest, StateRoundTripContinuesIdentically) {
  GradScalerOptions options;
  options.growth_interval = 4;
  GradScaler a = MakeScaler(options);
  for (bool found : {false, false, true, false, false}) a.Update(found);
  std::optional<GradScalerState> state = a.State();
  ASSERT_TRUE(state.has_value());
  EXPECT_EQ(state->scale, 32768.0f);
  EXPECT_EQ(state->growth_tracker, 2);
  GradScaler b = MakeScaler({});  // the checkpoint overrides the factors and the interval, as in PyTorch
  ASSERT_TRUE(b.Restore(*state).ok());
  for (bool found : {false, false, false, true, false}) {
    a.Update(found);
    b.Update(found);
    EXPECT_EQ(a.scale(), b.scale());
    EXPECT_EQ(a.growth_tracker(), b.growth_tracker());
  }
}

TEST(GradScalerTest, RestoreRejectsBadStateAndKeepsItsOwn) {
  GradScalerOptions options;
  options.min_scale = 2.0;
  GradScaler scaler = MakeScaler(options);
  GradScalerState bad;
  bad.growth_tracker = 2000;
  Status s = scaler.Restore(bad);
  EXPECT_THAT(s.message(), HasSubstr("_growth_tracker"));
  bad = GradScalerState{};
  bad.growth_factor = 1.0;
  EXPECT_THAT(scaler.Restore(bad).message(), HasSubstr("growth_factor"));
  bad = GradScalerState{};
  bad.scale = 0.0f;
  EXPECT_FALSE(scaler.Restore(bad).ok());
  bad = GradScalerState{};
  bad.scale = 1.0f;
  EXPECT_THAT(scaler.Restore(bad).message(), HasSubstr("below min_scale"));
  EXPECT_EQ(scaler.scale(), 65536.0f);
  EXPECT_EQ(scaler.growth_tracker(), 0);
}

TEST(GradScalerTest, CreateRejectsBadOptions) {
  auto fails = [](GradScalerOptions o, const char* what) {
    StatusOr<GradScaler> s = GradScaler::Create(o);
    ASSERT_FALSE(s.ok()) << what;
    EXPECT_THAT(s.status().message(), HasSubstr(what));
  };
  GradScalerOptions o;
  o.growth_factor = 1.0;
  fails(o, "growth_factor");
  o = {};
  o.backoff_factor = 1.0;
  fails(o, "backoff_factor");
  o = {};
  o.backoff_factor = 0.0;
  fails(o, "backoff_factor");
  o = {};
  o.growth_interval = 0;
  fails(o, "growth_interval");
  o = {};
  o.init_scale = std::numeric_limits<double>::infinity();
  fails(o, "init_scale");
  o = {};
  o.init_scale = 1e39;  // finite in double, inf in float32
  fails(o, "init_scale");
  o = {};
  o.min_scale = 131072.0;
  fails(o, "min_scale");
  o = {};
  o.mode = LossScaleMode::kStatic;
  o.init_scale = -1.0;
  fails(o, "static scale");
}

TEST(GradScalerTest, UnscalesTheWholeStoreGradientBuffer) {
  StatusOr<ParameterStore> created = ParameterStore::Create({{"w", {2}}, {"b", {1}}});
  ASSERT_TRUE(created.ok());
  ParameterStore store = std::move(created).value();
  GradScalerOptions options;
  options.init_scale = 8.0;
  GradScaler scaler = MakeScaler(options);
  store.grad(0)[0] = 8.0f;
  store.grad(0)[1] = -4.0f;
  store.grad(1)[0] = 2.0f;
  EXPECT_FALSE(scaler.UnscaleAndCheck(store));
  EXPECT_EQ(store.grad(0)[0], 1.0f);
  EXPECT_EQ(store.grad(0)[1], -0.5f);
  EXPECT_EQ(store.grad(1)[0], 0.25f);
  store.grad(1)[0] = kNan;
  EXPECT_TRUE(scaler.UnscaleAndCheck(store));
}

}  // namespace
}  // namespace onnxamp::trainer
