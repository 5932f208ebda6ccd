// Unary elementwise kernels (Sqrt Exp Log Neg Abs Reciprocal Relu LeakyRelu Elu Sigmoid Tanh Erf Gelu Softplus):
// every op x float type against a double reference on seeded random inputs, hand-computed edge cases, integer
// types, the parallel path, and attribute and type errors.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "tests/runtime/ops/elementwise_test_util.h"

namespace onnxamp::testing::ew {
namespace {

struct UnaryCase {
  std::string op;
  int64_t opset;
  std::vector<ir::Attribute> attrs;
  double lo, hi;  // input range
  std::function<double(double)> ref;
  std::string label;  // test name (op plus attribute variant)
};

double Gelu(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double GeluTanh(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }

std::vector<UnaryCase> Cases() {
  return {
      {"Sqrt", 13, {}, 0, 9, [](double x) { return std::sqrt(x); }, "Sqrt"},
      {"Exp", 13, {}, -5, 5, [](double x) { return std::exp(x); }, "Exp"},
      {"Log", 13, {}, 0.01, 50, [](double x) { return std::log(x); }, "Log"},
      {"Neg", 13, {}, -3, 3, [](double x) { return -x; }, "Neg"},
      {"Abs", 13, {}, -3, 3, [](double x) { return std::fabs(x); }, "Abs"},
      {"Reciprocal", 13, {}, 0.1, 4, [](double x) { return 1 / x; }, "Reciprocal"},
      {"Relu", 14, {}, -3, 3, [](double x) { return x < 0 ? 0 : x; }, "Relu"},
      {"LeakyRelu", 16, {}, -3, 3, [](double x) { return x < 0 ? double(0.01f) * x : x; }, "LeakyRelu"},
      {"LeakyRelu",
       16,
       {ir::Attribute::Float("alpha", 0.2f)},
       -3,
       3,
       [](double x) { return x < 0 ? double(0.2f) * x : x; },
       "LeakyReluAlpha"},
      {"Elu", 6, {}, -3, 3, [](double x) { return x < 0 ? std::expm1(x) : x; }, "Elu"},
      {"Elu",
       6,
       {ir::Attribute::Float("alpha", 0.5f)},
       -3,
       3,
       [](double x) { return x < 0 ? 0.5 * std::expm1(x) : x; },
       "EluAlpha"},
      {"Sigmoid", 13, {}, -8, 8, [](double x) { return 1 / (1 + std::exp(-x)); }, "Sigmoid"},
      {"Tanh", 13, {}, -4, 4, [](double x) { return std::tanh(x); }, "Tanh"},
      {"Erf", 13, {}, -3, 3, [](double x) { return std::erf(x); }, "Erf"},
      {"Gelu", 20, {}, -4, 4, Gelu, "Gelu"},
      {"Gelu", 20, {ir::Attribute::String("approximate", "tanh")}, -4, 4, GeluTanh, "GeluTanh"},
      {"Softplus", 13, {}, -10, 10, [](double x) { return std::log1p(std::exp(x)); }, "Softplus"},
  };
}

using UnaryParam = std::tuple<int, DType>;  // index into Cases(), element type

class UnaryTest : public ::testing::TestWithParam<UnaryParam> {};

TEST_P(UnaryTest, MatchesDoubleReference) {
  const UnaryCase c = Cases()[std::get<0>(GetParam())];
  const DType dtype = std::get<1>(GetParam());
  // 1000 elements: odd-sized, with the exact endpoints and zero among them.
  std::vector<double> v = Random(1000, 7 + std::get<0>(GetParam()), c.lo, c.hi);
  v[0] = c.lo;
  if (c.lo <= 0 && c.hi >= 0) v[1] = 0;
  ir::Tensor x = Make(dtype, {10, 100}, v);
  OpTester t = Tester(c.op, c.opset);
  t.attributes = c.attrs;
  t.Input(x);
  ir::Tensor y = RunOne(t);
  ASSERT_EQ(y.dtype(), dtype);
  ASSERT_EQ(y.dims(), (std::vector<int64_t>{10, 100}));
  std::vector<double> want;
  for (double xi : AsDoubles(x)) want.push_back(c.ref(xi));
  ExpectClose(y, want, c.label);
}

INSTANTIATE_TEST_SUITE_P(Ops, UnaryTest,
                         ::testing::Combine(::testing::Range(0, static_cast<int>(Cases().size())),
                                            ::testing::ValuesIn(FloatDTypes())),
                         [](const ::testing::TestParamInfo<UnaryParam>& info) {
                           return Cases()[std::get<0>(info.param)].label + "_" +
                                  std::string(onnxamp::DTypeName(std::get<1>(info.param)));
                         });

std::vector<double> RunFloat(const std::string& op, int64_t opset, const std::vector<double>& x,
                             std::vector<ir::Attribute> attrs = {}, DType dtype = DType::kFloat32) {
  OpTester t = Tester(op, opset);
  t.attributes = std::move(attrs);
  t.Input(Make(dtype, {static_cast<int64_t>(x.size())}, x));
  return AsDoubles(RunOne(t));
}

TEST(Unary, EdgeCases) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // Relu keeps NaN (like PyTorch), maps -0 and negatives to 0.
  auto r = RunFloat("Relu", 14, {-1, -0.0, 2, nan});
  EXPECT_EQ(r[0], 0);
  EXPECT_EQ(r[2], 2);
  EXPECT_TRUE(std::isnan(r[3]));
  // Sigmoid and Softplus saturate without overflow or NaN.
  r = RunFloat("Sigmoid", 13, {-100, 100, -inf, inf});
  EXPECT_LT(r[0], 1e-40);
  EXPECT_EQ(r[1], 1);
  EXPECT_EQ(r[2], 0);
  EXPECT_EQ(r[3], 1);
  r = RunFloat("Softplus", 13, {100, -100, 0});
  EXPECT_EQ(r[0], 100);
  EXPECT_LT(r[1], 1e-40);
  EXPECT_FLOAT_EQ(static_cast<float>(r[2]), static_cast<float>(std::log(2.0)));
  // Exp overflows to inf in fp16 exactly like hardware (e^12 = 162755 > 65504).
  r = RunFloat("Exp", 13, {12, -30}, {}, DType::kFloat16);
  EXPECT_EQ(r[0], inf);
  EXPECT_EQ(r[1], 0);
  // Log of 0 and of a negative number.
  r = RunFloat("Log", 13, {0, -1});
  EXPECT_EQ(r[0], -inf);
  EXPECT_TRUE(std::isnan(r[1]));
  // Elu at exactly 0 takes the linear branch; hand-computed negative values.
  r = RunFloat("Elu", 6, {0, -1}, {ir::Attribute::Float("alpha", 2.0f)});
  EXPECT_EQ(r[0], 0);
  EXPECT_FLOAT_EQ(static_cast<float>(r[1]), static_cast<float>(2.0 * (std::exp(-1.0) - 1)));
  // Gelu hand values: gelu(1) = 0.8413447, tanh form 0.8411920.
  r = RunFloat("Gelu", 20, {1, -1});
  EXPECT_NEAR(r[0], 0.8413447460685429, 1e-6);
  EXPECT_NEAR(r[1], -0.15865525393145707, 1e-6);
  r = RunFloat("Gelu", 20, {1}, {ir::Attribute::String("approximate", "tanh")});
  EXPECT_NEAR(r[0], 0.8411919906082768, 1e-6);
}

TEST(Unary, IntegerTypes) {
  // Abs and Neg wrap INT8_MIN (two's complement), Relu on int32, Abs on uint8 is the identity, Erf truncates.
  OpTester abs = Tester("Abs", 13);
  abs.Input(Make(DType::kInt8, {4}, {-128, -5, 0, 7}));
  EXPECT_EQ(AsDoubles(RunOne(abs)), (std::vector<double>{-128, 5, 0, 7}));
  OpTester neg = Tester("Neg", 13);
  neg.Input(Make(DType::kInt64, {3}, {-9, 0, 4}));
  EXPECT_EQ(AsDoubles(RunOne(neg)), (std::vector<double>{9, 0, -4}));
  OpTester relu = Tester("Relu", 14);
  relu.Input(Make(DType::kInt32, {3}, {-9, 0, 4}));
  EXPECT_EQ(AsDoubles(RunOne(relu)), (std::vector<double>{0, 0, 4}));
  OpTester absu = Tester("Abs", 13);
  absu.Input(Make(DType::kUint8, {2}, {200, 3}));
  EXPECT_EQ(AsDoubles(RunOne(absu)), (std::vector<double>{200, 3}));
  OpTester erf = Tester("Erf", 13);
  erf.Input(Make(DType::kInt32, {4}, {-10, -1, 0, 10}));
  EXPECT_EQ(AsDoubles(RunOne(erf)), (std::vector<double>{-1, 0, 0, 1}));
}

TEST(Unary, ParallelPathMatchesSerial) {
  // 300k elements on 4 threads against the same op on 1 thread: identical bits.
  std::vector<double> v = Random(300000, 3, -5, 5);
  for (const char* op : {"Tanh", "Sigmoid", "Exp"}) {
    OpTester serial = Tester(op, 13);
    serial.Input(Make(DType::kFloat16, {300, 1000}, v));
    OpTester parallel = serial;
    parallel.options.num_threads = 4;
    EXPECT_TRUE(RunOne(serial).SameContents(RunOne(parallel))) << op;
  }
}

TEST(Unary, EmptyAndScalar) {
  OpTester empty = Tester("Exp", 13);
  empty.Input(Make(DType::kFloat32, {0, 3}, {}));
  ir::Tensor y = RunOne(empty);
  EXPECT_EQ(y.dims(), (std::vector<int64_t>{0, 3}));
  OpTester scalar = Tester("Sqrt", 13);
  scalar.Input(Make(DType::kFloat32, {}, {4}));
  y = RunOne(scalar);
  EXPECT_EQ(y.dims(), std::vector<int64_t>{});
  EXPECT_EQ(AsDoubles(y), std::vector<double>{2});
}

TEST(Unary, Errors) {
  OpTester bad_alpha = Tester("LeakyRelu", 16);
  bad_alpha.Attr(ir::Attribute::Int("alpha", 1)).Input(Make(DType::kFloat32, {1}, {1}));
  ExpectCreateError(bad_alpha, "attribute 'alpha' must be a float, got int");
  OpTester bad_gelu = Tester("Gelu", 20);
  bad_gelu.Attr(ir::Attribute::String("approximate", "fast")).Input(Make(DType::kFloat32, {1}, {1}));
  ExpectCreateError(bad_gelu, "attribute 'approximate' must be \"none\" or \"tanh\", got \"fast\"");
  // Gelu exists from opset 20.
  OpTester old_gelu = Tester("Gelu", 17);
  old_gelu.Input(Make(DType::kFloat32, {1}, {1}));
  ExpectCreateError(old_gelu, "Gelu");
  // Sqrt takes float types only.
  OpTester int_sqrt = Tester("Sqrt", 13);
  int_sqrt.Input(Make(DType::kInt32, {1}, {4}));
  ExpectRunError(int_sqrt, "int32");
}

}  // namespace
}  // namespace onnxamp::testing::ew
