// Tests of Gather and GatherElements: every data type, int32/int64 and negative indices, scalar indices, each
// axis, out-of-range errors naming the index, and GatherElements' shape rules.
#include <gtest/gtest.h>

#include "tests/runtime/ops/tensor_ops_util.h"

namespace onnxamp::testing {
namespace {

class GatherTest : public ::testing::TestWithParam<DType> {};

TEST_P(GatherTest, GathersRowsAndElements) {
  const DType dt = GetParam();
  {
    // data [3,2] codes 0..5; indices [2,2] along axis 0 -> [2,2,2].
    OpTester t = Op("Gather", 13);
    ir::Tensor idx(DType::kInt64, {2, 2});
    auto v = idx.mutable_values<int64_t>();
    v[0] = 2, v[1] = -3, v[2] = 1, v[3] = 2;
    t.Input(IotaTensor(dt, {3, 2})).Input(idx);
    auto out = t.Run();
    ASSERT_TRUE(out.ok()) << out.status().message();
    ExpectGathered((*out)[0], dt, {2, 2, 2}, {4, 5, 0, 1, 2, 3, 4, 5}, nullptr, "Gather");
  }
  {
    OpTester t = Op("GatherElements", 13);
    ir::Tensor idx(DType::kInt32, {2, 2});
    auto v = idx.mutable_values<int32_t>();
    v[0] = 2, v[1] = 0, v[2] = -1, v[3] = 1;
    t.Input(IotaTensor(dt, {2, 3})).Input(idx).Attr(ir::Attribute::Int("axis", 1));
    auto out = t.Run();
    ASSERT_TRUE(out.ok()) << out.status().message();
    ExpectGathered((*out)[0], dt, {2, 2}, {2, 0, 5, 4}, nullptr, "GatherElements");
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, GatherTest, ::testing::ValuesIn(MovableDTypes()), DTypeTestName);

TEST(GatherOpTest, InnerAxisAndScalarIndex) {
  OpTester t = Op("Gather", 13);
  t.Input(IotaTensor(DType::kFloat32, {2, 3, 2})).Input(Int32s({2, 0})).Attr(ir::Attribute::Int("axis", -2));
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  ExpectGathered((*out)[0], DType::kFloat32, {2, 2, 2}, {4, 5, 0, 1, 10, 11, 6, 7});

  OpTester scalar = Op("Gather", 11);
  scalar.Input(IotaTensor(DType::kInt64, {3, 2})).Input(Int64s({1}, /*scalar=*/true));
  out = scalar.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  ExpectGathered((*out)[0], DType::kInt64, {2}, {2, 3});
}

TEST(GatherOpTest, LargeGatherUsesThreadsAndMatches) {
  // An embedding-style lookup: [1000, 64] table, 300 indices.
  OpTester t = Op("Gather", 13);
  t.options.num_threads = 4;
  std::vector<int64_t> idx, src;
  for (int64_t j = 0; j < 300; ++j) idx.push_back((j * 37) % 1000 - (j % 3 == 0 ? 1000 : 0));
  ir::Tensor table(DType::kInt32, {1000, 64});
  for (int64_t i = 0; i < table.num_elements(); ++i) table.mutable_values<int32_t>()[i] = static_cast<int32_t>(i);
  t.Input(table).Input(Int64s(idx));
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  std::vector<int32_t> want;
  for (int64_t j : idx) {
    const int64_t row = j < 0 ? j + 1000 : j;
    for (int64_t c = 0; c < 64; ++c) want.push_back(static_cast<int32_t>(row * 64 + c));
  }
  auto got = (*out)[0].values<int32_t>();
  EXPECT_EQ(std::vector<int32_t>(got.begin(), got.end()), want);
}

TEST(GatherOpTest, OutOfRangeIndicesAreNamed) {
  OpTester t = Op("Gather", 13);
  t.Input(ir::Tensor(DType::kFloat32, {3, 2})).Input(Int64s({0, 3}));
  auto out = t.Run();
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kOutOfRange);
  EXPECT_NE(out.status().message().find("index 3 (element 1 of indices [2]) is out of range for axis 0 of size 3"),
            std::string::npos)
      << out.status().message();
  OpTester neg = Op("GatherElements", 13);
  neg.Input(ir::Tensor(DType::kFloat32, {3, 2})).Input(Int64s({-4}));
  ExpectRunError(neg, "has shape [1]; expected the rank of data [3,2]");
  OpTester neg2 = Op("GatherElements", 13);
  ir::Tensor idx(DType::kInt64, {1, 2});
  idx.mutable_values<int64_t>()[1] = -4;
  neg2.Input(ir::Tensor(DType::kFloat32, {3, 2})).Input(idx);
  ExpectRunError(neg2, "index -4 (element 1 of indices [1,2]) is out of range for axis 0 of size 3");
  OpTester type = Op("Gather", 13);
  type.Input(ir::Tensor(DType::kFloat32, {3})).Input(ir::Tensor(DType::kFloat32, {1}));
  ExpectRunError(type, "must be int32 or int64, got float");
}

TEST(GatherElementsOpTest, Axis0WithSmallerIndices) {
  OpTester t = Op("GatherElements", 11);
  ir::Tensor idx(DType::kInt64, {2, 2});
  auto v = idx.mutable_values<int64_t>();
  v[0] = 1, v[1] = 2, v[2] = 0, v[3] = -1;
  t.Input(IotaTensor(DType::kFloat32, {3, 3})).Input(idx);
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  // out[i][j] = data[idx[i][j]][j]
  ExpectGathered((*out)[0], DType::kFloat32, {2, 2}, {3, 7, 0, 7});
}

}  // namespace
}  // namespace onnxamp::testing
