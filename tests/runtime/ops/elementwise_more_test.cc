// Mod, PRelu, Sum, Mean, IsNaN, IsInf, Trilu, CumSum and OneHot (CPU): hand-computed values, every float type
// against a double reference where the op computes, integer semantics, and the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tests/runtime/ops/elementwise_test_util.h"

namespace onnxamp::testing::ew {
namespace {

ir::Tensor Run2(const std::string& op, int64_t opset, ir::Tensor a, ir::Tensor b,
                std::vector<ir::Attribute> attrs = {}) {
  OpTester t = Tester(op, opset);
  t.attributes = std::move(attrs);
  t.Input(std::move(a)).Input(std::move(b));
  return RunOne(t);
}

TEST(Mod, IntegerSignsFollowPythonOrC) {
  const std::vector<double> a = {7, -7, 7, -7, 5, 0}, b = {3, 3, -3, -3, 0, 4};
  // fmod 0: the divisor's sign (Python); fmod 1: the dividend's (C). x % 0 gives 0.
  EXPECT_EQ(AsDoubles(Run2("Mod", 13, Make(DType::kInt32, {6}, a), Make(DType::kInt32, {6}, b))),
            (std::vector<double>{1, 2, -2, -1, 0, 0}));
  EXPECT_EQ(AsDoubles(Run2("Mod", 13, Make(DType::kInt64, {6}, a), Make(DType::kInt64, {6}, b),
                           {ir::Attribute::Int("fmod", 1)})),
            (std::vector<double>{1, -1, 1, -1, 0, 0}));
  // INT_MIN % -1 is 0, not a trap.
  OpTester t = Tester("Mod", 13);
  t.Input(MakeTensor<int32_t>({1}, {std::numeric_limits<int32_t>::min()})).Input(MakeTensor<int32_t>({1}, {-1}));
  EXPECT_EQ(AsDoubles(RunOne(t)), std::vector<double>{0});
}

TEST(Mod, FloatsAreFmodAndBroadcast) {
  for (DType dtype : FloatDTypes()) {
    ir::Tensor a = Make(dtype, {2, 3}, {5.5, -5.5, 3, 1.25, -2, 7});
    ir::Tensor b = Make(dtype, {3}, {2, 2, -2});
    std::vector<double> want;
    const auto av = AsDoubles(a), bv = AsDoubles(b);
    for (size_t i = 0; i < av.size(); ++i) want.push_back(std::fmod(av[i], bv[i % 3]));
    ExpectClose(Run2("Mod", 13, a, b, {ir::Attribute::Int("fmod", 1)}), want, std::string(DTypeName(dtype)));
  }
  OpTester no_fmod = Tester("Mod", 13);
  no_fmod.Input(Make(DType::kFloat32, {1}, {1})).Input(Make(DType::kFloat32, {1}, {2}));
  ExpectRunError(no_fmod, "a float Mod needs attribute fmod = 1");
}

TEST(PRelu, SlopePerChannelAndErrors) {
  for (DType dtype : FloatDTypes()) {
    // X [1, 2, 2], slope [2, 1]: channel 0 at 0.5, channel 1 at -2.
    ir::Tensor y = Run2("PRelu", 16, Make(dtype, {1, 2, 2}, {-2, 3, -1, 0}), Make(dtype, {2, 1}, {0.5, -2}));
    ExpectClose(y, {-1, 3, 2, 0}, std::string(DTypeName(dtype)));
  }
  // Opset 6: a [C] slope runs along axis 1.
  ir::Tensor y =
      Run2("PRelu", 6, Make(DType::kFloat32, {1, 2, 2}, {-2, -2, -1, -1}), Make(DType::kFloat32, {2}, {0.5, 3}));
  EXPECT_EQ(AsDoubles(y), (std::vector<double>{-1, -1, -3, -3}));
  // Integer slopes wrap like the integer Mul: -2^30 * 4 is 0 in int32.
  OpTester wrap = Tester("PRelu", 16);
  wrap.Input(MakeTensor<int32_t>({1}, {-(1 << 30)})).Input(MakeTensor<int32_t>({1}, {4}));
  EXPECT_EQ(AsDoubles(RunOne(wrap)), std::vector<double>{0});
  // The slope may not grow X.
  OpTester grow = Tester("PRelu", 16);
  grow.Input(Make(DType::kFloat32, {2}, {1, 2})).Input(Make(DType::kFloat32, {3, 1}, {1, 2, 3}));
  ExpectRunError(grow, "does not broadcast to input 0 (X)'s shape [2]");
}

TEST(SumMean, BroadcastInOrderAndRoundOnce) {
  for (DType dtype : FloatDTypes()) {
    OpTester sum = Tester("Sum", 13);
    sum.Input(Make(dtype, {2, 1}, {1, 2})).Input(Make(dtype, {3}, {10, 20, 30})).Input(Make(dtype, {}, {0.5}));
    ExpectClose(RunOne(sum), {11.5, 21.5, 31.5, 12.5, 22.5, 32.5}, std::string(DTypeName(dtype)));
    OpTester mean = Tester("Mean", 13);
    mean.Input(Make(dtype, {2}, {1, 2})).Input(Make(dtype, {2}, {3, 5}));
    ExpectClose(RunOne(mean), {2, 3.5}, std::string(DTypeName(dtype)));
  }
  // fp16 accumulates in float: 2048 + 1 + 1 is 2050, where fp16 steps would round 2049 back to 2048.
  OpTester halves = Tester("Sum", 13);
  halves.Input(Make(DType::kFloat16, {1}, {2048}))
      .Input(Make(DType::kFloat16, {1}, {1}))
      .Input(Make(DType::kFloat16, {1}, {1}));
  EXPECT_EQ(AsDoubles(RunOne(halves)), std::vector<double>{2050});
  OpTester one = Tester("Sum", 13);
  one.Input(Make(DType::kFloat32, {2}, {-0.0, 4}));
  EXPECT_EQ(AsDoubles(RunOne(one)), (std::vector<double>{0, 4}));
}

TEST(IsNaNIsInf, DetectWhatTheAttributesAsk) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  for (DType dtype : FloatDTypes()) {
    OpTester isnan = Tester("IsNaN", 20);
    isnan.Input(Make(dtype, {4}, {1, nan, inf, -inf}));
    ir::Tensor y = RunOne(isnan);
    ASSERT_EQ(y.dtype(), DType::kBool);
    EXPECT_EQ(AsDoubles(y), (std::vector<double>{0, 1, 0, 0}));
    OpTester isinf = Tester("IsInf", 20);
    isinf.Attr(ir::Attribute::Int("detect_negative", 0)).Input(Make(dtype, {4}, {1, nan, inf, -inf}));
    EXPECT_EQ(AsDoubles(RunOne(isinf)), (std::vector<double>{0, 0, 1, 0}));
  }
}

TEST(Trilu, UpperLowerAndDiagonals) {
  // [2, 3, 3] batches, k from -1 to 1, upper and lower, against the rule j - i >= k / <= k.
  std::vector<double> v(18);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i + 1);
  for (int64_t upper : {0, 1}) {
    for (int64_t k : {-1, 0, 1, 5, -5}) {
      OpTester t = Tester("Trilu", 14);
      t.Attr(ir::Attribute::Int("upper", upper)).Input(Make(DType::kFloat32, {2, 3, 3}, v));
      t.Input(MakeTensor<int64_t>({}, {k}));
      std::vector<double> want(v.size());
      for (size_t e = 0; e < v.size(); ++e) {
        const int64_t i = static_cast<int64_t>(e % 9) / 3, j = static_cast<int64_t>(e % 3);
        want[e] = (upper ? j - i >= k : j - i <= k) ? v[e] : 0;
      }
      EXPECT_EQ(AsDoubles(RunOne(t)), want) << "upper " << upper << " k " << k;
    }
  }
  // A causal mask: bool, lower triangle, k absent.
  OpTester mask = Tester("Trilu", 14);
  mask.Attr(ir::Attribute::Int("upper", 0)).Input(MakeBool({2, 2}, {true, true, true, true}));
  EXPECT_EQ(AsDoubles(RunOne(mask)), (std::vector<double>{1, 0, 1, 1}));
  OpTester vector = Tester("Trilu", 14);
  vector.Input(Make(DType::kFloat32, {3}, {1, 2, 3}));
  ExpectRunError(vector, "has rank 1, expected at least 2");
}

TEST(CumSum, ExclusiveReverseAndAxis) {
  // [2, 3] along axis 1 (and -1), every attribute combination, against hand sums.
  const std::vector<double> x = {1, 2, 3, 4, 5, 6};
  struct Case {
    int64_t exclusive, reverse;
    std::vector<double> want;
  };
  for (const Case& c : {Case{0, 0, {1, 3, 6, 4, 9, 15}}, Case{1, 0, {0, 1, 3, 0, 4, 9}},
                        Case{0, 1, {6, 5, 3, 15, 11, 6}}, Case{1, 1, {5, 3, 0, 11, 6, 0}}}) {
    for (DType dtype : FloatDTypes()) {
      for (int64_t axis : {1, -1}) {
        OpTester t = Tester("CumSum", 14);
        t.Attr(ir::Attribute::Int("exclusive", c.exclusive)).Attr(ir::Attribute::Int("reverse", c.reverse));
        t.Input(Make(dtype, {2, 3}, x)).Input(MakeTensor<int32_t>({}, {static_cast<int32_t>(axis)}));
        ExpectClose(RunOne(t), c.want, std::string(DTypeName(dtype)));
      }
    }
  }
  // Axis 0, int64.
  OpTester t = Tester("CumSum", 14);
  t.Input(Make(DType::kInt64, {2, 3}, x)).Input(MakeTensor<int64_t>({1}, {0}));
  EXPECT_EQ(AsDoubles(RunOne(t)), (std::vector<double>{1, 2, 3, 5, 7, 9}));
  // float sums in double: 1e8 + 1 + ... stays exact in the running total before rounding each output.
  OpTester big = Tester("CumSum", 14);
  big.Input(Make(DType::kFloat32, {3}, {16777216, 1, 1})).Input(MakeTensor<int64_t>({}, {0}));
  EXPECT_EQ(AsDoubles(RunOne(big)), (std::vector<double>{16777216, 16777216, 16777218}));
  OpTester bad = Tester("CumSum", 14);
  bad.Input(Make(DType::kFloat32, {3}, {1, 2, 3})).Input(MakeTensor<int64_t>({}, {1}));
  ExpectRunError(bad, "outside [-1, 0]");
}

TEST(OneHot, AxisNegativeIndicesAndOutOfRange) {
  // indices [2, 2] = {0, -1, 3, 5} at depth 4, values (off 0, on 7), axis -1 and 0.
  OpTester last = Tester("OneHot", 11);
  last.Input(MakeTensor<int64_t>({2, 2}, {0, -1, 3, 5}))
      .Input(MakeTensor<int64_t>({}, {4}))
      .Input(Make(DType::kFloat32, {2}, {0, 7}));
  ir::Tensor y = RunOne(last);
  EXPECT_EQ(y.dims(), (std::vector<int64_t>{2, 2, 4}));
  EXPECT_EQ(AsDoubles(y), (std::vector<double>{7, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 7, 0, 0, 0, 0}));
  OpTester first = Tester("OneHot", 11);
  first.Attr(ir::Attribute::Int("axis", 0))
      .Input(Make(DType::kFloat32, {2}, {1.7, 0}))
      .Input(Make(DType::kFloat32, {1}, {2}))
      .Input(MakeTensor<int64_t>({2}, {-1, 1}));
  y = RunOne(first);
  EXPECT_EQ(y.dims(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(AsDoubles(y), (std::vector<double>{-1, 1, 1, -1}));  // 1.7 truncates to 1
  // Opset 9: a negative index sets nothing.
  OpTester nine = Tester("OneHot", 9);
  nine.Input(MakeTensor<int64_t>({2}, {-1, 1}))
      .Input(MakeTensor<int64_t>({}, {2}))
      .Input(Make(DType::kFloat32, {2}, {0, 1}));
  EXPECT_EQ(AsDoubles(RunOne(nine)), (std::vector<double>{0, 0, 0, 1}));
  OpTester zero_depth = Tester("OneHot", 11);
  zero_depth.Input(MakeTensor<int64_t>({1}, {0}))
      .Input(MakeTensor<int64_t>({}, {0}))
      .Input(Make(DType::kFloat32, {2}, {0, 1}));
  ExpectRunError(zero_depth, "expected at least 1");
}

}  // namespace
}  // namespace onnxamp::testing::ew
