// Broadcasting binary arithmetic (Add Sub Mul Div Pow): every float type x op x broadcast pattern against a double
// reference, integer semantics (wrapping, truncating division, x / 0), Pow's mixed types and fast exponents, the
// opset 1-6 broadcast attributes, the parallel path, and errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tests/runtime/ops/elementwise_test_util.h"

namespace onnxamp::testing::ew {
namespace {

using Dims = std::vector<int64_t>;

struct ShapeCase {
  Dims a, b;
  const char* name;
};

const std::vector<ShapeCase>& Shapes() {
  static const std::vector<ShapeCase> v = {
      {{3, 5, 7}, {3, 5, 7}, "Same"},
      {{3, 5, 7}, {}, "ScalarB"},
      {{1}, {4, 9}, "ScalarA"},
      {{6, 11}, {11}, "Row"},
      {{6, 11}, {6, 1}, "Column"},
      {{2, 3, 4, 5}, {3, 1, 1}, "Channel"},
      {{2, 1, 4}, {3, 1}, "BothExpand"},
      {{5, 1, 3, 1}, {1, 4, 1, 2}, "Alternating"},
      {{0, 3}, {3}, "Empty"},
      {{}, {}, "Rank0"},
  };
  return v;
}

double RefOp(const std::string& op, double a, double b) {
  if (op == "Add") return a + b;
  if (op == "Sub") return a - b;
  if (op == "Mul") return a * b;
  if (op == "Div") return a / b;
  return std::pow(a, b);
}

using BinaryParam = std::tuple<std::string, int, DType>;  // op, shape case, dtype

class BinaryFloatTest : public ::testing::TestWithParam<BinaryParam> {};

TEST_P(BinaryFloatTest, MatchesDoubleReference) {
  const auto& [op, shape_index, dtype] = GetParam();
  const ShapeCase& sc = Shapes()[shape_index];
  const bool pow = op == "Pow";
  // Pow: positive bases, small exponents; Div: divisors away from zero.
  ir::Tensor a = Make(dtype, sc.a, Random(NumElements(sc.a), 11, pow ? 0.1 : -3, 3));
  std::vector<double> bv = Random(NumElements(sc.b), 12, pow ? -2 : 0.5, 3);
  if (!pow) {
    for (size_t i = 0; i < bv.size(); i += 2) bv[i] = -bv[i];
  }
  ir::Tensor b = Make(dtype, sc.b, bv);
  OpTester t = Tester(op, 14);
  t.Input(a).Input(b);
  ir::Tensor out = RunOne(t);
  auto shape = ops::BroadcastShapes(sc.a, sc.b);
  ASSERT_TRUE(shape.ok());
  ASSERT_EQ(out.dims(), *shape);
  ASSERT_EQ(out.dtype(), dtype);
  const std::vector<double> da = AsDoubles(a), db = AsDoubles(b);
  std::vector<double> want;
  for (int64_t i = 0; i < NumElements(*shape); ++i) {
    want.push_back(
        RefOp(op, da[ops::BroadcastInputOffset(sc.a, *shape, i)], db[ops::BroadcastInputOffset(sc.b, *shape, i)]));
  }
  ExpectClose(out, want, op + " " + sc.name);
}

INSTANTIATE_TEST_SUITE_P(Ops, BinaryFloatTest,
                         ::testing::Combine(::testing::Values("Add", "Sub", "Mul", "Div", "Pow"),
                                            ::testing::Range(0, static_cast<int>(Shapes().size())),
                                            ::testing::ValuesIn(FloatDTypes())),
                         [](const ::testing::TestParamInfo<BinaryParam>& info) {
                           return std::get<0>(info.param) + "_" + Shapes()[std::get<1>(info.param)].name + "_" +
                                  std::string(onnxamp::DTypeName(std::get<2>(info.param)));
                         });

std::vector<double> Run2(const std::string& op, DType dtype, const std::vector<double>& a, const std::vector<double>& b,
                         int64_t opset = 14, DType btype = DType::kUndefined) {
  OpTester t = Tester(op, opset);
  t.Input(Make(dtype, {static_cast<int64_t>(a.size())}, a));
  t.Input(Make(btype == DType::kUndefined ? dtype : btype, {static_cast<int64_t>(b.size())}, b));
  ir::Tensor out = RunOne(t);
  EXPECT_EQ(out.dtype(), dtype);
  return AsDoubles(out);
}

TEST(Binary, IntegerSemantics) {
  // Division truncates toward zero; x / 0 gives 0; INT_MIN / -1 wraps instead of trapping.
  EXPECT_EQ(Run2("Div", DType::kInt32, {-7, 7, -7, 7, 5}, {2, -2, -2, 2, 0}), (std::vector<double>{-3, -3, 3, 3, 0}));
  const double imin = std::numeric_limits<int32_t>::min();
  EXPECT_EQ(Run2("Div", DType::kInt32, {imin}, {-1}), (std::vector<double>{imin}));
  EXPECT_EQ(Run2("Div", DType::kUint8, {200, 7}, {7, 0}), (std::vector<double>{28, 0}));
  // Wrapping arithmetic.
  EXPECT_EQ(Run2("Add", DType::kInt8, {127, -128}, {1, -1}), (std::vector<double>{-128, 127}));
  EXPECT_EQ(Run2("Mul", DType::kUint16, {65535, 300}, {65535, 300}), (std::vector<double>{1, 24464}));
  EXPECT_EQ(Run2("Sub", DType::kUint8, {3}, {5}), (std::vector<double>{254}));
  const double i64max = static_cast<double>(std::numeric_limits<int64_t>::max());
  auto r = Run2("Add", DType::kInt64, {i64max}, {1});
  EXPECT_EQ(r[0], static_cast<double>(std::numeric_limits<int64_t>::min()));
}

TEST(Binary, IntegerRandomBroadcast) {
  // int32 and int64 against exact integer arithmetic over broadcast shapes, every op but Pow.
  for (DType dtype : {DType::kInt32, DType::kInt64, DType::kInt16, DType::kUint32}) {
    for (const char* op : {"Add", "Sub", "Mul", "Div"}) {
      const Dims da = {4, 1, 6}, db = {3, 1};
      std::vector<double> av = RandomInts(NumElements(da), 5, dtype == DType::kUint32 ? 0 : -1000, 1000);
      std::vector<double> bv = RandomInts(NumElements(db), 6, 1, 50);
      OpTester t = Tester(op, 14);
      t.Input(Make(dtype, da, av)).Input(Make(dtype, db, bv));
      ir::Tensor out = RunOne(t);
      ASSERT_EQ(out.dims(), (Dims{4, 3, 6}));
      std::vector<double> want;
      for (int64_t i = 0; i < 72; ++i) {
        const int64_t x = static_cast<int64_t>(av[ops::BroadcastInputOffset(da, out.dims(), i)]);
        const int64_t y = static_cast<int64_t>(bv[ops::BroadcastInputOffset(db, out.dims(), i)]);
        const std::string o = op;
        int64_t z = o == "Add" ? x + y : o == "Sub" ? x - y : o == "Mul" ? x * y : x / y;
        if (dtype == DType::kUint32) z = static_cast<uint32_t>(z);
        if (dtype == DType::kInt16) z = static_cast<int16_t>(z);
        want.push_back(static_cast<double>(z));
      }
      EXPECT_EQ(AsDoubles(out), want) << op << " " << DTypeName(dtype);
    }
  }
}

TEST(Binary, PowTypes) {
  // Integer base and exponent: exact (2^40 would lose nothing in double either, 3^39 would).
  EXPECT_EQ(Run2("Pow", DType::kInt64, {3, 2, -2, 1, -1, 5}, {39, 10, 3, -4, -3, -1}, 15),
            (std::vector<double>{4052555153018976267.0, 1024, -8, 1, -1, 0}));
  // Integer base, float exponent: through double, truncated.
  EXPECT_EQ(Run2("Pow", DType::kInt32, {4, 2, 9}, {0.5, 1.5, -0.5}, 15, DType::kFloat32),
            (std::vector<double>{2, 2, 0}));
  // Float base, integer exponent.
  EXPECT_EQ(Run2("Pow", DType::kFloat32, {1.5, -2, 3}, {2, 3, -1}, 15, DType::kInt64),
            (std::vector<double>{2.25, -8, static_cast<double>(1.0f / 3.0f)}));
  // fp16 base with a float exponent; bf16 exponent with a float base.
  auto r = Run2("Pow", DType::kFloat16, {2, 3}, {0.5, 2}, 15, DType::kFloat32);
  EXPECT_EQ(r, (std::vector<double>{static_cast<float>(Float16(std::sqrt(2.0f))), 9}));
  r = Run2("Pow", DType::kFloat32, {2, 3}, {3, 2}, 15, DType::kBFloat16);
  EXPECT_EQ(r, (std::vector<double>{8, 9}));
}

TEST(Binary, PowScalarExponentFastPaths) {
  // Each special exponent (x*x, x*x*x, identity, sqrt, reciprocal) against std::pow, plus a general one.
  const std::vector<double> x = Random(257, 9, 0.1, 4);
  for (double e : {2.0, 3.0, 1.0, 0.5, -1.0, 1.7}) {
    for (DType dtype : FloatDTypes()) {
      OpTester t = Tester("Pow", 15);
      t.Input(Make(dtype, {257}, x)).Input(Make(dtype, {}, {e}));
      ir::Tensor out = RunOne(t);
      std::vector<double> want;
      for (double v : AsDoubles(Make(dtype, {257}, x))) want.push_back(std::pow(v, e));
      ExpectClose(out, want, "Pow exponent " + std::to_string(e));
    }
  }
}

TEST(Binary, LegacyBroadcastAttributes) {
  // Opset 6: B = [3] broadcast along axis 1 of A = [2, 3, 2].
  OpTester t = Tester("Add", 6);
  t.Attr(ir::Attribute::Int("broadcast", 1)).Attr(ir::Attribute::Int("axis", 1));
  t.Input(Make(DType::kFloat32, {2, 3, 2}, {0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1}));
  t.Input(Make(DType::kFloat32, {3}, {10, 20, 30}));
  EXPECT_EQ(AsDoubles(RunOne(t)), (std::vector<double>{10, 10, 20, 20, 30, 30, 11, 11, 21, 21, 31, 31}));
  // Without axis B matches the trailing dims.
  OpTester s = Tester("Mul", 6);
  s.Attr(ir::Attribute::Int("broadcast", 1));
  s.Input(Make(DType::kFloat32, {2, 2}, {1, 2, 3, 4})).Input(Make(DType::kFloat32, {2}, {10, 100}));
  EXPECT_EQ(AsDoubles(RunOne(s)), (std::vector<double>{10, 200, 30, 400}));
  // broadcast = 0 requires equal shapes, even where numpy rules would allow it.
  OpTester no = Tester("Add", 6);
  no.Input(Make(DType::kFloat32, {2, 2}, {1, 2, 3, 4})).Input(Make(DType::kFloat32, {2}, {1, 2}));
  ExpectRunError(no, "attribute 'broadcast' is 0");
}

TEST(Binary, ParallelPathMatchesSerial) {
  // 2^18 + 3 elements, row broadcast, 4 threads vs 1: identical bits for fp32 and bf16.
  for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
    const Dims da = {262147 / 7, 7}, db = {7};
    OpTester serial = Tester("Mul", 14);
    serial.Input(Make(dtype, da, Random(NumElements(da), 1))).Input(Make(dtype, db, Random(7, 2)));
    OpTester parallel = serial;
    parallel.options.num_threads = 4;
    EXPECT_TRUE(RunOne(serial).SameContents(RunOne(parallel))) << DTypeName(dtype);
  }
}

TEST(Binary, Errors) {
  OpTester shapes = Tester("Add", 14);
  shapes.Input(Make(DType::kFloat32, {2, 3}, Random(6, 1))).Input(Make(DType::kFloat32, {4}, Random(4, 1)));
  ExpectRunError(shapes, "input 0 shape [2,3] and input 1 shape [4] cannot be broadcast: dim 3 vs 4");
  OpTester types = Tester("Sub", 14);
  types.Input(Make(DType::kFloat32, {2}, {1, 2})).Input(Make(DType::kFloat16, {2}, {1, 2}));
  ExpectRunError(types, "input 1 (B) has element type float16, expected float like input 0 (A)");
  OpTester bad_broadcast = Tester("Add", 6);
  bad_broadcast.Attr(ir::Attribute::Int("broadcast", 2));
  bad_broadcast.Input(Make(DType::kFloat32, {1}, {1})).Input(Make(DType::kFloat32, {1}, {1}));
  ExpectCreateError(bad_broadcast, "attribute 'broadcast' must be 0 or 1, got 2");
  OpTester bools = Tester("Add", 14);
  bools.Input(MakeBool({1}, {true})).Input(MakeBool({1}, {true}));
  ExpectRunError(bools, "bool");
}

}  // namespace
}  // namespace onnxamp::testing::ew
