// Tests of Split: sizes from the attribute (before 13) and the input (13+), even splits, num_outputs with an
// uneven last part (18+), zero-sized parts, every element type, and size errors.
#include <gtest/gtest.h>

#include "tests/runtime/ops/tensor_ops_util.h"

namespace onnxamp::testing {
namespace {

class SplitTest : public ::testing::TestWithParam<DType> {};

TEST_P(SplitTest, SplitsAlongAxis1) {
  const DType dt = GetParam();
  OpTester t = Op("Split", 13, 3);
  t.Input(IotaTensor(dt, {2, 5})).Input(Int64s({1, 0, 4})).Attr(ir::Attribute::Int("axis", -1));
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  ExpectGathered((*out)[0], dt, {2, 1}, {0, 5}, nullptr, "part 0");
  ExpectGathered((*out)[1], dt, {2, 0}, {}, nullptr, "part 1");
  ExpectGathered((*out)[2], dt, {2, 4}, {1, 2, 3, 4, 6, 7, 8, 9}, nullptr, "part 2");
}

INSTANTIATE_TEST_SUITE_P(AllTypes, SplitTest, ::testing::ValuesIn(MovableDTypes()), DTypeTestName);

std::vector<std::vector<int64_t>> OutputDims(const StatusOr<std::vector<ir::Tensor>>& out) {
  std::vector<std::vector<int64_t>> dims;
  for (const ir::Tensor& t : *out) dims.push_back(t.dims());
  return dims;
}

TEST(SplitOpTest, EvenSplitAttributeAndNumOutputs) {
  OpTester even = Op("Split", 13, 3);
  even.Input(IotaTensor(DType::kFloat32, {6, 2}));
  auto out = even.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(OutputDims(out), (std::vector<std::vector<int64_t>>{{2, 2}, {2, 2}, {2, 2}}));
  ExpectGathered((*out)[2], DType::kFloat32, {2, 2}, {8, 9, 10, 11});

  OpTester attr = Op("Split", 11, 2);
  attr.Input(IotaTensor(DType::kFloat32, {6})).Attr(ir::Attribute::Ints("split", {2, 4}));
  out = attr.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  ExpectGathered((*out)[1], DType::kFloat32, {4}, {2, 3, 4, 5});

  OpTester uneven = Op("Split", 18, 3);
  uneven.Input(IotaTensor(DType::kFloat32, {7})).Attr(ir::Attribute::Int("num_outputs", 3));
  out = uneven.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(OutputDims(out), (std::vector<std::vector<int64_t>>{{3}, {3}, {1}}));
  ExpectGathered((*out)[2], DType::kFloat32, {1}, {6});
}

TEST(SplitOpTest, OmittedOutputsAreSkipped) {
  OpTester t = Op("Split", 13, 2);
  t.omit_outputs = {true, false};
  t.Input(IotaTensor(DType::kInt64, {4}));
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  ASSERT_EQ(out->size(), 1u);
  ExpectGathered((*out)[0], DType::kInt64, {2}, {2, 3});
}

TEST(SplitOpTest, BadSizesAreErrors) {
  OpTester sum = Op("Split", 13, 2);
  sum.Input(ir::Tensor(DType::kFloat32, {5})).Input(Int64s({2, 2}));
  ExpectRunError(sum, "split [2,2] sums to 4 but axis 0 of input [5] has size 5");
  OpTester count = Op("Split", 13, 2);
  count.Input(ir::Tensor(DType::kFloat32, {5})).Input(Int64s({5}));
  ExpectRunError(count, "has 1 entries but the node has 2 outputs");
  OpTester odd = Op("Split", 13, 2);
  odd.Input(ir::Tensor(DType::kFloat32, {5}));
  ExpectRunError(odd, "cannot split axis 0 of size 5 (input [5]) evenly into 2 outputs");
  OpTester neg = Op("Split", 13, 2);
  neg.Input(ir::Tensor(DType::kFloat32, {5})).Input(Int64s({6, -1}));
  ExpectRunError(neg, "negative size");
  OpTester num = Op("Split", 18, 2);
  num.Input(ir::Tensor(DType::kFloat32, {5})).Attr(ir::Attribute::Int("num_outputs", 3));
  auto session = exec::Session::Create(num.BuildModel());
  ASSERT_FALSE(session.ok());
  EXPECT_NE(session.status().message().find("'num_outputs' is 3 but the node has 2 outputs"), std::string::npos);
}

}  // namespace
}  // namespace onnxamp::testing
