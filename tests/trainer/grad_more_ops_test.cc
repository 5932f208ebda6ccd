// Finite-difference checks of the gradient builders of the trigonometric, hyperbolic and rounding functions, the
// activations Softsign Selu Celu HardSigmoid HardSwish ThresholdedRelu Shrink Mish, and PRelu, Mod, Sum, Mean, Trilu,
// CumSum, DepthToSpace, SpaceToDepth, LRN, Compress, Hardmax, EyeLike and MaxUnpool.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "tests/runtime/op_tester.h"
#include "tests/trainer/grad_check.h"

namespace onnxamp::testing {
namespace {

using namespace gradtest;  // NOLINT

struct UnaryCase {
  std::string op;
  int64_t opset;
  double lo, hi;
  std::vector<double> kinks;
  std::vector<ir::Attribute> attrs;
  bool zero = false;  // a zero gradient (Floor, Ceil, Round, Sign)
};

class MoreUnaryGradTest : public ::testing::TestWithParam<UnaryCase> {};

TEST_P(MoreUnaryGradTest, MatchesFiniteDifferences) {
  const UnaryCase& c = GetParam();
  uint32_t seed = 3;
  for (const Dims& dims : {Dims{7}, Dims{2, 3, 5}}) {
    OpTester t = Op(c.op, c.opset);
    for (const ir::Attribute& a : c.attrs) t.Attr(a);
    t.Input(DoublesAway(dims, seed++, c.lo, c.hi, c.kinks));
    GradCheckOptions o;
    if (c.zero) o.min_abs = -1;  // all zero, as the finite differences
    ExpectGradientsMatchFiniteDifferences(t, c.op + " " + DimsName(dims), o);
  }
}

// Integers and half-integers are where Floor, Ceil, Round and Sign jump.
std::vector<double> Steps() {
  std::vector<double> v;
  for (int i = -6; i <= 6; ++i) v.insert(v.end(), {i * 0.5});
  return v;
}

INSTANTIATE_TEST_SUITE_P(
    Ops, MoreUnaryGradTest,
    ::testing::Values(
        UnaryCase{"Sin", 7, -4, 4, {}, {}}, UnaryCase{"Cos", 7, -4, 4, {}, {}}, UnaryCase{"Tan", 7, -1.2, 1.2, {}, {}},
        UnaryCase{"Asin", 7, -0.9, 0.9, {}, {}}, UnaryCase{"Acos", 7, -0.9, 0.9, {}, {}},
        UnaryCase{"Atan", 7, -3, 3, {}, {}}, UnaryCase{"Sinh", 9, -3, 3, {}, {}}, UnaryCase{"Cosh", 9, -3, 3, {0}, {}},
        UnaryCase{"Asinh", 9, -3, 3, {}, {}}, UnaryCase{"Acosh", 9, 1.2, 4, {}, {}},
        UnaryCase{"Atanh", 9, -0.9, 0.9, {}, {}}, UnaryCase{"Floor", 13, -3, 3, Steps(), {}, true},
        UnaryCase{"Ceil", 13, -3, 3, Steps(), {}, true}, UnaryCase{"Round", 11, -3, 3, Steps(), {}, true},
        UnaryCase{"Sign", 13, -3, 3, {0}, {}, true}, UnaryCase{"Softsign", 7, -3, 3, {0}, {}},
        UnaryCase{"Selu", 9, -3, 3, {0}, {}}, UnaryCase{"Celu", 12, -3, 3, {0}, {ir::Attribute::Float("alpha", 1.5f)}},
        UnaryCase{"HardSigmoid", 9, -4, 4, {-2.5, 2.5}, {}}, UnaryCase{"HardSwish", 14, -5, 5, {-3, 3}, {}},
        UnaryCase{"ThresholdedRelu", 10, -2, 2, {0.5}, {ir::Attribute::Float("alpha", 0.5f)}},
        UnaryCase{
            "Shrink", 9, -3, 3, {-1, 1}, {ir::Attribute::Float("lambd", 1.0f), ir::Attribute::Float("bias", 0.3f)}},
        UnaryCase{"Mish", 18, -4, 4, {}, {}}),
    [](const auto& info) { return info.param.op; });

// Opset 6: the builders' scalar constants get broadcast = 1 as input B (rewritten where they are A: Sqrt's 0.5 / Y,
// Tanh's 1 - Y^2, Softsign's 1 + |X|).
INSTANTIATE_TEST_SUITE_P(Opset6, MoreUnaryGradTest,
                         ::testing::Values(UnaryCase{"Sqrt", 6, 0.2, 3, {}, {}}, UnaryCase{"Tanh", 6, -2, 2, {}, {}},
                                           UnaryCase{"Sigmoid", 6, -2, 2, {}, {}},
                                           UnaryCase{"Softsign", 6, -3, 3, {0}, {}},
                                           UnaryCase{"Reciprocal", 6, 0.3, 3, {}, {}},
                                           UnaryCase{"Abs", 6, -2, 2, {0}, {}},
                                           UnaryCase{"LeakyRelu", 6, -2, 2, {0}, {}}),
                         [](const auto& info) { return info.param.op; });

TEST(ThresholdGrad, Fp16ComparesWithTheAttributeInFloat) {
  // The forward compares fp16 X with float(alpha); the backward must too (alpha 0.3 in fp16 would be 0.30005).
  for (const char* op : {"ThresholdedRelu", "Shrink"}) {
    OpTester t = Op(op, 10);
    t.Input(MakeTensor<Float16>({2}, {0.30004882f, -1.0f}));
    const std::vector<std::string> emitted = EmittedOps(t);
    EXPECT_TRUE(Contains(emitted, "Cast")) << op;
    OpTester wide = Op(op, 10);
    wide.Input(Doubles({2}, 1));
    EXPECT_FALSE(Contains(EmittedOps(wide), "Cast")) << op;
  }
}

TEST(PReluGrad, SlopeShapes) {
  // A per-channel slope [C, 1, 1], a shared one [1], and one of X's own shape; X and slope both trained.
  uint32_t seed = 5;
  for (const Dims& slope : {Dims{3, 1, 1}, Dims{1}, Dims{2, 3, 2, 2}}) {
    OpTester t = Op("PRelu", 16);
    t.Input(DoublesAway({2, 3, 2, 2}, seed, -2, 2, {0})).Input(DoublesAway(slope, seed + 1, -1, 1, {}));
    seed += 2;
    ExpectGradientsMatchFiniteDifferences(t, "PRelu slope " + DimsName(slope));
  }
}

TEST(ModGrad, FloatFmodBroadcast) {
  // A in (0.3, 3) and B in (0.6, 1.4) of either sign: A / B away from the integers, where trunc jumps.
  ir::Tensor a = DoublesAway({2, 3}, 9, -3, 3, {0});
  ir::Tensor b(DType::kFloat64, {3});
  b.mutable_values<double>()[0] = 0.7;
  b.mutable_values<double>()[1] = -1.3;
  b.mutable_values<double>()[2] = 1.1;
  for (int i = 0; i < 6; ++i) {
    const double q = a.values<double>()[i] / b.values<double>()[i % 3];
    ASSERT_GT(std::abs(q - std::round(q)), 1e-3) << "a test value sits on a jump of trunc";
  }
  OpTester t = Op("Mod", 13);
  t.Attr(ir::Attribute::Int("fmod", 1)).Input(a).Input(b);
  ExpectGradientsMatchFiniteDifferences(t, "Mod");
}

TEST(SumMeanGrad, ThreeInputsBroadcast) {
  for (const char* op : {"Sum", "Mean"}) {
    OpTester t = Op(op, 13);
    t.Input(Doubles({2, 3}, 1)).Input(Doubles({3}, 2)).Input(Doubles({2, 1}, 3));
    ExpectGradientsMatchFiniteDifferences(t, op);
  }
}

TEST(TriluGrad, UpperAndLower) {
  for (int64_t upper : {0, 1}) {
    for (int64_t k : {-1, 0, 2}) {
      OpTester t = Op("Trilu", 14);
      t.Attr(ir::Attribute::Int("upper", upper)).Input(Doubles({2, 3, 4}, 4)).Input(Int64s({}, {k}));
      GradCheckOptions o;
      o.wrt = {0};
      ExpectGradientsMatchFiniteDifferences(t, "Trilu upper " + std::to_string(upper) + " k " + std::to_string(k), o);
    }
  }
}

TEST(CumSumGrad, ExclusiveAndReverse) {
  for (int64_t exclusive : {0, 1}) {
    for (int64_t reverse : {0, 1}) {
      for (int64_t axis : {0, 1, -1}) {
        OpTester t = Op("CumSum", 14);
        t.Attr(ir::Attribute::Int("exclusive", exclusive)).Attr(ir::Attribute::Int("reverse", reverse));
        t.Input(Doubles({3, 4, 2}, 6)).Input(Int64s({}, {axis}));
        GradCheckOptions o;
        o.wrt = {0};
        ExpectGradientsMatchFiniteDifferences(t,
                                              "CumSum exclusive " + std::to_string(exclusive) + " reverse " +
                                                  std::to_string(reverse) + " axis " + std::to_string(axis),
                                              o);
      }
    }
  }
}

TEST(MoreOpsGradTest, DepthToSpaceAndSpaceToDepth) {
  for (const char* mode : {"DCR", "CRD"}) {
    OpTester t = Op("DepthToSpace", 13);
    t.Attr(ir::Attribute::Int("blocksize", 2)).Attr(ir::Attribute::String("mode", mode));
    t.Input(Doubles({2, 8, 2, 3}, 31));
    ExpectGradientsMatchFiniteDifferences(t, std::string("DepthToSpace ") + mode);
  }
  OpTester s = Op("SpaceToDepth", 13);
  s.Attr(ir::Attribute::Int("blocksize", 2));
  s.Input(Doubles({2, 3, 4, 2}, 32));
  ExpectGradientsMatchFiniteDifferences(s, "SpaceToDepth");
}

TEST(MoreOpsGradTest, Lrn) {
  // An odd and an even window (asymmetric around the channel), with alpha large enough that the normalisation
  // matters.
  for (int64_t size : {3, 4}) {
    OpTester t = Op("LRN", 13);
    t.Attr(ir::Attribute::Int("size", size)).Attr(ir::Attribute::Float("alpha", 0.6f));
    t.Attr(ir::Attribute::Float("beta", 0.7f)).Attr(ir::Attribute::Float("bias", 1.5f));
    t.Input(Doubles({2, 5, 3}, 33));
    ExpectGradientsMatchFiniteDifferences(t, "LRN size " + std::to_string(size));
  }
}

TEST(MoreOpsGradTest, MeanVarianceNormalization) {
  // The default axes, one axis, a negative axis list over every dim; a slice with a tiny spread (the 1/s term large).
  OpTester d = Op("MeanVarianceNormalization", 13);
  d.Input(Doubles({2, 3, 2, 4}, 40));
  ExpectGradientsMatchFiniteDifferences(d, "MVN axes [0,2,3]");
  OpTester one = Op("MeanVarianceNormalization", 9);
  one.Attr(ir::Attribute::Ints("axes", {1}));
  one.Input(Doubles({3, 5}, 41));
  ExpectGradientsMatchFiniteDifferences(one, "MVN axes [1]");
  OpTester all = Op("MeanVarianceNormalization", 13);
  all.Attr(ir::Attribute::Ints("axes", {-1, -2}));
  all.Input(Doubles({2, 3}, 42, 0.5, 0.6));
  GradCheckOptions o;
  o.rtol = 1e-4;
  ExpectGradientsMatchFiniteDifferences(all, "MVN axes [-1,-2], small spread", o);
}

TEST(MoreOpsGradTest, LpNormalization) {
  for (int64_t p : {1, 2}) {
    for (int64_t axis : {0, -1}) {
      OpTester t = Op("LpNormalization", 22);
      t.Attr(ir::Attribute::Int("p", p)).Attr(ir::Attribute::Int("axis", axis));
      // Away from 0, where |x| (p = 1) has its kink.
      t.Input(DoublesAway({3, 4, 2}, 43, -2, 2, {0.0}));
      ExpectGradientsMatchFiniteDifferences(t,
                                            "LpNormalization p " + std::to_string(p) + " axis " + std::to_string(axis));
    }
  }
}

TEST(MoreOpsGradTest, Det) {
  // A batch of 3x3 matrices, a 1x1, and a singular 3x3 of rank 2 (its gradient, the cofactor matrix, is not zero).
  OpTester batch = Op("Det", 11);
  batch.Input(Doubles({2, 2, 3, 3}, 44));
  ExpectGradientsMatchFiniteDifferences(batch, "Det [2,2,3,3]");
  OpTester one = Op("Det", 22);
  one.Input(Doubles({1, 1}, 45));
  ExpectGradientsMatchFiniteDifferences(one, "Det [1,1]");
  OpTester singular = Op("Det", 11);
  singular.Input(MakeTensor<double>({3, 3}, {1.0, 2.0, 3.0, 2.0, 4.0, 6.0, 0.5, -1.0, 2.5}));
  ExpectGradientsMatchFiniteDifferences(singular, "Det singular");
}

TEST(MoreOpsGradTest, Dft) {
  struct Case {
    std::string name;
    int64_t opset;
    Dims dims;
    int64_t axis;
    std::optional<int64_t> length;
    bool inverse, onesided;
  };
  for (const Case& c : {Case{"real axis 1", 17, {2, 6, 1}, 1, std::nullopt, false, false},
                        Case{"complex padded", 17, {2, 5, 2}, 1, 8, false, false},
                        Case{"real onesided cut", 17, {3, 7, 1}, 1, 5, false, true},
                        Case{"complex inverse axis -3", 20, {4, 3, 2}, -3, std::nullopt, true, false},
                        Case{"real axis 2 of 4", 20, {2, 3, 5, 1}, 2, 6, false, true}}) {
    OpTester t = Op("DFT", c.opset);
    t.Attr(ir::Attribute::Int("inverse", c.inverse)).Attr(ir::Attribute::Int("onesided", c.onesided));
    if (c.opset < 20) t.Attr(ir::Attribute::Int("axis", c.axis));
    t.Input(Doubles(c.dims, 46));
    if (c.length) {
      t.Input(Int64s({}, {*c.length}));
    } else if (c.opset >= 20) {
      t.OmittedInput();
    }
    if (c.opset >= 20) t.Input(Int64s({}, {c.axis}));
    GradCheckOptions o;
    o.wrt = {0};
    ExpectGradientsMatchFiniteDifferences(t, "DFT " + c.name, o);
  }
}

TEST(MoreOpsGradTest, Stft) {
  // A real signal with a window (both differentiated), and a complex one with frame_length only.
  OpTester t = Op("STFT", 17);
  t.Input(Doubles({2, 11, 1}, 47)).Input(Int64s({}, {3})).Input(Doubles({4}, 48, 0.2, 1.0));
  GradCheckOptions o;
  o.wrt = {0, 2};
  ExpectGradientsMatchFiniteDifferences(t, "STFT real with window", o);
  OpTester c = Op("STFT", 17);
  c.Attr(ir::Attribute::Int("onesided", 0));
  c.Input(Doubles({1, 9, 2}, 49)).Input(Int64s({}, {2})).OmittedInput().Input(Int64s({}, {5}));
  GradCheckOptions oc;
  oc.wrt = {0};
  ExpectGradientsMatchFiniteDifferences(c, "STFT complex, frame_length", oc);
}

TEST(MoreOpsGradTest, CompressHardmaxEyeLike) {
  auto cond = [](const std::vector<bool>& v) {
    ir::Tensor t(DType::kBool, {static_cast<int64_t>(v.size())});
    for (size_t i = 0; i < v.size(); ++i) t.mutable_values<bool>()[i] = v[i];
    return t;
  };
  OpTester axis = Op("Compress", 11);
  axis.Attr(ir::Attribute::Int("axis", 1)).Input(Doubles({2, 4, 3}, 34)).Input(cond({true, false, true}));
  ExpectGradientsMatchFiniteDifferences(axis, "Compress axis 1, short condition");
  OpTester flat = Op("Compress", 11);
  flat.Input(Doubles({2, 3}, 35)).Input(cond({false, true, true, false, true, true}));
  ExpectGradientsMatchFiniteDifferences(flat, "Compress flattened");
  // A condition longer than the axis, true past its end: the forward ignores those entries, so must the backward.
  OpTester long_axis = Op("Compress", 11);
  long_axis.Attr(ir::Attribute::Int("axis", 1)).Input(Doubles({2, 5}, 38));
  long_axis.Input(cond({true, false, true, false, true, true}));
  ExpectGradientsMatchFiniteDifferences(long_axis, "Compress axis 1, long condition");
  OpTester long_flat = Op("Compress", 9);
  long_flat.Input(Doubles({2, 2}, 39)).Input(cond({true, false, false, true, true, true}));
  ExpectGradientsMatchFiniteDifferences(long_flat, "Compress flattened, long condition, opset 9");
  GradCheckOptions zero;
  zero.min_abs = -1;  // all zero, as the finite differences
  OpTester hardmax = Op("Hardmax", 13);
  hardmax.Input(Doubles({2, 5}, 36));
  ExpectGradientsMatchFiniteDifferences(hardmax, "Hardmax", zero);
  OpTester eye = Op("EyeLike", 9);
  eye.Input(Doubles({3, 4}, 37));
  ExpectGradientsMatchFiniteDifferences(eye, "EyeLike", zero);
}

TEST(MoreOpsGradTest, MaxUnpool) {
  // X [1, 2, 2, 2] unpooled by a 2x2 window, stride 2, into [1, 2, 4, 4]: each channel's indices in its own plane.
  for (bool padded : {false, true}) {
    OpTester t = Op("MaxUnpool", 11);
    t.Attr(ir::Attribute::Ints("kernel_shape", {2, 2})).Attr(ir::Attribute::Ints("strides", {2, 2}));
    t.Input(Doubles({1, 2, 2, 2}, 40)).Input(Int64s({1, 2, 2, 2}, {0, 3, 9, 14, 17, 22, 24, 31}));
    if (padded) t.Input(Int64s({4}, {1, 2, 5, 5}));
    ExpectGradientsMatchFiniteDifferences(t, padded ? "MaxUnpool output_shape" : "MaxUnpool");
  }
}

}  // namespace
}  // namespace onnxamp::testing
