// CUDA gradient kernels of the dnn family against their CPU references: ConvGrad and ConvTransposeGrad (1-D to 3-D
// on cuDNN, 4-D and KernelOptions::cuda_conv_direct on the direct kernels; strides, dilations, groups and depthwise,
// symmetric, asymmetric and negative pads, auto_pad, output_padding / output_shape; every subset of dX, dW, dB),
// BatchNormTraining and BatchNormalizationGrad (ranks 2 to 5, mixed parameter types, output subsets), MaxPoolGrad
// (Indices from MaxPool, overlapping windows, hand-made indices with -1 and repeats) with the CUDA MaxPool's Indices
// checked equal to the CPU's, and AveragePoolGrad (count_include_pad, ceil_mode, dilations, auto_pad); per element
// type. ConvGrad's outputs are also checked bit-identical across two runs of one session.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/ops/common/broadcast.h"
#include "runtime/ops/gradient_ops.h"
#include "tests/cuda/conv_test_util.h"
#include "tests/cuda/cuda_op_test_util.h"
#include "tests/runtime/ops/tolerance.h"

namespace onnxamp::testing {
namespace {

using Dims = std::vector<int64_t>;
using op_test::DTypeParamName;
using op_test::FloatTypes;
using op_test::Op;

ir::Tensor Int64s(const Dims& dims, const std::vector<int64_t>& values) {
  ir::Tensor t(DType::kInt64, dims);
  auto out = t.mutable_values<int64_t>();
  for (size_t i = 0; i < out.size() && i < values.size(); ++i) out[i] = values[i];
  return t;
}

// The CPU outputs of `t`, asserted to succeed.
std::vector<ir::Tensor> RunCpu(OpTester t, const std::string& what) {
  t.options.device = exec::Device::kCpu;
  StatusOr<std::vector<ir::Tensor>> out = t.Run();
  EXPECT_TRUE(out.ok()) << what << ": cpu: " << out.status().message();
  return out.ok() ? *std::move(out) : std::vector<ir::Tensor>{};
}

// Runs `t` on the CPU and on CUDA (every node on the device) and compares each output with the per-dtype table of
// cuda_op_test_util.h, its absolute part widened by rtol * (the output's largest magnitude). Why: every output here
// is a sum (over images and positions for dW and dB, over windows for dX, over the batch for the normalisation
// statistics) that the two devices add in different orders; the rounding error of such a sum scales with the size
// of its terms, not with the result, which cancellation can make small (as ConvTolerance argues for Conv).
void ExpectGradMatchesCpu(const OpTester& t, const std::string& what) {
  const std::vector<ir::Tensor> want = RunCpu(t, what);
  ASSERT_FALSE(want.empty()) << what;
  StatusOr<std::vector<ir::Tensor>> got = RunOnCuda(t);
  ASSERT_TRUE(got.ok()) << what << ": cuda: " << got.status().message();
  ASSERT_EQ(got->size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    const ir::Tensor& g = (*got)[i];
    const ir::Tensor& w = want[i];
    ASSERT_EQ(g.dtype(), w.dtype()) << what << ": output " << i;
    ASSERT_EQ(g.dims(), w.dims()) << what << ": output " << i;
    Tolerance tol = CudaToleranceFor(w.dtype());
    tol.atol += tol.rtol * MaxAbs(w);
    ExpectClose(g, AsDoubles(w), what + " output " + std::to_string(i), tol);
  }
}

// Which of the three optional outputs (dX, dW, dB / dX, dScale, dB) a case requests.
struct OutputSubset {
  std::string name;
  std::vector<bool> omit;
};
const std::vector<OutputSubset>& Subsets() {
  static const std::vector<OutputSubset> subsets = {
      {"all", {false, false, false}}, {"dx", {false, true, true}},     {"dw", {true, false, true}},
      {"db", {true, true, false}},    {"dw_db", {true, false, false}},
  };
  return subsets;
}

// ---- ConvGrad / ConvTransposeGrad -------------------------------------------------------------------------------

struct ConvGradCase {
  std::string name;
  Dims x;  // X [N, C, spatial...]
  int64_t m;
  Dims kernel;
  int64_t group = 1;
  Dims strides = {}, dilations = {}, pads = {};
  std::string auto_pad = {};
  Dims output_padding = {}, output_shape = {};  // ConvTranspose only
};

std::vector<ConvGradCase> ConvGradCases() {
  return {
      {"2d", {2, 3, 7, 9}, 4, {3, 3}},
      {"2d_stride2_pads", {1, 3, 8, 8}, 5, {3, 3}, 1, {2, 2}, {}, {1, 1, 1, 1}},
      {"2d_stride2_unread_tail", {2, 2, 8, 9}, 3, {3, 2}, 1, {2, 3}},  // trailing inputs no window reads
      {"2d_asymmetric_pads_group2", {2, 4, 7, 6}, 6, {3, 2}, 2, {}, {}, {0, 1, 2, 0}},
      {"2d_dilation2", {1, 3, 11, 10}, 3, {3, 3}, 1, {}, {2, 2}, {2, 2, 2, 2}},
      {"depthwise", {2, 8, 9, 9}, 8, {3, 3}, 8, {}, {}, {1, 1, 1, 1}},
      {"depthwise_multiplier2_stride2", {1, 4, 7, 7}, 8, {3, 3}, 4, {1, 2}, {}, {1, 0, 1, 1}},
      {"same_upper", {1, 3, 7, 8}, 4, {4, 3}, 1, {2, 2}, {}, {}, "SAME_UPPER"},
      {"same_lower", {1, 3, 7, 8}, 4, {4, 3}, 1, {2, 2}, {}, {}, "SAME_LOWER"},
      {"1d", {3, 5, 17}, 6, {5}, 1, {2}, {}, {2, 1}},
      {"1d_dilated", {1, 3, 20}, 2, {3}, 1, {}, {3}},
      {"3d", {1, 3, 5, 6, 7}, 4, {3, 3, 3}, 1, {}, {}, {1, 1, 1, 1, 1, 1}},
      {"3d_strided_asymmetric", {2, 2, 6, 5, 4}, 3, {2, 3, 2}, 1, {2, 1, 2}, {}, {0, 1, 1, 1, 0, 0}},
      {"4d_spatial", {1, 2, 3, 4, 3, 3}, 2, {2, 2, 2, 2}, 1, {}, {}, {1, 0, 0, 1, 0, 1, 1, 0}},
      {"1x1", {2, 16, 5, 5}, 8, {1, 1}},
      {"wide_reduction", {4, 16, 12, 12}, 8, {3, 3}, 1, {}, {}, {1, 1, 1, 1}},
      {"empty_batch", {0, 3, 5, 5}, 4, {3, 3}},
  };
}

std::vector<ConvGradCase> ConvTransposeGradCases() {
  return {
      {"2d", {2, 3, 5, 6}, 4, {3, 3}},
      {"stride2_output_padding", {1, 2, 4, 4}, 3, {3, 3}, 1, {2, 2}, {}, {1, 1, 1, 1}, "", {1, 1}},
      {"group2_dilation", {1, 4, 5, 5}, 6, {2, 3}, 2, {}, {2, 1}},
      {"asymmetric_pads", {2, 2, 5, 4}, 3, {3, 3}, 1, {2, 1}, {}, {0, 1, 1, 0}},
      {"output_shape_larger", {1, 2, 3, 3}, 2, {3, 3}, 1, {2, 2}, {}, {}, "", {}, {9, 8}},
      {"depthwise", {1, 4, 5, 5}, 4, {3, 3}, 4, {}, {}, {1, 1, 1, 1}},
      {"1d", {2, 3, 7}, 2, {4}, 1, {3}},
      {"3d", {1, 2, 3, 4, 3}, 2, {2, 2, 2}, 1, {2, 2, 2}},
      {"4d_spatial", {1, 2, 2, 3, 2, 2}, 2, {2, 2, 2, 2}, 1, {2, 1, 1, 2}},
  };
}

void SetConvAttrs(const ConvGradCase& c, OpTester& t) {
  if (c.group != 1) t.Attr(ir::Attribute::Int("group", c.group));
  if (!c.strides.empty()) t.Attr(ir::Attribute::Ints("strides", c.strides));
  if (!c.dilations.empty()) t.Attr(ir::Attribute::Ints("dilations", c.dilations));
  if (!c.pads.empty()) t.Attr(ir::Attribute::Ints("pads", c.pads));
  if (!c.auto_pad.empty()) t.Attr(ir::Attribute::String("auto_pad", c.auto_pad));
  if (!c.output_padding.empty()) t.Attr(ir::Attribute::Ints("output_padding", c.output_padding));
  if (!c.output_shape.empty()) t.Attr(ir::Attribute::Ints("output_shape", c.output_shape));
}

// ConvGrad (or ConvTransposeGrad) of case `c`: dY of the forward's output shape (worked out by the CPU forward op).
OpTester ConvGradTester(const ConvGradCase& c, DType dtype, bool transpose, const OutputSubset& subset) {
  Dims w = transpose ? Dims{c.x[1], c.m / c.group} : Dims{c.m, c.x[1] / c.group};
  w.insert(w.end(), c.kernel.begin(), c.kernel.end());
  OpTester forward = Op(transpose ? "ConvTranspose" : "Conv", 17);
  SetConvAttrs(c, forward);
  forward.Input(ir::Tensor(DType::kFloat32, c.x)).Input(ir::Tensor(DType::kFloat32, w));
  const std::vector<ir::Tensor> y = RunCpu(forward, c.name + " forward");
  const Dims dy = y.empty() ? Dims{} : y[0].dims();
  OpTester t = InternalOp(transpose ? ops::kConvTransposeGradOp : ops::kConvGradOp);
  SetConvAttrs(c, t);
  t.Input(Random(dtype, dy, 21)).Input(Random(dtype, c.x, 22)).Input(Random(dtype, w, 23));
  t.num_outputs = 3;
  t.omit_outputs = subset.omit;
  return t;
}

class CudaConvGradTest : public ::testing::TestWithParam<DType> {};

TEST_P(CudaConvGradTest, ConvGradMatchesCpu) {
  ONNXAMP_REQUIRE_CUDA();
  for (const ConvGradCase& c : ConvGradCases()) {
    for (const OutputSubset& s : Subsets()) {
      ExpectGradMatchesCpu(ConvGradTester(c, GetParam(), false, s), "ConvGrad " + c.name + " " + s.name);
    }
  }
}

TEST_P(CudaConvGradTest, ConvTransposeGradMatchesCpu) {
  ONNXAMP_REQUIRE_CUDA();
  for (const ConvGradCase& c : ConvTransposeGradCases()) {
    for (const OutputSubset& s : Subsets()) {
      ExpectGradMatchesCpu(ConvGradTester(c, GetParam(), true, s), "ConvTransposeGrad " + c.name + " " + s.name);
    }
  }
}

TEST_P(CudaConvGradTest, DirectKernelsMatchCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const OutputSubset& all = Subsets()[0];
  for (const ConvGradCase& c : ConvGradCases()) {
    ExpectGradMatchesCpu(DirectConv(ConvGradTester(c, GetParam(), false, all)), "ConvGrad (direct) " + c.name);
  }
  for (const ConvGradCase& c : ConvTransposeGradCases()) {
    ExpectGradMatchesCpu(DirectConv(ConvGradTester(c, GetParam(), true, all)), "ConvTransposeGrad (direct) " + c.name);
  }
}

TEST_P(CudaConvGradTest, SecondRunWithNewShape) {
  ONNXAMP_REQUIRE_CUDA();
  // One session, three shapes of dY and X: the cached plan must follow them.
  const DType dtype = GetParam();
  OpTester t = InternalOp(ops::kConvGradOp);
  t.Attr(ir::Attribute::Ints("pads", {1, 1, 1, 1}));
  t.num_outputs = 3;
  t.Input(Random(dtype, {1, 4, 6, 6}, 1)).Input(Random(dtype, {1, 3, 6, 6}, 2)).Input(Random(dtype, {4, 3, 3, 3}, 3));
  OpTester gpu = t;
  gpu.options.device = exec::Device::kCuda;
  ir::Model model = gpu.BuildModel();
  const ir::Shape dy_shape = {ir::Dim::Param("N"), ir::Dim::Value(4), ir::Dim::Param("OH"), ir::Dim::Param("OW")};
  const ir::Shape x_shape = {ir::Dim::Param("N"), ir::Dim::Value(3), ir::Dim::Param("H"), ir::Dim::Param("W")};
  model.graph->inputs()[0]->set_type(ir::ValueType::Tensor(dtype, dy_shape));
  model.graph->inputs()[1]->set_type(ir::ValueType::Tensor(dtype, x_shape));
  auto session = exec::Session::Create(std::move(model), gpu.options);
  ASSERT_TRUE(session.ok()) << session.status().message();
  for (const Dims& x : {Dims{1, 3, 6, 6}, Dims{2, 3, 9, 5}, Dims{1, 3, 6, 6}}) {
    OpTester cpu = t;
    cpu.inputs[0] = Random(dtype, {x[0], 4, x[2], x[3]}, static_cast<uint32_t>(x[0] * 10 + x[2]));
    cpu.inputs[1] = Random(dtype, x, static_cast<uint32_t>(x[0] * 100 + x[2]));
    const std::vector<ir::Tensor> want = RunCpu(cpu, "rerun");
    ASSERT_EQ(want.size(), 3u);
    StatusOr<std::vector<ir::Tensor>> got = (*session)->Run(cpu.Feeds());
    ASSERT_TRUE(got.ok()) << got.status().message();
    for (size_t i = 0; i < 3; ++i) {
      ASSERT_EQ((*got)[i].dims(), want[i].dims());
      Tolerance tol = CudaToleranceFor(dtype);
      tol.atol += tol.rtol * MaxAbs(want[i]);
      ExpectClose((*got)[i], AsDoubles(want[i]), "rerun " + ops::ShapeToString(x) + " output " + std::to_string(i),
                  tol);
    }
  }
}

TEST(CudaConvGradDeterminismTest, TwoRunsGiveIdenticalBits) {
  ONNXAMP_REQUIRE_CUDA();
  // Large enough reductions (dW sums 8 * 32 * 32 products per element) that an algorithm splitting them across
  // blocks with atomics would show run-to-run differences.
  for (DType dtype : FloatTypes()) {
    for (bool transpose : {false, true}) {
      ConvGradCase c{"determinism", {8, 32, 32, 32}, 32, {3, 3}, 1, {}, {}, {1, 1, 1, 1}};
      const OpTester t = ConvGradTester(c, dtype, transpose, Subsets()[0]);
      const std::string what =
          std::string(transpose ? "ConvTransposeGrad " : "ConvGrad ") + std::string(DTypeName(dtype));
      OpTester gpu = t;
      gpu.options.device = exec::Device::kCuda;
      auto session = exec::Session::Create(gpu.BuildModel(), gpu.options);
      ASSERT_TRUE(session.ok()) << what << ": " << session.status().message();
      StatusOr<std::vector<ir::Tensor>> first = (*session)->Run(gpu.Feeds());
      StatusOr<std::vector<ir::Tensor>> second = (*session)->Run(gpu.Feeds());
      ASSERT_TRUE(first.ok() && second.ok()) << what;
      ASSERT_EQ(first->size(), 3u) << what;
      for (size_t i = 0; i < 3; ++i) {
        EXPECT_EQ(AsDoubles((*first)[i]), AsDoubles((*second)[i])) << what << ": output " << i << " differs";
      }
      ExpectGradMatchesCpu(t, what + " (large)");
    }
  }
}

// ---- BatchNormTraining / BatchNormalizationGrad -----------------------------------------------------------------

struct BatchNormCase {
  std::string name;
  Dims x;
  DType param_type;  // kUndefined: X's type
  float momentum = 0.9f;
  float epsilon = 1e-5f;
};

std::vector<BatchNormCase> BatchNormCases() {
  return {
      {"4d", {4, 3, 5, 6}, DType::kUndefined},
      {"4d_float_params", {2, 5, 4, 7}, DType::kFloat32, 0.7f, 1e-3f},
      {"3d", {2, 5, 7}, DType::kUndefined},
      {"rank2", {8, 4}, DType::kFloat32},
      {"5d", {2, 3, 2, 3, 2}, DType::kUndefined, 0.99f},
      {"long_run", {3, 2, 40, 40}, DType::kFloat32},
  };
}

TEST_P(CudaConvGradTest, BatchNormTrainingMatchesCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dtype = GetParam();
  for (const BatchNormCase& c : BatchNormCases()) {
    const DType pt = c.param_type == DType::kUndefined ? dtype : c.param_type;
    const Dims p = {c.x[1]};
    // Outputs Y, new running mean / var, saved mean / inv_std; then without the running statistics.
    const std::vector<OutputSubset> subsets = {
        {"all", {}}, {"y_saved", {false, true, true, false, false}}, {"y_running", {false, false, false, true, true}}};
    for (const OutputSubset& s : subsets) {
      OpTester t = InternalOp(ops::kBatchNormTrainingOp);
      t.Attr(ir::Attribute::Float("momentum", c.momentum)).Attr(ir::Attribute::Float("epsilon", c.epsilon));
      // X off zero, so the two-pass variance matters.
      t.Input(Random(dtype, c.x, 31, 1.5, 3.5))
          .Input(Random(pt, p, 32, 0.5, 1.5))
          .Input(Random(pt, p, 33))
          .Input(Random(pt, p, 34))
          .Input(Random(pt, p, 35, 0.5, 2));
      t.num_outputs = 5;
      t.omit_outputs = s.omit;
      ExpectGradMatchesCpu(t, "BatchNormTraining " + c.name + " " + s.name);
    }
  }
}

TEST_P(CudaConvGradTest, BatchNormalizationGradMatchesCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dtype = GetParam();
  for (const BatchNormCase& c : BatchNormCases()) {
    const DType pt = c.param_type == DType::kUndefined ? dtype : c.param_type;
    const Dims p = {c.x[1]};
    for (const OutputSubset& s : Subsets()) {
      OpTester t = InternalOp(ops::kBatchNormalizationGradOp);
      t.Input(Random(dtype, c.x, 41))
          .Input(Random(dtype, c.x, 42, -2, 2))
          .Input(Random(pt, p, 43, 0.5, 1.5))
          .Input(Random(DType::kFloat32, p, 44, -0.5, 0.5))
          .Input(Random(DType::kFloat32, p, 45, 0.5, 2));
      t.num_outputs = 3;
      t.omit_outputs = s.omit;
      ExpectGradMatchesCpu(t, "BatchNormalizationGrad " + c.name + " " + s.name);
    }
  }
}

// ---- MaxPoolGrad / AveragePoolGrad ------------------------------------------------------------------------------

struct PoolCase {
  std::string name;
  Dims x;
  Dims kernel;
  Dims strides = {}, dilations = {}, pads = {};
  int64_t ceil_mode = 0;
  int64_t count_include_pad = 0;  // AveragePool
  std::string auto_pad = {};
};

std::vector<PoolCase> PoolCases() {
  return {
      {"2d_k3_s2_pads", {2, 3, 9, 8}, {3, 3}, {2, 2}, {}, {1, 1, 1, 1}},
      {"2d_overlapping", {1, 2, 7, 7}, {3, 3}, {1, 1}},
      {"2d_asymmetric_pads_include_pad", {1, 2, 7, 6}, {3, 3}, {2, 2}, {}, {1, 1, 1, 0}, 0, 1},
      {"2d_ceil_mode", {2, 2, 7, 8}, {2, 3}, {2, 2}, {}, {}, 1},
      {"2d_ceil_mode_include_pad", {1, 2, 6, 7}, {3, 3}, {2, 2}, {}, {1, 0, 0, 1}, 1, 1},
      {"2d_dilation", {1, 3, 10, 9}, {3, 2}, {1, 2}, {2, 2}, {2, 1, 2, 1}},
      {"same_upper", {1, 2, 7, 8}, {3, 3}, {2, 2}, {}, {}, 0, 0, "SAME_UPPER"},
      {"1d", {3, 4, 15}, {3}, {2}, {}, {1, 1}},
      {"3d", {1, 2, 5, 6, 4}, {2, 3, 2}, {2, 1, 2}, {}, {0, 1, 1, 1, 0, 0}},
  };
}

void SetPoolAttrs(const PoolCase& c, OpTester& t, bool max) {
  t.Attr(ir::Attribute::Ints("kernel_shape", c.kernel));
  if (!c.strides.empty()) t.Attr(ir::Attribute::Ints("strides", c.strides));
  if (!c.dilations.empty()) t.Attr(ir::Attribute::Ints("dilations", c.dilations));
  if (!c.pads.empty()) t.Attr(ir::Attribute::Ints("pads", c.pads));
  if (c.ceil_mode) t.Attr(ir::Attribute::Int("ceil_mode", 1));
  if (!c.auto_pad.empty()) t.Attr(ir::Attribute::String("auto_pad", c.auto_pad));
  if (!max && c.count_include_pad) t.Attr(ir::Attribute::Int("count_include_pad", 1));
}

// MaxPool of case `c` with its Indices output (storage_order 0).
OpTester MaxPoolTester(const PoolCase& c, DType dtype) {
  OpTester t = Op("MaxPool", 12);
  SetPoolAttrs(c, t, true);
  t.Input(Random(dtype, c.x, 51));
  t.num_outputs = 2;
  return t;
}

// MaxPoolGrad for case `c`: a random dY and the Indices of the CPU's MaxPool. An empty node when that MaxPool fails
// (after a failed expectation), so that running it fails too.
OpTester MaxPoolGradTester(const PoolCase& c, DType dtype) {
  const std::vector<ir::Tensor> pooled = RunCpu(MaxPoolTester(c, dtype), c.name);
  EXPECT_EQ(pooled.size(), 2u) << c.name;
  OpTester t = InternalOp(ops::kMaxPoolGradOp);
  if (pooled.size() != 2) return t;
  t.Input(Random(dtype, pooled[0].dims(), 52)).Input(pooled[1]).Input(Int64s({static_cast<int64_t>(c.x.size())}, c.x));
  return t;
}

// AveragePoolGrad for case `pc`: a random dY of the shape of the CPU's AveragePool output. An empty node when that
// AveragePool fails (after a failed expectation).
OpTester AveragePoolGradTester(const PoolCase& pc, DType dtype) {
  OpTester forward = Op("AveragePool", 19);
  SetPoolAttrs(pc, forward, false);
  forward.Input(ir::Tensor(DType::kFloat32, pc.x));
  const std::vector<ir::Tensor> y = RunCpu(forward, pc.name);
  EXPECT_EQ(y.size(), 1u) << pc.name;
  OpTester t = InternalOp(ops::kAveragePoolGradOp);
  if (y.size() != 1) return t;
  SetPoolAttrs(pc, t, false);
  t.Input(Random(dtype, y[0].dims(), 61)).Input(Int64s({static_cast<int64_t>(pc.x.size())}, pc.x));
  return t;
}

TEST_P(CudaConvGradTest, MaxPoolIndicesMatchCpu) {
  ONNXAMP_REQUIRE_CUDA();
  // MaxPoolGrad reads the Indices of the device's MaxPool: they must be the CPU's (flat positions in X, row-major).
  for (const PoolCase& c : PoolCases()) {
    const OpTester t = MaxPoolTester(c, GetParam());
    const std::vector<ir::Tensor> want = RunCpu(t, c.name);
    ASSERT_EQ(want.size(), 2u) << c.name;
    StatusOr<std::vector<ir::Tensor>> got = RunOnCuda(t);
    ASSERT_TRUE(got.ok()) << c.name << ": " << got.status().message();
    ASSERT_EQ((*got)[1].dtype(), DType::kInt64) << c.name;
    EXPECT_EQ((*got)[1].dims(), want[1].dims()) << c.name;
    EXPECT_EQ(AsDoubles((*got)[1]), AsDoubles(want[1])) << "MaxPool Indices " << c.name;
  }
}

TEST_P(CudaConvGradTest, MaxPoolGradMatchesCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dtype = GetParam();
  for (const PoolCase& c : PoolCases()) ExpectGradMatchesCpu(MaxPoolGradTester(c, dtype), "MaxPoolGrad " + c.name);
  // Hand-made indices: -1 (a window in the padding) and repeated positions, across planes.
  OpTester t = InternalOp(ops::kMaxPoolGradOp);
  t.Input(Random(dtype, {2, 1, 4}, 53))
      .Input(Int64s({2, 1, 4}, {2, 2, -1, 0, 5, 2, 5, 5}))
      .Input(Int64s({3}, {2, 1, 3}));
  ExpectGradMatchesCpu(t, "MaxPoolGrad hand-made indices");
}

TEST_P(CudaConvGradTest, AveragePoolGradMatchesCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dtype = GetParam();
  for (const PoolCase& c : PoolCases()) {
    for (int64_t include_pad : {int64_t{0}, int64_t{1}}) {
      PoolCase pc = c;
      pc.count_include_pad = c.count_include_pad | include_pad;
      ExpectGradMatchesCpu(AveragePoolGradTester(pc, dtype),
                           "AveragePoolGrad " + pc.name + " count_include_pad " + std::to_string(include_pad));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Float, CudaConvGradTest, ::testing::ValuesIn(FloatTypes()), DTypeParamName());

// Needs no GPU: every case above is valid for its CPU reference, so that the comparisons on a GPU compare results
// rather than fail on the CPU side.
TEST(CudaDnnGradCasesTest, CpuReferencesRun) {
  for (const DType dtype : {DType::kFloat32, DType::kFloat16}) {
    for (const ConvGradCase& c : ConvGradCases())
      EXPECT_EQ(RunCpu(ConvGradTester(c, dtype, false, Subsets()[0]), c.name).size(), 3u) << c.name;
    for (const ConvGradCase& c : ConvTransposeGradCases())
      EXPECT_EQ(RunCpu(ConvGradTester(c, dtype, true, Subsets()[0]), c.name).size(), 3u) << c.name;
    for (const PoolCase& c : PoolCases()) {
      EXPECT_EQ(RunCpu(MaxPoolGradTester(c, dtype), "MaxPoolGrad " + c.name).size(), 1u) << c.name;
      PoolCase pc = c;
      pc.count_include_pad = 1;
      EXPECT_EQ(RunCpu(AveragePoolGradTester(pc, dtype), "AveragePoolGrad " + pc.name).size(), 1u) << pc.name;
    }
  }
}

}  // namespace
}  // namespace onnxamp::testing
