// Tests of the view ops: Reshape (0 and -1 rules, allowzero, opset 1 attribute), Flatten, Squeeze, Unsqueeze
// (axes as attribute before opset 13, as input from 13), on every element type.
#include <gtest/gtest.h>

#include <numeric>

#include "tests/runtime/ops/tensor_ops_util.h"

namespace onnxamp::testing {
namespace {

std::vector<int64_t> Iota(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

class ViewOpsTest : public ::testing::TestWithParam<DType> {};

TEST_P(ViewOpsTest, ReshapeKeepsElementOrder) {
  const DType dt = GetParam();
  OpTester t = Op("Reshape", 14);
  t.Input(IotaTensor(dt, {2, 3, 4})).Input(Int64s({4, -1}));
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  ExpectGathered((*out)[0], dt, {4, 6}, Iota(24));
}

TEST_P(ViewOpsTest, FlattenSqueezeUnsqueeze) {
  const DType dt = GetParam();
  {
    OpTester t = Op("Flatten", 13);
    t.Input(IotaTensor(dt, {2, 3, 4})).Attr(ir::Attribute::Int("axis", -1));
    auto out = t.Run();
    ASSERT_TRUE(out.ok()) << out.status().message();
    ExpectGathered((*out)[0], dt, {6, 4}, Iota(24), nullptr, "Flatten");
  }
  {
    OpTester t = Op("Squeeze", 13);
    t.Input(IotaTensor(dt, {1, 3, 1, 2})).Input(Int64s({0, -2}));
    auto out = t.Run();
    ASSERT_TRUE(out.ok()) << out.status().message();
    ExpectGathered((*out)[0], dt, {3, 2}, Iota(6), nullptr, "Squeeze");
  }
  {
    OpTester t = Op("Unsqueeze", 13);
    t.Input(IotaTensor(dt, {3, 2})).Input(Int64s({-1, 0}));
    auto out = t.Run();
    ASSERT_TRUE(out.ok()) << out.status().message();
    ExpectGathered((*out)[0], dt, {1, 3, 2, 1}, Iota(6), nullptr, "Unsqueeze");
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, ViewOpsTest, ::testing::ValuesIn(MovableDTypes()), DTypeTestName);

// Runs Reshape of an input of `in` dims to `shape` and returns the output dims (or the error).
StatusOr<std::vector<int64_t>> ReshapeDims(std::vector<int64_t> in, std::vector<int64_t> shape, int64_t allowzero = 0,
                                           int64_t opset = 14) {
  OpTester t = Op("Reshape", opset);
  t.Input(ir::Tensor(DType::kFloat32, std::move(in))).Input(Int64s(shape));
  if (opset >= 14) t.Attr(ir::Attribute::Int("allowzero", allowzero));
  ONNXAMP_ASSIGN_OR_RETURN(auto out, t.Run());
  return out[0].dims();
}

TEST(ReshapeTest, ZeroCopiesAndMinusOneInfers) {
  EXPECT_EQ(*ReshapeDims({2, 3, 4}, {0, -1}), (std::vector<int64_t>{2, 12}));
  EXPECT_EQ(*ReshapeDims({2, 3, 4}, {0, 0, 2, 2}), (std::vector<int64_t>{2, 3, 2, 2}));
  EXPECT_EQ(*ReshapeDims({2, 3, 4}, {-1}), (std::vector<int64_t>{24}));
  EXPECT_FALSE(ReshapeDims({2, 3, 4}, {}).ok());  // 24 elements cannot become a scalar
  EXPECT_EQ(*ReshapeDims({1, 1}, {}), (std::vector<int64_t>{}));
  // allowzero=1: a 0 is a real zero-sized dim.
  EXPECT_EQ(*ReshapeDims({0, 3}, {3, 0}, 1), (std::vector<int64_t>{3, 0}));
  // Without allowzero the 0 copies the input's dim 1 (3), so [0,3] -> [3,3] fails.
  EXPECT_FALSE(ReshapeDims({0, 3}, {3, 0}, 0).ok());
  EXPECT_EQ(*ReshapeDims({0, 3}, {0, 3}, 0), (std::vector<int64_t>{0, 3}));
  // Opset 5-13 has no allowzero; a 0 copies.
  EXPECT_EQ(*ReshapeDims({2, 6}, {0, 2, 3}, 0, 13), (std::vector<int64_t>{2, 2, 3}));
}

TEST(ReshapeTest, ErrorsNameBothShapes) {
  auto bad = ReshapeDims({2, 3}, {4, 2});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("cannot reshape input [2,3] (6 elements) to [4,2] (8 elements)"),
            std::string::npos)
      << bad.status().message();
  EXPECT_NE(bad.status().message().find("node Reshape 'node'"), std::string::npos) << bad.status().message();
  auto two = ReshapeDims({2, 3}, {-1, -1});
  ASSERT_FALSE(two.ok());
  EXPECT_NE(two.status().message().find("more than one -1"), std::string::npos);
  auto neg = ReshapeDims({2, 3}, {-2, 3});
  ASSERT_FALSE(neg.ok());
  EXPECT_NE(neg.status().message().find("invalid dim -2"), std::string::npos);
  auto both = ReshapeDims({0, 3}, {0, -1}, 1);
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find("allowzero"), std::string::npos);
  auto infer = ReshapeDims({2, 3}, {4, -1});
  ASSERT_FALSE(infer.ok());
  EXPECT_NE(infer.status().message().find("-1 dim cannot be inferred"), std::string::npos);
  auto copy = ReshapeDims({6}, {2, 0});
  ASSERT_FALSE(copy.ok());
  EXPECT_NE(copy.status().message().find("copies dim 1"), std::string::npos) << copy.status().message();
}

TEST(ReshapeTest, Opset1ReadsTheShapeAttribute) {
  OpTester t = Op("Reshape", 4);
  t.Input(IotaTensor(DType::kFloat32, {2, 3})).Attr(ir::Attribute::Ints("shape", {3, -1}));
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  ExpectGathered((*out)[0], DType::kFloat32, {3, 2}, Iota(6));
  OpTester missing = Op("Reshape", 4);
  missing.Input(IotaTensor(DType::kFloat32, {2, 3}));
  auto session = exec::Session::Create(missing.BuildModel());
  ASSERT_FALSE(session.ok());
  EXPECT_NE(session.status().message().find("'shape'"), std::string::npos);
}

TEST(ReshapeTest, SubByteTypesAreReshapedWithoutMoving) {
  ir::Tensor x(DType::kInt4, {2, 3});
  for (size_t i = 0; i < x.nbytes(); ++i) x.mutable_data()[i] = std::byte(0x21 + i);
  OpTester t = Op("Reshape", 21);
  t.Input(x).Input(Int64s({3, 2}));
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ((*out)[0].dims(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(std::vector<std::byte>((*out)[0].bytes().begin(), (*out)[0].bytes().end()),
            std::vector<std::byte>(x.bytes().begin(), x.bytes().end()));
}

TEST(FlattenTest, AxisRangeIncludesRank) {
  for (auto [axis, want] : std::vector<std::pair<int64_t, std::vector<int64_t>>>{
           {0, {1, 24}}, {1, {2, 12}}, {2, {6, 4}}, {3, {24, 1}}, {-3, {1, 24}}, {-1, {6, 4}}}) {
    OpTester t = Op("Flatten", 13);
    t.Input(ir::Tensor(DType::kFloat32, {2, 3, 4})).Attr(ir::Attribute::Int("axis", axis));
    auto out = t.Run();
    ASSERT_TRUE(out.ok()) << out.status().message();
    EXPECT_EQ((*out)[0].dims(), want) << "axis " << axis;
  }
  OpTester bad = Op("Flatten", 13);
  bad.Input(ir::Tensor(DType::kFloat32, {2, 3})).Attr(ir::Attribute::Int("axis", 3));
  ExpectRunError(bad, "axis 3 is out of range for rank 2");
}

TEST(SqueezeTest, AttributeBefore13AndAllOnesByDefault) {
  OpTester t = Op("Squeeze", 11);
  t.Input(ir::Tensor(DType::kFloat32, {1, 3, 1, 2})).Attr(ir::Attribute::Ints("axes", {2}));
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ((*out)[0].dims(), (std::vector<int64_t>{1, 3, 2}));

  OpTester all = Op("Squeeze", 13);
  all.Input(ir::Tensor(DType::kFloat32, {1, 3, 1, 2}));
  out = all.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ((*out)[0].dims(), (std::vector<int64_t>{3, 2}));

  OpTester bad = Op("Squeeze", 13);
  bad.Input(ir::Tensor(DType::kFloat32, {1, 3})).Input(Int64s({1}));
  ExpectRunError(bad, "cannot squeeze axis 1 of input [1,3]: its size is 3");
  OpTester repeated = Op("Squeeze", 13);
  repeated.Input(ir::Tensor(DType::kFloat32, {1, 3})).Input(Int64s({0, -2}));
  ExpectRunError(repeated, "repeat axis 0");
}

TEST(UnsqueezeTest, AxesReferToTheOutputRank) {
  OpTester t = Op("Unsqueeze", 11);
  t.Input(ir::Tensor(DType::kFloat32, {3, 4})).Attr(ir::Attribute::Ints("axes", {0, 3}));
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ((*out)[0].dims(), (std::vector<int64_t>{1, 3, 4, 1}));

  OpTester unsorted = Op("Unsqueeze", 13);
  unsorted.Input(ir::Tensor(DType::kFloat32, {3, 4, 5})).Input(Int64s({5, 4, 2}));
  out = unsorted.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ((*out)[0].dims(), (std::vector<int64_t>{3, 4, 1, 5, 1, 1}));

  OpTester scalar = Op("Unsqueeze", 13);
  scalar.Input(ir::Tensor(DType::kFloat32, {})).Input(Int64s({0}, /*scalar=*/true));
  out = scalar.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ((*out)[0].dims(), (std::vector<int64_t>{1}));

  OpTester bad = Op("Unsqueeze", 13);
  bad.Input(ir::Tensor(DType::kFloat32, {3})).Input(Int64s({2}));
  ExpectRunError(bad, "axes 2 is out of range for rank 2");

  OpTester no_attr = Op("Unsqueeze", 11);
  no_attr.Input(ir::Tensor(DType::kFloat32, {3}));
  auto session = exec::Session::Create(no_attr.BuildModel());
  ASSERT_FALSE(session.ok());
  EXPECT_NE(session.status().message().find("'axes'"), std::string::npos);
}

}  // namespace
}  // namespace onnxamp::testing
