// Finite-difference checks of the norm/loss gradient builders (LayerNormalization, Softmax, LogSoftmax,
// SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss) over their attribute and opset variants, in float64, and of the
// nodes they emit. (The *Grad kernels' own tests are in tests/runtime/ops/norm_loss_grad_test.cc.)
#include <gtest/gtest.h>

#include <optional>
#include <random>
#include <string>
#include <vector>

#include "runtime/ops/gradient_ops.h"
#include "tests/runtime/op_tester.h"
#include "tests/trainer/grad_check.h"
#include "trainer/autodiff/autodiff.h"

namespace onnxamp::testing {
namespace {

using gradtest::Contains;
using gradtest::Dims;
using gradtest::DimsName;
using gradtest::Doubles;
using gradtest::EmittedOps;
using gradtest::Int64s;
using gradtest::Op;
using ir::Attribute;

// ---- LayerNormalization

struct LayerNormCase {
  int64_t axis;
  Dims x, scale;
  std::optional<Dims> bias;
  int64_t stash_type;  // 1: float statistics (the default), 11: double
};

TEST(LayerNormGradTest, AxesScalesAndBias) {
  const std::vector<LayerNormCase> cases = {
      {-1, {3, 5}, {5}, Dims{5}, 11},
      {-1, {2, 3, 5}, {5}, std::nullopt, 11},
      {1, {2, 3, 5}, {3, 5}, Dims{3, 5}, 11},
      {-2, {2, 3, 5}, {3, 5}, Dims{5}, 11},    // B smaller than Scale: dB through SumToShape
      {1, {2, 3, 5}, {1, 5}, Dims{3, 1}, 11},  // Scale and B broadcast inside the normalised dims
      {0, {2, 3, 5}, {2, 3, 5}, Dims{2, 3, 5}, 11},
      {-3, {3, 1, 5}, {1, 1, 5}, std::nullopt, 11},
      {-1, {3, 7}, {7}, Dims{7}, 1},  // float statistics: the backward reads rounded Mean and InvStdDev
  };
  uint32_t seed = 1;
  for (const LayerNormCase& c : cases) {
    OpTester t = Op("LayerNormalization", 17);
    t.Attr(Attribute::Int("axis", c.axis)).Attr(Attribute::Int("stash_type", c.stash_type));
    t.Input(Doubles(c.x, seed));
    t.Input(Doubles(c.scale, seed + 1, 0.5, 1.5));
    seed += 2;
    if (c.bias) t.Input(Doubles(*c.bias, seed++));
    const std::string what = "LayerNormalization axis " + std::to_string(c.axis) + " X " + DimsName(c.x) + " Scale " +
                             DimsName(c.scale) + (c.bias ? " B " + DimsName(*c.bias) : "");
    GradCheckOptions o;
    if (c.stash_type == 1) o.rtol = 1e-4;
    ExpectGradientsMatchFiniteDifferences(t, what, o);
  }
}

TEST(LayerNormGradTest, OnlySomeInputsAndRequestedStatistics) {
  // dX alone, dScale alone; the model asking for Mean and InvStdDev itself (left out of the loss).
  OpTester t = Op("LayerNormalization", 17);
  t.Attr(Attribute::Int("stash_type", 11)).Input(Doubles({4, 3}, 1)).Input(Doubles({3}, 2, 0.5, 1.5));
  t.Input(Doubles({3}, 3));
  for (int i = 0; i < 3; ++i) {
    GradCheckOptions o;
    o.wrt = {i};
    ExpectGradientsMatchFiniteDifferences(t, "LayerNormalization d/d input " + std::to_string(i), o);
  }
  t.num_outputs = 3;
  GradCheckOptions o;
  o.skip_outputs = {1, 2};
  ExpectGradientsMatchFiniteDifferences(t, "LayerNormalization with Mean and InvStdDev outputs", o);
  EXPECT_TRUE(Contains(EmittedOps(t), ops::kLayerNormalizationGradOp));
}

// ---- Softmax and LogSoftmax

struct SoftmaxCase {
  int64_t opset;
  std::optional<int64_t> axis;
  Dims dims;
};

class SoftmaxGradTest : public ::testing::TestWithParam<std::string> {};

TEST_P(SoftmaxGradTest, AxesAndOpsets) {
  const std::vector<SoftmaxCase> cases = {
      {13, std::nullopt, {3, 5}},
      {13, 0, {3, 5}},
      {13, 1, {2, 3, 4}},
      {13, -3, {2, 3, 4}},
      {11, std::nullopt, {2, 3, 4}},  // 2-D coercion at the default axis 1: normalised over 3 * 4 values
      {11, 2, {2, 3, 4}},
      {11, 0, {2, 3}},
      {11, -2, {2, 3, 4}},
      {8, std::nullopt, {3, 2, 2}},
  };
  uint32_t seed = 10;
  for (const SoftmaxCase& c : cases) {
    OpTester t = Op(GetParam(), c.opset);
    if (c.axis) t.Attr(Attribute::Int("axis", *c.axis));
    t.Input(Doubles(c.dims, seed++));
    ExpectGradientsMatchFiniteDifferences(t, GetParam() + " opset " + std::to_string(c.opset) + " axis " +
                                                 (c.axis ? std::to_string(*c.axis) : "default") + " " +
                                                 DimsName(c.dims));
  }
  OpTester t = Op(GetParam(), 13);
  t.Input(Doubles({2, 3}, 1));
  EXPECT_TRUE(Contains(EmittedOps(t), GetParam() == "Softmax" ? ops::kSoftmaxGradOp : ops::kLogSoftmaxGradOp));
}

INSTANTIATE_TEST_SUITE_P(Ops, SoftmaxGradTest, ::testing::Values("Softmax", "LogSoftmax"),
                         [](const auto& info) { return info.param; });

// ---- SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss

struct LossCase {
  int64_t opset;
  Dims dims;  // [N, C] or [N, C, D1, ...]
  std::string reduction;
  std::optional<int64_t> ignore_index;
  bool weights;
};

class LossGradTest : public ::testing::TestWithParam<std::string> {};

TEST_P(LossGradTest, ReductionsLayoutsIgnoreAndWeights) {
  const bool sce = GetParam() == "SoftmaxCrossEntropyLoss";
  std::vector<LossCase> cases;
  for (int64_t opset : {12, 13}) {
    for (const std::string reduction : {"none", "sum", "mean"}) {
      cases.push_back({opset, {5, 3}, reduction, std::nullopt, false});
      cases.push_back({opset, {3, 4, 2, 3}, reduction, 1, true});
    }
  }
  cases.push_back({13, {4, 5, 3}, "mean", std::nullopt, true});
  cases.push_back({13, {4, 5, 3}, "mean", -1, false});
  uint32_t seed = 20;
  for (const LossCase& c : cases) {
    Dims label_dims = c.dims;
    label_dims.erase(label_dims.begin() + 1);
    int64_t positions = 1;
    for (int64_t d : label_dims) positions *= d;
    std::vector<int64_t> labels(positions);
    for (int64_t i = 0; i < positions; ++i) labels[i] = (i * 5 + 2) % c.dims[1];
    if (c.ignore_index && *c.ignore_index < 0) labels[1] = *c.ignore_index;  // an ignored position outside [0, C)
    OpTester t = Op(GetParam(), c.opset);
    t.Attr(Attribute::String("reduction", c.reduction));
    if (c.ignore_index) t.Attr(Attribute::Int("ignore_index", *c.ignore_index));
    // NLL's input is log-probabilities in practice; any values differentiate.
    t.Input(Doubles(c.dims, seed++, sce ? -2 : -3, sce ? 2 : -0.1)).Input(Int64s(label_dims, labels));
    if (c.weights) t.Input(Doubles({c.dims[1]}, seed++, 0.5, 2));
    GradCheckOptions o;
    o.wrt = {0};
    const std::string what = GetParam() + " opset " + std::to_string(c.opset) + " " + DimsName(c.dims) + " " +
                             c.reduction + (c.ignore_index ? " ignore " + std::to_string(*c.ignore_index) : "") +
                             (c.weights ? " weighted" : "");
    ExpectGradientsMatchFiniteDifferences(t, what, o);
    if (sce) {
      // With log_prob an output too: its gradient adds LogSoftmaxGrad's.
      OpTester both = t;
      both.num_outputs = 2;
      ExpectGradientsMatchFiniteDifferences(both, what + " with log_prob", o);
    }
  }
}

// The class weights take no gradient (as PyTorch's nll_loss, whose derivative for weight is not implemented): asked
// for, theirs is empty.
TEST_P(LossGradTest, EmitsTheGradOpAndNoGradientForWeights) {
  const bool sce = GetParam() == "SoftmaxCrossEntropyLoss";
  OpTester t = Op(GetParam(), 13);
  t.Input(Doubles({3, 4}, 1, -3, -0.1)).Input(Int64s({3}, {0, 3, 1})).Input(Doubles({4}, 2, 0.5, 2));
  EXPECT_TRUE(
      Contains(EmittedOps(t), sce ? ops::kSoftmaxCrossEntropyLossGradOp : ops::kNegativeLogLikelihoodLossGradOp));
  ir::Model m = t.BuildModel();
  ir::Graph& g = *m.graph;
  StatusOr<trainer::GradientResult> r = trainer::BuildGradients(m, {g.outputs()[0]->name(), {"in0", "in2"}, ""});
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->gradients.size(), 2u);
  EXPECT_FALSE(r->gradients[0].empty());
  EXPECT_TRUE(r->gradients[1].empty());
}

INSTANTIATE_TEST_SUITE_P(Ops, LossGradTest, ::testing::Values("SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace onnxamp::testing
