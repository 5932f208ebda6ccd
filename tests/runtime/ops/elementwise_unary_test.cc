// Unary elementwise kernels (Sqrt Exp Log Neg Abs Reciprocal Relu LeakyRelu Elu Sigmoid Tanh Erf Gelu Softplus, the
// trigonometric and hyperbolic functions, Floor Ceil Round Sign, Softsign Selu Celu HardSigmoid HardSwish
// ThresholdedRelu Shrink Mish):
// every op x float type against a double reference on seeded random inputs, hand-computed edge cases, integer
// types, the parallel path, and attribute and type errors.
#include <gtest/gtest.h>

#include <algorithm>
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
      {"Sin", 7, {}, -7, 7, [](double x) { return std::sin(x); }, "Sin"},
      {"Cos", 7, {}, -7, 7, [](double x) { return std::cos(x); }, "Cos"},
      {"Tan", 7, {}, -1.3, 1.3, [](double x) { return std::tan(x); }, "Tan"},
      {"Asin", 7, {}, -1, 1, [](double x) { return std::asin(x); }, "Asin"},
      {"Acos", 7, {}, -1, 1, [](double x) { return std::acos(x); }, "Acos"},
      {"Atan", 7, {}, -10, 10, [](double x) { return std::atan(x); }, "Atan"},
      {"Sinh", 9, {}, -5, 5, [](double x) { return std::sinh(x); }, "Sinh"},
      {"Cosh", 9, {}, -5, 5, [](double x) { return std::cosh(x); }, "Cosh"},
      {"Asinh", 9, {}, -20, 20, [](double x) { return std::asinh(x); }, "Asinh"},
      {"Acosh", 9, {}, 1, 20, [](double x) { return std::acosh(x); }, "Acosh"},
      {"Atanh", 9, {}, -0.95, 0.95, [](double x) { return std::atanh(x); }, "Atanh"},
      {"Floor", 13, {}, -5, 5, [](double x) { return std::floor(x); }, "Floor"},
      {"Ceil", 13, {}, -5, 5, [](double x) { return std::ceil(x); }, "Ceil"},
      {"Round", 11, {}, -5, 5, [](double x) { return std::nearbyint(x); }, "Round"},
      {"Sign", 13, {}, -3, 3, [](double x) { return x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0); }, "Sign"},
      {"Softsign", 1, {}, -6, 6, [](double x) { return x / (1 + std::fabs(x)); }, "Softsign"},
      {"Selu",
       6,
       {},
       -4,
       4,
       [](double x) {
         return double(1.05070102214813232421875f) * (x > 0 ? x : double(1.67326319217681884765625f) * std::expm1(x));
       },
       "Selu"},
      {"Celu",
       12,
       {ir::Attribute::Float("alpha", 2.0f)},
       -4,
       4,
       [](double x) { return x > 0 ? x : 2 * std::expm1(x / 2); },
       "Celu"},
      {"HardSigmoid",
       6,
       {},
       -4,
       4,
       [](double x) { return std::clamp(double(0.2f) * x + 0.5, 0.0, 1.0); },
       "HardSigmoid"},
      {"HardSwish", 14, {}, -5, 5, [](double x) { return x * std::clamp(x / 6 + 0.5, 0.0, 1.0); }, "HardSwish"},
      {"ThresholdedRelu",
       10,
       {ir::Attribute::Float("alpha", 0.5f)},
       -2,
       2,
       [](double x) { return x > 0.5 ? x : 0; },
       "ThresholdedRelu"},
      {"Shrink",
       9,
       {ir::Attribute::Float("lambd", 1.0f), ir::Attribute::Float("bias", 0.25f)},
       -3,
       3,
       [](double x) { return x < -1 ? x + 0.25 : (x > 1 ? x - 0.25 : 0); },
       "Shrink"},
      {"Mish", 18, {}, -8, 8, [](double x) { return x * std::tanh(std::log1p(std::exp(x))); }, "Mish"},
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

TEST(Unary, MoreEdgeCases) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // Round halves to even (numpy.round), Sign keeps NaN and zero.
  auto r = RunFloat("Round", 11, {0.5, 1.5, 2.5, -0.5, -1.5, 2.4999});
  EXPECT_EQ(r, (std::vector<double>{0, 2, 2, -0.0, -2, 2}));
  r = RunFloat("Sign", 13, {-2, 0, 3, nan});
  EXPECT_EQ(r[0], -1);
  EXPECT_EQ(r[1], 0);
  EXPECT_EQ(r[2], 1);
  EXPECT_TRUE(std::isnan(r[3]));
  // Out-of-domain inputs give NaN; the hyperbolic functions overflow to inf in fp16 above 11.
  r = RunFloat("Asin", 7, {1.5});
  EXPECT_TRUE(std::isnan(r[0]));
  r = RunFloat("Cosh", 9, {12}, {}, DType::kFloat16);
  EXPECT_EQ(r[0], inf);
  // HardSwish's kinks; Mish at large inputs neither overflows nor loses the identity.
  r = RunFloat("HardSwish", 14, {-3, 3, 0});
  EXPECT_EQ(r, (std::vector<double>{0, 3, 0}));
  r = RunFloat("Mish", 18, {100, -100});
  EXPECT_EQ(r[0], 100);
  EXPECT_NEAR(r[1], 0, 1e-30);
  // The piecewise-linear activations keep NaN.
  for (const char* op : {"ThresholdedRelu", "Shrink"}) {
    r = RunFloat(op, 10, {nan});
    EXPECT_TRUE(std::isnan(r[0])) << op;
  }
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
  OpTester sign = Tester("Sign", 13);
  sign.Input(Make(DType::kInt32, {3}, {-9, 0, 4}));
  EXPECT_EQ(AsDoubles(RunOne(sign)), (std::vector<double>{-1, 0, 1}));
  OpTester shrink = Tester("Shrink", 9);
  shrink.Attr(ir::Attribute::Float("lambd", 1.5f)).Attr(ir::Attribute::Float("bias", 1.5f));
  shrink.Input(Make(DType::kInt8, {5}, {-3, -1, 0, 1, 3}));
  EXPECT_EQ(AsDoubles(RunOne(shrink)), (std::vector<double>{-1, 0, 0, 0, 1}));
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
  OpTester zero_alpha = Tester("Celu", 12);
  zero_alpha.Attr(ir::Attribute::Float("alpha", 0.0f)).Input(Make(DType::kFloat32, {1}, {1}));
  ExpectCreateError(zero_alpha, "attribute 'alpha' must not be 0");
  // Sqrt takes float types only.
  OpTester int_sqrt = Tester("Sqrt", 13);
  int_sqrt.Input(Make(DType::kInt32, {1}, {4}));
  ExpectRunError(int_sqrt, "int32");
}

}  // namespace
}  // namespace onnxamp::testing::ew
