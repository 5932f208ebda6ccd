// Tests of Shape (with start/end from opset 15) and Size, on inputs of any type.
#include <gtest/gtest.h>

#include <optional>

#include "tests/runtime/ops/tensor_ops_util.h"

namespace onnxamp::testing {
namespace {

std::vector<int64_t> RunShape(std::optional<int64_t> start, std::optional<int64_t> end, int64_t opset = 15,
                              DType dtype = DType::kFloat32) {
  OpTester t = Op("Shape", opset);
  t.Input(ir::Tensor(dtype, {2, 3, 4, 5}));
  if (start) t.Attr(ir::Attribute::Int("start", *start));
  if (end) t.Attr(ir::Attribute::Int("end", *end));
  auto out = t.Run();
  EXPECT_TRUE(out.ok()) << out.status().message();
  if (!out.ok()) return {-1};
  EXPECT_EQ((*out)[0].dtype(), DType::kInt64);
  return Int64Values((*out)[0]);
}

TEST(ShapeTest, StartAndEndSliceTheDims) {
  EXPECT_EQ(RunShape({}, {}), (std::vector<int64_t>{2, 3, 4, 5}));
  EXPECT_EQ(RunShape(1, {}), (std::vector<int64_t>{3, 4, 5}));
  EXPECT_EQ(RunShape({}, -1), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(RunShape(-3, 3), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(RunShape(-10, 10), (std::vector<int64_t>{2, 3, 4, 5}));  // clamped
  EXPECT_EQ(RunShape(3, 1), (std::vector<int64_t>{}));
  // Before opset 15 the attributes do not exist: ignored.
  EXPECT_EQ(RunShape(1, 2, 13), (std::vector<int64_t>{2, 3, 4, 5}));
  EXPECT_EQ(RunShape({}, {}, 15, DType::kString), (std::vector<int64_t>{2, 3, 4, 5}));
  EXPECT_EQ(RunShape({}, {}, 21, DType::kUint4), (std::vector<int64_t>{2, 3, 4, 5}));
}

TEST(SizeTest, CountsElementsOfAnyType) {
  for (DType dt : {DType::kFloat32, DType::kString, DType::kBool, DType::kInt4}) {
    OpTester t = Op("Size", 21);
    t.Input(ir::Tensor(dt, {2, 3, 5}));
    auto out = t.Run();
    ASSERT_TRUE(out.ok()) << out.status().message();
    EXPECT_EQ((*out)[0].dims(), std::vector<int64_t>{});
    EXPECT_EQ(Int64Values((*out)[0]), std::vector<int64_t>{30}) << DTypeName(dt);
  }
  OpTester empty = Op("Size", 13);
  empty.Input(ir::Tensor(DType::kFloat32, {4, 0}));
  auto out = empty.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(Int64Values((*out)[0]), std::vector<int64_t>{0});
}

}  // namespace
}  // namespace onnxamp::testing
