// Finite-difference checks of the InstanceNormalization and GroupNormalization gradient builders (and so of the
// GroupNormalizationGrad kernel): X, scale and bias over ranks 2 to 5, epsilon, GroupNormalization 18 (scale and
// bias per group) and 21 (per channel, stash_type), groups of one channel and of all channels.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/ops/gradient_ops.h"
#include "tests/runtime/op_tester.h"
#include "tests/trainer/grad_check.h"

namespace onnxamp::testing {
namespace {

using gradtest::Dims;
using gradtest::DimsName;
using gradtest::Doubles;

TEST(InstanceNormGrad, MatchesFiniteDifferences) {
  struct Case {
    int64_t opset;
    Dims x;
    float epsilon;
  };
  uint32_t seed = 20;
  for (const Case& c : {Case{6, {2, 3, 5}, 1e-5f}, Case{22, {1, 2, 3, 4}, 0.5f}, Case{17, {3, 1, 2, 3, 2}, 1e-3f},
                        Case{17, {2, 2, 1, 3}, 1e-2f}, Case{17, {2, 4, 7}, 1e-5f}}) {
    OpTester t = gradtest::Op("InstanceNormalization", c.opset);
    t.Attr(ir::Attribute::Float("epsilon", c.epsilon));
    t.Input(Doubles(c.x, seed++)).Input(Doubles({c.x[1]}, seed++)).Input(Doubles({c.x[1]}, seed++));
    ExpectGradientsMatchFiniteDifferences(t, "InstanceNormalization-" + std::to_string(c.opset) + " " + DimsName(c.x));
  }
  OpTester t = gradtest::Op("InstanceNormalization", 17);
  t.Input(Doubles({2, 3, 4}, 1)).Input(Doubles({3}, 2)).Input(Doubles({3}, 3));
  EXPECT_TRUE(gradtest::Contains(gradtest::EmittedOps(t), ops::kGroupNormalizationGradOp));
}

TEST(GroupNormGrad, MatchesFiniteDifferences) {
  struct Case {
    int64_t opset;
    Dims x;
    int64_t groups;
    float epsilon;
  };
  uint32_t seed = 40;
  for (const Case& c : {Case{18, {2, 6, 5}, 3, 1e-5f}, Case{18, {1, 4, 3, 3}, 2, 0.1f}, Case{18, {2, 3, 4}, 1, 1e-5f},
                        Case{18, {2, 3, 4}, 3, 1e-5f}, Case{21, {2, 6, 5}, 2, 1e-5f}, Case{21, {1, 4, 2, 3}, 4, 1e-2f},
                        Case{21, {3, 4, 3}, 1, 1e-5f}, Case{21, {2, 6}, 3, 1e-3f}}) {
    OpTester t = gradtest::Op("GroupNormalization", c.opset);
    t.Attr(ir::Attribute::Int("num_groups", c.groups)).Attr(ir::Attribute::Float("epsilon", c.epsilon));
    if (c.opset >= 21) t.Attr(ir::Attribute::Int("stash_type", 1));
    const int64_t params = c.opset >= 21 ? c.x[1] : c.groups;
    t.Input(Doubles(c.x, seed++)).Input(Doubles({params}, seed++)).Input(Doubles({params}, seed++));
    ExpectGradientsMatchFiniteDifferences(t, "GroupNormalization-" + std::to_string(c.opset) + " " + DimsName(c.x) +
                                                 " groups " + std::to_string(c.groups));
  }
}

TEST(GroupNormGrad, OnlyTheNeededOutputs) {
  OpTester t = gradtest::Op("GroupNormalization", 21);
  t.Attr(ir::Attribute::Int("num_groups", 2));
  t.Input(Doubles({2, 4, 3}, 1)).Input(Doubles({4}, 2)).Input(Doubles({4}, 3));
  GradCheckOptions only_scale;
  only_scale.wrt = {1};
  ExpectGradientsMatchFiniteDifferences(t, "dScale only", only_scale);
  GradCheckOptions only_bias;
  only_bias.wrt = {2};
  ExpectGradientsMatchFiniteDifferences(t, "dBias only", only_bias);
}

}  // namespace
}  // namespace onnxamp::testing
