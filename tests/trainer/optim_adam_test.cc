// Adam and AdamW against float64 references written from torch.optim's documented algorithms: L2 weight decay
// (Adam) versus decoupled decay (AdamW), AMSGrad, bias correction per parameter step count, resuming from restored
// step counts, the first-step closed form, and option checks.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tests/trainer/optim_test_util.h"
#include "trainer/optim/optim_math.h"
#include "trainer/optim/optimizer.h"
#include "trainer/state/parameter_store.h"

namespace onnxamp::trainer {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

using namespace optim_test;  // NOLINT(build/namespaces): the shared helpers and data of the optimizer tests

// torch.optim.Adam / AdamW as documented, in float64. AMSGrad keeps the maximum of the raw second moments and
// bias-corrects it (what the implementation does).
std::vector<double> AdamReference(const AdamOptions& o, bool decoupled, double lr, const std::vector<float>& p0,
                                  const Grads& grads) {
  std::vector<double> p(p0.begin(), p0.end());
  std::vector<double> m(p.size(), 0.0), v(p.size(), 0.0), vmax(p.size(), 0.0);
  for (size_t t = 1; t <= grads.size(); ++t) {
    const double bc1 = 1.0 - std::pow(o.beta1, static_cast<double>(t));
    const double bc2 = 1.0 - std::pow(o.beta2, static_cast<double>(t));
    for (size_t j = 0; j < p.size(); ++j) {
      double g = grads[t - 1][j];
      if (decoupled) {
        p[j] -= lr * o.weight_decay * p[j];
      } else {
        g += o.weight_decay * p[j];
      }
      m[j] = o.beta1 * m[j] + (1.0 - o.beta1) * g;
      v[j] = o.beta2 * v[j] + (1.0 - o.beta2) * g * g;
      vmax[j] = std::max(vmax[j], v[j]);
      const double m_hat = m[j] / bc1;
      const double v_hat = (o.amsgrad ? vmax[j] : v[j]) / bc2;
      p[j] -= lr * m_hat / (std::sqrt(v_hat) + o.eps);
    }
  }
  return p;
}

std::unique_ptr<Optimizer> Make(const AdamOptions& options, bool decoupled) {
  return Ok(decoupled ? MakeAdamW(options) : MakeAdam(options));
}

TEST(OptimAdamTest, FirstStepMovesEachCoordinateByTheLearningRate) {
  // After bias correction the first step is lr * g / (|g| + eps).
  std::unique_ptr<Optimizer> opt = Make({}, false);
  std::vector<float> p = RunSteps(*opt, 0.01, kP0, {kGrads[0]});
  for (size_t j = 0; j < p.size(); ++j) {
    const double g = kGrads[0][j];
    EXPECT_NEAR(p[j], kP0[j] - 0.01 * g / (std::fabs(g) + 1e-8), 1e-7) << j;
  }
}

TEST(OptimAdamTest, AdamMatchesTheReference) {
  AdamOptions o;
  o.beta1 = 0.8;
  o.beta2 = 0.95;
  o.eps = 1e-6;
  std::unique_ptr<Optimizer> opt = Make(o, false);
  ExpectClose(RunSteps(*opt, 0.05, kP0, kGrads), AdamReference(o, false, 0.05, kP0, kGrads));
  EXPECT_EQ(opt->name(), "adam");
  EXPECT_EQ(opt->step_counts(), std::vector<int64_t>{4});
}

TEST(OptimAdamTest, AdamWDecouplesWeightDecayWhereAdamAddsItToTheGradient) {
  AdamOptions o;
  o.weight_decay = 0.1;
  std::unique_ptr<Optimizer> adam = Make(o, false);
  std::unique_ptr<Optimizer> adamw = Make(o, true);
  std::vector<float> p_adam = RunSteps(*adam, 0.05, kP0, kGrads);
  std::vector<float> p_adamw = RunSteps(*adamw, 0.05, kP0, kGrads);
  ExpectClose(p_adam, AdamReference(o, false, 0.05, kP0, kGrads));
  ExpectClose(p_adamw, AdamReference(o, true, 0.05, kP0, kGrads));
  EXPECT_EQ(adamw->name(), "adamw");
  // The two rules give different parameters (by far more than the tolerance).
  double max_diff = 0.0;
  for (size_t j = 0; j < p_adam.size(); ++j) max_diff = std::max(max_diff, std::fabs(double{p_adam[j]} - p_adamw[j]));
  EXPECT_GT(max_diff, 1e-3);
}

TEST(OptimAdamTest, AdamWWithZeroGradientOnlyDecays) {
  // m = v = 0 gives a zero Adam update: what remains is p * (1 - lr * wd).
  std::unique_ptr<Optimizer> opt = Make(AdamWDefaults(), true);
  std::vector<float> p = RunSteps(*opt, 0.1, {2.0f, -4.0f}, {{0.0f, 0.0f}});
  EXPECT_EQ(p[0], 2.0f * static_cast<float>(1.0 - 0.1 * 1e-2));
  EXPECT_EQ(p[1], -4.0f * static_cast<float>(1.0 - 0.1 * 1e-2));
  EXPECT_EQ(AdamWDefaults().weight_decay, 1e-2);
}

TEST(OptimAdamTest, AmsgradKeepsTheLargestSecondMoment) {
  AdamOptions o;
  o.amsgrad = true;
  o.beta2 = 0.9;
  const Grads grads = {{1.0f, -2.0f}, {0.01f, 0.02f}, {0.01f, -0.01f}, {0.02f, 0.01f}};
  std::unique_ptr<Optimizer> opt = Make(o, false);
  std::vector<float> p = RunSteps(*opt, 0.01, {0.5f, 0.5f}, grads);
  ExpectClose(p, AdamReference(o, false, 0.01, {0.5f, 0.5f}, grads));
  AdamOptions plain = o;
  plain.amsgrad = false;
  std::vector<double> without = AdamReference(plain, false, 0.01, {0.5f, 0.5f}, grads);
  EXPECT_GT(std::fabs(p[0] - without[0]), 1e-4);
  EXPECT_EQ(opt->state_names(), (std::vector<std::string>{"exp_avg", "exp_avg_sq", "max_exp_avg_sq"}));
}

TEST(OptimAdamTest, MomentsLiveInTheStore) {
  std::unique_ptr<Optimizer> opt = Make({}, false);
  ParameterStore store = OneParameter({1.0f, 1.0f});
  StepWith(*opt, store, 0.001, {0.5f, -1.0f});
  EXPECT_THAT(store.state_names(), ElementsAre("exp_avg", "exp_avg_sq"));
  const float* m = store.FindState("exp_avg");
  const float* v = store.FindState("exp_avg_sq");
  ASSERT_NE(m, nullptr);
  ASSERT_NE(v, nullptr);
  // exp_avg.lerp_(g, 0.1f) from 0 is fma(0.1f, g, 0); exp_avg_sq = 0 * beta2 + (0.001f * g) * g.
  EXPECT_EQ(m[0], 0.1f * 0.5f);
  EXPECT_EQ(m[1], 0.1f * -1.0f);
  EXPECT_EQ(v[0], static_cast<float>(1.0 - 0.999) * 0.5f * 0.5f);
  EXPECT_EQ(v[1], static_cast<float>(1.0 - 0.999) * -1.0f * -1.0f);
}

TEST(OptimAdamTest, BiasCorrectionFollowsEachParametersOwnStepCount) {
  // b gets its first gradient at the second step: its first step is the closed form lr * g / (|g| + eps).
  std::unique_ptr<Optimizer> opt = Make({}, false);
  ParameterStore store = ParameterStore::Create({{"a", {1}}, {"b", {1}}}).value();
  store.grad(0)[0] = 0.3f;
  store.set_has_grad(0, true);
  ASSERT_TRUE(opt->Step(store, 0.01).ok());
  EXPECT_EQ(store.param(1)[0], 0.0f);
  store.ZeroGrads();
  store.grad(0)[0] = 0.3f;
  store.grad(1)[0] = -0.7f;
  store.set_has_grad(0, true);
  store.set_has_grad(1, true);
  ASSERT_TRUE(opt->Step(store, 0.01).ok());
  EXPECT_EQ(opt->step_counts(), (std::vector<int64_t>{2, 1}));
  EXPECT_NEAR(store.param(1)[0], 0.01, 1e-8);
}

TEST(OptimAdamTest, ResumingFromRestoredStepCountsContinuesIdentically) {
  std::unique_ptr<Optimizer> straight = Make({}, true);
  ParameterStore a = OneParameter(kP0);
  for (const std::vector<float>& g : kGrads) StepWith(*straight, a, 0.01, g);

  std::unique_ptr<Optimizer> first = Make({}, true);
  ParameterStore b = OneParameter(kP0);
  for (size_t t = 0; t < 2; ++t) StepWith(*first, b, 0.01, kGrads[t]);
  std::unique_ptr<Optimizer> resumed = Make({}, true);  // the moments stay in the store
  ASSERT_TRUE(resumed->RestoreStepCounts(first->step_counts()).ok());
  for (size_t t = 2; t < kGrads.size(); ++t) StepWith(*resumed, b, 0.01, kGrads[t]);
  for (size_t j = 0; j < kP0.size(); ++j) EXPECT_EQ(a.param(0)[j], b.param(0)[j]) << j;

  // Forgetting the step counts restarts the bias correction: the parameters differ.
  ParameterStore c = OneParameter(kP0);
  std::unique_ptr<Optimizer> first_c = Make({}, true);
  for (size_t t = 0; t < 2; ++t) StepWith(*first_c, c, 0.01, kGrads[t]);
  std::unique_ptr<Optimizer> forgetful = Make({}, true);
  for (size_t t = 2; t < kGrads.size(); ++t) StepWith(*forgetful, c, 0.01, kGrads[t]);
  EXPECT_NE(a.param(0)[0], c.param(0)[0]);
  EXPECT_FALSE(forgetful->RestoreStepCounts({-1}).ok());
}

TEST(OptimAdamTest, ScalarsRoundFromDoubleAsPyTorchPassesThem) {
  const optim_math::AdamScalars s = optim_math::ComputeAdamScalars(1e-3, 0.9, 0.999, 1e-8, 1e-2, true, false, 3);
  EXPECT_EQ(s.lerp_weight, static_cast<float>(1.0 - 0.9));
  EXPECT_EQ(s.one_minus_beta2, static_cast<float>(1.0 - 0.999));
  EXPECT_EQ(s.decay_factor, static_cast<float>(1.0 - 1e-3 * 1e-2));
  EXPECT_EQ(s.neg_step_size, static_cast<float>(-(1e-3 / (1.0 - std::pow(0.9, 3.0)))));
  EXPECT_EQ(s.bias_correction2_sqrt, static_cast<float>(std::sqrt(1.0 - std::pow(0.999, 3.0))));
  EXPECT_TRUE(s.decoupled);
}

TEST(OptimAdamTest, RejectsBadOptions) {
  AdamOptions o;
  o.beta1 = 1.0;
  EXPECT_THAT(MakeAdam(o).status().message(), HasSubstr("beta1"));
  o = {};
  o.beta2 = -0.1;
  EXPECT_THAT(MakeAdamW(o).status().message(), HasSubstr("adamw: beta2"));
  o = {};
  o.eps = -1.0;
  EXPECT_THAT(MakeAdam(o).status().message(), HasSubstr("eps"));
  o = {};
  o.weight_decay = -1.0;
  EXPECT_THAT(MakeAdam(o).status().message(), HasSubstr("weight_decay"));
}

}  // namespace
}  // namespace onnxamp::trainer
