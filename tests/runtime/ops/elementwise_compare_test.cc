// Comparisons and logic (Equal Less Greater LessOrEqual GreaterOrEqual And Or Xor Not), Where, Min, Max and Clip:
// broadcasting, every element type family, NaN handling, opset variants and errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>

#include "tests/runtime/ops/elementwise_test_util.h"

namespace onnxamp::testing::ew {
namespace {

using Dims = std::vector<int64_t>;
const double kNaN = std::numeric_limits<double>::quiet_NaN();

std::vector<bool> Bools(const ir::Tensor& t) {
  EXPECT_EQ(t.dtype(), DType::kBool);
  std::vector<bool> v;
  for (bool b : t.values<bool>()) v.push_back(b);
  return v;
}

bool RefCompare(const std::string& op, double a, double b) {
  if (op == "Equal") return a == b;
  if (op == "Less") return a < b;
  if (op == "Greater") return a > b;
  if (op == "LessOrEqual") return a <= b;
  return a >= b;
}

using CompareParam = std::tuple<std::string, DType>;
class CompareTest : public ::testing::TestWithParam<CompareParam> {};

TEST_P(CompareTest, BroadcastMatchesReference) {
  const auto& [op, dtype] = GetParam();
  const Dims da = {3, 1, 5}, db = {4, 1};
  // Small integers so that ties are frequent; NaN in float inputs.
  std::vector<double> av = RandomInts(15, 3, 0, 4), bv = RandomInts(4, 4, 0, 4);
  if (ops::DispatchFloat(dtype, [](auto) { return Status::Ok(); }).ok()) av[2] = kNaN;
  OpTester t = Tester(op, 16);
  t.Input(Make(dtype, da, av)).Input(Make(dtype, db, bv));
  ir::Tensor out = RunOne(t);
  ASSERT_EQ(out.dims(), (Dims{3, 4, 5}));
  std::vector<bool> want;
  for (int64_t i = 0; i < 60; ++i) {
    want.push_back(RefCompare(op, av[ops::BroadcastInputOffset(da, out.dims(), i)],
                              bv[ops::BroadcastInputOffset(db, out.dims(), i)]));
  }
  EXPECT_EQ(Bools(out), want);
}

INSTANTIATE_TEST_SUITE_P(
    Ops, CompareTest,
    ::testing::Combine(::testing::Values("Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"),
                       ::testing::Values(DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64,
                                         DType::kInt32, DType::kInt64, DType::kUint8, DType::kInt8)),
    [](const ::testing::TestParamInfo<CompareParam>& info) {
      return std::get<0>(info.param) + "_" + std::string(onnxamp::DTypeName(std::get<1>(info.param)));
    });

TEST(Compare, EqualOnBoolAndString) {
  OpTester b = Tester("Equal", 13);
  b.Input(MakeBool({4}, {true, true, false, false})).Input(MakeBool({4}, {true, false, true, false}));
  EXPECT_EQ(Bools(RunOne(b)), (std::vector<bool>{true, false, false, true}));
  ir::Tensor s1(DType::kString, {2, 2});
  s1.mutable_strings() = {"a", "b", "c", "d"};
  ir::Tensor s2(DType::kString, {2});
  s2.mutable_strings() = {"a", "d"};
  OpTester s = Tester("Equal", 19);
  s.Input(s1).Input(s2);
  EXPECT_EQ(Bools(RunOne(s)), (std::vector<bool>{true, false, false, true}));
}

TEST(Compare, LegacyBroadcast) {
  OpTester t = Tester("Greater", 1);
  t.Attr(ir::Attribute::Int("broadcast", 1)).Attr(ir::Attribute::Int("axis", 0));
  t.Input(Make(DType::kFloat32, {2, 3}, {1, 2, 3, 4, 5, 6})).Input(Make(DType::kFloat32, {2}, {2, 5}));
  EXPECT_EQ(Bools(RunOne(t)), (std::vector<bool>{false, false, true, false, false, true}));
}

TEST(Logic, TruthTablesAndBroadcast) {
  const std::vector<bool> a = {false, false, true, true}, b = {false, true, false, true};
  const std::map<std::string, std::vector<bool>> want = {
      {"And", {false, false, false, true}}, {"Or", {false, true, true, true}}, {"Xor", {false, true, true, false}}};
  for (const auto& [op, w] : want) {
    OpTester t = Tester(op, 7);
    t.Input(MakeBool({4}, a)).Input(MakeBool({4}, b));
    EXPECT_EQ(Bools(RunOne(t)), w) << op;
  }
  // [2, 1] and [3]: a column against a row.
  OpTester t = Tester("And", 7);
  t.Input(MakeBool({2, 1}, {true, false})).Input(MakeBool({3}, {true, false, true}));
  EXPECT_EQ(Bools(RunOne(t)), (std::vector<bool>{true, false, true, false, false, false}));
  OpTester n = Tester("Not", 1);
  n.Input(MakeBool({3}, {true, false, true}));
  EXPECT_EQ(Bools(RunOne(n)), (std::vector<bool>{false, true, false}));
  OpTester bad = Tester("And", 7);
  bad.Input(Make(DType::kInt32, {1}, {1})).Input(Make(DType::kInt32, {1}, {1}));
  ExpectRunError(bad, "int32");
}

TEST(Where, BroadcastAllTypes) {
  // condition [2, 1], X [3], Y [] -> [2, 3].
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kFloat64, DType::kInt8, DType::kInt64}) {
    OpTester t = Tester("Where", 16);
    t.Input(MakeBool({2, 1}, {true, false})).Input(Make(dtype, {3}, {1, 2, 3})).Input(Make(dtype, {}, {-1}));
    ir::Tensor out = RunOne(t);
    EXPECT_EQ(out.dtype(), dtype);
    EXPECT_EQ(out.dims(), (Dims{2, 3}));
    EXPECT_EQ(AsDoubles(out), (std::vector<double>{1, 2, 3, -1, -1, -1})) << DTypeName(dtype);
  }
  OpTester b = Tester("Where", 9);
  b.Input(MakeBool({2}, {false, true})).Input(MakeBool({2}, {true, true})).Input(MakeBool({2}, {false, false}));
  EXPECT_EQ(Bools(RunOne(b)), (std::vector<bool>{false, true}));
  ir::Tensor x(DType::kString, {2});
  x.mutable_strings() = {"x0", "x1"};
  ir::Tensor y(DType::kString, {1});
  y.mutable_strings() = {"y"};
  OpTester s = Tester("Where", 16);
  s.Input(MakeBool({2, 2}, {true, false, false, true})).Input(x).Input(y);
  ir::Tensor out = RunOne(s);
  EXPECT_EQ(out.strings(), (std::vector<std::string>{"x0", "y", "y", "x1"}));
}

TEST(Where, RandomAgainstReferenceAndParallel) {
  const Dims dc = {64, 1, 33}, dx = {50, 1}, dy = {64, 50, 33};
  std::vector<bool> cond;
  for (double v : RandomInts(NumElements(dc), 8, 0, 1)) cond.push_back(v != 0);
  const std::vector<double> xv = Random(50, 9), yv = Random(NumElements(dy), 10);
  OpTester t = Tester("Where", 16);
  t.Input(MakeBool(dc, cond)).Input(Make(DType::kFloat32, dx, xv)).Input(Make(DType::kFloat32, dy, yv));
  t.options.num_threads = 3;
  ir::Tensor out = RunOne(t);
  ASSERT_EQ(out.dims(), dy);
  std::vector<double> want;
  const std::vector<double> rx = AsDoubles(Make(DType::kFloat32, dx, xv)),
                            ry = AsDoubles(Make(DType::kFloat32, dy, yv));
  for (int64_t i = 0; i < NumElements(dy); ++i) {
    want.push_back(cond[ops::BroadcastInputOffset(dc, dy, i)] ? rx[ops::BroadcastInputOffset(dx, dy, i)] : ry[i]);
  }
  EXPECT_EQ(AsDoubles(out), want);
}

TEST(Where, Errors) {
  OpTester c = Tester("Where", 16);
  c.Input(Make(DType::kInt32, {1}, {1})).Input(Make(DType::kFloat32, {1}, {1})).Input(Make(DType::kFloat32, {1}, {1}));
  ExpectRunError(c, "input 0 (condition) has element type int32, expected bool");
  OpTester s = Tester("Where", 16);
  s.Input(MakeBool({2}, {true, false}))
      .Input(Make(DType::kFloat32, {3}, {1, 2, 3}))
      .Input(Make(DType::kFloat32, {1}, {1}));
  ExpectRunError(s, "cannot be broadcast");
}

TEST(MinMax, VariadicBroadcast) {
  // Three inputs [3], [2, 1], [] -> [2, 3].
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kInt32, DType::kUint8}) {
    OpTester mx = Tester("Max", 13);
    mx.Input(Make(dtype, {3}, {1, 5, 3})).Input(Make(dtype, {2, 1}, {2, 4})).Input(Make(dtype, {}, {3}));
    EXPECT_EQ(AsDoubles(RunOne(mx)), (std::vector<double>{3, 5, 3, 4, 5, 4})) << DTypeName(dtype);
    OpTester mn = Tester("Min", 13);
    mn.Input(Make(dtype, {3}, {1, 5, 3})).Input(Make(dtype, {2, 1}, {2, 4})).Input(Make(dtype, {}, {3}));
    EXPECT_EQ(AsDoubles(RunOne(mn)), (std::vector<double>{1, 2, 2, 1, 3, 3})) << DTypeName(dtype);
  }
  // One input: a copy. NaN propagates from either side.
  OpTester one = Tester("Min", 8);
  one.Input(Make(DType::kFloat32, {2}, {4, -1}));
  EXPECT_EQ(AsDoubles(RunOne(one)), (std::vector<double>{4, -1}));
  OpTester nan = Tester("Max", 13);
  nan.Input(Make(DType::kFloat32, {3}, {kNaN, 1, 2})).Input(Make(DType::kFloat32, {3}, {0, kNaN, 1}));
  std::vector<double> r = AsDoubles(RunOne(nan));
  EXPECT_TRUE(std::isnan(r[0]));
  EXPECT_TRUE(std::isnan(r[1]));
  EXPECT_EQ(r[2], 2);
  OpTester bad = Tester("Max", 13);
  bad.Input(Make(DType::kFloat32, {2}, {1, 2})).Input(Make(DType::kFloat64, {2}, {1, 2}));
  ExpectRunError(bad, "input 1 has element type double, expected float like input 0");
}

TEST(MinMax, FourInputsRandom) {
  const std::vector<Dims> shapes = {{5, 1, 7}, {4, 1}, {1, 4, 7}, {7}};
  for (const char* op : {"Min", "Max"}) {
    OpTester t = Tester(op, 13);
    std::vector<std::vector<double>> vals;
    for (size_t i = 0; i < shapes.size(); ++i) {
      vals.push_back(AsDoubles(Make(DType::kFloat16, shapes[i], Random(NumElements(shapes[i]), 20 + i))));
      t.Input(Make(DType::kFloat16, shapes[i], vals.back()));
    }
    ir::Tensor out = RunOne(t);
    ASSERT_EQ(out.dims(), (Dims{5, 4, 7}));
    std::vector<double> want;
    for (int64_t i = 0; i < 140; ++i) {
      double w = vals[0][ops::BroadcastInputOffset(shapes[0], out.dims(), i)];
      for (size_t k = 1; k < shapes.size(); ++k) {
        const double v = vals[k][ops::BroadcastInputOffset(shapes[k], out.dims(), i)];
        w = std::string(op) == "Min" ? std::min(w, v) : std::max(w, v);
      }
      want.push_back(w);
    }
    EXPECT_EQ(AsDoubles(out), want) << op;
  }
}

TEST(Clip, InputsAndAttributes) {
  const std::vector<double> x = {-3, -1, 0, 1, 3, kNaN};
  for (DType dtype : FloatDTypes()) {
    // Opset 13: both bounds as inputs.
    OpTester t = Tester("Clip", 13);
    t.Input(Make(dtype, {6}, x)).Input(Make(dtype, {}, {-1.5})).Input(Make(dtype, {}, {2}));
    std::vector<double> r = AsDoubles(RunOne(t));
    EXPECT_EQ(std::vector<double>(r.begin(), r.end() - 1), (std::vector<double>{-1.5, -1, 0, 1, 2}));
    EXPECT_TRUE(std::isnan(r.back())) << DTypeName(dtype);
    // Only max (min omitted).
    OpTester m = Tester("Clip", 11);
    m.Input(Make(dtype, {6}, x)).OmittedInput().Input(Make(dtype, {}, {0}));
    r = AsDoubles(RunOne(m));
    EXPECT_EQ(std::vector<double>(r.begin(), r.end() - 1), (std::vector<double>{-3, -1, 0, 0, 0}));
  }
  // Opset 6: attributes; a missing one leaves that side open.
  OpTester a = Tester("Clip", 6);
  a.Attr(ir::Attribute::Float("min", -2)).Input(Make(DType::kFloat32, {3}, {-3, 0, 1e30}));
  EXPECT_EQ(AsDoubles(RunOne(a)), (std::vector<double>{-2, 0, static_cast<double>(1e30f)}));
  // Integers (opset 12+) and min > max (everything becomes max).
  OpTester i = Tester("Clip", 13);
  i.Input(Make(DType::kInt8, {4}, {-128, -5, 5, 127}))
      .Input(Make(DType::kInt8, {}, {-10}))
      .Input(Make(DType::kInt8, {}, {10}));
  EXPECT_EQ(AsDoubles(RunOne(i)), (std::vector<double>{-10, -5, 5, 10}));
  OpTester inv = Tester("Clip", 13);
  inv.Input(Make(DType::kFloat32, {3}, {-5, 0, 5}))
      .Input(Make(DType::kFloat32, {}, {2}))
      .Input(Make(DType::kFloat32, {}, {1}));
  EXPECT_EQ(AsDoubles(RunOne(inv)), (std::vector<double>{1, 1, 1}));
}

TEST(Clip, Errors) {
  OpTester shape = Tester("Clip", 13);
  shape.Input(Make(DType::kFloat32, {2}, {1, 2})).Input(Make(DType::kFloat32, {2}, {0, 0}));
  ExpectRunError(shape, "input 1 (min) must be a scalar, got shape [2]");
  OpTester type = Tester("Clip", 13);
  type.Input(Make(DType::kFloat32, {2}, {1, 2})).Input(Make(DType::kFloat64, {}, {0}));
  ExpectRunError(type, "input 1 (min) has element type double, expected float like input 0");
  OpTester attr = Tester("Clip", 6);
  attr.Attr(ir::Attribute::String("max", "1")).Input(Make(DType::kFloat32, {1}, {1}));
  ExpectCreateError(attr, "attribute 'max' must be a float, got string");
}

}  // namespace
}  // namespace onnxamp::testing::ew
