// Tests of Constant (every value attribute, sparse values, attribute errors) and ConstantOfShape (default and
// typed values, scalars, empty shapes), and of absurd sizes: a shape that cannot fit in memory must come back as
// ResourceExhausted naming the byte size (or OutOfRange when even the element count overflows), never a crash.
#include <gtest/gtest.h>

#include <limits>

#include "tests/runtime/ops/tensor_ops_util.h"

namespace onnxamp::testing {
namespace {

StatusOr<ir::Tensor> RunConstant(std::vector<ir::Attribute> attrs, int64_t opset = 13) {
  OpTester t = Op("Constant", opset);
  for (auto& a : attrs) t.Attr(std::move(a));
  ONNXAMP_ASSIGN_OR_RETURN(auto out, t.Run());
  return out[0];
}

TEST(ConstantTest, EveryValueAttribute) {
  ir::Tensor v = MakeTensor<double>({2}, {1.5, -2});
  auto t = RunConstant({ir::Attribute::TensorValue("value", v)});
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_TRUE(t->SameContents(v));

  t = RunConstant({ir::Attribute::Float("value_float", 2.5f)});
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->dims(), std::vector<int64_t>{});
  EXPECT_EQ(Values<float>(*t), std::vector<float>{2.5f});

  t = RunConstant({ir::Attribute::Floats("value_floats", {1, 2, 3})});
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(Values<float>(*t), (std::vector<float>{1, 2, 3}));

  t = RunConstant({ir::Attribute::Int("value_int", -7)});
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->dtype(), DType::kInt64);
  EXPECT_EQ(Int64Values(*t), std::vector<int64_t>{-7});

  t = RunConstant({ir::Attribute::Ints("value_ints", {4, 5})});
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(Int64Values(*t), (std::vector<int64_t>{4, 5}));

  t = RunConstant({ir::Attribute::String("value_string", "hi")});
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->strings(), std::vector<std::string>{"hi"});

  t = RunConstant({ir::Attribute::Strings("value_strings", {"a", "bc"})});
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->dims(), std::vector<int64_t>{2});
  EXPECT_EQ(t->strings(), (std::vector<std::string>{"a", "bc"}));
}

TEST(ConstantTest, SparseValueIsMadeDense) {
  for (bool linear : {false, true}) {
    ir::Attribute a("sparse_value", ir::AttrType::kSparseTensor);
    a.sparse_tensor.dims = {2, 3};
    a.sparse_tensor.values = MakeTensor<float>({2}, {5, 7});
    if (linear) {
      a.sparse_tensor.indices = Int64s({1, 5});
    } else {
      ir::Tensor idx(DType::kInt64, {2, 2});
      auto v = idx.mutable_values<int64_t>();
      v[0] = 0, v[1] = 1, v[2] = 1, v[3] = 2;
      a.sparse_tensor.indices = idx;
    }
    auto t = RunConstant({a});
    ASSERT_TRUE(t.ok()) << t.status().message();
    EXPECT_EQ(t->dims(), (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(Values<float>(*t), (std::vector<float>{0, 5, 0, 0, 0, 7})) << (linear ? "linear" : "coordinates");
  }
  ir::Attribute bad("sparse_value", ir::AttrType::kSparseTensor);
  bad.sparse_tensor.dims = {2, 3};
  bad.sparse_tensor.values = MakeTensor<float>({1}, {5});
  bad.sparse_tensor.indices = Int64s({6});
  auto t = RunConstant({bad});
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("position 6 of value 0 is out of range for [2,3]"), std::string::npos)
      << t.status().message();
}

TEST(ConstantTest, AttributeErrorsAreReportedAtSessionCreation) {
  auto none = RunConstant({});
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no value attribute"), std::string::npos);
  auto two = RunConstant({ir::Attribute::Int("value_int", 1), ir::Attribute::Float("value_float", 1)});
  ASSERT_FALSE(two.ok());
  EXPECT_NE(two.status().message().find("both attribute 'value_int' and 'value_float'"), std::string::npos)
      << two.status().message();
}

TEST(ConstantOfShapeTest, DefaultAndTypedValues) {
  OpTester def = Op("ConstantOfShape", 9);
  def.Input(Int64s({2, 3}));
  auto out = def.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ((*out)[0].dtype(), DType::kFloat32);
  EXPECT_EQ(Values<float>((*out)[0]), std::vector<float>(6, 0.0f));

  for (DType dt : {DType::kInt32, DType::kFloat16, DType::kBFloat16, DType::kBool, DType::kInt64}) {
    ir::Tensor v(dt, {1});
    EncodeElement(v, 0, 1);
    OpTester t = Op("ConstantOfShape", 20);
    t.Input(Int64s({3})).Attr(ir::Attribute::TensorValue("value", v));
    out = t.Run();
    ASSERT_TRUE(out.ok()) << out.status().message();
    ExpectGathered((*out)[0], dt, {3}, {1, 1, 1}, nullptr, std::string(DTypeName(dt)));
  }

  OpTester scalar = Op("ConstantOfShape", 9);
  scalar.Input(Int64s({}));
  out = scalar.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ((*out)[0].dims(), std::vector<int64_t>{});
  OpTester zero = Op("ConstantOfShape", 9);
  zero.Input(Int64s({0, 5}));
  out = zero.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ((*out)[0].num_elements(), 0);

  OpTester neg = Op("ConstantOfShape", 9);
  neg.Input(Int64s({2, -1}));
  ExpectRunError(neg, "has a negative dim");
  OpTester bad = Op("ConstantOfShape", 9);
  bad.Input(Int64s({2})).Attr(ir::Attribute::TensorValue("value", ir::Tensor(DType::kFloat32, {2})));
  auto session = exec::Session::Create(bad.BuildModel());
  ASSERT_FALSE(session.ok());
  EXPECT_NE(session.status().message().find("tensor of one element"), std::string::npos);
}

// --- Absurd sizes: the run fails with a status, the process survives.

void ExpectExhausted(const OpTester& t, const std::string& bytes) {
  auto out = t.Run();
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kResourceExhausted) << out.status().message();
  EXPECT_NE(out.status().message().find("needs " + bytes + " bytes"), std::string::npos) << out.status().message();
}

TEST(AbsurdSizeTest, ConstantOfShapeBeyondTheMachine) {
  // 2^40 floats = 4 TiB: more than any test machine has.
  OpTester t = Op("ConstantOfShape", 9);
  t.Input(Int64s({int64_t{1} << 40}));
  ExpectExhausted(t, "4398046511104");
  // [2^40, 2^40] elements overflow int64 entirely.
  OpTester huge = Op("ConstantOfShape", 9);
  huge.Input(Int64s({int64_t{1} << 40, int64_t{1} << 40}));
  auto out = huge.Run();
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kOutOfRange) << out.status().message();
  EXPECT_NE(out.status().message().find("overflows"), std::string::npos) << out.status().message();
}

TEST(AbsurdSizeTest, ExpandPadRangeResizeBeyondTheMachine) {
  OpTester expand = Op("Expand", 13);
  expand.Input(MakeTensor<float>({1}, {1})).Input(Int64s({int64_t{1} << 40}));
  ExpectExhausted(expand, "4398046511104");
  OpTester pad = Op("Pad", 13);
  pad.Input(MakeTensor<float>({1}, {1})).Input(Int64s({int64_t{1} << 40, 0}));
  ExpectExhausted(pad, "4398046511108");
  OpTester range = Op("Range", 11);
  range.Input(MakeTensor<double>({}, {0})).Input(MakeTensor<double>({}, {1e15})).Input(MakeTensor<double>({}, {1}));
  ExpectExhausted(range, "8000000000000000");
  OpTester resize = Op("Resize", 13);
  resize.Input(MakeTensor<float>({1, 2}, {1, 2})).OmittedInput().Input(MakeTensor<float>({2}, {1, 1099511627776.0f}));
  ExpectExhausted(resize, "8796093022208");  // 2^41 floats
  // Pads whose sum overflows int64 are refused before anything is sized.
  OpTester overflow = Op("Pad", 13);
  overflow.Input(MakeTensor<float>({1}, {1})).Input(Int64s({std::numeric_limits<int64_t>::max(), 5}));
  auto out = overflow.Run();
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kOutOfRange) << out.status().message();
}

TEST(AbsurdSizeTest, MemoryLimitOfTheSession) {
  // A 1 MiB limit: Expand, Tile and Range results of 4 MiB are refused with their byte size.
  exec::SessionOptions small;
  small.num_threads = 1;
  small.memory_limit_bytes = 1 << 20;
  OpTester expand = Op("Expand", 13);
  expand.options = small;
  expand.Input(MakeTensor<float>({1}, {1})).Input(Int64s({1024, 1024}));
  ExpectExhausted(expand, "4194304");
  OpTester tile = Op("Tile", 13);
  tile.options = small;
  tile.Input(MakeTensor<float>({2}, {1, 2})).Input(Int64s({1 << 19}));
  ExpectExhausted(tile, "4194304");
  OpTester range = Op("Range", 11);
  range.options = small;
  range.Input(MakeTensor<int32_t>({}, {0}))
      .Input(MakeTensor<int32_t>({}, {1 << 20}))
      .Input(MakeTensor<int32_t>({}, {1}));
  ExpectExhausted(range, "4194304");
  // Strings are not counted by the executor; their element count is checked against the machine.
  OpTester strings = Op("Expand", 13);
  strings.Input(ir::Tensor(DType::kString, {1})).Input(Int64s({int64_t{1} << 40}));
  auto out = strings.Run();
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kResourceExhausted) << out.status().message();
  EXPECT_NE(out.status().message().find("bytes"), std::string::npos) << out.status().message();
}

}  // namespace
}  // namespace onnxamp::testing
