// CUDA elementwise math against the CPU reference: unary math and activations, Add Sub Mul Div Pow, comparisons and
// logic, Min/Max; every registered element type, the shapes of every engine path (flat, scalar, row and column
// broadcast, general), attribute variants, NaN/inf, tensors large enough for grid-stride loops, and errors. Mod, PRelu,
// BitShift, IsNaN, IsInf, Sum and Mean: elementwise_attr_test.cc.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "tests/cuda/elementwise_test_util.h"

namespace onnxamp::testing::cuda_ew {
namespace {

const std::vector<DType> kFloat = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64};
const std::vector<DType> kFloatSigned = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64,
                                         DType::kInt8,    DType::kInt16,   DType::kInt32,    DType::kInt64};

// ---- unary ------------------------------------------------------------------------------------------------------

struct UnaryCase {
  std::string label;  // test name
  std::string op;
  int64_t opset;
  std::vector<DType> types;
  double lo, hi;  // input range
  std::vector<ir::Attribute> attrs;
};

const std::vector<UnaryCase>& UnaryCases() {
  static const std::vector<UnaryCase> cases = {
      {"Sqrt", "Sqrt", 13, kFloat, 0.0, 9.0, {}},
      {"Exp", "Exp", 13, kFloat, -10.0, 10.0, {}},
      {"Log", "Log", 13, kFloat, 0.01, 100.0, {}},
      {"Neg", "Neg", 13, kFloatSigned, -100.0, 100.0, {}},
      {"Abs", "Abs", 13, AllNumericTypes(), -100.0, 100.0, {}},
      {"Reciprocal", "Reciprocal", 13, kFloat, 0.1, 10.0, {}},
      {"Relu", "Relu", 14, kFloatSigned, -5.0, 5.0, {}},
      {"LeakyRelu", "LeakyRelu", 16, kFloat, -5.0, 5.0, {}},
      {"LeakyReluAlpha", "LeakyRelu", 16, kFloat, -5.0, 5.0, {ir::Attribute::Float("alpha", 0.2f)}},
      {"Elu", "Elu", 6, kFloat, -5.0, 5.0, {}},
      {"EluAlpha", "Elu", 6, kFloat, -5.0, 5.0, {ir::Attribute::Float("alpha", 0.5f)}},
      {"Sigmoid", "Sigmoid", 13, kFloat, -20.0, 20.0, {}},
      {"Tanh", "Tanh", 13, kFloat, -6.0, 6.0, {}},
      {"Erf", "Erf", 13, AllNumericTypes(), -3.0, 3.0, {}},
      {"Gelu", "Gelu", 20, kFloat, -6.0, 6.0, {}},
      {"GeluNone", "Gelu", 20, kFloat, -6.0, 6.0, {ir::Attribute::String("approximate", "none")}},
      {"GeluTanh", "Gelu", 20, kFloat, -6.0, 6.0, {ir::Attribute::String("approximate", "tanh")}},
      {"Softplus", "Softplus", 13, kFloat, -20.0, 20.0, {}},
      {"SqrtOpset6", "Sqrt", 6, kFloat, 0.0, 9.0, {}},
      {"Sin", "Sin", 7, kFloat, -10.0, 10.0, {}},
      {"Cos", "Cos", 7, kFloat, -10.0, 10.0, {}},
      {"Floor", "Floor", 13, kFloat, -50.0, 50.0, {}},
      {"Ceil", "Ceil", 13, kFloat, -50.0, 50.0, {}},
      {"Round", "Round", 11, kFloat, -50.0, 50.0, {}},
      {"HardSigmoid", "HardSigmoid", 6, kFloat, -5.0, 5.0, {}},
      {"HardSigmoidAlphaBeta",
       "HardSigmoid",
       6,
       kFloat,
       -5.0,
       5.0,
       {ir::Attribute::Float("alpha", 0.5f), ir::Attribute::Float("beta", 0.25f)}},
      {"HardSwish", "HardSwish", 14, kFloat, -6.0, 6.0, {}},
      {"Mish", "Mish", 18, kFloat, -20.0, 20.0, {}},
      {"Tan", "Tan", 7, kFloat, -1.5, 1.5, {}},
      {"Asin", "Asin", 7, kFloat, -1.0, 1.0, {}},
      {"Acos", "Acos", 7, kFloat, -1.0, 1.0, {}},
      {"Atan", "Atan", 7, kFloat, -20.0, 20.0, {}},
      {"Sinh", "Sinh", 9, kFloat, -10.0, 10.0, {}},
      {"Cosh", "Cosh", 9, kFloat, -10.0, 10.0, {}},
      {"Asinh", "Asinh", 9, kFloat, -100.0, 100.0, {}},
      {"Acosh", "Acosh", 9, kFloat, 1.0, 100.0, {}},
      {"Atanh", "Atanh", 9, kFloat, -0.99, 0.99, {}},
      {"Sign", "Sign", 13, AllNumericTypes(), -5.0, 5.0, {}},
      {"Softsign", "Softsign", 1, kFloat, -20.0, 20.0, {}},
      {"Selu", "Selu", 6, kFloat, -5.0, 5.0, {}},
      {"SeluAlphaGamma",
       "Selu",
       6,
       kFloat,
       -5.0,
       5.0,
       {ir::Attribute::Float("alpha", 2.0f), ir::Attribute::Float("gamma", 0.5f)}},
      {"Celu", "Celu", 12, kFloat, -5.0, 5.0, {}},
      {"CeluAlpha", "Celu", 12, kFloat, -5.0, 5.0, {ir::Attribute::Float("alpha", 0.3f)}},
      {"ThresholdedRelu", "ThresholdedRelu", 10, kFloat, -3.0, 3.0, {}},
      {"ThresholdedReluAlpha", "ThresholdedRelu", 10, kFloat, -3.0, 3.0, {ir::Attribute::Float("alpha", -0.5f)}},
      {"Shrink", "Shrink", 9, AllNumericTypes(), -3.0, 3.0, {}},
      {"ShrinkBiasLambd",
       "Shrink",
       9,
       AllNumericTypes(),
       -30.0,
       30.0,
       {ir::Attribute::Float("bias", 1.5f), ir::Attribute::Float("lambd", 2.0f)}},
  };
  return cases;
}

struct UnaryParam {
  size_t case_index;
  DType dtype;
};

std::vector<UnaryParam> UnaryParams() {
  std::vector<UnaryParam> out;
  for (size_t i = 0; i < UnaryCases().size(); ++i) {
    for (DType t : UnaryCases()[i].types) out.push_back({i, t});
  }
  return out;
}

class CudaUnaryTest : public ::testing::TestWithParam<UnaryParam> {};

TEST_P(CudaUnaryTest, MatchesCpuOnEveryShape) {
  ONNXAMP_REQUIRE_CUDA();
  const UnaryCase& c = UnaryCases()[GetParam().case_index];
  const DType dtype = GetParam().dtype;
  uint32_t seed = 1;
  for (const auto& dims : UnaryShapes()) {
    OpTester t = Tester(c.op, c.opset);
    for (const auto& a : c.attrs) t.Attr(a);
    t.Input(Input(dtype, dims, seed++, c.lo, c.hi));
    ExpectCudaMatchesCpu(t, c.label + " " + std::string(DTypeName(dtype)) + " " + ShapeName(dims));
  }
}

// NaN, infinities, signed zeros and the extremes of each float type; the integer types' extremes (wrapping Neg/Abs).
TEST_P(CudaUnaryTest, SpecialValues) {
  ONNXAMP_REQUIRE_CUDA();
  const UnaryCase& c = UnaryCases()[GetParam().case_index];
  const DType dtype = GetParam().dtype;
  std::vector<double> v;
  if (IsFloatingPoint(dtype)) {
    const double inf = std::numeric_limits<double>::infinity();
    v = {std::nan(""), inf, -inf, 0.0, -0.0, 1e-30, -1e-30, 60000.0, -60000.0, 88.0, -88.0, 1e30, -1e30, 0.5, -0.5};
  } else if (dtype == DType::kInt8) {
    v = {0, 1, -1, 2, -2, 127, -128, 100};
  } else if (dtype == DType::kUint8 || dtype == DType::kUint16 || dtype == DType::kUint32 || dtype == DType::kUint64) {
    v = {0, 1, 2, 127, 255, 3, 4, 5};
  } else {
    v = {0, 1, -1, 2, -2, 127, -128, 255, -32768, 32767};
    if (dtype == DType::kInt32) v.push_back(-2147483648.0);
    if (dtype == DType::kInt64) v.push_back(-9223372036854775808.0);
  }
  OpTester t = Tester(c.op, c.opset);
  for (const auto& a : c.attrs) t.Attr(a);
  t.Input(Make(dtype, {static_cast<int64_t>(v.size())}, v));
  ExpectCudaMatchesCpu(t, c.label + " special " + std::string(DTypeName(dtype)));
}

INSTANTIATE_TEST_SUITE_P(Ops, CudaUnaryTest, ::testing::ValuesIn(UnaryParams()),
                         [](const ::testing::TestParamInfo<UnaryParam>& info) {
                           return UnaryCases()[info.param.case_index].label + "_" +
                                  std::string(DTypeName(info.param.dtype));
                         });

TEST(CudaUnary, NotOnEveryShape) {
  ONNXAMP_REQUIRE_CUDA();
  uint32_t seed = 5;
  for (const auto& dims : UnaryShapes()) {
    ExpectCudaMatchesCpu(Tester("Not", 1).Input(Input(DType::kBool, dims, seed++, 0, 1)), "Not " + ShapeName(dims));
  }
}

TEST(CudaUnary, BadAttributesAreRefusedLikeTheCpu) {
  ONNXAMP_REQUIRE_CUDA();
  OpTester gelu = Tester("Gelu", 20);
  gelu.Attr(ir::Attribute::String("approximate", "fast")).Input(Make(DType::kFloat32, {1}, {1}));
  ExpectSameCreateError(gelu);
  OpTester alpha = Tester("LeakyRelu", 16);
  alpha.Attr(ir::Attribute::Int("alpha", 1)).Input(Make(DType::kFloat32, {1}, {1}));
  ExpectSameCreateError(alpha);
  OpTester elu = Tester("Elu", 6);
  elu.Attr(ir::Attribute::String("alpha", "x")).Input(Make(DType::kFloat32, {1}, {1}));
  ExpectSameCreateError(elu);
  OpTester celu = Tester("Celu", 12);
  celu.Attr(ir::Attribute::Float("alpha", 0.0f)).Input(Make(DType::kFloat32, {1}, {1}));
  ExpectSameCreateError(celu);
  OpTester shrink = Tester("Shrink", 9);
  shrink.Attr(ir::Attribute::Int("lambd", 1)).Input(Make(DType::kFloat32, {1}, {1}));
  ExpectSameCreateError(shrink);
}

// ---- binary -----------------------------------------------------------------------------------------------------

struct BinaryCase {
  std::string op;
  int64_t opset;
  std::vector<DType> types;
  double lo, hi;          // input range (floats)
  double int_lo, int_hi;  // input range (integers)
};

const std::vector<BinaryCase>& BinaryCases() {
  static const std::vector<BinaryCase> cases = {
      {"Add", 14, AllNumericTypes(), -10.0, 10.0, -100, 100},
      {"Sub", 14, AllNumericTypes(), -10.0, 10.0, -100, 100},
      {"Mul", 14, AllNumericTypes(), -10.0, 10.0, -100, 100},  // wraps for 8 and 16 bits
      {"Div", 14, AllNumericTypes(), -10.0, 10.0, -6, 6},      // integer x / 0 gives 0
      {"Pow", 15, AllNumericTypes(), 0.25, 3.0, -3, 4},
      {"Min", 13, AllNumericTypes(), -10.0, 10.0, -100, 100},
      {"Max", 13, AllNumericTypes(), -10.0, 10.0, -100, 100},
      // Comparisons on small integers so that ties occur in every type.
      {"Equal", 19, AllNumericTypes(), -2.0, 2.0, -2, 2},
      {"Less", 13, AllNumericTypes(), -2.0, 2.0, -2, 2},
      {"Greater", 13, AllNumericTypes(), -2.0, 2.0, -2, 2},
      {"LessOrEqual", 16, AllNumericTypes(), -2.0, 2.0, -2, 2},
      {"GreaterOrEqual", 16, AllNumericTypes(), -2.0, 2.0, -2, 2},
      {"Equal", 19, {DType::kBool}, 0, 1, 0, 1},
      {"And", 7, {DType::kBool}, 0, 1, 0, 1},
      {"Or", 7, {DType::kBool}, 0, 1, 0, 1},
      {"Xor", 7, {DType::kBool}, 0, 1, 0, 1},
  };
  return cases;
}

bool IsComparison(const std::string& op) {
  return op == "Equal" || op == "Less" || op == "Greater" || op == "LessOrEqual" || op == "GreaterOrEqual";
}

struct BinaryParam {
  size_t case_index;
  DType dtype;
};

std::vector<BinaryParam> BinaryParams() {
  std::vector<BinaryParam> out;
  for (size_t i = 0; i < BinaryCases().size(); ++i) {
    for (DType t : BinaryCases()[i].types) out.push_back({i, t});
  }
  return out;
}

class CudaBinaryTest : public ::testing::TestWithParam<BinaryParam> {};

TEST_P(CudaBinaryTest, MatchesCpuOnEveryBroadcast) {
  ONNXAMP_REQUIRE_CUDA();
  const BinaryCase& c = BinaryCases()[GetParam().case_index];
  const DType dtype = GetParam().dtype;
  const bool integer = !IsFloatingPoint(dtype);
  const double lo = integer ? c.int_lo : c.lo, hi = integer ? c.int_hi : c.hi;
  uint32_t seed = 11;
  for (const auto& [da, db] : BinaryShapes()) {
    OpTester t = Tester(c.op, c.opset);
    ir::Tensor a = Input(dtype, da, seed++, lo, hi);
    ir::Tensor b = Input(dtype, db, seed++, lo, hi);
    // Comparisons of floats on a grid of halves: ties, and values fp16/bf16 hold exactly.
    if (IsComparison(c.op) && !integer) {
      std::vector<double> va = ValuesFor(DType::kInt32, static_cast<size_t>(a.num_elements()), seed++, -4, 4);
      std::vector<double> vb = ValuesFor(DType::kInt32, static_cast<size_t>(b.num_elements()), seed++, -4, 4);
      for (double& x : va) x *= 0.5;
      for (double& x : vb) x *= 0.5;
      a = Make(dtype, da, va);
      b = Make(dtype, db, vb);
    }
    t.Input(a).Input(b);
    ExpectCudaMatchesCpu(t, c.op + " " + std::string(DTypeName(dtype)) + " " + ShapeName(da) + " op " + ShapeName(db));
    // The same with the operands swapped (the broadcast input first).
    OpTester s = Tester(c.op, c.opset);
    s.Input(b).Input(a);
    ExpectCudaMatchesCpu(s, c.op + " " + std::string(DTypeName(dtype)) + " " + ShapeName(db) + " op " + ShapeName(da));
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, CudaBinaryTest, ::testing::ValuesIn(BinaryParams()),
                         [](const ::testing::TestParamInfo<BinaryParam>& info) {
                           return BinaryCases()[info.param.case_index].op + "_" +
                                  std::string(DTypeName(info.param.dtype));
                         });

// Integer division: x / 0 = 0 and INT_MIN / -1 wraps (no trap), truncation toward zero.
TEST(CudaBinary, IntegerDivisionEdgeCases) {
  ONNXAMP_REQUIRE_CUDA();
  for (DType t : {DType::kInt8, DType::kInt16, DType::kInt32, DType::kInt64, DType::kUint8, DType::kUint64}) {
    std::vector<double> a = {7, -7, 7, -7, 0, 5, 100, -100};
    std::vector<double> b = {2, 2, -2, -2, 0, 0, 0, -1};
    if (!IsInteger(t) || t == DType::kUint8 || t == DType::kUint64) {
      a = {7, 8, 9, 0, 5, 100, 255, 1};
      b = {2, 3, 0, 0, 1, 7, 16, 0};
    }
    ExpectCudaMatchesCpu(Tester("Div", 14).Input(Make(t, {8}, a)).Input(Make(t, {8}, b)),
                         "Div " + std::string(DTypeName(t)));
  }
  ExpectCudaMatchesCpu(Tester("Div", 14)
                           .Input(Make(DType::kInt32, {2}, {-2147483648.0, -2147483648.0}))
                           .Input(Make(DType::kInt32, {2}, {-1, 1})),
                       "Div INT_MIN / -1");
  ExpectCudaMatchesCpu(Tester("Mul", 14)
                           .Input(Make(DType::kInt32, {2}, {2147483647.0, -2147483648.0}))
                           .Input(Make(DType::kInt32, {2}, {2, -1})),
                       "Mul wraps");
}

// Float division by zero: +-inf and NaN as IEEE says.
TEST(CudaBinary, FloatDivisionByZero) {
  ONNXAMP_REQUIRE_CUDA();
  for (DType t : kFloat) {
    ExpectCudaMatchesCpu(Tester("Div", 14).Input(Make(t, {4}, {1, -1, 0, 2})).Input(Make(t, {4}, {0, 0, 0, -0.0})),
                         "Div by zero " + std::string(DTypeName(t)));
  }
}

// Pow with every pairing of base and exponent type families (the exponent is converted on the device).
TEST(CudaBinary, PowMixedTypes) {
  ONNXAMP_REQUIRE_CUDA();
  const std::vector<DType> bases = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64,
                                    DType::kInt32,   DType::kInt64,   DType::kUint8,    DType::kInt8};
  const std::vector<DType> exponents = {DType::kFloat32, DType::kFloat16, DType::kFloat64,  DType::kInt32,
                                        DType::kInt64,   DType::kUint8,   DType::kBFloat16, DType::kInt8};
  uint32_t seed = 100;
  for (DType bt : bases) {
    for (DType et : exponents) {
      const bool int_base = IsInteger(bt);
      ir::Tensor base = Input(bt, {5, 7}, seed++, int_base ? -3 : 0.25, int_base ? 5 : 3.0);
      ir::Tensor e = Input(et, {7}, seed++, IsInteger(et) && et != DType::kUint8 ? -2 : 0, 3.0);
      ExpectCudaMatchesCpu(Tester("Pow", 15).Input(base).Input(e),
                           "Pow " + std::string(DTypeName(bt)) + " ^ " + std::string(DTypeName(et)));
    }
  }
}

// Integer bases to half-integral float exponents whose results are whole numbers (4 ** 0.5 = 2, 9 ** 1.5 = 27): the
// CPU's pow gives them exactly and truncation keeps them; a device pow 1 ulp below would truncate to one less.
TEST(CudaBinary, PowIntegerBaseHalfIntegralExponent) {
  ONNXAMP_REQUIRE_CUDA();
  const std::vector<double> bases = {0, 1, 4, 9, 16, 25, 36, 49, 64, 81, 100, 121, 144, 169, 196, 225, 2, 3, -4};
  for (DType bt : {DType::kInt32, DType::kInt64}) {
    for (DType et : {DType::kFloat32, DType::kFloat64}) {
      for (double e : {0.5, 1.5, 2.5, 3.5, -0.5}) {
        ExpectCudaMatchesCpu(Tester("Pow", 15).Input(Make(bt, {19}, bases)).Input(Make(et, {1}, {e})),
                             "Pow " + std::string(DTypeName(bt)) + " ^ " + std::to_string(e));
      }
    }
  }
}

// A scalar exponent takes the CPU's exact fast forms (x*x, x*x*x, sqrt, 1/x): the values at -0, +-inf and NaN tell
// them from pow().
TEST(CudaBinary, PowScalarExponents) {
  ONNXAMP_REQUIRE_CUDA();
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> x = {-0.0, 0.0, inf, -inf, std::nan(""), 2.0, -3.0, 0.5, 1e-3, 7.25};
  for (DType t : kFloat) {
    for (double e : {2.0, 3.0, 1.0, 0.5, -1.0, 2.5, 0.0, -2.0}) {
      ExpectCudaMatchesCpu(Tester("Pow", 15).Input(Make(t, {10}, x)).Input(Make(t, {}, {e})),
                           "Pow " + std::string(DTypeName(t)) + " ^ " + std::to_string(e));
      ExpectCudaMatchesCpu(Tester("Pow", 15).Input(Make(t, {10}, x)).Input(Make(DType::kFloat32, {1}, {e})),
                           "Pow " + std::string(DTypeName(t)) + " ^ float " + std::to_string(e));
    }
  }
  // Integer bases with negative exponents: 0 unless the base is 1 or -1.
  ExpectCudaMatchesCpu(Tester("Pow", 15)
                           .Input(Make(DType::kInt64, {6}, {1, -1, 2, -2, 0, 3}))
                           .Input(Make(DType::kInt64, {6}, {-3, -3, -1, -2, 2, 40})),
                       "Pow int64 negative and overflowing exponents");
}

// Min and Max propagate NaN from either side; comparisons with NaN are false (Equal too).
TEST(CudaBinary, NaNAndInfinities) {
  ONNXAMP_REQUIRE_CUDA();
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  const std::vector<double> a = {nan, 1, nan, inf, -inf, 0.0, -0.0, 3};
  const std::vector<double> b = {1, nan, nan, 1, 1, -0.0, 0.0, inf};
  for (DType t : kFloat) {
    for (const char* op : {"Min", "Max", "Add", "Sub", "Mul", "Div"}) {
      ExpectCudaMatchesCpu(Tester(op, 13).Input(Make(t, {8}, a)).Input(Make(t, {8}, b)),
                           std::string(op) + " NaN " + std::string(DTypeName(t)));
    }
    for (const char* op : {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"}) {
      ExpectCudaMatchesCpu(Tester(op, 16).Input(Make(t, {8}, a)).Input(Make(t, {8}, b)),
                           std::string(op) + " NaN " + std::string(DTypeName(t)));
    }
  }
}

// Opsets before 7: the `broadcast` and `axis` attributes.
TEST(CudaBinary, LegacyBroadcastAttributes) {
  ONNXAMP_REQUIRE_CUDA();
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kInt32}) {
    OpTester axis = Tester("Add", 6);
    axis.Attr(ir::Attribute::Int("broadcast", 1)).Attr(ir::Attribute::Int("axis", 1));
    axis.Input(Input(t, {2, 3, 4}, 1, -5, 5)).Input(Input(t, {3}, 2, -5, 5));
    ExpectCudaMatchesCpu(axis, "Add legacy axis 1 " + std::string(DTypeName(t)));
    OpTester trailing = Tester("Mul", 6);
    trailing.Attr(ir::Attribute::Int("broadcast", 1));
    trailing.Input(Input(t, {2, 3, 4}, 3, -5, 5)).Input(Input(t, {3, 4}, 4, -5, 5));
    ExpectCudaMatchesCpu(trailing, "Mul legacy trailing " + std::string(DTypeName(t)));
    OpTester cmp = Tester("Greater", 1);
    cmp.Attr(ir::Attribute::Int("broadcast", 1));
    cmp.Input(Input(t, {2, 3, 4}, 5, -5, 5)).Input(Input(t, {}, 6, -5, 5));
    ExpectCudaMatchesCpu(cmp, "Greater legacy scalar " + std::string(DTypeName(t)));
  }
}

TEST(CudaBinary, ErrorsMatchTheCpu) {
  ONNXAMP_REQUIRE_CUDA();
  // Incompatible broadcast: the message names both shapes and the clashing dims.
  ExpectSameRunError(Tester("Add", 14)
                         .Input(Make(DType::kFloat32, {2, 3}, {1, 2, 3, 4, 5, 6}))
                         .Input(Make(DType::kFloat32, {4}, {1, 2, 3, 4})));
  ExpectSameRunError(Tester("Less", 13)
                         .Input(Input(DType::kFloat16, {4, 1, 5}, 1, -1, 1))
                         .Input(Input(DType::kFloat16, {3, 2}, 2, -1, 1)));
  ExpectSameRunError(Tester("Where", 16)
                         .Input(Input(DType::kBool, {2, 3}, 1, 0, 1))
                         .Input(Input(DType::kFloat32, {3}, 2, -1, 1))
                         .Input(Input(DType::kFloat32, {4}, 3, -1, 1)));
  ExpectSameRunError(Tester("Max", 13)
                         .Input(Input(DType::kFloat32, {2, 3}, 1, -1, 1))
                         .Input(Input(DType::kFloat32, {3}, 2, -1, 1))
                         .Input(Input(DType::kFloat32, {2, 2}, 3, -1, 1)));
  // Mismatched element types.
  ExpectSameRunError(
      Tester("Add", 14).Input(Make(DType::kFloat32, {2}, {1, 2})).Input(Make(DType::kFloat64, {2}, {1, 2})));
  // A legacy broadcast that does not fit.
  OpTester legacy = Tester("Add", 6);
  legacy.Attr(ir::Attribute::Int("broadcast", 1)).Attr(ir::Attribute::Int("axis", 0));
  legacy.Input(Input(DType::kFloat32, {2, 3}, 1, -1, 1)).Input(Input(DType::kFloat32, {3}, 2, -1, 1));
  ExpectSameRunError(legacy);
}

// ---- Min / Max (variadic) ---------------------------------------------------------------------------------------

TEST(CudaMinMax, VariadicWithBroadcasting) {
  ONNXAMP_REQUIRE_CUDA();
  const std::vector<std::vector<std::vector<int64_t>>> shape_sets = {
      {{7}},                                    // one input: passed through
      {{33, 65}, {33, 65}},                     //
      {{2, 1, 4}, {3, 1}, {4}, {}},             // four inputs, all broadcast
      {{5, 6}, {6}, {5, 1}},                    // row then column
      {{2, 3, 4, 5}, {3, 4, 5}, {2, 1, 1, 5}},  // general
      {{0, 3}, {3}},                            // empty
  };
  for (const char* op : {"Min", "Max"}) {
    for (DType t : AllNumericTypes()) {
      uint32_t seed = 40;
      for (const auto& shapes : shape_sets) {
        OpTester tester = Tester(op, 13);
        std::string what = std::string(op) + " " + std::string(DTypeName(t));
        for (const auto& dims : shapes) {
          tester.Input(Input(t, dims, seed++, -50, 50));
          what += ' ';  // (not " " + ShapeName(...): GCC 12 warns falsely about that concatenation)
          what += ShapeName(dims);
        }
        ExpectCudaMatchesCpu(tester, what);
      }
    }
  }
  // NaN in the third input reaches the output.
  const double nan = std::nan("");
  for (DType t : kFloat) {
    ExpectCudaMatchesCpu(Tester("Max", 13)
                             .Input(Make(t, {3}, {1, 2, 3}))
                             .Input(Make(t, {3}, {0, 5, 1}))
                             .Input(Make(t, {3}, {nan, 0, 9})),
                         "Max NaN third " + std::string(DTypeName(t)));
  }
}

// ---- large tensors: grid-stride loops over more than 65535 x 256 items ------------------------------------------

// Same shapes, vectorised (4 x fp32 per access): 4 x 65535 x 256 + 7 elements, so the packs alone need more than the
// largest grid, plus a scalar tail.
TEST(CudaElementwiseLarge, FlatVectorised) {
  ONNXAMP_REQUIRE_CUDA();
  const int64_t n = 4 * int64_t{65535} * 256 + 7;
  ExpectCudaMatchesCpu(Tester("Mul", 14).Input(BigFloat({n}, 1)).Input(BigFloat({n}, 2)), "Mul large flat");
  ExpectCudaMatchesCpu(Tester("Relu", 14).Input(BigFloat({n}, 3)), "Relu large flat");
}

// Row broadcast with an odd row (per-element path) and a general broadcast, each over 16,776,960 elements.
TEST(CudaElementwiseLarge, RowAndGeneralBroadcast) {
  ONNXAMP_REQUIRE_CUDA();
  ExpectCudaMatchesCpu(Tester("Add", 14).Input(BigFloat({16385, 1025}, 4)).Input(BigFloat({1025}, 5)),
                       "Add large row broadcast");
  ExpectCudaMatchesCpu(Tester("Sub", 14).Input(BigFloat({17, 1025, 1000}, 6)).Input(BigFloat({17, 1, 1000}, 7)),
                       "Sub large general broadcast");
  ExpectCudaMatchesCpu(Tester("Less", 13).Input(BigFloat({17, 1025, 1000}, 8)).Input(BigFloat({1025, 1}, 9)),
                       "Less large general broadcast");
}

}  // namespace
}  // namespace onnxamp::testing::cuda_ew
