// Tests of the shape helpers: DimVector across its inline capacity, and MakeCopyPlan's merging.
#include "runtime/ops/common/shape_util.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace onnxamp::testing {
namespace {

std::vector<int64_t> ToVector(const ops::DimVector& v) { return {v.begin(), v.end()}; }

TEST(DimVectorTest, GrowsPastTheInlineValuesAndShrinksBack) {
  ops::DimVector v;
  std::vector<int64_t> want;
  for (int64_t i = 0; i < 20; ++i) {
    v.push_back(i * 3);
    want.push_back(i * 3);
    ASSERT_EQ(ToVector(v), want) << i;
  }
  const ops::DimVector copy = v;
  EXPECT_EQ(ToVector(copy), want);
  v.resize(5);
  want.resize(5);
  EXPECT_EQ(ToVector(v), want);
  v.resize(12, -1);
  want.resize(12, -1);
  EXPECT_EQ(ToVector(v), want);
  EXPECT_EQ(v.back(), -1);
  const std::span<const int64_t> s = v;
  EXPECT_EQ(std::vector<int64_t>(s.begin(), s.end()), want);
  EXPECT_EQ(ToVector(copy).size(), 20u);  // the copy is its own
}

TEST(DimVectorTest, ConstructsLikeAVector) {
  EXPECT_EQ(ToVector(ops::DimVector(3)), (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(ToVector(ops::DimVector(2, 7)), (std::vector<int64_t>{7, 7}));
  EXPECT_EQ(ToVector(ops::DimVector{4, 5}), (std::vector<int64_t>{4, 5}));
  const std::vector<int64_t> many(11, 2);
  EXPECT_EQ(ToVector(ops::DimVector(std::span<const int64_t>(many))), many);
  EXPECT_TRUE(ops::DimVector().empty());
}

TEST(CopyPlanTest, MergesContiguousDimsAndDropsOnes) {
  // A [2, 1, 3, 4] tensor copied whole: one row of 24.
  const std::vector<int64_t> dims = {2, 1, 3, 4};
  const std::vector<int64_t> strides = ops::ContiguousStrides(dims);
  const ops::CopyPlan plan = ops::MakeCopyPlan(dims, strides, strides);
  EXPECT_EQ(ToVector(plan.dims), (std::vector<int64_t>{24}));
  EXPECT_EQ(plan.rows, 1);
  EXPECT_EQ(plan.inner, 24);
  // Rows of 4 read with a gap (a slice of every other row): dims {6, 4}, source row stride 8.
  const ops::CopyPlan sliced =
      ops::MakeCopyPlan(std::vector<int64_t>{6, 4}, std::vector<int64_t>{4, 1}, std::vector<int64_t>{8, 1});
  EXPECT_EQ(ToVector(sliced.dims), (std::vector<int64_t>{6, 4}));
  EXPECT_EQ(ToVector(sliced.src_strides), (std::vector<int64_t>{8, 1}));
  EXPECT_EQ(sliced.rows, 6);
}

}  // namespace
}  // namespace onnxamp::testing
