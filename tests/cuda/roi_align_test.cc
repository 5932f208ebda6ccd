// CUDA RoiAlign and its com.onnxamp gradient RoiAlignGrad against the CPU kernels, bit for bit: both take every sample
// from runtime/ops/detection/roi_sample.h and sum in the same order, and the CUDA file is built without FMA
// contraction. Modes avg and max, opset 10's and 16's coordinate modes, fixed and adaptive sampling ratios, spatial
// scales, rois partly or wholly outside the image and reversed ones, several images, no rois, every float type, and
// the CPU's errors (rois and batch indices are host inputs, checked as on the CPU). Skipped without a CUDA device.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/ops/gradient_ops.h"
#include "tests/cuda/cuda_op_test_util.h"
#include "tests/cuda/elementwise_test_util.h"

namespace onnxamp::testing {
namespace {

using cuda_ew::ExpectSameRunError;
using ir::Attribute;
using op_test::Op;
using op_test::RandomValues;
using op_test::TensorOf;

struct Case {
  bool grad = false;
  const char* mode = "avg";
  int64_t opset = 16;
  const char* transform = "half_pixel";  // opset 16+
  int64_t sampling_ratio = 2;
  float scale = 1.0f;
  int64_t out_h = 3, out_w = 2;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> x_dims = {2, 3, 9, 11};
  int64_t rois = 5;
};

std::string Describe(const Case& c) {
  return std::string(c.grad ? "RoiAlignGrad " : "RoiAlign ") + c.mode + " opset " + std::to_string(c.opset) + " " +
         c.transform + " ratio " + std::to_string(c.sampling_ratio) + " scale " + std::to_string(c.scale) + " out " +
         std::to_string(c.out_h) + "x" + std::to_string(c.out_w) + " " + std::string(DTypeName(c.dtype)) + " rois " +
         std::to_string(c.rois);
}

OpTester Node(const Case& c, uint32_t seed) {
  OpTester t = c.grad ? InternalOp(ops::kRoiAlignGradOp) : Op("RoiAlign", c.opset);
  t.Attr(Attribute::String("mode", c.mode));
  if (c.grad || c.opset >= 16) t.Attr(Attribute::String("coordinate_transformation_mode", c.transform));
  t.Attr(Attribute::Int("output_height", c.out_h)).Attr(Attribute::Int("output_width", c.out_w));
  t.Attr(Attribute::Int("sampling_ratio", c.sampling_ratio)).Attr(Attribute::Float("spatial_scale", c.scale));
  const int64_t n = c.x_dims[0], ch = c.x_dims[1], h = c.x_dims[2], w = c.x_dims[3];
  // Boxes in image units / scale: inside, across the border, outside, reversed and tiny ones.
  std::vector<double> boxes = RandomValues(static_cast<size_t>(4 * c.rois), seed, -3, 14);
  const double fixed[][4] = {{1, 1, 6, 5}, {-4, -2, 3, 20}, {12, 10, 30, 40}, {7, 6, 2, 1}, {3.2, 3.3, 3.4, 3.5}};
  for (int64_t r = 0; r < c.rois && r < 5; ++r) {
    for (int k = 0; k < 4; ++k) boxes[static_cast<size_t>(4 * r + k)] = fixed[r][k] / c.scale;
  }
  std::vector<int64_t> bidx(static_cast<size_t>(c.rois));
  for (size_t r = 0; r < bidx.size(); ++r) bidx[r] = static_cast<int64_t>((r * 7 + 1) % static_cast<size_t>(n));
  if (c.grad) {
    const std::vector<int64_t> dy_dims = {c.rois, ch, c.out_h, c.out_w};
    t.Input(TensorOf(c.dtype, dy_dims, RandomValues(static_cast<size_t>(Count(dy_dims)), seed + 1, -1, 1)));
    t.Input(MakeTensor<int64_t>({4}, {n, ch, h, w}));
  } else {
    t.Input(TensorOf(c.dtype, c.x_dims, RandomValues(static_cast<size_t>(Count(c.x_dims)), seed + 2, -2, 2)));
  }
  t.Input(TensorOf(c.dtype, {c.rois, 4}, boxes));
  t.Input(MakeTensor<int64_t>({c.rois}, bidx));
  return t;
}

class CudaRoiAlignTest : public ::testing::TestWithParam<bool> {};

TEST_P(CudaRoiAlignTest, EveryVariantIsTheCpusBits) {
  ONNXAMP_REQUIRE_CUDA();
  uint32_t seed = 1;
  for (const char* mode : {"avg", "max"}) {
    if (GetParam() && std::string(mode) == "max") continue;  // the gradient covers avg only
    for (int variant = 0; variant < 4; ++variant) {
      for (int64_t ratio : {0, 2}) {
        for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64}) {
          Case c;
          c.grad = GetParam();
          c.mode = mode;
          c.opset = variant == 0 && !c.grad ? 10 : 16;
          c.transform = variant == 1 ? "output_half_pixel" : "half_pixel";
          c.scale = variant == 2 ? 0.25f : variant == 3 ? 1.5f : 1.0f;
          c.sampling_ratio = ratio;
          c.dtype = t;
          ExpectCudaMatchesCpu(Node(c, seed += 3), Describe(c), Tolerance{0, 0});
        }
      }
    }
  }
}

TEST_P(CudaRoiAlignTest, EdgeSizesAreTheCpusBits) {
  ONNXAMP_REQUIRE_CUDA();
  struct Shape {
    std::vector<int64_t> x_dims;
    int64_t rois, out_h, out_w;
  };
  const std::vector<Shape> shapes = {{{1, 1, 1, 1}, 3, 2, 2},
                                     {{3, 2, 5, 4}, 0, 2, 2},
                                     {{2, 0, 6, 6}, 4, 2, 3},
                                     {{1, 4, 7, 1}, 5, 1, 1},
                                     {{4, 8, 32, 24}, 40, 7, 7}};
  uint32_t seed = 50;
  for (const Shape& s : shapes) {
    Case c;
    c.grad = GetParam();
    c.x_dims = s.x_dims;
    c.rois = s.rois;
    c.out_h = s.out_h;
    c.out_w = s.out_w;
    c.sampling_ratio = 0;
    ExpectCudaMatchesCpu(Node(c, seed += 3), Describe(c), Tolerance{0, 0});
  }
}

TEST_P(CudaRoiAlignTest, BadInputsAreTheCpuErrors) {
  ONNXAMP_REQUIRE_CUDA();
  Case c;
  c.grad = GetParam();
  const size_t rois_input = c.grad ? 2 : 1;
  {
    OpTester t = Node(c, 1);
    t.inputs[rois_input + 1] = MakeTensor<int64_t>({c.rois}, {0, 1, 2, 0, 1});  // batch index 2 of 2 images
    ExpectSameRunError(t);
  }
  {
    Case adaptive = c;
    adaptive.sampling_ratio = 0;  // samples per bin from the box's size
    OpTester t = Node(adaptive, 1);
    std::vector<double> boxes(20, 0.0);
    for (size_t k = 2; k < boxes.size(); k += 4) boxes[k] = boxes[k + 1] = 1e9;  // boxes far too large
    t.inputs[rois_input] = TensorOf(c.dtype, {c.rois, 4}, boxes);
    ExpectSameRunError(t);
  }
  {
    OpTester t = Node(c, 1);
    t.inputs[rois_input] = TensorOf(c.dtype, {c.rois, 3}, std::vector<double>(15, 1));  // rois not [R, 4]
    ExpectSameRunError(t);
  }
}

// false: RoiAlign; true: RoiAlignGrad.
INSTANTIATE_TEST_SUITE_P(Kinds, CudaRoiAlignTest, ::testing::Bool());

}  // namespace
}  // namespace onnxamp::testing
