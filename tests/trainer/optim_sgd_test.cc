// SGD against float64 references written from torch.optim.SGD's documented algorithm (plain, momentum with and
// without dampening, Nesterov, L2 weight decay), plus closed forms, skipped parameters and option checks.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>
#include <vector>

#include "tests/trainer/optim_test_util.h"
#include "trainer/optim/optimizer.h"
#include "trainer/state/parameter_store.h"

namespace onnxamp::trainer {
namespace {

using ::testing::HasSubstr;

using optim_test::ExpectClose;
using optim_test::Grads;
using optim_test::Ok;
using optim_test::OneParameter;
using optim_test::RunSteps;

const std::vector<float> kP0 = {1.0f, -0.5f, 2.0f, 0.25f};
const Grads kGrads = {{0.1f, -0.2f, 0.3f, 0.05f}, {0.4f, 0.1f, -0.3f, 0.2f}, {-0.2f, 0.3f, 0.1f, -0.1f}};

// The algorithm box of torch.optim.SGD, in float64 from the float32 inputs.
std::vector<double> SgdReference(const SgdOptions& o, double lr, const std::vector<float>& p0, const Grads& grads) {
  std::vector<double> p(p0.begin(), p0.end());
  std::vector<double> b(p.size(), 0.0);
  for (size_t t = 0; t < grads.size(); ++t) {
    for (size_t j = 0; j < p.size(); ++j) {
      double g = grads[t][j];
      if (o.weight_decay != 0.0) g += o.weight_decay * p[j];
      if (o.momentum != 0.0) {
        b[j] = t == 0 ? g : o.momentum * b[j] + (1.0 - o.dampening) * g;
        g = o.nesterov ? g + o.momentum * b[j] : b[j];
      }
      p[j] -= lr * g;
    }
  }
  return p;
}

std::unique_ptr<Optimizer> Sgd(const SgdOptions& options) { return Ok(MakeSgd(options)); }

TEST(OptimSgdTest, PlainMatchesTheClosedForm) {
  std::unique_ptr<Optimizer> opt = Sgd({});
  const Grads grads(3, kGrads[0]);
  std::vector<float> p = RunSteps(*opt, 0.1, kP0, grads);
  std::vector<double> expected;
  for (size_t j = 0; j < kP0.size(); ++j) expected.push_back(kP0[j] - 3 * 0.1 * kGrads[0][j]);
  ExpectClose(p, expected);
  EXPECT_EQ(opt->name(), "sgd");
  EXPECT_TRUE(opt->state_names().empty());
}

TEST(OptimSgdTest, OneStepIsOneFusedMultiplyAdd) {
  // param.add_(grad, alpha=-lr) on float32 is fma(grad, (float)-lr, param) in PyTorch's vectorised kernel.
  std::unique_ptr<Optimizer> opt = Sgd({});
  std::vector<float> p = RunSteps(*opt, 0.1, kP0, {kGrads[0]});
  for (size_t j = 0; j < p.size(); ++j) EXPECT_EQ(p[j], std::fma(kGrads[0][j], -0.1f, kP0[j])) << j;
}

TEST(OptimSgdTest, Momentum) {
  SgdOptions o;
  o.momentum = 0.9;
  std::unique_ptr<Optimizer> opt = Sgd(o);
  ExpectClose(RunSteps(*opt, 0.05, kP0, kGrads), SgdReference(o, 0.05, kP0, kGrads));
  EXPECT_EQ(opt->state_names(), std::vector<std::string>{"momentum_buffer"});
}

TEST(OptimSgdTest, DampeningIsNotAppliedOnTheFirstStep) {
  SgdOptions o;
  o.momentum = 0.9;
  o.dampening = 0.5;
  std::unique_ptr<Optimizer> opt = Sgd(o);
  std::vector<float> one = RunSteps(*opt, 0.1, kP0, {kGrads[0]});
  // The buffer starts as the gradient itself: p1 = p0 - lr * g, as without momentum.
  for (size_t j = 0; j < one.size(); ++j) EXPECT_NEAR(one[j], kP0[j] - 0.1 * kGrads[0][j], 1e-7) << j;
  std::unique_ptr<Optimizer> opt3 = Sgd(o);
  ExpectClose(RunSteps(*opt3, 0.1, kP0, kGrads), SgdReference(o, 0.1, kP0, kGrads));
}

TEST(OptimSgdTest, Nesterov) {
  SgdOptions o;
  o.momentum = 0.8;
  o.nesterov = true;
  std::unique_ptr<Optimizer> opt = Sgd(o);
  std::vector<float> p = RunSteps(*opt, 0.1, kP0, kGrads);
  ExpectClose(p, SgdReference(o, 0.1, kP0, kGrads));
  SgdOptions plain = o;
  plain.nesterov = false;
  std::vector<double> without = SgdReference(plain, 0.1, kP0, kGrads);
  EXPECT_GT(std::fabs(p[0] - without[0]), 1e-3);  // the test tells Nesterov from plain momentum
}

TEST(OptimSgdTest, WeightDecayIsAddedToTheGradient) {
  SgdOptions o;
  o.weight_decay = 0.1;
  o.momentum = 0.9;
  std::unique_ptr<Optimizer> opt = Sgd(o);
  ExpectClose(RunSteps(*opt, 0.1, kP0, kGrads), SgdReference(o, 0.1, kP0, kGrads));
  // With a zero gradient, one plain step decays the parameter: p * (1 - lr * wd).
  SgdOptions decay_only;
  decay_only.weight_decay = 0.5;
  std::unique_ptr<Optimizer> opt2 = Sgd(decay_only);
  std::vector<float> p = RunSteps(*opt2, 0.1, {2.0f}, {{0.0f}});
  EXPECT_FLOAT_EQ(p[0], 1.9f);
}

TEST(OptimSgdTest, ParametersWithoutGradientsAreSkipped) {
  SgdOptions o;
  o.momentum = 0.9;
  std::unique_ptr<Optimizer> opt = Sgd(o);
  StatusOr<ParameterStore> created = ParameterStore::Create({{"a", {1}}, {"b", {1}}});
  ASSERT_TRUE(created.ok());
  ParameterStore store = std::move(created).value();
  store.param(0)[0] = 1.0f;
  store.param(1)[0] = 1.0f;
  ASSERT_TRUE(opt->Step(store, 0.1).ok());  // no gradients at all: nothing moves, nothing counts
  EXPECT_EQ(opt->step_counts(), (std::vector<int64_t>{0, 0}));
  store.grad(0)[0] = 1.0f;
  store.set_has_grad(0, true);
  ASSERT_TRUE(opt->Step(store, 0.1).ok());
  EXPECT_EQ(opt->step_counts(), (std::vector<int64_t>{1, 0}));
  EXPECT_FLOAT_EQ(store.param(0)[0], 0.9f);
  EXPECT_EQ(store.param(1)[0], 1.0f);
  // b's first step starts its momentum buffer from its own gradient, not from a's history.
  store.ZeroGrads();
  store.grad(0)[0] = 1.0f;
  store.grad(1)[0] = 1.0f;
  store.set_has_grad(0, true);
  store.set_has_grad(1, true);
  ASSERT_TRUE(opt->Step(store, 0.1).ok());
  EXPECT_EQ(opt->step_counts(), (std::vector<int64_t>{2, 1}));
  EXPECT_FLOAT_EQ(store.param(0)[0], 0.9f - 0.1f * 1.9f);
  EXPECT_FLOAT_EQ(store.param(1)[0], 0.9f);
}

TEST(OptimSgdTest, RejectsBadOptionsAndLearningRates) {
  SgdOptions o;
  o.nesterov = true;
  EXPECT_THAT(MakeSgd(o).status().message(), HasSubstr("Nesterov"));
  o.momentum = 0.9;
  o.dampening = 0.1;
  EXPECT_FALSE(MakeSgd(o).ok());
  o = {};
  o.momentum = -0.1;
  EXPECT_THAT(MakeSgd(o).status().message(), HasSubstr("momentum"));
  o = {};
  o.weight_decay = std::nan("");
  EXPECT_THAT(MakeSgd(o).status().message(), HasSubstr("weight_decay"));
  std::unique_ptr<Optimizer> opt = Sgd({});
  ParameterStore store = OneParameter({1.0f});
  EXPECT_THAT(opt->Step(store, -1.0).message(), HasSubstr("learning rate"));
  EXPECT_FALSE(opt->Step(store, std::nan("")).ok());
  ASSERT_TRUE(opt->Step(store, 0.1).ok());
  ParameterStore other = ParameterStore::Create({{"a", {1}}, {"b", {1}}}).value();
  EXPECT_EQ(opt->Step(other, 0.1).code(), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace onnxamp::trainer
