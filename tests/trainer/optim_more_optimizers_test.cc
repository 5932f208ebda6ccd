// RMSprop, Adagrad and Lion against float64 references written from their documented algorithms (torch.optim.RMSprop,
// torch.optim.Adagrad; Lion's paper and its authors' PyTorch code): plain, L2 weight decay, momentum and the centered
// variant; Adagrad's learning-rate decay and initial accumulator; Lion's decoupled decay and sign update; the state
// kept in the store; option checks.
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

// torch.optim.RMSprop as documented, in float64.
std::vector<double> RmspropReference(const RmspropOptions& o, double lr, const std::vector<float>& p0,
                                     const Grads& grads) {
  std::vector<double> p(p0.begin(), p0.end());
  std::vector<double> v(p.size(), 0.0), mean(p.size(), 0.0), buf(p.size(), 0.0);
  for (const std::vector<float>& step : grads) {
    for (size_t j = 0; j < p.size(); ++j) {
      const double g = step[j] + o.weight_decay * p[j];
      v[j] = o.alpha * v[j] + (1.0 - o.alpha) * g * g;
      double denom = v[j];
      if (o.centered) {
        mean[j] = o.alpha * mean[j] + (1.0 - o.alpha) * g;
        denom -= mean[j] * mean[j];
      }
      denom = std::sqrt(denom) + o.eps;
      if (o.momentum > 0) {
        buf[j] = o.momentum * buf[j] + g / denom;
        p[j] -= lr * buf[j];
      } else {
        p[j] -= lr * g / denom;
      }
    }
  }
  return p;
}

// Lion (Chen et al. 2023, Algorithm 2), in float64.
std::vector<double> LionReference(const LionOptions& o, double lr, const std::vector<float>& p0, const Grads& grads) {
  std::vector<double> p(p0.begin(), p0.end());
  std::vector<double> m(p.size(), 0.0);
  for (const std::vector<float>& step : grads) {
    for (size_t j = 0; j < p.size(); ++j) {
      const double g = step[j];
      const double c = o.beta1 * m[j] + (1.0 - o.beta1) * g;
      p[j] *= 1.0 - lr * o.weight_decay;
      p[j] -= lr * ((c > 0) - (c < 0));
      m[j] = o.beta2 * m[j] + (1.0 - o.beta2) * g;
    }
  }
  return p;
}

TEST(OptimRmspropTest, PlainMatchesTheReference) {
  std::unique_ptr<Optimizer> opt = Ok(MakeRmsprop({}));
  ExpectClose(RunSteps(*opt, 0.01, kP0, kGrads), RmspropReference({}, 0.01, kP0, kGrads));
  EXPECT_EQ(opt->name(), "rmsprop");
  EXPECT_EQ(opt->state_names(), std::vector<std::string>{"square_avg"});
  EXPECT_EQ(opt->step_counts(), std::vector<int64_t>{4});
}

TEST(OptimRmspropTest, FirstStepDividesByTheRootOfTheSmoothedSquare) {
  // v = (1 - alpha) g^2: the first step is lr * g / (|g| sqrt(1 - alpha) + eps).
  RmspropOptions o;
  o.alpha = 0.9;
  std::unique_ptr<Optimizer> opt = Ok(MakeRmsprop(o));
  const std::vector<float> p = RunSteps(*opt, 0.01, kP0, {kGrads[0]});
  for (size_t j = 0; j < p.size(); ++j) {
    const double g = kGrads[0][j];
    EXPECT_NEAR(p[j], kP0[j] - 0.01 * g / (std::fabs(g) * std::sqrt(0.1) + 1e-8), 1e-7) << j;
  }
}

TEST(OptimRmspropTest, WeightDecayMomentumAndCenteredMatchTheReference) {
  for (bool centered : {false, true}) {
    for (double momentum : {0.0, 0.9}) {
      RmspropOptions o;
      o.alpha = 0.8;
      o.eps = 1e-6;
      o.weight_decay = 0.1;
      o.momentum = momentum;
      o.centered = centered;
      std::unique_ptr<Optimizer> opt = Ok(MakeRmsprop(o));
      ExpectClose(RunSteps(*opt, 0.01, kP0, kGrads), RmspropReference(o, 0.01, kP0, kGrads), 2e-6);
      std::vector<std::string> names = {"square_avg"};
      if (momentum > 0) names.push_back("momentum_buffer");
      if (centered) names.push_back("grad_avg");
      EXPECT_EQ(opt->state_names(), names) << centered << " " << momentum;
    }
  }
  // Centering changes the result (by far more than the tolerance).
  RmspropOptions o;
  o.alpha = 0.8;
  std::unique_ptr<Optimizer> plain = Ok(MakeRmsprop(o));
  o.centered = true;
  std::unique_ptr<Optimizer> centered = Ok(MakeRmsprop(o));
  const std::vector<float> a = RunSteps(*plain, 0.01, kP0, kGrads), b = RunSteps(*centered, 0.01, kP0, kGrads);
  EXPECT_GT(std::fabs(a[0] - b[0]), 1e-3);
}

TEST(OptimRmspropTest, BuffersLiveInTheStore) {
  RmspropOptions o;
  o.alpha = 0.5;
  o.momentum = 0.5;
  o.centered = true;
  std::unique_ptr<Optimizer> opt = Ok(MakeRmsprop(o));
  ParameterStore store = OneParameter({1.0f});
  StepWith(*opt, store, 0.1, {2.0f});
  // v = 0.5 * 4 = 2, mean = 0.5 * 2 = 1, avg = sqrt(2 - 1) + 1e-8, buf = 2 / avg.
  EXPECT_EQ(store.FindState("square_avg")[0], 2.0f);
  EXPECT_EQ(store.FindState("grad_avg")[0], 1.0f);
  EXPECT_FLOAT_EQ(store.FindState("momentum_buffer")[0], 2.0f);
  EXPECT_FLOAT_EQ(store.param(0)[0], 1.0f - 0.2f);
}

TEST(OptimRmspropTest, RejectsBadOptions) {
  RmspropOptions o;
  o.alpha = -0.1;
  EXPECT_THAT(MakeRmsprop(o).status().message(), HasSubstr("rmsprop: alpha must be in [0, 1], got -0.1"));
  o.alpha = 1.5;
  EXPECT_THAT(MakeRmsprop(o).status().message(), HasSubstr("alpha"));
  o = {};
  o.eps = -1.0;
  EXPECT_THAT(MakeRmsprop(o).status().message(), HasSubstr("eps"));
  o = {};
  o.momentum = std::nan("");
  EXPECT_THAT(MakeRmsprop(o).status().message(), HasSubstr("momentum"));
  o = {};
  o.weight_decay = -1.0;
  EXPECT_THAT(MakeRmsprop(o).status().message(), HasSubstr("weight_decay"));
}

// torch.optim.Adagrad as documented, in float64.
std::vector<double> AdagradReference(const AdagradOptions& o, double lr, const std::vector<float>& p0,
                                     const Grads& grads) {
  std::vector<double> p(p0.begin(), p0.end());
  std::vector<double> sum(p.size(), o.initial_accumulator_value);
  for (size_t t = 1; t <= grads.size(); ++t) {
    const double clr = lr / (1.0 + static_cast<double>(t - 1) * o.lr_decay);
    for (size_t j = 0; j < p.size(); ++j) {
      const double g = grads[t - 1][j] + o.weight_decay * p[j];
      sum[j] += g * g;
      p[j] -= clr * g / (std::sqrt(sum[j]) + o.eps);
    }
  }
  return p;
}

TEST(OptimAdagradTest, MatchesTheReference) {
  for (double lr_decay : {0.0, 0.5}) {
    for (double initial : {0.0, 0.1}) {
      AdagradOptions o;
      o.lr_decay = lr_decay;
      o.initial_accumulator_value = initial;
      o.weight_decay = 0.05;
      std::unique_ptr<Optimizer> opt = Ok(MakeAdagrad(o));
      ExpectClose(RunSteps(*opt, 0.1, kP0, kGrads), AdagradReference(o, 0.1, kP0, kGrads));
      EXPECT_EQ(opt->name(), "adagrad");
      EXPECT_EQ(opt->state_names(), std::vector<std::string>{"sum"});
    }
  }
  // The first step with no initial value: lr * g / (|g| + eps), and the sum holds g^2.
  std::unique_ptr<Optimizer> opt = Ok(MakeAdagrad({}));
  ParameterStore store = OneParameter({1.0f});
  StepWith(*opt, store, 0.1, {2.0f});
  EXPECT_EQ(store.FindState("sum")[0], 4.0f);
  EXPECT_FLOAT_EQ(store.param(0)[0], 0.9f);
  AdagradOptions bad;
  bad.lr_decay = -1;
  EXPECT_THAT(MakeAdagrad(bad).status().message(), HasSubstr("adagrad: lr_decay must be finite and >= 0, got -1"));
  bad = {};
  bad.initial_accumulator_value = NAN;
  EXPECT_THAT(MakeAdagrad(bad).status().message(), HasSubstr("initial_accumulator_value"));
}

// torch.optim.RAdam as documented (L2 decay), in float64: SGD with momentum on the bias-corrected first moment while
// rho_t <= 5, the rectified adaptive step after.
std::vector<double> RadamReference(const RadamOptions& o, double lr, const std::vector<float>& p0, const Grads& grads) {
  std::vector<double> p(p0.begin(), p0.end());
  std::vector<double> m(p.size(), 0.0), v(p.size(), 0.0);
  const double rho_inf = 2.0 / (1.0 - o.beta2) - 1.0;
  for (size_t t = 1; t <= grads.size(); ++t) {
    const double bc1 = 1.0 - std::pow(o.beta1, static_cast<double>(t));
    const double bc2 = 1.0 - std::pow(o.beta2, static_cast<double>(t));
    const double rho_t = rho_inf - 2.0 * t * std::pow(o.beta2, static_cast<double>(t)) / bc2;
    for (size_t j = 0; j < p.size(); ++j) {
      const double g = grads[t - 1][j] + o.weight_decay * p[j];
      m[j] = o.beta1 * m[j] + (1.0 - o.beta1) * g;
      v[j] = o.beta2 * v[j] + (1.0 - o.beta2) * g * g;
      double step = lr * m[j] / bc1;
      if (rho_t > 5.0) {
        const double rect = std::sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t));
        step *= rect * std::sqrt(bc2) / (std::sqrt(v[j]) + o.eps);
      }
      p[j] -= step;
    }
  }
  return p;
}

TEST(OptimRadamTest, MatchesTheReferenceBeforeAndAfterRectification) {
  // beta2 0.5: rho_inf = 3, never above 5 (momentum SGD throughout); beta2 0.9: rho_inf = 19, rho_t 4.58 at step 5
  // and 5.39 at step 6: rectified from step 6.
  for (double beta2 : {0.5, 0.9}) {
    RadamOptions o;
    o.beta2 = beta2;
    o.weight_decay = 0.05;
    std::unique_ptr<Optimizer> opt = Ok(MakeRadam(o));
    Grads grads = kGrads;
    for (int k = 0; k < 4; ++k) grads.push_back(kGrads[k]);
    ExpectClose(RunSteps(*opt, 0.01, kP0, grads), RadamReference(o, 0.01, kP0, grads), 2e-6);
    EXPECT_EQ(opt->name(), "radam");
    EXPECT_EQ(opt->state_names(), (std::vector<std::string>{"exp_avg", "exp_avg_sq"}));
  }
  EXPECT_FALSE(optim_math::ComputeRadamScalars(0.01, 0.9, 0.9, 1e-8, 0, 5).rectified);
  EXPECT_TRUE(optim_math::ComputeRadamScalars(0.01, 0.9, 0.9, 1e-8, 0, 6).rectified);
  RadamOptions bad;
  bad.beta2 = 1.0;
  EXPECT_THAT(MakeRadam(bad).status().message(), HasSubstr("radam: beta2 must be in [0, 1), got 1"));
  bad = {};
  bad.eps = -1;
  EXPECT_THAT(MakeRadam(bad).status().message(), HasSubstr("eps"));
}

// torch.optim.NAdam as documented, in float64 (the momentum cache's product too): L2 decay, or decoupled (NAdamW).
std::vector<double> NadamReference(const NadamOptions& o, double lr, const std::vector<float>& p0, const Grads& grads) {
  const size_t n = p0.size();
  std::vector<double> p(n), m(n, 0.0), v(n, 0.0);
  for (size_t j = 0; j < n; ++j) p[j] = p0[j];
  double mu_product = 1.0;
  for (size_t t = 1; t <= grads.size(); ++t) {
    const double bc2 = 1.0 - std::pow(o.beta2, static_cast<double>(t));
    const double mu = o.beta1 * (1.0 - 0.5 * std::pow(0.96, t * o.momentum_decay));
    const double mu_next = o.beta1 * (1.0 - 0.5 * std::pow(0.96, (t + 1) * o.momentum_decay));
    mu_product *= mu;
    for (size_t j = 0; j < p.size(); ++j) {
      double g = grads[t - 1][j];
      if (o.decoupled_weight_decay) {
        p[j] *= 1.0 - lr * o.weight_decay;
      } else {
        g += o.weight_decay * p[j];
      }
      m[j] = o.beta1 * m[j] + (1.0 - o.beta1) * g;
      v[j] = o.beta2 * v[j] + (1.0 - o.beta2) * g * g;
      const double denom = std::sqrt(v[j] / bc2) + o.eps;
      p[j] -= lr * (1.0 - mu) / (1.0 - mu_product) * g / denom;
      p[j] -= lr * mu_next / (1.0 - mu_product * mu_next) * m[j] / denom;
    }
  }
  return p;
}

TEST(OptimNadamTest, MatchesTheReferenceWithL2OrDecoupledDecay) {
  for (bool decoupled : {false, true}) {
    NadamOptions o;
    o.beta2 = 0.99;
    o.weight_decay = 0.05;
    o.momentum_decay = 0.1;  // mu moves visibly over the steps
    o.decoupled_weight_decay = decoupled;
    std::unique_ptr<Optimizer> opt = Ok(MakeNadam(o));
    ExpectClose(RunSteps(*opt, 0.01, kP0, kGrads), NadamReference(o, 0.01, kP0, kGrads), 2e-6);
    EXPECT_EQ(opt->name(), "nadam");
    EXPECT_EQ(opt->state_names(), (std::vector<std::string>{"exp_avg", "exp_avg_sq"}));
  }
  // Decoupled decay differs from L2.
  NadamOptions l2, dec;
  l2.weight_decay = dec.weight_decay = 0.5;
  dec.decoupled_weight_decay = true;
  std::unique_ptr<Optimizer> a = Ok(MakeNadam(l2)), b = Ok(MakeNadam(dec));
  EXPECT_NE(RunSteps(*a, 0.01, kP0, kGrads), RunSteps(*b, 0.01, kP0, kGrads));
  NadamOptions bad;
  bad.momentum_decay = -1;
  EXPECT_THAT(MakeNadam(bad).status().message(), HasSubstr("nadam: momentum_decay must be finite and >= 0, got -1"));
  bad = {};
  bad.beta1 = 1.0;
  EXPECT_THAT(MakeNadam(bad).status().message(), HasSubstr("nadam: beta1 must be in [0, 1), got 1"));
}

// The momentum cache's product is torch's float32 state, the same asked in any order.
TEST(OptimNadamTest, MuProductIsTheFloat32ProductOfEveryStep) {
  float product = 1.0f;
  std::vector<float> want;
  for (int64_t t = 1; t <= 300; ++t) {
    product = product * static_cast<float>(optim_math::NadamMu(0.9, 4e-3, static_cast<double>(t)));
    want.push_back(product);
  }
  for (int64_t t : {1, 2, 3, 150, 300, 7, 299, 300}) {
    EXPECT_EQ(optim_math::NadamMuProduct(0.9, 4e-3, t), want[static_cast<size_t>(t - 1)]) << t;
  }
  EXPECT_EQ(optim_math::NadamMuProduct(0.95, 4e-3, 1), static_cast<float>(optim_math::NadamMu(0.95, 4e-3, 1.0)));
  EXPECT_EQ(optim_math::NadamMuProduct(0.9, 4e-3, 0), 1.0f);
}

// RAdamW: the decoupled decay multiplies the parameter by 1 - lr * weight_decay before the update; the rest is RAdam.
TEST(OptimRadamTest, DecoupledDecayIsRadamOnTheDecayedParameter) {
  RadamOptions dec;
  dec.weight_decay = 0.5;
  dec.decoupled_weight_decay = true;
  std::unique_ptr<Optimizer> opt = Ok(MakeRadam(dec));
  const std::vector<float> got = RunSteps(*opt, 0.01, kP0, {kGrads[0]});
  // Step 1 is unrectified: p * (1 - lr wd) - lr * m / bc1 = p * 0.995 - 0.01 * g.
  for (size_t j = 0; j < kP0.size(); ++j) EXPECT_NEAR(got[j], kP0[j] * 0.995 - 0.01 * kGrads[0][j], 1e-6) << j;
}

TEST(OptimLionTest, MatchesTheReference) {
  for (double wd : {0.0, 0.5}) {
    LionOptions o;
    o.weight_decay = wd;
    std::unique_ptr<Optimizer> opt = Ok(MakeLion(o));
    ExpectClose(RunSteps(*opt, 0.01, kP0, kGrads), LionReference(o, 0.01, kP0, kGrads));
    EXPECT_EQ(opt->name(), "lion");
    EXPECT_EQ(opt->state_names(), std::vector<std::string>{"exp_avg"});
  }
}

TEST(OptimLionTest, EveryCoordinateMovesByTheLearningRate) {
  // The first update is sign(g) * lr: every coordinate with a nonzero gradient moves by exactly lr (one rounding),
  // one with a zero gradient stays; the momentum is (1 - beta2) g.
  std::unique_ptr<Optimizer> opt = Ok(MakeLion({}));
  ParameterStore store = OneParameter({1.0f, 1.0f, 1.0f});
  StepWith(*opt, store, 0.25, {3.0f, -1e-30f, 0.0f});
  EXPECT_THAT(std::vector<float>(store.param(0).begin(), store.param(0).end()), ElementsAre(0.75f, 1.25f, 1.0f));
  EXPECT_EQ(store.FindState("exp_avg")[0], 3.0f * static_cast<float>(1.0 - 0.99));
  // The sign follows the interpolation with beta1, not the momentum: after a large positive gradient, a small
  // negative one still moves the parameter down (0.9 * 0.03 - 0.1 * 0.2 > 0).
  StepWith(*opt, store, 0.25, {-0.2f, 0.0f, 0.0f});
  EXPECT_EQ(store.param(0)[0], 0.5f);
}

TEST(OptimLionTest, DecayIsDecoupled) {
  // A zero gradient leaves a zero update: what remains is p * (1 - lr * wd).
  LionOptions o;
  o.weight_decay = 0.1;
  std::unique_ptr<Optimizer> opt = Ok(MakeLion(o));
  const std::vector<float> p = RunSteps(*opt, 0.5, {2.0f, -4.0f}, {{0.0f, 0.0f}});
  EXPECT_EQ(p[0], 2.0f * static_cast<float>(1.0 - 0.5 * 0.1));
  EXPECT_EQ(p[1], -4.0f * static_cast<float>(1.0 - 0.5 * 0.1));
}

TEST(OptimLionTest, SignIsATensorsSign) {
  EXPECT_EQ(optim_math::Sign(2.5f), 1.0f);
  EXPECT_EQ(optim_math::Sign(-1e-40f), -1.0f);
  EXPECT_EQ(optim_math::Sign(0.0f), 0.0f);
  EXPECT_EQ(optim_math::Sign(-0.0f), 0.0f);
  EXPECT_EQ(optim_math::Sign(std::nanf("")), 0.0f);
}

TEST(OptimLionTest, RejectsBadOptions) {
  LionOptions o;
  o.beta1 = 1.0;
  EXPECT_THAT(MakeLion(o).status().message(), HasSubstr("lion: beta1 must be in [0, 1), got 1"));
  o = {};
  o.beta2 = -0.5;
  EXPECT_THAT(MakeLion(o).status().message(), HasSubstr("beta2"));
  o = {};
  o.weight_decay = INFINITY;
  EXPECT_THAT(MakeLion(o).status().message(), HasSubstr("weight_decay"));
}

}  // namespace
}  // namespace onnxamp::trainer
