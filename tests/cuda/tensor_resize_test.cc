// CUDA Resize and Upsample against the CPU reference: nearest with every nearest_mode and coordinate transform,
// linear and cubic with every coordinate transform (tf_crop_and_resize with roi and extrapolation,
// half_pixel_symmetric), cubic_coeff_a, exclude_outside, antialias, axes, keep_aspect_ratio_policy, sizes and
// scales, 1 to 3 resized axes, empty and identity resizes, opset 10 Resize and Upsample-7/9, nearest on integer
// and bool data, one output above the grid-stride threshold, and errors as the CPU reports them.
#include <gtest/gtest.h>

#include "tests/cuda/tensor_test_util.h"

namespace onnxamp::testing::cuda_tensor {
namespace {

const char* const kCoordModes[] = {"half_pixel",           "pytorch_half_pixel", "align_corners",       "asymmetric",
                                   "tf_half_pixel_for_nn", "tf_crop_and_resize", "half_pixel_symmetric"};

ir::Tensor Floats(std::vector<int64_t> dims, const std::vector<double>& v) {
  return op_test::TensorOf(DType::kFloat32, std::move(dims), v);
}

ir::Tensor RandomData(DType dt, std::vector<int64_t> dims, uint32_t seed) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return op_test::TensorOf(dt, std::move(dims), op_test::RandomValues(static_cast<size_t>(n), seed, -2, 2));
}

// A Resize-19 node over `x` with scales or sizes (exactly one non-empty) and string attributes.
OpTester ResizeNode(const ir::Tensor& x, const std::string& mode, const std::string& coord,
                    const std::vector<double>& scales, const std::vector<int64_t>& sizes, int64_t opset = 19) {
  OpTester t = Node("Resize", opset);
  t.Attr(ir::Attribute::String("mode", mode)).Attr(ir::Attribute::String("coordinate_transformation_mode", coord));
  t.Input(x);
  const size_t rank = x.dims().size();
  if (coord == "tf_crop_and_resize") {
    std::vector<double> roi;
    const size_t n = scales.empty() ? sizes.size() : scales.size();
    for (size_t i = 0; i < n; ++i) roi.push_back(i + 2 < rank ? 0.0 : 0.1 * static_cast<double>(i));
    for (size_t i = 0; i < n; ++i) roi.push_back(i + 2 < rank ? 1.0 : 1.2 - 0.15 * static_cast<double>(i));
    t.Input(Floats({static_cast<int64_t>(roi.size())}, roi));
    t.Attr(ir::Attribute::Float("extrapolation_value", 2.5f));
  } else {
    t.OmittedInput();
  }
  if (!scales.empty()) {
    t.Input(Floats({static_cast<int64_t>(scales.size())}, scales));
  } else {
    t.OmittedInput().Input(I64(sizes));
  }
  return t;
}

class CudaResize : public ::testing::TestWithParam<DType> {};

TEST_P(CudaResize, NearestEveryModeAndTransform) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dt = GetParam();
  const ir::Tensor x = RandomData(dt, {1, 2, 4, 5}, 1);
  for (const char* nearest : {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}) {
    for (const char* coord : kCoordModes) {
      OpTester up = ResizeNode(x, "nearest", coord, {1, 1, 1.7, 0.6}, {});
      up.Attr(ir::Attribute::String("nearest_mode", nearest));
      ExpectCudaMatchesCpu(up, std::string("nearest ") + nearest + " " + coord + " scales");
      OpTester sized = ResizeNode(x, "nearest", coord, {}, {1, 2, 7, 3});
      sized.Attr(ir::Attribute::String("nearest_mode", nearest));
      ExpectCudaMatchesCpu(sized, std::string("nearest ") + nearest + " " + coord + " sizes");
    }
  }
}

TEST_P(CudaResize, LinearAndCubicEveryTransform) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dt = GetParam();
  const ir::Tensor x = RandomData(dt, {1, 2, 5, 6}, 2);
  for (const char* mode : {"linear", "cubic"}) {
    for (const char* coord : kCoordModes) {
      const std::string what = std::string(mode) + " " + coord;
      ExpectCudaMatchesCpu(ResizeNode(x, mode, coord, {1, 1, 2.0, 1.5}, {}), what + " up");
      ExpectCudaMatchesCpu(ResizeNode(x, mode, coord, {1, 1, 0.6, 0.5}, {}), what + " down");
      ExpectCudaMatchesCpu(ResizeNode(x, mode, coord, {}, {1, 2, 9, 4}), what + " sizes");
      ExpectCudaMatchesCpu(ResizeNode(x, mode, coord, {}, {1, 2, 1, 1}), what + " to 1x1");
    }
  }
}

TEST_P(CudaResize, CubicOptionsAntialiasAxesAspect) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dt = GetParam();
  const ir::Tensor x = RandomData(dt, {2, 1, 7, 8}, 3);
  for (int64_t exclude : {0, 1}) {
    OpTester t = ResizeNode(x, "cubic", "half_pixel", {1, 1, 1.6, 0.7}, {});
    t.Attr(ir::Attribute::Float("cubic_coeff_a", -0.5f)).Attr(ir::Attribute::Int("exclude_outside", exclude));
    ExpectCudaMatchesCpu(t, "cubic a=-0.5 exclude_outside=" + std::to_string(exclude));
  }
  for (const char* mode : {"linear", "cubic"}) {
    OpTester t = ResizeNode(x, mode, "half_pixel", {1, 1, 0.4, 0.6}, {});
    t.Attr(ir::Attribute::Int("antialias", 1));
    ExpectCudaMatchesCpu(t, std::string(mode) + " antialias");
    OpTester up = ResizeNode(x, mode, "pytorch_half_pixel", {1, 1, 1.5, 0.3}, {});
    up.Attr(ir::Attribute::Int("antialias", 1));
    ExpectCudaMatchesCpu(up, std::string(mode) + " antialias mixed");
  }
  OpTester axes = ResizeNode(x, "linear", "asymmetric", {2.5}, {});
  axes.Attr(ir::Attribute::Ints("axes", {-1}));
  ExpectCudaMatchesCpu(axes, "axes [-1]");
  for (const char* policy : {"not_larger", "not_smaller"}) {
    OpTester t = ResizeNode(x, "linear", "half_pixel", {}, {10, 9});
    t.Attr(ir::Attribute::Ints("axes", {2, 3})).Attr(ir::Attribute::String("keep_aspect_ratio_policy", policy));
    ExpectCudaMatchesCpu(t, std::string("keep_aspect_ratio_policy ") + policy);
  }
}

TEST_P(CudaResize, AxesCountsEmptyIdentity) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dt = GetParam();
  ExpectCudaMatchesCpu(ResizeNode(RandomData(dt, {2, 3, 4, 5}, 4), "linear", "half_pixel", {1, 1.5, 0.7, 2.0}, {}),
                       "three resized axes");
  ExpectCudaMatchesCpu(ResizeNode(RandomData(dt, {1, 2, 3, 2, 3}, 5), "cubic", "align_corners", {1, 1, 2, 2, 2}, {}),
                       "rank 5, three cubic passes");
  ExpectCudaMatchesCpu(ResizeNode(RandomData(dt, {7}, 6), "linear", "asymmetric", {3.0}, {}), "rank 1");
  ExpectCudaMatchesCpu(ResizeNode(RandomData(dt, {2, 3, 4}, 7), "linear", "half_pixel", {1, 1, 1}, {}), "identity");
  ExpectCudaMatchesCpu(ResizeNode(RandomData(dt, {0, 2, 3, 3}, 8), "linear", "half_pixel", {1, 1, 2, 2}, {}),
                       "empty batch");
  ExpectCudaMatchesCpu(ResizeNode(RandomData(dt, {1, 1, 3, 3}, 9), "nearest", "asymmetric", {1, 1, 0.2, 0.2}, {}),
                       "downsampled to nothing");
}

TEST_P(CudaResize, OlderOpsetsAndUpsample) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dt = GetParam();
  const ir::Tensor x = RandomData(dt, {1, 1, 3, 4}, 10);
  for (const char* mode : {"nearest", "linear"}) {
    ExpectCudaMatchesCpu(
        Node("Resize", 10).Attr(ir::Attribute::String("mode", mode)).Input(x).Input(Floats({4}, {1, 1, 2.5, 0.5})),
        std::string("Resize-10 ") + mode);
    ExpectCudaMatchesCpu(
        Node("Upsample", 9).Attr(ir::Attribute::String("mode", mode)).Input(x).Input(Floats({4}, {1, 1, 2, 3})),
        std::string("Upsample-9 ") + mode);
    ExpectCudaMatchesCpu(Node("Upsample", 7)
                             .Attr(ir::Attribute::String("mode", mode))
                             .Attr(ir::Attribute::Floats("scales", {1, 1, 2, 1.5}))
                             .Input(x),
                         std::string("Upsample-7 ") + mode);
  }
  ExpectCudaMatchesCpu(ResizeNode(x, "cubic", "half_pixel", {1, 1, 2, 2}, {}, 11), "Resize-11 cubic");
}

INSTANTIATE_TEST_SUITE_P(Floats, CudaResize,
                         ::testing::Values(DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64),
                         TypeName);

class CudaResizeNearestTypes : public ::testing::TestWithParam<DType> {};

TEST_P(CudaResizeNearestTypes, NearestMovesAnyType) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dt = GetParam();
  const ir::Tensor x = Distinct(dt, {2, 3, 5});
  ExpectExact(ResizeNode(x, "nearest", "half_pixel", {1, 2.0, 0.7}, {}), "nearest half_pixel");
  ExpectExact(ResizeNode(x, "nearest", "tf_crop_and_resize", {1, 1.5, 1.3}, {}), "nearest tf_crop_and_resize");
  ExpectExact(ResizeNode(x, "nearest", "asymmetric", {}, {2, 3, 11}), "nearest sizes");
}

INSTANTIATE_TEST_SUITE_P(Types, CudaResizeNearestTypes, ::testing::ValuesIn(MoveTypes()), TypeName);

TEST(CudaResizeLarge, AboveOneGrid) {
  ONNXAMP_REQUIRE_CUDA();
  // 4200 x 4200 = 17.64M outputs: more than 65535 blocks of 256 threads.
  ExpectCudaMatchesCpu(
      ResizeNode(RandomData(DType::kFloat16, {1, 1, 2100, 2100}, 11), "linear", "half_pixel", {1, 1, 2, 2}, {}),
      "linear 2x to 4200x4200 fp16");
  ExpectExact(ResizeNode(Distinct(DType::kInt8, {1, 1, 2100, 2100}), "nearest", "asymmetric", {1, 1, 2, 2}, {}),
              "nearest 2x to 4200x4200 int8");
}

TEST(CudaResizeTables, FollowTheSizesFromRunToRun) {
  ONNXAMP_REQUIRE_CUDA();
  // One session, sizes fed per run: the tables kept from one run must not serve a run of other sizes.
  for (const char* mode : {"nearest", "linear"}) {
    const ir::Tensor x = RandomData(DType::kFloat32, {1, 2, 5, 6}, 13);
    OpTester t = ResizeNode(x, mode, "half_pixel", {}, {1, 2, 7, 9});
    exec::SessionOptions gpu = t.options, cpu = t.options;
    gpu.device = exec::Device::kCuda;
    auto on_gpu = exec::Session::Create(t.BuildModel(), gpu);
    auto on_cpu = exec::Session::Create(t.BuildModel(), cpu);
    ASSERT_TRUE(on_gpu.ok()) << on_gpu.status().ToString();
    ASSERT_TRUE(on_cpu.ok()) << on_cpu.status().ToString();
    for (const std::vector<int64_t>& sizes :
         {std::vector<int64_t>{1, 2, 7, 9}, {1, 2, 7, 9}, {1, 2, 3, 11}, {1, 2, 7, 9}, {1, 2, 8, 9}}) {
      ir::Tensor in0 = x, in3 = I64(sizes);
      in0.set_name("in0");
      in3.set_name("in3");
      auto got = (*on_gpu)->Run({in0, in3});
      auto want = (*on_cpu)->Run({in0, in3});
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      ASSERT_TRUE(want.ok()) << want.status().ToString();
      ASSERT_EQ((*got)[0].dims(), (*want)[0].dims()) << mode;
      ExpectClose((*got)[0], AsDoubles((*want)[0]), mode, CudaToleranceFor(DType::kFloat32));
    }
  }
}

TEST(CudaResizeErrors, ErrorsAsOnCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const ir::Tensor x = RandomData(DType::kFloat32, {1, 1, 3, 4}, 12);
  OpTester both = Node("Resize", 19);
  both.Input(x).OmittedInput().Input(Floats({4}, {1, 1, 2, 2})).Input(I64({1, 1, 6, 8}));
  ExpectBothRunError(both, "both scales and sizes are given");
  ExpectBothRunError(ResizeNode(x, "linear", "half_pixel", {1, 1, 2}, {}), "scales has 3 entries; expected 4");
  ExpectBothRunError(ResizeNode(x, "linear", "half_pixel", {1, 1, -2, 1}, {}), "must be positive and finite");
  ExpectBothRunError(ResizeNode(Distinct(DType::kInt64, {1, 1, 3, 4}), "linear", "half_pixel", {1, 1, 2, 2}, {}),
                     "element type int64 is not supported");
  ExpectBothRunError(ResizeNode(Distinct(DType::kFloat32, {1, 0, 3}), "nearest", "half_pixel", {}, {1, 2, 3}),
                     "an empty axis cannot be resized to a non-empty one");
  ExpectCudaCreateError(ResizeNode(x, "bicubic", "half_pixel", {1, 1, 2, 2}, {}), "attribute 'mode' is 'bicubic'");
  ExpectCudaCreateError(ResizeNode(x, "linear", "half_pixel_symmetric", {1, 1, 2, 2}, {}, 18),
                        "'half_pixel_symmetric' needs opset 19");
}

}  // namespace
}  // namespace onnxamp::testing::cuda_tensor
