// Cast and CastLike: every pair of numeric/bool types on values exact in both, rounding to nearest even for
// fp16/bf16, float-to-integer truncation and saturation, integer wrapping, strings both ways, opset variants and
// refused types.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tests/runtime/ops/elementwise_test_util.h"

namespace onnxamp::testing::ew {
namespace {

const std::vector<DType>& AllTypes() {
  static const std::vector<DType> v = {
      DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64, DType::kInt8,   DType::kInt16, DType::kInt32,
      DType::kInt64,   DType::kUint8,   DType::kUint16,   DType::kUint32,  DType::kUint64, DType::kBool};
  return v;
}

bool IsSigned(DType t) {
  return t != DType::kUint8 && t != DType::kUint16 && t != DType::kUint32 && t != DType::kUint64 && t != DType::kBool;
}

ir::Tensor CastTo(const ir::Tensor& x, DType to, int64_t opset = 13, int threads = 1) {
  OpTester t = Tester("Cast", opset);
  t.Attr(ir::Attribute::Int("to", static_cast<int64_t>(to))).Input(x);
  t.options.num_threads = threads;
  return RunOne(t);
}

using PairParam = std::tuple<DType, DType>;
class CastPairTest : public ::testing::TestWithParam<PairParam> {};

TEST_P(CastPairTest, ExactValues) {
  const auto [from, to] = GetParam();
  // Values every type holds exactly (bool: 0 and 1 only); negative ones when both types are signed.
  std::vector<double> v = {0, 1, 2, 7, 100, 120, 0, 1};
  if (IsSigned(from) && IsSigned(to)) v = {0, 1, -2, 7, -100, 120, -1, 1};
  if (from == DType::kBool) v = {0, 1, 1, 0, 1, 0, 0, 1};
  ir::Tensor x = Make(from, {2, 4}, v);
  ir::Tensor y = CastTo(x, to);
  ASSERT_EQ(y.dtype(), to);
  ASSERT_EQ(y.dims(), (std::vector<int64_t>{2, 4}));
  std::vector<double> want = v;
  if (to == DType::kBool) {
    for (double& w : want) w = w != 0;
  }
  EXPECT_EQ(AsDoubles(y), want);
}

INSTANTIATE_TEST_SUITE_P(AllPairs, CastPairTest,
                         ::testing::Combine(::testing::ValuesIn(AllTypes()), ::testing::ValuesIn(AllTypes())),
                         [](const ::testing::TestParamInfo<PairParam>& info) {
                           return std::string(onnxamp::DTypeName(std::get<0>(info.param))) + "_to_" +
                                  std::string(onnxamp::DTypeName(std::get<1>(info.param)));
                         });

TEST(Cast, FloatToIntegerTruncatesAndSaturates) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  ir::Tensor x = Make(DType::kFloat32, {8}, {-2.7, 2.7, -0.5, 1e10, -1e10, nan, inf, 2147483520});
  EXPECT_EQ(AsDoubles(CastTo(x, DType::kInt32)),
            (std::vector<double>{-2, 2, 0, 2147483647, -2147483648.0, 0, 2147483647, 2147483520}));
  EXPECT_EQ(AsDoubles(CastTo(x, DType::kUint8)), (std::vector<double>{0, 2, 0, 255, 0, 0, 255, 255}));
  EXPECT_EQ(AsDoubles(CastTo(x, DType::kInt8)), (std::vector<double>{-2, 2, 0, 127, -128, 0, 127, 127}));
  // int64: 2^63 and above saturate (float's nearest to INT64_MAX is 2^63 itself).
  ir::Tensor big = Make(DType::kFloat32, {3}, {9.3e18, -9.3e18, 9.2e18});
  ir::Tensor r = CastTo(big, DType::kInt64);
  EXPECT_EQ(r.values<int64_t>()[0], std::numeric_limits<int64_t>::max());
  EXPECT_EQ(r.values<int64_t>()[1], std::numeric_limits<int64_t>::min());
  EXPECT_EQ(r.values<int64_t>()[2], static_cast<int64_t>(9.2e18f));
  // fp16 and double sources.
  EXPECT_EQ(AsDoubles(CastTo(Make(DType::kFloat16, {2}, {-3.5, 70000}), DType::kInt16)),
            (std::vector<double>{-3, 32767}));
  EXPECT_EQ(AsDoubles(CastTo(Make(DType::kFloat64, {2}, {4294967295.9, -1}), DType::kUint32)),
            (std::vector<double>{4294967295, 0}));
}

TEST(Cast, IntegersWrap) {
  EXPECT_EQ(AsDoubles(CastTo(Make(DType::kInt32, {3}, {300, -1, -129}), DType::kInt8)),
            (std::vector<double>{44, -1, 127}));
  EXPECT_EQ(AsDoubles(CastTo(Make(DType::kInt64, {2}, {-1, 65536 + 5}), DType::kUint16)),
            (std::vector<double>{65535, 5}));
  // Large int64 to float rounds to nearest.
  ir::Tensor x(DType::kInt64, {1});
  x.mutable_values<int64_t>()[0] = (int64_t{1} << 40) + 1;
  EXPECT_EQ(CastTo(x, DType::kFloat32).values<float>()[0], static_cast<float>((int64_t{1} << 40) + 1));
}

TEST(Cast, HalfAndBFloat16RoundToNearestEven) {
  // fp16: 1 + 2^-11 is a tie (rounds down to even 1.0); 1 + 3 * 2^-11 rounds up; 65519 is the largest value that
  // rounds to 65504, 65520 overflows to inf; 2^-25 ties to zero, 2^-24 is the smallest subnormal.
  const std::vector<double> v = {1 + std::ldexp(1, -11), 1 + 3 * std::ldexp(1, -11), 65519, 65520,
                                 std::ldexp(1, -25),     std::ldexp(1, -24),         -0.0};
  ir::Tensor h = CastTo(Make(DType::kFloat32, {7}, v), DType::kFloat16);
  std::vector<double> got = AsDoubles(h);
  EXPECT_EQ(got[0], 1.0);
  EXPECT_EQ(got[1], 1 + std::ldexp(1, -9));
  EXPECT_EQ(got[2], 65504);
  EXPECT_EQ(got[3], std::numeric_limits<double>::infinity());
  EXPECT_EQ(got[4], 0);
  EXPECT_EQ(got[5], std::ldexp(1, -24));
  EXPECT_EQ(h.values<Float16>()[6].bits, 0x8000);  // -0 keeps its sign
  // bf16: 1 + 2^-8 ties to 1.0, 1 + 3 * 2^-8 rounds up to 1 + 2^-6.
  ir::Tensor b =
      CastTo(Make(DType::kFloat32, {2}, {1 + std::ldexp(1, -8), 1 + 3 * std::ldexp(1, -8)}), DType::kBFloat16);
  EXPECT_EQ(AsDoubles(b), (std::vector<double>{1.0, 1 + std::ldexp(1, -6)}));
  // NaN stays NaN through fp16, bf16 and back.
  ir::Tensor n = Make(DType::kFloat32, {1}, {std::numeric_limits<double>::quiet_NaN()});
  EXPECT_TRUE(std::isnan(AsDoubles(CastTo(CastTo(n, DType::kFloat16), DType::kFloat32))[0]));
  EXPECT_TRUE(std::isnan(AsDoubles(CastTo(CastTo(n, DType::kBFloat16), DType::kFloat64))[0]));
  // fp16 -> bf16 goes through float.
  EXPECT_EQ(AsDoubles(CastTo(Make(DType::kFloat16, {1}, {1.0009765625}), DType::kBFloat16)),
            (std::vector<double>{1.0}));
}

TEST(Cast, ToBool) {
  ir::Tensor x = Make(DType::kFloat32, {4}, {0, -0.0, 0.25, std::numeric_limits<double>::quiet_NaN()});
  EXPECT_EQ(AsDoubles(CastTo(x, DType::kBool)), (std::vector<double>{0, 0, 1, 1}));
}

TEST(Cast, Strings) {
  ir::Tensor s(DType::kString, {2, 4});
  s.mutable_strings() = {"0.47892547", "NaN", "INF", "+INF", "-INF", "-1e3", " 2 ", "inf"};
  std::vector<double> f = AsDoubles(CastTo(s, DType::kFloat32));
  EXPECT_EQ(f[0], static_cast<double>(0.47892547f));
  EXPECT_TRUE(std::isnan(f[1]));
  EXPECT_EQ(f[2], std::numeric_limits<double>::infinity());
  EXPECT_EQ(f[3], std::numeric_limits<double>::infinity());
  EXPECT_EQ(f[4], -std::numeric_limits<double>::infinity());
  EXPECT_EQ(f[5], -1000);
  EXPECT_EQ(f[6], 2);
  EXPECT_EQ(f[7], std::numeric_limits<double>::infinity());
  ir::Tensor ints(DType::kString, {3});
  ints.mutable_strings() = {"42", "-7", "+9223372036854775807"};
  ir::Tensor i = CastTo(ints, DType::kInt64);
  EXPECT_EQ(i.values<int64_t>()[2], std::numeric_limits<int64_t>::max());  // exact, not through double
  EXPECT_EQ(i.values<int64_t>()[1], -7);
  // Numbers to strings: shortest round trip; fp16 prints its own shortest form.
  ir::Tensor x = Make(DType::kFloat32, {5},
                      {0.9767611, 0.039187793, std::numeric_limits<double>::quiet_NaN(),
                       -std::numeric_limits<double>::infinity(), 1e-5});
  EXPECT_EQ(CastTo(x, DType::kString).strings(),
            (std::vector<std::string>{"0.9767611", "0.039187793", "NaN", "-INF", "1e-05"}));
  EXPECT_EQ(CastTo(Make(DType::kFloat16, {2}, {0.1, 65504}), DType::kString).strings(),
            (std::vector<std::string>{"0.1", "65500"}));
  EXPECT_EQ(CastTo(Make(DType::kInt32, {2}, {-12, 7}), DType::kString).strings(),
            (std::vector<std::string>{"-12", "7"}));
  // A string that is no number.
  ir::Tensor bad(DType::kString, {2});
  bad.mutable_strings() = {"1", "one"};
  OpTester t = Tester("Cast", 13);
  t.Attr(ir::Attribute::Int("to", static_cast<int64_t>(DType::kFloat32))).Input(bad);
  ExpectRunError(t, "input 0 element 1: \"one\" is not a number");
}

TEST(Cast, OpsetVariants) {
  // Cast-1 names the type with a string.
  OpTester c1 = Tester("Cast", 1);
  c1.Attr(ir::Attribute::String("to", "FLOAT16")).Input(Make(DType::kFloat32, {2}, {1.5, -2}));
  ir::Tensor y = RunOne(c1);
  EXPECT_EQ(y.dtype(), DType::kFloat16);
  EXPECT_EQ(AsDoubles(y), (std::vector<double>{1.5, -2}));
  // Opset 19: saturate is accepted (it only concerns float8).
  OpTester c19 = Tester("Cast", 19);
  c19.Attr(ir::Attribute::Int("to", static_cast<int64_t>(DType::kInt32)))
      .Attr(ir::Attribute::Int("saturate", 0))
      .Input(Make(DType::kFloat32, {1}, {3.9}));
  EXPECT_EQ(AsDoubles(RunOne(c19)), (std::vector<double>{3}));
  // Same type: the input is passed through.
  ir::Tensor x = Make(DType::kFloat64, {2}, {1, 2});
  EXPECT_TRUE(CastTo(x, DType::kFloat64).SameContents(x));
}

TEST(Cast, CastLike) {
  OpTester t = Tester("CastLike", 15);
  t.Input(Make(DType::kFloat32, {3}, {1.7, -1.7, 300})).Input(Make(DType::kUint8, {0}, {}));
  ir::Tensor y = RunOne(t);
  EXPECT_EQ(y.dtype(), DType::kUint8);
  EXPECT_EQ(AsDoubles(y), (std::vector<double>{1, 0, 255}));
  OpTester h = Tester("CastLike", 19);
  h.Input(Make(DType::kFloat64, {1}, {0.1})).Input(Make(DType::kBFloat16, {1}, {0}));
  EXPECT_EQ(RunOne(h).values<BFloat16>()[0].bits, BFloat16(0.1f).bits);
  OpTester early = Tester("CastLike", 14);
  early.Input(Make(DType::kFloat32, {1}, {1})).Input(Make(DType::kFloat32, {1}, {1}));
  ExpectCreateError(early, "CastLike");
}

TEST(Cast, ParallelPathMatchesSerial) {
  ir::Tensor x = Make(DType::kFloat32, {400, 1000}, Random(400000, 4, -1e5, 1e5));
  for (DType to : {DType::kFloat16, DType::kBFloat16, DType::kInt16}) {
    EXPECT_TRUE(CastTo(x, to, 13, 1).SameContents(CastTo(x, to, 13, 4))) << DTypeName(to);
  }
}

TEST(Cast, Errors) {
  OpTester fp8 = Tester("Cast", 19);
  fp8.Attr(ir::Attribute::Int("to", static_cast<int64_t>(DType::kFloat8E4M3FN))).Input(Make(DType::kFloat32, {1}, {1}));
  ExpectCreateError(fp8, "attribute 'to' is float8e4m3fn, which Cast does not support");
  OpTester bad = Tester("Cast", 13);
  bad.Attr(ir::Attribute::Int("to", 99)).Input(Make(DType::kFloat32, {1}, {1}));
  ExpectCreateError(bad, "attribute 'to' is 99, which is no ONNX element type");
  OpTester missing = Tester("Cast", 13);
  missing.Input(Make(DType::kFloat32, {1}, {1}));
  ExpectCreateError(missing, "attribute 'to' is required");
  OpTester sat = Tester("Cast", 13);
  sat.Attr(ir::Attribute::Int("to", 1)).Attr(ir::Attribute::Int("saturate", 1)).Input(Make(DType::kFloat32, {1}, {1}));
  ExpectCreateError(sat, "attribute 'saturate' exists from opset 19");
}

}  // namespace
}  // namespace onnxamp::testing::ew
