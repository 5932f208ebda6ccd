// Finite-difference checks (float64) of the Min, Max, ReduceMax, ReduceMin, ReduceProd, ReduceLogSum and
// ReduceLogSumExp gradient builders over shapes, broadcasts, axes and opset variants, at points away from ties; and
// hand-computed gradients at ties (split evenly, as PyTorch does) and for ReduceProd over zeros, plus the
// ReduceProdGrad kernel in float32.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/ops/gradient_ops.h"
#include "tests/runtime/op_tester.h"
#include "tests/trainer/analytic_grad.h"
#include "tests/trainer/grad_check.h"

namespace onnxamp::testing {
namespace {

using gradtest::AnalyticGradients;
using gradtest::Contains;
using gradtest::Dims;
using gradtest::DimsName;
using gradtest::Doubles;
using gradtest::EmittedOps;
using gradtest::Int64s;
using gradtest::Op;
using ir::Attribute;

ir::Tensor D(const Dims& dims, const std::vector<double>& v) { return MakeTensor<double>(dims, v); }

// ---- Min, Max

TEST(MinMaxGradTest, ShapesAndBroadcasts) {
  const std::vector<std::vector<Dims>> cases = {
      {{5}},                          // one input: the identity
      {{3, 4}, {3, 4}},               // same shapes
      {{2, 3, 4}, {3, 1}},            // broadcast
      {{1, 4}, {3, 1}},               // both broadcast
      {{2, 1, 3}, {}, {4, 1}},        // three inputs, a scalar among them
      {{3}, {2, 3}, {2, 1}, {1, 3}},  // four inputs
  };
  for (const char* op : {"Max", "Min"}) {
    uint32_t seed = 1;  // the same draws for both ops: every input holds both some maxima and some minima
    for (int64_t opset : {8, 13}) {
      for (const std::vector<Dims>& shapes : cases) {
        OpTester t = Op(op, opset);
        std::string name = std::string(op) + " opset " + std::to_string(opset);
        for (const Dims& d : shapes) {
          t.Input(Doubles(d, seed++, -3, 3));
          name += " " + DimsName(d);
        }
        // With three or more inputs one may hold no extremum anywhere: its gradient is then zero, which the central
        // differences still check element by element.
        GradCheckOptions o;
        if (shapes.size() > 2) o.min_abs = -1;
        ExpectGradientsMatchFiniteDifferences(t, name, o);
      }
    }
    // Before opset 8 every input has the same shape.
    OpTester t = Op(op, 6);
    t.Input(Doubles({2, 3}, seed++)).Input(Doubles({2, 3}, seed++)).Input(Doubles({2, 3}, seed++));
    ExpectGradientsMatchFiniteDifferences(t, std::string(op) + " opset 6");
  }
}

TEST(MinMaxGradTest, TiesSplitEvenly) {
  // torch.maximum / torch.minimum: dY / 2 to each of two equal inputs.
  {
    OpTester t = Op("Max", 13);
    t.Input(D({3}, {1, 2, 3})).Input(D({3}, {1, 5, 0}));
    auto g = AnalyticGradients(t, D({3}, {2, 3, 4}), {0, 1});
    ASSERT_TRUE(g.ok()) << g.status().message();
    EXPECT_EQ((*g)[0], (std::vector<double>{1, 0, 4}));
    EXPECT_EQ((*g)[1], (std::vector<double>{1, 3, 0}));
  }
  {
    OpTester t = Op("Min", 13);
    t.Input(D({3}, {1, 2, 3})).Input(D({3}, {1, 0, 5}));
    auto g = AnalyticGradients(t, D({3}, {2, 3, 4}), {0, 1});
    ASSERT_TRUE(g.ok()) << g.status().message();
    EXPECT_EQ((*g)[0], (std::vector<double>{1, 0, 4}));
    EXPECT_EQ((*g)[1], (std::vector<double>{1, 3, 0}));
  }
  {
    // Three inputs: k inputs equal to the result get dY / k each.
    OpTester t = Op("Max", 13);
    t.Input(D({2}, {1, 2})).Input(D({2}, {1, 2})).Input(D({2}, {1, 0}));
    auto g = AnalyticGradients(t, D({2}, {3, 6}), {0, 1, 2});
    ASSERT_TRUE(g.ok()) << g.status().message();
    EXPECT_EQ((*g)[0], (std::vector<double>{1, 3}));
    EXPECT_EQ((*g)[1], (std::vector<double>{1, 3}));
    EXPECT_EQ((*g)[2], (std::vector<double>{1, 0}));
  }
  {
    // Broadcast ties: each input's shares summed back to its shape.
    OpTester t = Op("Max", 13);
    t.Input(D({2, 1}, {1, 2})).Input(D({3}, {1, 2, 0}));
    auto g = AnalyticGradients(t, D({2, 3}, {1, 2, 3, 4, 5, 6}), {0, 1});
    ASSERT_TRUE(g.ok()) << g.status().message();
    EXPECT_EQ((*g)[0], (std::vector<double>{3.5, 12.5}));
    EXPECT_EQ((*g)[1], (std::vector<double>{0.5, 4.5, 0}));
  }
}

// ---- Reduce*

struct ReduceCase {
  std::string name;
  int64_t opset;
  Dims x;
  std::optional<std::vector<int64_t>> axes;  // nullopt: no axes attribute / input
  int64_t keepdims;
  int64_t noop = -1;  // noop_with_empty_axes (opset 18+); -1: absent
};

const std::vector<ReduceCase>& ReduceCases() {
  static const std::vector<ReduceCase> cases = {
      {"all_keep_opset13", 13, {2, 3, 4}, std::nullopt, 1},
      {"all_drop_opset13", 13, {2, 3, 4}, std::nullopt, 0},
      {"axis1_drop_opset13", 13, {2, 3, 4}, std::vector<int64_t>{1}, 0},
      {"neg_axes_drop_opset13", 13, {2, 3, 4}, std::vector<int64_t>{-1, 0}, 0},
      {"axis_keep_opset11", 11, {3, 5}, std::vector<int64_t>{1}, 1},
      {"axes_drop_opset8", 8, {3, 1, 5}, std::vector<int64_t>{0, 1}, 0},
      {"axis_drop_opset6", 6, {4, 3}, std::vector<int64_t>{1}, 0},
      {"axes_input_keep_opset18", 18, {2, 3, 4}, std::vector<int64_t>{0, 2}, 1},
      {"axes_input_drop_opset18", 18, {2, 3, 4}, std::vector<int64_t>{-2}, 0},
      {"no_axes_drop_opset18", 18, {3, 5}, std::nullopt, 0},
      {"empty_axes_input_drop_opset20", 20, {3, 5}, std::vector<int64_t>{}, 0},
      {"noop_omitted_axes_opset18", 18, {3, 5}, std::nullopt, 0, 1},
      {"noop_empty_axes_opset18", 18, {2, 3}, std::vector<int64_t>{}, 1, 1},
      {"noop_with_axes_opset18", 18, {2, 3, 4}, std::vector<int64_t>{1}, 0, 1},
      {"odd_shape_opset18", 18, {5, 1, 7}, std::vector<int64_t>{2}, 1, 0},
  };
  return cases;
}

OpTester ReduceOp(const std::string& op, const ReduceCase& c, ir::Tensor x) {
  OpTester t = Op(op, c.opset);
  t.Attr(Attribute::Int("keepdims", c.keepdims));
  if (c.noop >= 0) t.Attr(Attribute::Int("noop_with_empty_axes", c.noop));
  t.Input(std::move(x));
  if (c.axes) {
    if (c.opset >= 18) {
      t.Input(Int64s({static_cast<int64_t>(c.axes->size())}, *c.axes));
    } else {
      t.Attr(Attribute::Ints("axes", *c.axes));
    }
  }
  return t;
}

class ReduceOpGradTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ReduceOpGradTest, AxesKeepdimsAndOpsets) {
  const std::string& op = GetParam();
  uint32_t seed = 61;
  for (const ReduceCase& c : ReduceCases()) {
    const Dims& d = c.x;
    ir::Tensor x = Doubles(d, seed++, -2, 2);
    if (op == "ReduceLogSum") x = Doubles(d, seed++, 0.2, 3);
    if (op == "ReduceProd") x = Doubles(d, seed++, 0.4, 1.6);
    if (op == "ReduceProd" && x.num_elements() > 2) {  // and some negative values
      x.mutable_values<double>()[1] *= -1;
      x.mutable_values<double>()[2] *= -1;
    }
    GradCheckOptions o;
    o.wrt = {0};
    ExpectGradientsMatchFiniteDifferences(ReduceOp(op, c, std::move(x)), op + " " + c.name, o);
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, ReduceOpGradTest,
                         ::testing::Values("ReduceMax", "ReduceMin", "ReduceProd", "ReduceLogSum", "ReduceLogSumExp",
                                           "ReduceL1", "ReduceL2"),
                         [](const auto& info) { return info.param; });

// torch.norm: a group of zeros gets a zero gradient (ReduceL2: not NaN from 0 / 0; ReduceL1: sign(0) = 0).
TEST(ReduceNormGradTest, ZeroGroupsGetZeroGradients) {
  for (const char* op : {"ReduceL2", "ReduceL1"}) {
    for (int64_t opset : {8, 13, 18}) {
      OpTester t = Op(op, opset);
      t.Attr(Attribute::Int("keepdims", 0));
      t.Input(D({2, 2}, {0, 0, 3, -4}));
      if (opset >= 18) {
        t.Input(Int64s({1}, {1}));
      } else {
        t.Attr(Attribute::Ints("axes", {1}));
      }
      auto g = AnalyticGradients(t, D({2}, {2, 5}), {0});
      ASSERT_TRUE(g.ok()) << op << " opset " << opset << ": " << g.status().message();
      const std::vector<double> want = std::string(op) == "ReduceL2" ? std::vector<double>{0, 0, 5 * 0.6, 5 * -0.8}
                                                                     : std::vector<double>{0, 0, 5, -5};
      EXPECT_EQ((*g)[0], want) << op << " opset " << opset;
    }
  }
}

TEST(ReduceLogSumExpGradTest, LargeValuesStayFinite) {
  // exp(900) overflows double: the gradient exp(X - Y) must not.
  OpTester t = Op("ReduceLogSumExp", 18);
  t.Attr(Attribute::Int("keepdims", 0));
  t.Input(Doubles({3, 4}, 71, 880, 900)).Input(Int64s({1}, {1}));
  GradCheckOptions o;
  o.wrt = {0};
  o.atol = 1e-6;
  ExpectGradientsMatchFiniteDifferences(t, "ReduceLogSumExp near 900", o);
}

TEST(ReduceExtremeGradTest, TiesSplitEvenly) {
  {
    // ReduceMax over axis 1: row 0 has two maxima (3, 3), each gets half of dY.
    ReduceCase c{"", 13, {2, 3}, std::vector<int64_t>{1}, 0};
    OpTester t = ReduceOp("ReduceMax", c, D({2, 3}, {1, 3, 3, 2, 0, -1}));
    auto g = AnalyticGradients(t, D({2}, {2, 5}), {0});
    ASSERT_TRUE(g.ok()) << g.status().message();
    EXPECT_EQ((*g)[0], (std::vector<double>{0, 1, 1, 5, 0, 0}));
  }
  {
    // ReduceMin over everything (opset 18, axes omitted): three zeros share dY = 6.
    ReduceCase c{"", 18, {2, 2}, std::nullopt, 1};
    OpTester t = ReduceOp("ReduceMin", c, D({2, 2}, {0, 1, 0, 0}));
    auto g = AnalyticGradients(t, D({1, 1}, {6}), {0});
    ASSERT_TRUE(g.ok()) << g.status().message();
    EXPECT_EQ((*g)[0], (std::vector<double>{2, 0, 2, 2}));
  }
  {
    // ReduceMax with an axes input and keepdims 0 over dims 0 and 2, a tie across the reduced dims.
    ReduceCase c{"", 18, {2, 2, 2}, std::vector<int64_t>{0, 2}, 0};
    OpTester t = ReduceOp("ReduceMax", c, D({2, 2, 2}, {4, 1, 2, 7, 4, 0, 7, 3}));
    auto g = AnalyticGradients(t, D({2}, {8, 10}), {0});
    ASSERT_TRUE(g.ok()) << g.status().message();
    EXPECT_EQ((*g)[0], (std::vector<double>{4, 0, 0, 5, 4, 0, 5, 0}));
  }
}

TEST(ReduceProdGradTest, Zeros) {
  // Row 0: one zero (only it gets a gradient: the product of the others); row 1: two zeros (all 0); row 2: none.
  ReduceCase c{"", 13, {3, 3}, std::vector<int64_t>{1}, 1};
  const ir::Tensor x = D({3, 3}, {2, 0, 3, 0, 0, 4, 1.5, 2, -1});
  auto g = AnalyticGradients(ReduceOp("ReduceProd", c, x), D({3, 1}, {1, 1, 2}), {0});
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ((*g)[0], (std::vector<double>{0, 6, 0, 0, 0, 0, -4, -3, 6}));
  EXPECT_TRUE(Contains(EmittedOps(ReduceOp("ReduceProd", c, x)), ops::kReduceProdGradOp));
  // The product is a polynomial in each element, so central differences hold at zeros too.
  GradCheckOptions o;
  o.wrt = {0};
  ExpectGradientsMatchFiniteDifferences(ReduceOp("ReduceProd", c, x), "ReduceProd with zeros", o);
  ReduceCase all{"", 18, {2, 3}, std::nullopt, 0};
  ExpectGradientsMatchFiniteDifferences(ReduceOp("ReduceProd", all, D({2, 3}, {0.5, 0, 2, 1.5, -3, 0.75})),
                                        "ReduceProd with a zero, everything reduced", o);
}

TEST(ReduceProdGradKernel, Float32AndRanks) {
  // dY [2, 1] against X [2, 3]: dims where dY has 1 and X does not are reduced.
  OpTester t = InternalOp(ops::kReduceProdGradOp);
  t.Input(MakeTensor<float>({2, 1}, {1, 2})).Input(MakeTensor<float>({2, 3}, {1, 2, 3, 0, 5, 6}));
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ((*out)[0].dims(), (Dims{2, 3}));
  EXPECT_EQ(Values<float>((*out)[0]), (std::vector<float>{6, 3, 2, 60, 0, 0}));
  // A scalar dY: every dim reduced.
  OpTester s = InternalOp(ops::kReduceProdGradOp);
  s.Input(MakeTensor<float>({}, {1})).Input(MakeTensor<float>({2, 2}, {1, 2, 3, 4}));
  out = s.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(Values<float>((*out)[0]), (std::vector<float>{24, 12, 8, 6}));
  // Shapes that are no reduction of X.
  OpTester bad = InternalOp(ops::kReduceProdGradOp);
  bad.Input(MakeTensor<float>({2}, {1, 1})).Input(MakeTensor<float>({2, 3}, {1, 2, 3, 4, 5, 6}));
  out = bad.Run();
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("dY [2] is not a reduction of X [2,3]: dim 1 is 2, X has 3"), std::string::npos)
      << out.status().message();
}

}  // namespace
}  // namespace onnxamp::testing
