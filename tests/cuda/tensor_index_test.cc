// CUDA Gather, GatherElements, Pad, ConstantOfShape, Constant and Range against the CPU reference, bit for bit:
// int32/int64 and negative indices, every pad mode with positive and negative pads, constant values and axes, fills
// of every element size (one above the grid-stride threshold), and errors as the CPU reports them. Out-of-range
// gather indices give zeros on CUDA (the CPU reports an error; see runtime/cuda/ops/tensor/index_kernels.cc).
#include <gtest/gtest.h>

#include "tests/cuda/tensor_test_util.h"

namespace onnxamp::testing::cuda_tensor {
namespace {

class CudaTensorIndex : public ::testing::TestWithParam<DType> {};

TEST_P(CudaTensorIndex, Gather) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dt = GetParam();
  ExpectExact(Node("Gather", 13).Input(Distinct(dt, {5, 3})).Input(I64({4, 0, -1, 2})), "Gather axis 0");
  ExpectExact(Node("Gather", 13)
                  .Attr(ir::Attribute::Int("axis", 1))
                  .Input(Distinct(dt, {2, 6, 3}))
                  .Input(I32({5, -6, 1, 1, 0, 3}, {2, 3})),
              "Gather axis 1, int32 [2,3] indices");
  ExpectExact(Node("Gather", 13).Attr(ir::Attribute::Int("axis", -1)).Input(Distinct(dt, {4, 7})).Input(I64({6}, true)),
              "Gather axis -1, scalar index");
  ExpectExact(Node("Gather", 13).Input(Distinct(dt, {1000, 64})).Input(I64({999, 0, 17, 500, -1, 3, 3})),
              "Gather embedding rows");
  ExpectExact(Node("Gather", 13).Input(Distinct(dt, {4, 3})).Input(I64({})), "Gather no indices");
  ExpectExact(Node("Gather", 13).Input(Distinct(dt, {4, 0})).Input(I64({1, 2})), "Gather empty rows");
  ExpectExact(Node("Gather", 13)
                  .Attr(ir::Attribute::Int("axis", 2))
                  .Input(Distinct(dt, {2, 1, 5, 3, 1, 2}))
                  .Input(I64({4, 0, 2})),
              "Gather rank 6");
}

TEST_P(CudaTensorIndex, GatherElements) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dt = GetParam();
  ir::Tensor idx(DType::kInt64, {2, 3});
  const std::vector<int64_t> v = {1, 0, 2, -1, 1, -3};
  for (size_t i = 0; i < v.size(); ++i) idx.mutable_values<int64_t>()[i] = v[i];
  ExpectExact(Node("GatherElements", 13).Input(Distinct(dt, {3, 3})).Input(idx), "GatherElements axis 0");
  ExpectExact(Node("GatherElements", 13).Attr(ir::Attribute::Int("axis", -1)).Input(Distinct(dt, {2, 4})).Input(idx),
              "GatherElements axis -1, smaller indices");
  ir::Tensor idx32(DType::kInt32, {2, 2, 3});
  const std::vector<int32_t> w = {0, 1, 2, 3, 4, 0, -1, -2, 1, 2, 3, 4};
  for (size_t i = 0; i < w.size(); ++i) idx32.mutable_values<int32_t>()[i] = w[i];
  ExpectExact(
      Node("GatherElements", 13).Attr(ir::Attribute::Int("axis", 1)).Input(Distinct(dt, {3, 5, 4})).Input(idx32),
      "GatherElements axis 1, int32, rank 3");
  ExpectExact(Node("GatherElements", 13).Input(Distinct(dt, {3, 3})).Input(ir::Tensor(DType::kInt64, {0, 3})),
              "GatherElements empty");
}

TEST(CudaTensorIndexErrors, GatherErrors) {
  ONNXAMP_REQUIRE_CUDA();
  const ir::Tensor data = op_test::TensorOf(DType::kFloat32, {3, 2}, {1, 2, 3, 4, 5, 6});
  OpTester cpu = Node("Gather", 13).Input(data).Input(I64({3}));
  StatusOr<std::vector<ir::Tensor>> want = cpu.Run();
  ASSERT_FALSE(want.ok());
  EXPECT_NE(want.status().message().find("index 3"), std::string::npos) << want.status().message();
  StatusOr<std::vector<ir::Tensor>> got = RunOnCuda(Node("Gather", 13).Input(data).Input(I64({2, 3, -4, 0})));
  ASSERT_TRUE(got.ok()) << got.status().message();
  ExpectClose((*got)[0], {5, 6, 0, 0, 0, 0, 1, 2}, "Gather out of range on cuda", Tolerance{0, 0});
  StatusOr<std::vector<ir::Tensor>> elems = RunOnCuda(Node("GatherElements", 13).Input(data).Input([] {
    ir::Tensor i(DType::kInt64, {1, 2});
    i.mutable_values<int64_t>()[0] = 7;
    i.mutable_values<int64_t>()[1] = -1;
    return i;
  }()));
  ASSERT_TRUE(elems.ok()) << elems.status().message();
  ExpectClose((*elems)[0], {0, 6}, "GatherElements out of range on cuda", Tolerance{0, 0});
  ExpectBothRunError(Node("Gather", 13).Input(data).Input(op_test::TensorOf(DType::kFloat32, {1}, {0})),
                     "must be int32 or int64");
  ExpectBothRunError(Node("GatherElements", 13).Input(data).Input(I64({0})), "expected the rank of data");
}

// Pad at opset 19: data dims, pads, optional constant value (empty: none), optional axes (empty: none).
struct PadCase {
  const char* mode;
  std::vector<int64_t> dims, pads;
  double value;
  std::vector<int64_t> axes;
};

TEST_P(CudaTensorIndex, Pad) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dt = GetParam();
  const std::vector<PadCase> cases = {
      {"constant", {3, 4}, {1, 2, 0, 3}, 0, {}},
      {"constant", {3, 4}, {1, 2, 0, 3}, 1, {}},
      {"constant", {3, 4}, {-1, 1, 2, -2}, 1, {}},  // crop and pad
      {"constant", {3, 4}, {-3, 0, 1, 0}, 1, {}},   // an axis cropped away entirely, then padded
      {"constant", {2, 3, 4}, {1, -1}, 1, {-1}},    // axes input, negative axis
      {"edge", {3, 4}, {2, 3, 1, 5}, 0, {}},
      {"edge", {2, 3, 4}, {-1, 2, 0, 2, 0, -1}, 0, {}},
      {"reflect", {3, 4}, {2, 3, 2, 3}, 0, {}},
      {"reflect", {5}, {4, 4}, 0, {}},
      {"reflect", {1, 3}, {2, 0, 2, 0}, 0, {}},  // reflect of a length-1 axis
      {"reflect", {2, 4}, {0, 9, 0, 9}, 0, {}},  // pads beyond the axis length
      {"wrap", {3, 4}, {2, 5, 1, 6}, 0, {}},
      {"wrap", {2, 3}, {-1, 4, 0, 2}, 0, {}},
      {"constant", {2, 1, 3, 1, 2, 2}, {0, 1, 0, 1, 0, 1, 1, 0, 1, 0, 1, 0}, 1, {}},  // rank 6
      {"constant", {0, 3}, {1, 0, 1, 0}, 1, {}},                                      // empty input, non-empty output
      {"constant", {}, {}, 0, {}},                                                    // scalar
  };
  for (const PadCase& c : cases) {
    OpTester t = Node("Pad", 19);
    t.Attr(ir::Attribute::String("mode", c.mode)).Input(Distinct(dt, c.dims)).Input(I64(c.pads));
    if (c.value != 0) {
      t.Input(op_test::TensorOf(dt, {}, {c.value}));
    } else if (!c.axes.empty()) {
      t.OmittedInput();
    }
    if (!c.axes.empty()) t.Input(I64(c.axes));
    ExpectExact(
        t, std::string("Pad ") + c.mode + " " + ops::ShapeToString(c.dims) + " pads " + ops::ShapeToString(c.pads));
  }
  ExpectExact(Node("Pad", 2)
                  .Attr(ir::Attribute::Ints("pads", {1, 0, 0, 2}))
                  .Attr(ir::Attribute::Float("value", 1.0f))
                  .Input(Distinct(dt, {2, 3})),
              "Pad-2 attributes");
  ExpectExact(Node("Pad", 11)
                  .Attr(ir::Attribute::String("mode", "reflect"))
                  .Input(Distinct(dt, {3, 3}))
                  .Input(I64({1, 1, 1, 1})),
              "Pad-11 reflect");
}

TEST(CudaTensorIndexErrors, PadErrors) {
  ONNXAMP_REQUIRE_CUDA();
  ExpectCudaCreateError(
      Node("Pad", 18).Attr(ir::Attribute::String("mode", "wrap")).Input(Distinct(DType::kFloat32, {3})),
      "(wrap from opset 19)");
  ExpectBothRunError(Node("Pad", 19)
                         .Attr(ir::Attribute::String("mode", "edge"))
                         .Input(Distinct(DType::kFloat32, {0, 2}))
                         .Input(I64({1, 0, 0, 0})),
                     "cannot pad axis 0 in edge mode");
  ExpectBothRunError(Node("Pad", 19).Input(Distinct(DType::kFloat32, {2, 2})).Input(I64({1, 1})),
                     "pads [1,1] has 2 entries; expected 4");
  ExpectBothRunError(Node("Pad", 19).Input(Distinct(DType::kFloat32, {2})).Input(I64({-2, -1})),
                     "give a negative output size");
}

TEST_P(CudaTensorIndex, ConstantOfShape) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dt = GetParam();
  const ir::Tensor value = op_test::TensorOf(dt, {1}, {1});
  for (const std::vector<int64_t>& shape :
       std::vector<std::vector<int64_t>>{{3, 5}, {0}, {}, {7}, {1, 2, 3, 1, 2, 3}, {33}}) {
    ExpectExact(Node("ConstantOfShape", 20).Attr(ir::Attribute::TensorValue("value", value)).Input(I64(shape)),
                "ConstantOfShape " + ops::ShapeToString(shape));
  }
}

TEST(CudaTensorIndexLarge, ConstantOfShapeAboveOneGrid) {
  ONNXAMP_REQUIRE_CUDA();
  // 17,000,003 one-byte elements: not a multiple of 16, so element-wise fills; the fp32 case fills in 16-byte units.
  ExpectExact(Node("ConstantOfShape", 20)
                  .Attr(ir::Attribute::TensorValue("value", op_test::TensorOf(DType::kInt8, {1}, {-7})))
                  .Input(I64({17000003})),
              "ConstantOfShape 17M int8");
  ExpectExact(Node("ConstantOfShape", 20)
                  .Attr(ir::Attribute::TensorValue("value", op_test::TensorOf(DType::kFloat32, {1}, {2.5})))
                  .Input(I64({4, 4250000})),
              "ConstantOfShape 17M float");
  ExpectExact(Node("ConstantOfShape", 20).Input(I64({3, 4})), "ConstantOfShape default value");
}

TEST(CudaTensorIndex, ConstantAndRange) {
  ONNXAMP_REQUIRE_CUDA();
  ExpectExact(Node("Constant", 13).Attr(ir::Attribute::TensorValue("value", Distinct(DType::kFloat16, {3, 4}))),
              "Constant fp16 tensor");
  ExpectExact(Node("Constant", 13).Attr(ir::Attribute::TensorValue("value", Distinct(DType::kBool, {5}))),
              "Constant bool tensor");
  ExpectExact(Node("Constant", 13).Attr(ir::Attribute::TensorValue("value", Distinct(DType::kInt8, {0, 2}))),
              "Constant empty");
  ExpectExact(Node("Constant", 13).Attr(ir::Attribute::Float("value_float", 1.5f)), "Constant value_float");
  ExpectExact(Node("Constant", 13).Attr(ir::Attribute::Ints("value_ints", {3, -1, 7})), "Constant value_ints");
  ExpectExact(Node("Constant", 13).Attr(ir::Attribute::Floats("value_floats", {0.25f, -2.0f})),
              "Constant value_floats");
  ExpectCudaCreateError(Node("Constant", 13), "Constant has no value attribute");

  const auto scalar = [](DType dt, double v) { return op_test::TensorOf(dt, {}, {v}); };
  for (DType dt : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16, DType::kInt64, DType::kInt32,
                   DType::kInt8}) {
    ExpectExact(Node("Range", 11).Input(scalar(dt, 1)).Input(scalar(dt, 20)).Input(scalar(dt, 3)),
                std::string("Range ") + std::string(DTypeName(dt)));
    ExpectExact(Node("Range", 11).Input(scalar(dt, 10)).Input(scalar(dt, -5)).Input(scalar(dt, -4)),
                std::string("Range negative delta ") + std::string(DTypeName(dt)));
    ExpectExact(Node("Range", 11).Input(scalar(dt, 5)).Input(scalar(dt, 5)).Input(scalar(dt, 1)),
                std::string("Range empty ") + std::string(DTypeName(dt)));
  }
  ExpectExact(Node("Range", 11)
                  .Input(scalar(DType::kFloat32, 0.1))
                  .Input(scalar(DType::kFloat32, 2.9))
                  .Input(scalar(DType::kFloat32, 0.3)),
              "Range fractional float");
  ExpectBothRunError(
      Node("Range", 11).Input(scalar(DType::kInt64, 0)).Input(scalar(DType::kInt64, 3)).Input(scalar(DType::kInt64, 0)),
      "delta is 0");
}

INSTANTIATE_TEST_SUITE_P(Types, CudaTensorIndex, ::testing::ValuesIn(MoveTypes()), TypeName);

}  // namespace
}  // namespace onnxamp::testing::cuda_tensor
