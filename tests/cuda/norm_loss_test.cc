// CUDA kernels of the norm_reduce family, second part: LayerNormalization, GroupNormalization,
// InstanceNormalization, SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss against the CPU reference (every
// float type, row lengths around the warp size and long rows, broadcast parameters, stash types, optional outputs,
// opset 18 vs 21 GroupNormalization, reductions, weights, ignore_index), and the errors the CPU kernels give.
// Skipped without a CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "runtime/ops/common/reduce_norm.h"
#include "tests/cuda/cuda_op_test_util.h"
#include "tests/cuda/norm_reduce_test_util.h"
#include "tests/runtime/ops/reduce_test_util.h"

namespace onnxamp::testing {
namespace {

using ir::Attribute;
using ops::reduce::DimsToString;

ir::Tensor Random(DType dtype, const std::vector<int64_t>& dims, uint32_t seed, double lo = -2, double hi = 2) {
  return TensorOf(dtype, dims, RandomValues(Count(dims), seed, lo, hi));
}

// ---- LayerNormalization --------------------------------------------------------------------------------------------

class CudaLayerNormTest : public ::testing::TestWithParam<DType> {};

TEST_P(CudaLayerNormTest, RowLengthsAxesAndParameterShapesMatchCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dtype = GetParam();
  struct Case {
    std::vector<int64_t> dims;
    int64_t axis;
    std::vector<int64_t> scale_dims;  // Scale and B
  };
  const std::vector<Case> cases = {
      {{4, 1}, -1, {1}},         {{4, 31}, -1, {31}},    {{4, 32}, 1, {32}},      {{4, 33}, -1, {1, 33}},
      {{3, 64}, -1, {64}},       {{3, 65}, -1, {65}},    {{3, 1000}, -1, {1000}}, {{2, 5000}, -1, {5000}},
      {{2, 3, 4}, 1, {3, 4}},    {{2, 3, 4}, 1, {1, 4}}, {{2, 3, 4}, 1, {3, 1}},  {{2, 3, 4}, -2, {}},
      {{2, 3, 4}, 0, {2, 3, 4}}, {{5, 2, 7}, 2, {7}},    {{0, 8}, -1, {8}},       {{3, 0}, -1, {0}},
  };
  uint32_t seed = 400;
  for (const Case& c : cases) {
    const ir::Tensor x = Random(dtype, c.dims, seed++, -3, 5);
    const ir::Tensor scale = Random(dtype, c.scale_dims, seed++, 0.5, 1.5);
    const ir::Tensor bias = Random(dtype, c.scale_dims, seed++, -1, 1);
    for (int with_bias : {1, 0}) {
      OpTester t = Op("LayerNormalization", 17);
      t.Input(x).Input(scale).Attr(Attribute::Int("axis", c.axis));
      if (with_bias) t.Input(bias);
      t.num_outputs = 3;
      ExpectCudaMatchesCpu(t, "LayerNorm " + DimsToString(c.dims) + " axis " + std::to_string(c.axis) + " scale " +
                                  DimsToString(c.scale_dims) + (with_bias ? " with B" : ""));
    }
  }
}

TEST_P(CudaLayerNormTest, StashTypesEpsilonAndOptionalOutputsMatchCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dtype = GetParam();
  const ir::Tensor x = Random(dtype, {6, 96}, 1, -2, 2);
  const ir::Tensor scale = Random(dtype, {96}, 2, 0.5, 1.5);
  const ir::Tensor bias = Random(dtype, {96}, 3, -1, 1);
  for (int64_t stash : {1, 10, 11, 16}) {
    OpTester t = Op("LayerNormalization", 17);
    t.Input(x).Input(scale).Input(bias).Attr(Attribute::Int("stash_type", stash));
    t.Attr(Attribute::Float("epsilon", 1e-2f));
    t.num_outputs = 3;
    ExpectCudaMatchesCpu(t, "LayerNorm stash_type " + std::to_string(stash));
  }
  // Only Y; Y and InvStdDev; parameters of another float type than X.
  OpTester y_only = Op("LayerNormalization", 17);
  y_only.Input(x).Input(scale).Input(bias);
  ExpectCudaMatchesCpu(y_only, "LayerNorm Y only");
  OpTester no_mean = Op("LayerNormalization", 17);
  no_mean.Input(x).Input(scale).Input(bias);
  no_mean.num_outputs = 3;
  no_mean.omit_outputs = {false, true, false};
  ExpectCudaMatchesCpu(no_mean, "LayerNorm without Mean");
  const DType other = dtype == DType::kFloat32 ? DType::kFloat16 : DType::kFloat32;
  OpTester mixed = Op("LayerNormalization", 17);
  mixed.Input(x).Input(Random(other, {96}, 4, 0.5, 1.5)).Input(Random(other, {96}, 5, -1, 1));
  ExpectCudaMatchesCpu(mixed, "LayerNorm with " + std::string(DTypeName(other)) + " Scale and B");
}

INSTANTIATE_TEST_SUITE_P(Types, CudaLayerNormTest, ::testing::ValuesIn(FloatTypes()), DTypeParamName());

TEST(CudaLayerNormLargeTest, GridStrideAndErrors) {
  ONNXAMP_REQUIRE_CUDA();
  OpTester t = Op("LayerNormalization", 17);
  t.Input(Random(DType::kFloat32, {2'200'000, 8}, 7)).Input(Random(DType::kFloat32, {8}, 8, 0.5, 1.5));
  t.num_outputs = 3;
  ExpectCudaMatchesCpu(t, "LayerNorm of 2.2M rows of 8");

  const ir::Tensor x = Random(DType::kFloat32, {2, 3, 4}, 9);
  OpTester stash = Op("LayerNormalization", 17);
  stash.Input(x).Input(Random(DType::kFloat32, {4}, 10)).Attr(Attribute::Int("stash_type", 2));
  ExpectCreateErrorOnBoth(stash, "attribute 'stash_type' must be a float type code (1, 10, 11, 16), got 2");
  OpTester axis = Op("LayerNormalization", 17);
  axis.Input(x).Input(Random(DType::kFloat32, {4}, 10)).Attr(Attribute::Int("axis", 3));
  ExpectCreateErrorOnBoth(axis, "attribute 'axis': axis 3 is out of range for rank 3");
  OpTester shape = Op("LayerNormalization", 17);
  shape.Input(x).Input(Random(DType::kFloat32, {5}, 10));
  ExpectRunErrorOnBoth(shape, "input 1 (Scale): shape [5] does not broadcast to the normalised shape [4]");
  OpTester before = Op("LayerNormalization", 17);
  before.Input(x).Input(Random(DType::kFloat32, {4}, 10)).Input(Random(DType::kFloat32, {3, 4}, 11));
  ExpectRunErrorOnBoth(before, "input 2 (B): shape [3,4] does not broadcast to the normalised shape [4]");
}

// ---- GroupNormalization / InstanceNormalization ----------------------------------------------------------------

class CudaGroupNormTest : public ::testing::TestWithParam<DType> {};

TEST_P(CudaGroupNormTest, GroupsShapesAndOpsetsMatchCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dtype = GetParam();
  struct Case {
    std::vector<int64_t> dims;
    int64_t groups;
  };
  const std::vector<Case> cases = {{{2, 6, 5}, 1}, {{2, 6, 5}, 2},    {{2, 6, 5}, 6},    {{1, 4, 33, 3}, 2},
                                   {{3, 8}, 4},    {{2, 4, 1000}, 2}, {{1, 2, 5000}, 1}, {{2, 6, 1}, 3},
                                   {{0, 4, 3}, 2}, {{2, 4, 0}, 2}};
  uint32_t seed = 500;
  for (const Case& c : cases) {
    const ir::Tensor x = Random(dtype, c.dims, seed++, -3, 5);
    const int64_t channels = c.dims[1];
    for (int64_t opset : {18, 21}) {
      const int64_t params = opset >= 21 ? channels : c.groups;
      OpTester t = Op("GroupNormalization", opset);
      t.Input(x).Input(Random(dtype, {params}, seed, 0.5, 1.5)).Input(Random(dtype, {params}, seed + 1, -1, 1));
      seed += 2;
      t.Attr(Attribute::Int("num_groups", c.groups)).Attr(Attribute::Float("epsilon", 1e-3f));
      ExpectCudaMatchesCpu(t, "GroupNorm opset " + std::to_string(opset) + " " + DimsToString(c.dims) + " groups " +
                                  std::to_string(c.groups));
    }
  }
}

TEST_P(CudaGroupNormTest, InstanceNormMatchesCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dtype = GetParam();
  const std::vector<std::vector<int64_t>> shapes = {{2, 3, 5},    {1, 4, 1000}, {2, 2},   {2, 3, 4, 5},
                                                    {1, 2, 5000}, {3, 5, 31},   {0, 2, 3}};
  uint32_t seed = 600;
  for (const auto& dims : shapes) {
    OpTester t = Op("InstanceNormalization", 6);
    t.Input(Random(dtype, dims, seed, -3, 5))
        .Input(Random(dtype, {dims[1]}, seed + 1, 0.5, 1.5))
        .Input(Random(dtype, {dims[1]}, seed + 2, -1, 1));
    seed += 3;
    ExpectCudaMatchesCpu(t, "InstanceNorm " + DimsToString(dims));
  }
  // Parameters of another float type than the input.
  OpTester mixed = Op("InstanceNormalization", 6);
  mixed.Input(Random(dtype, {2, 3, 7}, seed))
      .Input(Random(DType::kFloat64, {3}, seed + 1, 0.5, 1.5))
      .Input(Random(DType::kFloat16, {3}, seed + 2));
  ExpectCudaMatchesCpu(mixed, "InstanceNorm with double scale and fp16 B");
}

INSTANTIATE_TEST_SUITE_P(Types, CudaGroupNormTest, ::testing::ValuesIn(FloatTypes()), DTypeParamName());

TEST(CudaGroupNormErrorsTest, RefusedAsOnTheCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const ir::Tensor x = Random(DType::kFloat32, {2, 6, 3}, 1);
  const ir::Tensor p2 = Random(DType::kFloat32, {2}, 2);
  OpTester zero = Op("GroupNormalization", 18);
  zero.Input(x).Input(p2).Input(p2).Attr(Attribute::Int("num_groups", 0));
  ExpectCreateErrorOnBoth(zero, "attribute 'num_groups' must be given and positive, got 0");
  OpTester stash = Op("GroupNormalization", 21);
  stash.Input(x).Input(p2).Input(p2).Attr(Attribute::Int("num_groups", 2)).Attr(Attribute::Int("stash_type", 11));
  ExpectCreateErrorOnBoth(stash, "attribute 'stash_type' = 11 is not supported (1: float)");
  OpTester multiple = Op("GroupNormalization", 18);
  multiple.Input(x).Input(Random(DType::kFloat32, {4}, 3)).Input(Random(DType::kFloat32, {4}, 3));
  multiple.Attr(Attribute::Int("num_groups", 4));
  ExpectRunErrorOnBoth(multiple, "input 0 (X): channel count 6 is not a multiple of attribute 'num_groups' 4");
  OpTester count = Op("GroupNormalization", 21);
  count.Input(x).Input(p2).Input(p2).Attr(Attribute::Int("num_groups", 2));
  ExpectRunErrorOnBoth(count, "input 1 (scale): expected 6 elements, got shape [2]");
  OpTester rank = Op("InstanceNormalization", 6);
  rank.Input(Random(DType::kFloat32, {4}, 4)).Input(p2).Input(p2);
  ExpectRunErrorOnBoth(rank, "input 0 (input): expected rank >= 2 ([N, C, ...]), got shape [4]");
  OpTester type = Op("InstanceNormalization", 6);
  type.Input(Random(DType::kFloat32, {2, 2, 3}, 5)).Input(p2).Input(TensorOf(DType::kInt32, {2}, {1, 2}));
  ExpectRunErrorOnBoth(type, "input 2 (B): element type int32 is not supported");
}

// ---- SoftmaxCrossEntropyLoss / NegativeLogLikelihoodLoss ------------------------------------------------------

class CudaLossTest : public ::testing::TestWithParam<DType> {};

TEST_P(CudaLossTest, ReductionsWeightsAndIgnoreIndexMatchCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dtype = GetParam();
  const std::vector<std::vector<int64_t>> shapes = {{4, 5}, {3, 4, 6}, {2, 3, 2, 2}, {8, 1000}, {2, 37, 33}, {0, 3}};
  uint32_t seed = 700;
  int variant = 0;
  for (const std::string& op : {std::string("SoftmaxCrossEntropyLoss"), std::string("NegativeLogLikelihoodLoss")}) {
    const bool sce = op == "SoftmaxCrossEntropyLoss";
    for (const auto& dims : shapes) {
      const int64_t classes = dims[1];
      std::vector<int64_t> label_dims = dims;
      label_dims.erase(label_dims.begin() + 1);
      // Scores for SCE; log-probability-like (negative) inputs for NLL.
      const ir::Tensor x = sce ? Random(dtype, dims, seed++, -4, 4) : Random(dtype, dims, seed++, -6, 0);
      const ir::Tensor weights = Random(dtype, {classes}, seed++, 0.1, 2);
      for (const std::string& reduction : {std::string("none"), std::string("sum"), std::string("mean")}) {
        for (int with_weights : {0, 1}) {
          for (int64_t ignore : {int64_t{-1000}, int64_t{1}, int64_t{-100}}) {
            const bool use_ignore = ignore != -1000;
            const DType label_type = variant++ % 2 == 0 ? DType::kInt64 : DType::kInt32;
            OpTester t = Op(op, 13);
            t.Input(x).Input(Labels(label_type, label_dims, classes, seed++, use_ignore, ignore));
            if (with_weights) t.Input(weights);
            t.Attr(Attribute::String("reduction", reduction));
            if (use_ignore) t.Attr(Attribute::Int("ignore_index", ignore));
            t.num_outputs = sce ? 2 : 1;  // SCE: the log_prob output too
            ExpectCudaMatchesCpu(t, op + " " + DimsToString(dims) + " " + reduction + (with_weights ? " weights" : "") +
                                        (use_ignore ? " ignore_index " + std::to_string(ignore) : "") + " labels " +
                                        std::string(DTypeName(label_type)));
          }
        }
      }
    }
  }
}

TEST_P(CudaLossTest, DefaultMeanAndWithoutLogProbMatchCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dtype = GetParam();
  const ir::Tensor x = Random(dtype, {16, 10}, 1, -3, 3);
  const ir::Tensor labels = Labels(DType::kInt64, {16}, 10, 2, false, 0);
  OpTester sce = Op("SoftmaxCrossEntropyLoss", 12);
  sce.Input(x).Input(labels);
  ExpectCudaMatchesCpu(sce, "SoftmaxCrossEntropyLoss default reduction");
  OpTester nll = Op("NegativeLogLikelihoodLoss", 12);
  nll.Input(x).Input(labels);
  ExpectCudaMatchesCpu(nll, "NegativeLogLikelihoodLoss default reduction");
  // Every position ignored: the mean is 0 / 0 (NaN) on both.
  OpTester all_ignored = Op("NegativeLogLikelihoodLoss", 13);
  all_ignored.Input(x).Input(TensorOf(DType::kInt64, {16}, std::vector<double>(16, 7.0)));
  all_ignored.Attr(Attribute::Int("ignore_index", 7));
  ExpectCudaMatchesCpu(all_ignored, "NegativeLogLikelihoodLoss with every position ignored");
}

INSTANTIATE_TEST_SUITE_P(Types, CudaLossTest, ::testing::ValuesIn(FloatTypes()), DTypeParamName());

TEST(CudaLossErrorsTest, RefusedAsOnTheCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const ir::Tensor x = Random(DType::kFloat32, {4, 3}, 1);
  const ir::Tensor labels = Labels(DType::kInt64, {4}, 3, 2, false, 0);
  OpTester reduction = Op("SoftmaxCrossEntropyLoss", 13);
  reduction.Input(x).Input(labels).Attr(Attribute::String("reduction", "avg"));
  ExpectCreateErrorOnBoth(reduction, "attribute 'reduction' must be 'none', 'sum' or 'mean', got 'avg'");
  OpTester shape = Op("NegativeLogLikelihoodLoss", 13);
  shape.Input(x).Input(Labels(DType::kInt64, {3}, 3, 2, false, 0));
  ExpectRunErrorOnBoth(shape, "input 1 (target): expected shape [4] (input 0 (input) without dimension 1), got [3]");
  OpTester type = Op("SoftmaxCrossEntropyLoss", 13);
  type.Input(x).Input(TensorOf(DType::kFloat32, {4}, {0, 1, 2, 0}));
  ExpectRunErrorOnBoth(type, "input 1 (labels): expected int32 or int64, got float");
  OpTester weights = Op("SoftmaxCrossEntropyLoss", 13);
  weights.Input(x).Input(labels).Input(Random(DType::kFloat32, {4}, 3));
  ExpectRunErrorOnBoth(weights, "input 2 (weights): expected 3 elements, got shape [4]");
  OpTester rank = Op("NegativeLogLikelihoodLoss", 13);
  rank.Input(Random(DType::kFloat32, {4}, 4)).Input(labels);
  ExpectRunErrorOnBoth(rank, "input 0 (input): expected rank >= 2 ([N, C, ...]), got shape [4]");
}

TEST(CudaLossLabelTest, LabelOutsideTheClassesGivesNanOnTheDevice) {
  ONNXAMP_REQUIRE_CUDA();
  // The CPU refuses the run; the device kernel cannot without synchronising, and marks the position with NaN.
  OpTester t = Op("NegativeLogLikelihoodLoss", 13);
  t.Input(Random(DType::kFloat32, {3, 4}, 1)).Input(TensorOf(DType::kInt64, {3}, {0, 4, 2}));
  t.Attr(Attribute::String("reduction", "none"));
  StatusOr<std::vector<ir::Tensor>> out = RunOnCuda(t);
  ASSERT_TRUE(out.ok()) << out.status().message();
  const std::vector<double> loss = AsDoubles((*out)[0]);
  ASSERT_EQ(loss.size(), 3u);
  EXPECT_FALSE(std::isnan(loss[0]));
  EXPECT_TRUE(std::isnan(loss[1]));
  EXPECT_FALSE(std::isnan(loss[2]));
}

}  // namespace
}  // namespace onnxamp::testing
