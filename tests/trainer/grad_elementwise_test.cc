// Finite-difference checks of the elementwise, reduce and shape-op gradient builders, and the SumToShape and ReluGrad
// kernels they emit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/ops/gradient_ops.h"
#include "tests/runtime/op_tester.h"
#include "tests/trainer/grad_check.h"

namespace onnxamp::testing {
namespace {

using Dims = std::vector<int64_t>;

// Values in [lo, hi) kept at least `gap` away from zero (away from the kinks of Relu and Abs).
ir::Tensor Doubles(const Dims& dims, uint32_t seed, double lo = -2, double hi = 2, double gap = 0.05) {
  ir::Tensor t(DType::kFloat64, dims);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  for (double& v : t.mutable_values<double>()) {
    do {
      v = u(gen);
    } while (std::abs(v) < gap);
  }
  return t;
}

ir::Tensor Int64s(const Dims& dims, const std::vector<int64_t>& values) { return MakeTensor<int64_t>(dims, values); }

OpTester Op(const std::string& op, int64_t opset = 17) {
  OpTester t;
  t.op_type = op;
  t.opset = opset;
  return t;
}

struct BinaryCase {
  Dims a, b;
};

class BinaryGradTest : public ::testing::TestWithParam<std::string> {};

TEST_P(BinaryGradTest, BroadcastShapes) {
  const std::vector<BinaryCase> cases = {
      {{3, 4}, {3, 4}}, {{2, 3, 4}, {4}}, {{2, 3, 4}, {3, 1}}, {{1, 4}, {3, 1}}, {{2, 1, 3}, {}}, {{}, {2, 3}},
  };
  uint32_t seed = 1;
  for (const BinaryCase& c : cases) {
    OpTester t = Op(GetParam());
    const bool pow = GetParam() == "Pow";
    t.Input(Doubles(c.a, seed++, pow ? 0.5 : -2, 2));
    t.Input(Doubles(c.b, seed++, pow ? -1.5 : -2, pow ? 1.5 : 2));
    ExpectGradientsMatchFiniteDifferences(
        t, GetParam() + " " + std::to_string(c.a.size()) + "d/" + std::to_string(c.b.size()) + "d");
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, BinaryGradTest, ::testing::Values("Add", "Sub", "Mul", "Div", "Pow"),
                         [](const auto& info) { return info.param; });

struct UnaryCase {
  std::string op;
  double lo, hi;
  std::vector<ir::Attribute> attrs;
};

class UnaryGradTest : public ::testing::TestWithParam<UnaryCase> {};

TEST_P(UnaryGradTest, OddShapes) {
  const UnaryCase& c = GetParam();
  uint32_t seed = 7;
  for (const Dims& dims : {Dims{}, Dims{5}, Dims{3, 7}, Dims{2, 3, 5}}) {
    OpTester t = Op(c.op);
    for (const ir::Attribute& a : c.attrs) t.Attr(a);
    // A scalar draws one value: keep it where every op here has a non-zero derivative.
    t.Input(Doubles(dims, seed++, dims.empty() ? std::max(c.lo, 0.1) : c.lo, c.hi));
    ExpectGradientsMatchFiniteDifferences(t, c.op + " rank " + std::to_string(dims.size()));
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, UnaryGradTest,
                         ::testing::Values(UnaryCase{"Neg", -2, 2, {}}, UnaryCase{"Identity", -2, 2, {}},
                                           UnaryCase{"Relu", -2, 2, {}}, UnaryCase{"Sqrt", 0.2, 3, {}},
                                           UnaryCase{"Exp", -2, 2, {}}, UnaryCase{"Log", 0.2, 3, {}},
                                           UnaryCase{"Tanh", -2, 2, {}}, UnaryCase{"Sigmoid", -3, 3, {}},
                                           UnaryCase{"Erf", -2, 2, {}}, UnaryCase{"Reciprocal", 0.3, 3, {}},
                                           UnaryCase{"Abs", -2, 2, {}}, UnaryCase{"Softplus", -3, 3, {}},
                                           UnaryCase{"LeakyRelu", -2, 2, {ir::Attribute::Float("alpha", 0.2f)}}),
                         [](const auto& info) { return info.param.op; });

TEST(CastGrad, BackToTheInputType) {
  // float64 -> float64 is the identity; the Cast's gradient is a Cast back (checked in float64 end to end).
  OpTester t = Op("Cast");
  t.Attr(ir::Attribute::Int("to", static_cast<int64_t>(DType::kFloat64))).Input(Doubles({3, 2}, 3));
  ExpectGradientsMatchFiniteDifferences(t, "Cast");
}

struct ReduceCase {
  std::string name;
  std::string op;
  int64_t opset;
  Dims x;
  std::vector<int64_t> axes;
  int64_t keepdims;
};

class ReduceGradTest : public ::testing::TestWithParam<ReduceCase> {};

TEST_P(ReduceGradTest, Axes) {
  const ReduceCase& c = GetParam();
  OpTester t = Op(c.op, c.opset);
  t.Attr(ir::Attribute::Int("keepdims", c.keepdims));
  t.Input(Doubles(c.x, 11));
  const bool axes_input = c.opset >= 18 || (c.op == "ReduceSum" && c.opset >= 13);
  if (!c.axes.empty()) {
    if (axes_input) {
      t.Input(Int64s({static_cast<int64_t>(c.axes.size())}, c.axes));
    } else {
      t.Attr(ir::Attribute::Ints("axes", c.axes));
    }
  }
  GradCheckOptions o;
  o.wrt = {0};
  ExpectGradientsMatchFiniteDifferences(t, c.name, o);
}

INSTANTIATE_TEST_SUITE_P(Cases, ReduceGradTest,
                         ::testing::Values(ReduceCase{"sum_all_keep", "ReduceSum", 17, {2, 3, 4}, {}, 1},
                                           ReduceCase{"sum_all_drop", "ReduceSum", 17, {2, 3, 4}, {}, 0},
                                           ReduceCase{"sum_axis1_drop", "ReduceSum", 17, {2, 3, 4}, {1}, 0},
                                           ReduceCase{"sum_neg_axes_drop", "ReduceSum", 17, {2, 3, 4}, {-1, 0}, 0},
                                           ReduceCase{"sum_axis_keep_opset11", "ReduceSum", 11, {2, 3, 4}, {2}, 1},
                                           ReduceCase{"sum_axis_drop_opset11", "ReduceSum", 11, {2, 3, 4}, {0}, 0},
                                           ReduceCase{"mean_axis_drop_opset17", "ReduceMean", 17, {3, 5}, {1}, 0},
                                           ReduceCase{"mean_all_keep_opset18", "ReduceMean", 18, {3, 5}, {}, 1},
                                           ReduceCase{"mean_axes_drop_opset18", "ReduceMean", 18, {2, 3, 4}, {0, 2}, 0},
                                           ReduceCase{"sumsquare_axis_keep", "ReduceSumSquare", 17, {4, 3}, {0}, 1}),
                         [](const auto& info) { return info.param.name; });

TEST(ShapeOpGrad, ReshapeFlattenSqueezeUnsqueezeTranspose) {
  {
    OpTester t = Op("Reshape", 14);
    t.Input(Doubles({2, 3, 4}, 21)).Input(Int64s({3}, {0, -1, 2}));
    ExpectGradientsMatchFiniteDifferences(t, "Reshape with 0 and -1");
  }
  {
    OpTester t = Op("Flatten", 13);
    t.Attr(ir::Attribute::Int("axis", 2)).Input(Doubles({2, 3, 2, 2}, 22));
    ExpectGradientsMatchFiniteDifferences(t, "Flatten");
  }
  {
    OpTester t = Op("Squeeze", 13);
    t.Input(Doubles({2, 1, 3}, 23)).Input(Int64s({1}, {1}));
    ExpectGradientsMatchFiniteDifferences(t, "Squeeze");
  }
  {
    OpTester t = Op("Unsqueeze", 11);
    t.Attr(ir::Attribute::Ints("axes", {0, 3})).Input(Doubles({2, 3}, 24));
    ExpectGradientsMatchFiniteDifferences(t, "Unsqueeze opset 11");
  }
  {
    OpTester t = Op("Transpose");
    t.Attr(ir::Attribute::Ints("perm", {1, 2, 0})).Input(Doubles({2, 3, 4}, 25));
    ExpectGradientsMatchFiniteDifferences(t, "Transpose perm");
  }
  {
    OpTester t = Op("Transpose");
    t.Input(Doubles({2, 3, 4}, 26));
    ExpectGradientsMatchFiniteDifferences(t, "Transpose reversed");
  }
}

// From opset 13 one Split with its sizes as an input; opsets 10-12 one Slice per input (their Split takes no such
// input), with a negative axis counted from the front at opset 10.
TEST(ShapeOpGrad, Concat) {
  for (const auto& [opset, axis] : std::vector<std::pair<int64_t, int64_t>>{
           {13, 0}, {13, 1}, {13, -1}, {11, 0}, {11, 1}, {11, -1}, {10, 1}, {10, -1}}) {
    SCOPED_TRACE(opset);
    OpTester t = Op("Concat", opset);
    t.Attr(ir::Attribute::Int("axis", axis));
    t.Input(Doubles({2, 3}, 31)).Input(Doubles({2, 3}, 32)).Input(Doubles({2, 3}, 33));
    if (axis == 1) {
      t.inputs[1] = Doubles({2, 1}, 34);
      t.inputs[2] = Doubles({2, 4}, 35);
    }
    ExpectGradientsMatchFiniteDifferences(t, "Concat axis " + std::to_string(axis));
  }
}

// The backward ops' own gradients (second derivatives, the Gradient operator): SumToShape is differentiable in G
// (leading, size-1 and no reduced dims); ReluGrad in dY, and zero in Y away from its kink.
TEST(GradCheck, SumToShapeAndReluGradBuilders) {
  for (const auto& [g, target] :
       std::vector<std::pair<Dims, Dims>>{{{2, 3, 4}, {3, 1}}, {{2, 3}, {2, 3}}, {{4}, {1}}}) {
    OpTester t = InternalOp(ops::kSumToShapeOp);
    t.Input(Doubles(g, 41)).Input(Int64s({static_cast<int64_t>(target.size())}, target));
    GradCheckOptions o;
    o.wrt = {0};
    ExpectGradientsMatchFiniteDifferences(t, "SumToShape", o);
  }
  OpTester relu = InternalOp(ops::kReluGradOp);
  relu.Input(Doubles({3, 4}, 42)).Input(Doubles({3, 4}, 43));
  GradCheckOptions dy;
  dy.wrt = {0};
  ExpectGradientsMatchFiniteDifferences(relu, "ReluGrad in dY", dy);
  GradCheckOptions y;
  y.wrt = {1};
  y.min_abs = -1;  // zero: the mask does not move under a small step of Y away from 0
  ExpectGradientsMatchFiniteDifferences(relu, "ReluGrad in Y", y);
}

// The indexing backward ops' own builders (second derivatives): GatherGrad (negative and repeated indices, two axes),
// GatherElementsGrad, SliceGrad (steps, axes) and DepthToSpaceGrad (both modes), each in dY.
TEST(GradCheck, IndexingGradBuilders) {
  GradCheckOptions only_dy;
  only_dy.wrt = {0};
  OpTester gather0 = InternalOp(ops::kGatherGradOp);
  gather0.Attr(ir::Attribute::Int("axis", 0));
  gather0.Input(Doubles({3, 3}, 61)).Input(Int64s({3}, {3, 1, -3})).Input(Int64s({2}, {4, 3}));
  ExpectGradientsMatchFiniteDifferences(gather0, "GatherGrad axis 0", only_dy);
  OpTester gather1 = InternalOp(ops::kGatherGradOp);
  gather1.Attr(ir::Attribute::Int("axis", 1));
  gather1.Input(Doubles({2, 2, 3}, 62)).Input(Int64s({2, 3}, {0, 3, -1, 2, 2, 1})).Input(Int64s({2}, {2, 4}));
  ExpectGradientsMatchFiniteDifferences(gather1, "GatherGrad axis 1", only_dy);
  OpTester elements = InternalOp(ops::kGatherElementsGradOp);
  elements.Attr(ir::Attribute::Int("axis", 1));
  elements.Input(Doubles({2, 3}, 63)).Input(Int64s({2, 3}, {0, 3, 3, 1, -1, 2})).Input(Int64s({2}, {2, 4}));
  ExpectGradientsMatchFiniteDifferences(elements, "GatherElementsGrad", only_dy);
  OpTester slice = InternalOp(ops::kSliceGradOp);
  slice.Input(Doubles({2, 3}, 64))
      .Input(Int64s({2}, {4, 5}))
      .Input(Int64s({2}, {1, 0}))
      .Input(Int64s({2}, {3, 5}))
      .Input(Int64s({2}, {0, 1}))
      .Input(Int64s({2}, {1, 2}));
  ExpectGradientsMatchFiniteDifferences(slice, "SliceGrad", only_dy);
  for (const char* mode : {"DCR", "CRD"}) {
    OpTester d2s = InternalOp(ops::kDepthToSpaceGradOp);
    d2s.Attr(ir::Attribute::Int("blocksize", 2)).Attr(ir::Attribute::String("mode", mode));
    d2s.Input(Doubles({1, 2, 4, 6}, 65));
    ExpectGradientsMatchFiniteDifferences(d2s, std::string("DepthToSpaceGrad ") + mode, only_dy);
  }
}

// The backward ops that are linear in dY: DropoutGrad (the same mask again),
// PadGrad (Pad in its mode), GatherNDGrad (GatherND, with and without batch_dims, a repeated index tuple) and
// MaxUnpoolGrad (MaxPoolGrad, which adds at repeated indices; refused with output_shape).
TEST(GradCheck, LinearBackwardOpGradBuilders) {
  GradCheckOptions only_dy;
  only_dy.wrt = {0};
  OpTester dropout = InternalOp(ops::kDropoutGradOp);
  dropout.Attr(ir::Attribute::Int("seed", 7));
  ir::Tensor training(DType::kBool, {});
  training.mutable_values<bool>()[0] = true;
  ir::Tensor ratio(DType::kFloat32, {});
  ratio.mutable_values<float>()[0] = 0.4f;
  dropout.Input(Doubles({4, 5}, 71)).Input(ratio).Input(training);
  ExpectGradientsMatchFiniteDifferences(dropout, "DropoutGrad", only_dy);
  GradCheckOptions opset19 = only_dy;
  opset19.onnx_opset = 19;  // Pad with axes (18) and in mode wrap (19)
  for (const char* mode : {"edge", "reflect", "wrap"}) {
    OpTester pad = InternalOp(ops::kPadGradOp);
    pad.Attr(ir::Attribute::String("mode", mode));
    // X [2, 3] padded by [1, 0] before and [1, 2] after: dY [4, 5].
    pad.Input(Doubles({4, 5}, 72)).Input(Int64s({2}, {2, 3})).Input(Int64s({4}, {1, 0, 1, 2}));
    ExpectGradientsMatchFiniteDifferences(pad, std::string("PadGrad ") + mode, opset19);
    OpTester axes = InternalOp(ops::kPadGradOp);
    axes.Attr(ir::Attribute::String("mode", mode));
    axes.Input(Doubles({2, 5}, 73)).Input(Int64s({2}, {2, 3})).Input(Int64s({2}, {1, 1})).Input(Int64s({1}, {-1}));
    ExpectGradientsMatchFiniteDifferences(axes, std::string("PadGrad axes ") + mode, opset19);
  }
  OpTester old_opset = InternalOp(ops::kPadGradOp);
  old_opset.Attr(ir::Attribute::String("mode", "wrap"));
  old_opset.Input(Doubles({4, 5}, 72)).Input(Int64s({2}, {2, 3})).Input(Int64s({4}, {1, 0, 1, 2}));
  EXPECT_NE(gradtest::GradientError(old_opset).find("opset 19+); the model's opset is 17"), std::string::npos)
      << gradtest::GradientError(old_opset);
  OpTester nd = InternalOp(ops::kGatherNDGradOp);
  nd.Input(Doubles({3, 4}, 74)).Input(Int64s({3, 1}, {2, 0, 2})).Input(Int64s({2}, {3, 4}));
  ExpectGradientsMatchFiniteDifferences(nd, "GatherNDGrad", only_dy);
  OpTester batched = InternalOp(ops::kGatherNDGradOp);
  batched.Attr(ir::Attribute::Int("batch_dims", 1));
  batched.Input(Doubles({2, 4}, 75)).Input(Int64s({2, 1}, {1, 2})).Input(Int64s({3}, {2, 3, 4}));
  ExpectGradientsMatchFiniteDifferences(batched, "GatherNDGrad batch_dims 1", only_dy);
  // Indices repeat where MaxPool windows overlap: the adjoint adds at them (MaxPoolGrad), it does not overwrite.
  for (bool repeated : {false, true}) {
    OpTester unpool = InternalOp(ops::kMaxUnpoolGradOp);
    unpool.Attr(ir::Attribute::Ints("kernel_shape", {2, 2})).Attr(ir::Attribute::Ints("strides", {2, 2}));
    unpool.Input(Doubles({1, 2, 4, 4}, 76))
        .Input(Int64s({1, 2, 2, 2}, repeated ? std::vector<int64_t>{5, 5, 9, 5, 17, 22, 22, 22}
                                             : std::vector<int64_t>{0, 3, 9, 14, 17, 22, 24, 31}))
        .Input(Int64s({4}, {1, 2, 2, 2}));
    ExpectGradientsMatchFiniteDifferences(unpool, repeated ? "MaxUnpoolGrad repeated indices" : "MaxUnpoolGrad",
                                          only_dy);
  }
  OpTester padded = InternalOp(ops::kMaxUnpoolGradOp);
  padded.Attr(ir::Attribute::Ints("kernel_shape", {2, 2})).Attr(ir::Attribute::Ints("strides", {2, 2}));
  padded.Input(Doubles({1, 2, 5, 5}, 76))
      .Input(Int64s({1, 2, 2, 2}, {0, 3, 9, 14, 17, 22, 24, 31}))
      .Input(Int64s({4}, {1, 2, 2, 2}))
      .Input(Int64s({4}, {1, 2, 5, 5}));
  EXPECT_NE(gradtest::GradientError(padded).find("MaxUnpool with output_shape"), std::string::npos)
      << gradtest::GradientError(padded);
}

// EluGrad and GeluGrad (both forms) in dY and X; SoftmaxGrad and LogSoftmaxGrad in dY and Y over one axis, a negative
// axis, and the 2-D coercion of opsets before 13 (legacy 1: the axis and every later dim).
TEST(GradCheck, ActivationAndSoftmaxGradBuilders) {
  for (const char* approximate : {"none", "tanh"}) {
    OpTester gelu = InternalOp(ops::kGeluGradOp);
    gelu.Attr(ir::Attribute::String("approximate", approximate));
    gelu.Input(Doubles({3, 4}, 51)).Input(Doubles({3, 4}, 52, -3, 3));
    ExpectGradientsMatchFiniteDifferences(gelu, std::string("GeluGrad ") + approximate);
  }
  OpTester elu = InternalOp(ops::kEluGradOp);
  elu.Attr(ir::Attribute::Float("alpha", 0.7f));
  elu.Input(Doubles({3, 4}, 53)).Input(Doubles({3, 4}, 54));  // X away from 0, where the branch changes
  ExpectGradientsMatchFiniteDifferences(elu, "EluGrad");
  struct Case {
    int64_t axis;
    int64_t legacy;
  };
  for (const char* op : {ops::kSoftmaxGradOp, ops::kLogSoftmaxGradOp}) {
    for (const Case& c : {Case{1, 0}, Case{-1, 0}, Case{1, 1}, Case{-2, 1}}) {
      OpTester t = InternalOp(op);
      t.Attr(ir::Attribute::Int("axis", c.axis)).Attr(ir::Attribute::Int("legacy", c.legacy));
      t.Input(Doubles({2, 3, 4}, 55)).Input(Doubles({2, 3, 4}, 56, -1.5, 0.5));
      ExpectGradientsMatchFiniteDifferences(
          t, std::string(op) + " axis " + std::to_string(c.axis) + " legacy " + std::to_string(c.legacy));
    }
  }
}

TEST(SumToShapeKernel, SumsBroadcastDims) {
  OpTester t = InternalOp(ops::kSumToShapeOp);
  // G [2, 3, 2] summed to [3, 1]: over dim 0 (leading) and dim 2 (size 1).
  t.Input(MakeTensor<float>({2, 3, 2}, {1, 2, 3, 4, 5, 6, 10, 20, 30, 40, 50, 60})).Input(Int64s({2}, {3, 1}));
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ((*out)[0].dims(), (Dims{3, 1}));
  EXPECT_EQ(Values<float>((*out)[0]), (std::vector<float>{33, 77, 121}));
  // The same shape: passed through.
  OpTester same = InternalOp(ops::kSumToShapeOp);
  same.Input(MakeTensor<double>({2}, {1.5, 2.5})).Input(Int64s({1}, {2}));
  out = same.Run();
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(Values<double>((*out)[0]), (std::vector<double>{1.5, 2.5}));
  // Scalar target.
  OpTester all = InternalOp(ops::kSumToShapeOp);
  all.Input(MakeTensor<float>({2, 2}, {1, 2, 3, 4})).Input(Int64s({0}, {}));
  out = all.Run();
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].dims(), Dims{});
  EXPECT_EQ(Values<float>((*out)[0]), (std::vector<float>{10}));
}

TEST(SumToShapeKernel, RefusesShapesThatDoNotBroadcast) {
  OpTester t = InternalOp(ops::kSumToShapeOp);
  t.Input(MakeTensor<float>({2, 3}, {1, 2, 3, 4, 5, 6})).Input(Int64s({1}, {2}));
  auto out = t.Run();
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("cannot sum [2,3] to [2]: dim 1 is 3, target 2"), std::string::npos)
      << out.status().message();
}

TEST(ReluGradKernel, PassesWhereTheOutputIsPositive) {
  OpTester t = InternalOp(ops::kReluGradOp);
  t.Input(MakeTensor<float>({4}, {1, 2, 3, 4})).Input(MakeTensor<float>({4}, {0, 0.5f, 0, 2}));
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(Values<float>((*out)[0]), (std::vector<float>{0, 2, 0, 4}));
}

}  // namespace
}  // namespace onnxamp::testing
