// Kernel tests of the com.onnxamp scatter ops behind the data-movement gradients: GatherElementsGrad (repeated
// positions summed, negative indices, hand-computed), SliceGrad (negative steps and clamped bounds, checked against
// the forward Slice's own view), PadGrad (edge, reflect and wrap contributions summed by hand), and their errors:
// bad indices in GatherElementsGrad and GatherGrad, shapes that do not match the forward's.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/ops/gradient_ops.h"
#include "tests/runtime/ops/reduce_test_util.h"

namespace onnxamp::testing {
namespace {

using ir::Attribute;

ir::Tensor Ints1(const std::vector<int64_t>& values) {
  return Int64Tensor({static_cast<int64_t>(values.size())}, values);
}

OpTester GatherElementsGradOp(int64_t axis, const ir::Tensor& dy, const ir::Tensor& indices,
                              const std::vector<int64_t>& data_dims) {
  OpTester t = InternalOp(ops::kGatherElementsGradOp);
  t.Attr(Attribute::Int("axis", axis)).Input(dy).Input(indices).Input(Ints1(data_dims));
  return t;
}

TEST(GatherElementsGradKernelTest, RepeatedPositionsSum) {
  // data [3, 2]; indices [3, 2] along axis 0: column 0 picks rows 2, 2, -3 (= 0); column 1 picks 1, 1, 1.
  for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16}) {
    auto out = RunOk(GatherElementsGradOp(0, TensorOf(dtype, {3, 2}, {1, 2, 3, 4, 5, 6}),
                                          Int64Tensor({3, 2}, {2, 1, 2, 1, -3, 1}), {3, 2}));
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].dtype(), dtype);
    ASSERT_EQ(out[0].dims(), (std::vector<int64_t>{3, 2}));
    EXPECT_EQ(AsDoubles(out[0]), (std::vector<double>{5, 0, 0, 2 + 4 + 6, 1 + 3, 0})) << DTypeName(dtype);
  }
  // Along axis 1 with int32 indices smaller than data off the axis: data [2, 4], indices [1, 3].
  ir::Tensor idx(DType::kInt32, {1, 3});
  idx.mutable_values<int32_t>()[0] = 3;
  idx.mutable_values<int32_t>()[1] = -1;
  idx.mutable_values<int32_t>()[2] = 0;
  auto out = RunOk(GatherElementsGradOp(1, TensorOf(DType::kFloat32, {1, 3}, {0.5, 0.25, 2}), idx, {2, 4}));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(AsDoubles(out[0]), (std::vector<double>{2, 0, 0, 0.75, 0, 0, 0, 0}));
}

TEST(GatherElementsGradKernelTest, Errors) {
  const ir::Tensor dy = TensorOf(DType::kFloat32, {2, 2}, {1, 2, 3, 4});
  ExpectRunError(GatherElementsGradOp(0, dy, Int64Tensor({2, 2}, {0, 3, 1, 0}), {3, 2}), "index 3 (element 1 of input");
  ExpectRunError(GatherElementsGradOp(0, dy, Int64Tensor({2, 2}, {0, 1, -4, 0}), {3, 2}),
                 "index -4 (element 2 of input");
  ExpectRunError(GatherElementsGradOp(1, dy, Int64Tensor({2, 2}, {0, 1, 1, 0}), {1, 2}), "no larger off axis");
  ExpectRunError(
      GatherElementsGradOp(0, TensorOf(DType::kFloat32, {2, 1}, {1, 2}), Int64Tensor({2, 2}, {0, 1, 1, 0}), {3, 2}),
      "(dY) has shape [2,1]; expected the indices' shape [2,2]");
  ExpectRunError(GatherElementsGradOp(0, dy, TensorOf(DType::kFloat32, {2, 2}, {0, 1, 1, 0}), {3, 2}),
                 "must be int32 or int64");
}

// GatherGrad reads indices through the same function as Gather: the same out-of-range message, negative too.
TEST(GatherGradKernelTest, BadIndices) {
  OpTester t = InternalOp(ops::kGatherGradOp);
  t.Attr(Attribute::Int("axis", 1));
  t.Input(TensorOf(DType::kFloat64, {2, 2}, {1, 2, 3, 4})).Input(Int64Tensor({2}, {1, -4})).Input(Ints1({2, 3}));
  ExpectRunError(t, "index -4 (element 1 of input");
  ExpectRunError(t, "is out of range for axis 1 of size 3 (data [2,3])");
}

OpTester SliceGradOp(const ir::Tensor& dy, const std::vector<int64_t>& x_dims, const std::vector<int64_t>& starts,
                     const std::vector<int64_t>& ends, const std::vector<int64_t>& axes,
                     const std::vector<int64_t>& steps) {
  OpTester t = InternalOp(ops::kSliceGradOp);
  t.Input(dy).Input(Ints1(x_dims)).Input(Ints1(starts)).Input(Ints1(ends)).Input(Ints1(axes)).Input(Ints1(steps));
  return t;
}

TEST(SliceGradKernelTest, ScattersIntoTheForwardView) {
  // x [3, 4]; rows 2, 0 (step -2 from the end) and columns 1..3 (end clamped from 100).
  auto out = RunOk(SliceGradOp(TensorOf(DType::kFloat32, {2, 3}, {1, 2, 3, 4, 5, 6}), {3, 4}, {-1, 1}, {-100, 100},
                               {0, 1}, {-2, 1}));
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].dims(), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(AsDoubles(out[0]), (std::vector<double>{0, 4, 5, 6, 0, 0, 0, 0, 0, 1, 2, 3}));
  ExpectRunError(
      SliceGradOp(TensorOf(DType::kFloat32, {2, 2}, {1, 2, 3, 4}), {3, 4}, {-1, 1}, {-100, 100}, {0, 1}, {-2, 1}),
      "(dY) has shape [2,2]; expected [2,3]");
  ExpectRunError(
      SliceGradOp(TensorOf(DType::kFloat32, {2, 3}, {1, 2, 3, 4, 5, 6}), {3, 4}, {0, 1}, {3, 4}, {0, 1}, {1, 0}),
      "zero step");
}

OpTester PadGradOp(const std::string& mode, const ir::Tensor& dy, const std::vector<int64_t>& x_dims,
                   const std::vector<int64_t>& pads) {
  OpTester t = InternalOp(ops::kPadGradOp);
  t.Attr(Attribute::String("mode", mode)).Input(dy).Input(Ints1(x_dims)).Input(Ints1(pads));
  return t;
}

TEST(PadGradKernelTest, SumsEveryCopy) {
  // x [3] padded by 2 before and 3 after; dY = 1, 2, ..., 8.
  const ir::Tensor dy = TensorOf(DType::kFloat64, {8}, {1, 2, 3, 4, 5, 6, 7, 8});
  struct Case {
    std::string mode;
    std::vector<double> want;
  };
  // edge:    out = x0 x0 | x0 x1 x2 | x2 x2 x2
  // reflect: out = x2 x1 | x0 x1 x2 | x1 x0 x1
  // wrap:    out = x1 x2 | x0 x1 x2 | x0 x1 x2
  const std::vector<Case> cases = {
      {"edge", {1 + 2 + 3, 4, 5 + 6 + 7 + 8}},
      {"reflect", {3 + 7, 2 + 4 + 6 + 8, 1 + 5}},
      {"wrap", {3 + 6, 1 + 4 + 7, 2 + 5 + 8}},
      {"constant", {3, 4, 5}},
  };
  for (const Case& c : cases) {
    auto out = RunOk(PadGradOp(c.mode, dy, {3}, {2, 3}));
    ASSERT_EQ(out.size(), 1u) << c.mode;
    EXPECT_EQ(AsDoubles(out[0]), c.want) << c.mode;
  }
  // Crop then reflect on axis 1 of [1, 4] with axes [-1]: pads -1 and 2: out = x1 x2 x3 x2 x1.
  OpTester t = PadGradOp("reflect", TensorOf(DType::kFloat32, {1, 5}, {1, 2, 3, 4, 5}), {1, 4}, {-1, 2});
  t.Input(Ints1({-1}));
  auto out = RunOk(t);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(AsDoubles(out[0]), (std::vector<double>{0, 1 + 5, 2 + 4, 3}));
}

TEST(PadGradKernelTest, Errors) {
  const ir::Tensor dy = TensorOf(DType::kFloat32, {5}, {1, 2, 3, 4, 5});
  ExpectRunError(PadGradOp("edge", dy, {3}, {1, 2}), "(dY) has shape [5]; expected [6]");
  ExpectRunError(PadGradOp("edge", dy, {3}, {1}), "expected 2");
  ExpectRunError(PadGradOp("reflect", TensorOf(DType::kFloat32, {2}, {1, 2}), {2}, {-2, 2}), "empty after cropping");
  ExpectCreateError(PadGradOp("mirror", dy, {3}, {1, 1}), "attribute 'mode' is 'mirror'");
}

}  // namespace
}  // namespace onnxamp::testing
