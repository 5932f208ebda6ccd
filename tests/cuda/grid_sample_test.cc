// CUDA GridSample and its com.onnxamp gradient GridSampleGrad against the CPU kernel, bit for bit: both compute every
// point's taps with runtime/ops/grid_sample/grid_sample_taps.h and sum in the same order in double, and the CUDA file
// is built without FMA contraction. Every mode, padding mode and align_corners, every float type, grids reaching far
// outside the image, infinite ones, exact halves (nearest's ties), NaN points, repeated taps (bicubic with border
// padding), sizes of one pixel, empty batches and channels, dX and dGrid requested alone, and the CPU's errors. Skipped
// without a CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
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

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

struct Case {
  const char* mode = "bilinear";
  const char* padding = "zeros";
  bool align = false;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> x_dims = {2, 3, 5, 7};
  int64_t ho = 4, wo = 6;
  int grad = 0;  // 0: GridSample; 1: both outputs; 2: dX only; 3: dGrid only
};

std::string Describe(const Case& c) {
  std::string dims;
  for (int64_t d : c.x_dims) dims += std::to_string(d) + "x";
  return std::string(c.grad ? "GridSampleGrad" + std::to_string(c.grad) + " " : "GridSample ") + c.mode + " " +
         c.padding + (c.align ? " align" : "") + " " + std::string(DTypeName(c.dtype)) + " X " + dims + " out " +
         std::to_string(c.ho) + "x" + std::to_string(c.wo);
}

OpTester Node(const Case& c, uint32_t seed) {
  OpTester t = c.grad ? InternalOp(ops::kGridSampleGradOp) : Op("GridSample", 16);
  t.Attr(Attribute::String("mode", c.mode)).Attr(Attribute::String("padding_mode", c.padding));
  t.Attr(Attribute::Int("align_corners", c.align ? 1 : 0));
  const int64_t n = c.x_dims[0], ch = c.x_dims[1];
  const std::vector<int64_t> grid_dims = {n, c.ho, c.wo, 2};
  std::vector<double> g = RandomValues(static_cast<size_t>(Count(grid_dims)), seed + 1, -1.6, 1.6);
  // Far points, exact halves of a pixel, NaN and the corners.
  const double special[] = {1e30, -1e30, 37.5, -0.25, 0.25, kNan, -1, 1, 0, kInf, -kInf};
  for (size_t i = 0; i < g.size(); i += 7) g[i] = special[(i / 7) % 11];
  if (c.grad) {
    t.Input(TensorOf(c.dtype, {n, ch, c.ho, c.wo},
                     RandomValues(static_cast<size_t>(n * ch * c.ho * c.wo), seed + 2, -1, 1)));
    t.num_outputs = 2;
    if (c.grad == 2) t.omit_outputs = {false, true};
    if (c.grad == 3) t.omit_outputs = {true, false};
  }
  t.Input(TensorOf(c.dtype, c.x_dims, RandomValues(static_cast<size_t>(Count(c.x_dims)), seed, -2, 2)));
  t.Input(TensorOf(c.dtype, grid_dims, g));
  return t;
}

class CudaGridSampleTest : public ::testing::TestWithParam<int> {};

TEST_P(CudaGridSampleTest, EveryModeAndPaddingIsTheCpusBits) {
  ONNXAMP_REQUIRE_CUDA();
  uint32_t seed = 1;
  for (const char* mode : {"bilinear", "nearest", "bicubic"}) {
    for (const char* padding : {"zeros", "border", "reflection"}) {
      for (bool align : {false, true}) {
        for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64}) {
          Case c;
          c.mode = mode;
          c.padding = padding;
          c.align = align;
          c.dtype = t;
          c.grad = GetParam();
          ExpectCudaMatchesCpu(Node(c, seed += 3), Describe(c), Tolerance{0, 0});
        }
      }
    }
  }
}

TEST_P(CudaGridSampleTest, EdgeSizesAreTheCpusBits) {
  ONNXAMP_REQUIRE_CUDA();
  const std::vector<std::vector<int64_t>> x_dims = {{1, 1, 1, 1}, {1, 2, 1, 6}, {2, 1, 5, 1},
                                                    {0, 3, 4, 4}, {2, 0, 4, 4}, {1, 2, 9, 11}};
  uint32_t seed = 100;
  for (const auto& dims : x_dims) {
    for (const char* mode : {"bilinear", "nearest", "bicubic"}) {
      for (const char* padding : {"zeros", "border", "reflection"}) {
        Case c;
        c.mode = mode;
        c.padding = padding;
        c.x_dims = dims;
        c.ho = dims[2] == 9 ? 17 : 3;
        c.wo = dims[2] == 9 ? 13 : 2;
        c.grad = GetParam();
        ExpectCudaMatchesCpu(Node(c, seed += 3), Describe(c), Tolerance{0, 0});
      }
    }
  }
  // No output points at all.
  Case c;
  c.ho = 0;
  c.grad = GetParam();
  ExpectCudaMatchesCpu(Node(c, 7), Describe(c), Tolerance{0, 0});
}

// 0: GridSample; 1: GridSampleGrad with both outputs; 2: dX alone; 3: dGrid alone.
INSTANTIATE_TEST_SUITE_P(Kinds, CudaGridSampleTest, ::testing::Values(0, 1, 2, 3));

TEST(CudaGridSampleErrorsTest, BadInputsAreTheCpuErrors) {
  ONNXAMP_REQUIRE_CUDA();
  Case c;
  {
    OpTester t = Node(c, 1);
    t.inputs[1] = TensorOf(c.dtype, {2, 4, 6, 3}, std::vector<double>(200, 0.1));  // grid's last dim is not 2
    ExpectSameRunError(t);
  }
  {
    OpTester t = Node(c, 1);
    t.inputs[1] = TensorOf(DType::kFloat64, {2, 4, 6, 2}, std::vector<double>(200, 0.1));  // grid of another type
    ExpectSameRunError(t);
  }
  {
    c.grad = 1;
    OpTester t = Node(c, 1);
    t.inputs[0] = TensorOf(c.dtype, {2, 3, 4, 5}, std::vector<double>(200, 0.1));  // dY of the wrong shape
    ExpectSameRunError(t);
  }
}

}  // namespace
}  // namespace onnxamp::testing
