// CUDA kernels of the index, movement and normalisation gradient ops (com.onnxamp GatherGrad, GatherElementsGrad,
// SliceGrad, PadGrad, ResizeGrad, LayerNormalizationGrad, GroupNormalizationGrad) against their CPU reference
// kernels, for every float type: negative and heavily repeated indices, int32 and int64 indices, negative steps and
// clamped bounds, every pad mode with crops, nearest/linear/cubic resizes under every coordinate transform, broadcast
// norm parameters and optional outputs; and GatherGrad's determinism (two runs, the same bits). The forward op's
// output shape (dY's shape) comes from running the forward on the CPU. Skipped without a CUDA device.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/ops/common/reduce_norm.h"
#include "runtime/ops/gradient_ops.h"
#include "tests/cuda/cuda_op_test_util.h"
#include "tests/cuda/tensor_test_util.h"

namespace onnxamp::testing {
namespace {

using cuda_tensor::I32;
using cuda_tensor::I64;
using cuda_tensor::I64Of;
using cuda_tensor::Random;
using cuda_tensor::RandomIndices;
using ir::Attribute;
using ops::reduce::DimsToString;

std::vector<DType> FloatTypes() { return {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64}; }

std::string TypeName(const ::testing::TestParamInfo<DType>& info) { return std::string(DTypeName(info.param)); }

// The dims of the first output of `forward` run on the CPU (the forward's output: the gradient's dY shape).
std::vector<int64_t> ForwardDims(const OpTester& forward) {
  StatusOr<std::vector<ir::Tensor>> out = forward.Run();
  EXPECT_TRUE(out.ok()) << forward.op_type << ": " << out.status().message();
  return out.ok() ? (*out)[0].dims() : std::vector<int64_t>{};
}

class CudaIndexGradTest : public ::testing::TestWithParam<DType> {};

// ---- GatherGrad ----------------------------------------------------------------------------------------------------

TEST_P(CudaIndexGradTest, GatherGradMatchesCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dtype = GetParam();
  struct Case {
    std::vector<int64_t> data_dims;
    int64_t axis;
    std::vector<int64_t> idx_dims;
    std::vector<int64_t> idx;
  };
  std::vector<Case> cases = {
      {{10, 8}, 0, {6}, {0, 3, -1, 3, 9, -10}},
      {{4, 7, 5}, 1, {2, 3}, {6, -7, 2, 2, -1, 0}},
      {{3, 6}, -1, {}, {-2}},
      {{6}, 0, {5}, {5, 4, -6, 4, 4}},
      {{5, 3}, 0, {0}, {}},
      {{2, 9, 33}, -2, {4}, {8, -1, 8, 0}},
  };
  // Many repeats of a few rows (embedding backward with a padding token), negative and positive.
  cases.push_back({{50, 16}, 0, {1000}, RandomIndices(1000, -3, 3, 11)});
  cases.push_back({{7, 40, 3}, 1, {30, 20}, RandomIndices(600, -40, 40, 12)});
  uint32_t seed = 100;
  for (const Case& c : cases) {
    for (bool int32 : {false, true}) {
      const ir::Tensor indices =
          int32 ? I32(std::vector<int32_t>(c.idx.begin(), c.idx.end()), c.idx_dims) : I64Of(c.idx_dims, c.idx);
      OpTester fwd = op_test::Op("Gather", 13);
      fwd.Input(op_test::TensorOf(DType::kFloat32, c.data_dims, {})).Input(indices);
      fwd.Attr(Attribute::Int("axis", c.axis));
      const std::vector<int64_t> dy_dims = ForwardDims(fwd);
      OpTester t = InternalOp(ops::kGatherGradOp);
      t.Input(Random(dtype, dy_dims, seed++)).Input(indices).Input(I64(c.data_dims));
      t.Attr(Attribute::Int("axis", c.axis));
      ExpectCudaMatchesCpu(t, "GatherGrad data " + DimsToString(c.data_dims) + " axis " + std::to_string(c.axis) +
                                  " indices " + DimsToString(c.idx_dims) + (int32 ? " int32" : " int64"));
    }
  }
}

// Heavy repeats: the sum of 20000 rows into 4 must give the same bits on every run (no atomics), and the CPU's.
TEST_P(CudaIndexGradTest, GatherGradIsDeterministic) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dtype = GetParam();
  const std::vector<int64_t> idx = RandomIndices(20000, -2, 2, 21);
  OpTester t = InternalOp(ops::kGatherGradOp);
  t.Input(Random(dtype, {20000, 96}, 22)).Input(I64Of({20000}, idx)).Input(I64({64, 96}));
  ExpectCudaMatchesCpu(t, "GatherGrad 20000 indices into 4 rows");
  StatusOr<std::vector<ir::Tensor>> a = RunOnCuda(t);
  StatusOr<std::vector<ir::Tensor>> b = RunOnCuda(t);
  ASSERT_TRUE(a.ok()) << a.status().message();
  ASSERT_TRUE(b.ok()) << b.status().message();
  const ir::Tensor& x = (*a)[0];
  const ir::Tensor& y = (*b)[0];
  ASSERT_EQ(x.nbytes(), y.nbytes());
  EXPECT_EQ(std::memcmp(x.data(), y.data(), x.nbytes()), 0) << "two runs gave different bits";
}

// ---- GatherElementsGrad --------------------------------------------------------------------------------------------

TEST_P(CudaIndexGradTest, GatherElementsGradMatchesCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dtype = GetParam();
  struct Case {
    std::vector<int64_t> data_dims;
    int64_t axis;
    std::vector<int64_t> idx_dims;
    int64_t lo, hi;  // index range (negative: from the end)
  };
  const std::vector<Case> cases = {
      {{4, 5}, 1, {4, 3}, -5, 5},       {{3, 4, 6}, 0, {2, 4, 6}, -3, 3},   {{3, 4, 6}, -1, {3, 2, 40}, -6, 6},
      {{5, 7}, 0, {9, 3}, -2, 2},       {{2, 3, 50}, 2, {2, 3, 10}, 0, 50}, {{6}, 0, {300}, -1, 1},
      {{4, 1, 3}, 1, {4, 1, 3}, -1, 1}, {{3, 3}, 1, {3, 0}, 0, 3},
  };
  uint32_t seed = 200;
  for (const Case& c : cases) {
    const ir::Tensor indices = I64Of(c.idx_dims, RandomIndices(Count(c.idx_dims), c.lo, c.hi, seed++));
    OpTester t = InternalOp(ops::kGatherElementsGradOp);
    t.Input(Random(dtype, c.idx_dims, seed++)).Input(indices).Input(I64(c.data_dims));
    t.Attr(Attribute::Int("axis", c.axis));
    ExpectCudaMatchesCpu(t, "GatherElementsGrad data " + DimsToString(c.data_dims) + " axis " + std::to_string(c.axis) +
                                " indices " + DimsToString(c.idx_dims));
  }
}

// ---- SliceGrad -----------------------------------------------------------------------------------------------------

TEST_P(CudaIndexGradTest, SliceGradMatchesCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dtype = GetParam();
  struct Case {
    std::vector<int64_t> x_dims;
    std::vector<int64_t> starts, ends, axes, steps;  // axes/steps empty: omitted
  };
  const int64_t kMax = INT64_MAX;
  const std::vector<Case> cases = {
      {{6, 8}, {1, 2}, {5, 7}, {}, {}},
      {{6, 8}, {-1}, {-kMax}, {1}, {-1}},
      {{6, 8}, {5, 7}, {0, 1}, {0, 1}, {-2, -3}},
      {{4, 5, 6}, {-3, 0}, {kMax, 100}, {-1, 0}, {1, 2}},
      {{4, 5, 6}, {1}, {1}, {1}, {1}},
      {{10}, {-100}, {100}, {0}, {3}},
      {{3, 4, 5}, {4, -2}, {-10, 0}, {2, 0}, {-2, -1}},
  };
  uint32_t seed = 300;
  for (const Case& c : cases) {
    OpTester fwd = op_test::Op("Slice", 13);
    fwd.Input(op_test::TensorOf(DType::kFloat32, c.x_dims, {})).Input(I64(c.starts)).Input(I64(c.ends));
    OpTester t = InternalOp(ops::kSliceGradOp);
    std::vector<ir::Tensor> rest = {I64(c.starts), I64(c.ends)};
    if (!c.axes.empty() || !c.steps.empty()) {
      fwd.Input(I64(c.axes));
      rest.push_back(I64(c.axes));
    }
    if (!c.steps.empty()) {
      fwd.Input(I64(c.steps));
      rest.push_back(I64(c.steps));
    }
    const std::vector<int64_t> dy_dims = ForwardDims(fwd);
    t.Input(Random(dtype, dy_dims, seed++)).Input(I64(c.x_dims));
    for (ir::Tensor& r : rest) t.Input(std::move(r));
    ExpectCudaMatchesCpu(t, "SliceGrad x " + DimsToString(c.x_dims) + " starts " + DimsToString(c.starts) + " ends " +
                                DimsToString(c.ends) + " steps " + DimsToString(c.steps));
  }
}

// ---- PadGrad -------------------------------------------------------------------------------------------------------

TEST_P(CudaIndexGradTest, PadGradMatchesCpuInEveryMode) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dtype = GetParam();
  struct Case {
    std::vector<int64_t> x_dims;
    std::vector<int64_t> pads, axes;  // axes empty: omitted
    bool crops;                       // negative pads (refused by reflect/edge/wrap on some axes: constant only)
  };
  const std::vector<Case> cases = {
      {{3, 4}, {1, 2, 2, 3}, {}, false},
      {{2, 5, 6}, {0, 2, 3, 1, 4, 5}, {}, false},
      {{2, 5, 6}, {3, 1, 2, 0}, {-1, 1}, false},
      {{7}, {6, 6}, {}, false},
      {{2, 3, 4, 5}, {0, 0, 1, 2, 0, 1, 3, 4}, {}, false},
      {{4, 6}, {-1, 2, 1, -2}, {}, true},
      {{1, 1}, {0, 3, 2, 0}, {}, true},
  };
  uint32_t seed = 400;
  for (const char* mode : {"constant", "edge", "reflect", "wrap"}) {
    for (const Case& c : cases) {
      const bool constant = std::string(mode) == "constant";
      if (c.crops && !constant) continue;
      OpTester fwd = op_test::Op("Pad", 19);
      fwd.Input(op_test::TensorOf(DType::kFloat32, c.x_dims, {})).Input(I64(c.pads));
      fwd.Attr(Attribute::String("mode", mode));
      if (!c.axes.empty()) fwd.OmittedInput().Input(I64(c.axes));
      const std::vector<int64_t> dy_dims = ForwardDims(fwd);
      OpTester t = InternalOp(ops::kPadGradOp);
      t.Input(Random(dtype, dy_dims, seed++)).Input(I64(c.x_dims)).Input(I64(c.pads));
      if (!c.axes.empty()) t.Input(I64(c.axes));
      t.Attr(Attribute::String("mode", mode));
      ExpectCudaMatchesCpu(t, std::string("PadGrad ") + mode + " x " + DimsToString(c.x_dims) + " pads " +
                                  DimsToString(c.pads) + " axes " + DimsToString(c.axes));
    }
  }
}

// ---- ResizeGrad ----------------------------------------------------------------------------------------------------

TEST_P(CudaIndexGradTest, ResizeGradMatchesCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dtype = GetParam();
  struct Case {
    std::string mode, coord, nearest;
    std::vector<int64_t> x_dims;
    std::vector<float> scales;  // empty: sizes
    std::vector<int64_t> sizes;
    std::vector<float> roi;  // tf_crop_and_resize
    std::vector<Attribute> extra;
  };
  std::vector<Case> cases;
  const std::vector<int64_t> x = {2, 3, 5, 6};
  for (const char* coord :
       {"half_pixel", "asymmetric", "align_corners", "tf_half_pixel_for_nn", "pytorch_half_pixel"}) {
    for (const char* nearest : {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}) {
      cases.push_back({"nearest", coord, nearest, x, {1, 1, 2.0f, 1.5f}, {}, {}, {}});
    }
    cases.push_back({"nearest", coord, "floor", x, {1, 1, 0.5f, 0.7f}, {}, {}, {}});
  }
  for (const char* coord :
       {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "half_pixel_symmetric"}) {
    cases.push_back({"linear", coord, "", x, {1, 1, 2.0f, 1.5f}, {}, {}, {}});
    cases.push_back({"linear", coord, "", x, {}, {2, 3, 3, 11}, {}, {}});
    cases.push_back({"cubic", coord, "", x, {1, 1, 1.6f, 2.5f}, {}, {}, {}});
  }
  cases.push_back({"linear",
                   "tf_crop_and_resize",
                   "",
                   x,
                   {},
                   {2, 3, 7, 4},
                   {0, 0, 0.1f, 0.2f, 1, 1, 0.9f, 0.7f},
                   {Attribute::Float("extrapolation_value", 0.5f)}});
  cases.push_back({"nearest",
                   "tf_crop_and_resize",
                   "round_prefer_floor",
                   x,
                   {},
                   {2, 3, 7, 4},
                   {0, 0, -0.2f, 0.2f, 1, 1, 1.1f, 0.7f},
                   {}});
  cases.push_back(
      {"linear", "half_pixel", "", {1, 2, 12, 9}, {1, 1, 0.5f, 0.4f}, {}, {}, {Attribute::Int("antialias", 1)}});
  cases.push_back({"cubic",
                   "half_pixel",
                   "",
                   {1, 2, 12, 9},
                   {1, 1, 0.6f, 0.5f},
                   {},
                   {},
                   {Attribute::Int("antialias", 1), Attribute::Int("exclude_outside", 1)}});
  cases.push_back({"linear", "half_pixel", "", {3, 7}, {}, {3, 7}, {}, {}});  // identity: a copy
  cases.push_back({"linear", "align_corners", "", x, {1.5f, 2.0f}, {}, {}, {Attribute::Ints("axes", {3, 2})}});
  uint32_t seed = 500;
  for (const Case& c : cases) {
    auto attrs = [&](OpTester& t) {
      t.Attr(Attribute::String("mode", c.mode)).Attr(Attribute::String("coordinate_transformation_mode", c.coord));
      if (!c.nearest.empty()) t.Attr(Attribute::String("nearest_mode", c.nearest));
      for (const Attribute& a : c.extra) t.Attr(a);
    };
    auto tables = [&](OpTester& t) {
      if (c.roi.empty()) {
        t.OmittedInput();
      } else {
        t.Input(op_test::TensorOf(DType::kFloat32, {static_cast<int64_t>(c.roi.size())},
                                  std::vector<double>(c.roi.begin(), c.roi.end())));
      }
      if (!c.scales.empty()) {
        t.Input(op_test::TensorOf(DType::kFloat32, {static_cast<int64_t>(c.scales.size())},
                                  std::vector<double>(c.scales.begin(), c.scales.end())));
      } else {
        t.OmittedInput().Input(I64(c.sizes));
      }
    };
    OpTester fwd = op_test::Op("Resize", 19);
    fwd.Input(op_test::TensorOf(DType::kFloat32, c.x_dims, {}));
    tables(fwd);
    attrs(fwd);
    const std::vector<int64_t> dy_dims = ForwardDims(fwd);
    OpTester t = InternalOp(ops::kResizeGradOp);
    t.Input(I64(c.x_dims));
    tables(t);
    if (!c.scales.empty()) t.OmittedInput();
    t.Input(Random(dtype, dy_dims, seed++));
    attrs(t);
    t.Attr(Attribute::Int("forward_opset", 19));
    ExpectCudaMatchesCpu(t, "ResizeGrad " + c.mode + " " + c.coord + " " + c.nearest + " x " + DimsToString(c.x_dims) +
                                " dY " + DimsToString(dy_dims));
  }
}

// ---- LayerNormalizationGrad ----------------------------------------------------------------------------------------

TEST_P(CudaIndexGradTest, LayerNormalizationGradMatchesCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dtype = GetParam();
  struct Case {
    std::vector<int64_t> dims;
    int64_t axis;
    std::vector<int64_t> scale_dims;
  };
  const std::vector<Case> cases = {
      {{4, 1}, -1, {1}},       {{4, 33}, -1, {33}},    {{300, 64}, -1, {64}},     {{3, 1000}, -1, {1000}},
      {{2, 5000}, -1, {5000}}, {{2, 3, 4}, 1, {3, 4}}, {{2, 3, 4}, 1, {1, 4}},    {{2, 3, 4}, 1, {3, 1}},
      {{2, 3, 4}, -2, {}},     {{5, 2, 7}, 2, {7}},    {{2, 3, 4}, 0, {2, 3, 4}}, {{0, 8}, -1, {8}},
      {{1100, 3}, 1, {3}},
  };
  uint32_t seed = 600;
  for (const Case& c : cases) {
    const ir::Tensor x = Random(dtype, c.dims, seed++, -3, 5);
    const ir::Tensor scale = Random(dtype, c.scale_dims, seed++, 0.5, 1.5);
    OpTester fwd = op_test::Op("LayerNormalization", 17);
    fwd.Input(x).Input(scale).Attr(Attribute::Int("axis", c.axis));
    fwd.num_outputs = 3;
    StatusOr<std::vector<ir::Tensor>> stats = fwd.Run();
    ASSERT_TRUE(stats.ok()) << stats.status().message();
    for (int outputs : {3, 1}) {
      OpTester t = InternalOp(ops::kLayerNormalizationGradOp);
      t.Input(Random(dtype, c.dims, seed++)).Input(x).Input(scale).Input((*stats)[1]).Input((*stats)[2]);
      t.Attr(Attribute::Int("axis", c.axis));
      t.num_outputs = outputs;
      ExpectCudaMatchesCpu(t, "LayerNormalizationGrad " + DimsToString(c.dims) + " axis " + std::to_string(c.axis) +
                                  " scale " + DimsToString(c.scale_dims) + " outputs " + std::to_string(outputs));
    }
  }
}

// ---- GroupNormalizationGrad ----------------------------------------------------------------------------------------

TEST_P(CudaIndexGradTest, GroupNormalizationGradMatchesCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dtype = GetParam();
  struct Case {
    std::vector<int64_t> dims;
    int64_t groups;  // 0: InstanceNormalization
    bool per_channel;
  };
  const std::vector<Case> cases = {
      {{2, 6, 5}, 3, true},    {{2, 6, 5}, 2, false},     {{2, 6, 5}, 0, true},
      {{2, 4, 3, 3}, 4, true}, {{1, 2, 3000}, 1, true},   {{3, 8, 40}, 2, true},
      {{4, 3}, 3, true},       {{2, 32, 7, 7}, 8, false}, {{0, 4, 2}, 2, true},
  };
  uint32_t seed = 700;
  for (const Case& c : cases) {
    const int64_t params = c.per_channel ? c.dims[1] : c.groups;
    const ir::Tensor x = Random(dtype, c.dims, seed++, -3, 5);
    for (std::vector<bool> omit :
         {std::vector<bool>{}, std::vector<bool>{true, false, false}, std::vector<bool>{false, true, true}}) {
      OpTester t = InternalOp(ops::kGroupNormalizationGradOp);
      const ir::Tensor dy = Random(dtype, c.dims, seed++);
      const ir::Tensor scale = Random(DType::kFloat32, {params}, seed++, 0.5, 1.5);
      t.Input(dy).Input(x).Input(scale);
      t.Attr(Attribute::Int("num_groups", c.groups)).Attr(Attribute::Int("per_channel", c.per_channel ? 1 : 0));
      t.Attr(Attribute::Float("epsilon", 1e-3f));
      t.num_outputs = 3;
      t.omit_outputs = omit;
      ExpectCudaMatchesCpu(t, "GroupNormalizationGrad " + DimsToString(c.dims) + " groups " + std::to_string(c.groups) +
                                  (c.per_channel ? " per channel" : " per group") + " omitted " +
                                  std::to_string(omit.size()));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(FloatTypes, CudaIndexGradTest, ::testing::ValuesIn(FloatTypes()), TypeName);

}  // namespace
}  // namespace onnxamp::testing
