// Tests of Expand and Tile: every element type, broadcasting both ways (Expand's shape may be smaller than the
// input), zero repeats, Tile-1's tiles/axis inputs, and size errors.
#include <gtest/gtest.h>

#include "tests/runtime/ops/tensor_ops_util.h"

namespace onnxamp::testing {
namespace {

class ExpandTileTest : public ::testing::TestWithParam<DType> {};

TEST_P(ExpandTileTest, ExpandBroadcasts) {
  const DType dt = GetParam();
  OpTester t = Op("Expand", 13);
  // [3,1] -> shape [2,1,2]: out [2,3,2], out[i][j][k] = in[j].
  t.Input(IotaTensor(dt, {3, 1})).Input(Int64s({2, 1, 2}));
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  ExpectGathered((*out)[0], dt, {2, 3, 2}, {0, 0, 1, 1, 2, 2, 0, 0, 1, 1, 2, 2});
}

TEST_P(ExpandTileTest, TileRepeats) {
  const DType dt = GetParam();
  OpTester t = Op("Tile", 13);
  t.Input(IotaTensor(dt, {2, 2})).Input(Int64s({2, 3}));
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  std::vector<int64_t> src;
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 6; ++j) src.push_back((i % 2) * 2 + j % 2);
  ExpectGathered((*out)[0], dt, {4, 6}, src);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, ExpandTileTest, ::testing::ValuesIn(MovableDTypes()), DTypeTestName);

TEST(ExpandOpTest, ShapeMayBeSmallerOrContainOnes) {
  OpTester t = Op("Expand", 8);
  t.Input(IotaTensor(DType::kFloat32, {2, 1, 3})).Input(Int64s({4, 1}));
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  std::vector<int64_t> src;
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t b = 0; b < 4; ++b)
      for (int64_t c = 0; c < 3; ++c) src.push_back(a * 3 + c);
  ExpectGathered((*out)[0], DType::kFloat32, {2, 4, 3}, src);

  OpTester bad = Op("Expand", 13);
  bad.Input(ir::Tensor(DType::kFloat32, {2, 3})).Input(Int64s({4}));
  ExpectRunError(bad, "cannot expand input [2,3] to [4]");
  OpTester neg = Op("Expand", 13);
  neg.Input(ir::Tensor(DType::kFloat32, {2, 3})).Input(Int64s({-1, 3}));
  ExpectRunError(neg, "has a negative dim");
}

TEST(TileOpTest, ZeroRepeatsOpset1AndErrors) {
  OpTester zero = Op("Tile", 13);
  zero.Input(IotaTensor(DType::kFloat32, {2, 2})).Input(Int64s({0, 2}));
  auto out = zero.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ((*out)[0].dims(), (std::vector<int64_t>{0, 4}));

  OpTester old = Op("Tile", 1);
  old.Input(IotaTensor(DType::kFloat32, {2, 2})).Input(Int64s({3}, true)).Input(Int64s({1}, true));
  out = old.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  ExpectGathered((*out)[0], DType::kFloat32, {2, 6}, {0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3});

  OpTester rank = Op("Tile", 13);
  rank.Input(ir::Tensor(DType::kFloat32, {2, 2})).Input(Int64s({2}));
  ExpectRunError(rank, "repeats [2] has 1 entries but the input [2,2] has rank 2");
  OpTester neg = Op("Tile", 13);
  neg.Input(ir::Tensor(DType::kFloat32, {2, 2})).Input(Int64s({2, -1}));
  ExpectRunError(neg, "negative count");
}

}  // namespace
}  // namespace onnxamp::testing
