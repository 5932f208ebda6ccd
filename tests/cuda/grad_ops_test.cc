// CUDA kernels of the elementwise, softmax, loss and reduction gradient ops of com.onnxamp (ReluGrad, EluGrad,
// GeluGrad, DropoutGrad, SoftmaxGrad, LogSoftmaxGrad, SoftmaxCrossEntropyLossGrad, NegativeLogLikelihoodLossGrad,
// SumToShape, ReduceProdGrad) against their CPU reference kernels: every float type, odd sizes, size-1 dims and empty
// tensors, every attribute variant; DropoutGrad paired with the CUDA Dropout that drew the mask; the CPU's error
// messages; and two runs of the same node giving the same bits. Skipped without a CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/common/reduce_norm.h"
#include "runtime/ops/gradient_ops.h"
#include "tests/cuda/cuda_op_test_util.h"
#include "tests/cuda/norm_reduce_test_util.h"
#include "tests/runtime/ir_build_util.h"
#include "tests/runtime/ops/reduce_test_util.h"

namespace onnxamp::testing {
namespace {

using ir::Attribute;
using ops::reduce::DimsToString;

ir::Tensor Random(DType dtype, const std::vector<int64_t>& dims, uint32_t seed, double lo = -2, double hi = 2) {
  return TensorOf(dtype, dims, RandomValues(Count(dims), seed, lo, hi));
}

// Random values in [lo, hi) with about one in `every` set to exactly `value` (zeros for ReluGrad's and
// ReduceProdGrad's edge cases).
ir::Tensor RandomWith(DType dtype, const std::vector<int64_t>& dims, uint32_t seed, double lo, double hi, double value,
                      int every) {
  std::vector<double> v = RandomValues(Count(dims), seed, lo, hi);
  for (size_t i = 0; i < v.size(); i += static_cast<size_t>(every)) v[i] = value;
  return TensorOf(dtype, dims, v);
}

ir::Tensor Bool(bool v) {
  ir::Tensor t(DType::kBool, {});
  t.mutable_values<bool>()[0] = v;
  return t;
}

std::string Name(DType dtype) { return std::string(DTypeName(dtype)); }

// Runs `t` on CUDA twice and expects the outputs to have identical bytes.
void ExpectSameBitsTwice(const OpTester& t, const std::string& what) {
  StatusOr<std::vector<ir::Tensor>> first = RunOnCuda(t);
  ASSERT_TRUE(first.ok()) << what << ": " << first.status().message();
  StatusOr<std::vector<ir::Tensor>> second = RunOnCuda(t);
  ASSERT_TRUE(second.ok()) << what << ": " << second.status().message();
  ASSERT_EQ(first->size(), second->size()) << what;
  for (size_t i = 0; i < first->size(); ++i) {
    const ir::Tensor& a = (*first)[i];
    const ir::Tensor& b = (*second)[i];
    ASSERT_EQ(a.dims(), b.dims()) << what;
    const size_t bytes = static_cast<size_t>(a.num_elements()) * static_cast<size_t>(DTypeBits(a.dtype()) / 8);
    ASSERT_GT(bytes, 0u) << what << ": a determinism check needs a non-empty output";
    EXPECT_EQ(std::memcmp(a.data(), b.data(), bytes), 0) << what << ": output " << i << " differs between runs";
  }
}

const std::vector<std::vector<int64_t>>& ElementwiseShapes() {
  static const std::vector<std::vector<int64_t>> shapes = {{}, {1}, {7}, {3, 1, 5}, {0, 4}, {1025}, {2, 3, 333}};
  return shapes;
}

// ---- ReluGrad, EluGrad, GeluGrad -----------------------------------------------------------------------------------

class CudaActivationGradTest : public ::testing::TestWithParam<DType> {};

TEST_P(CudaActivationGradTest, ReluGradMatchesCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dtype = GetParam();
  uint32_t seed = 10;
  for (const auto& dims : ElementwiseShapes()) {
    // Y is a Relu output: zeros (every third) and positive values; negative ones too, which also give 0.
    const ir::Tensor dy = Random(dtype, dims, seed++, -3, 3);
    const ir::Tensor y = RandomWith(dtype, dims, seed++, -1, 4, 0.0, 3);
    OpTester t = InternalOp(ops::kReluGradOp);
    t.Input(dy).Input(y);
    ExpectCudaMatchesCpu(t, "ReluGrad " + DimsToString(dims));
  }
}

TEST_P(CudaActivationGradTest, EluGradMatchesCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dtype = GetParam();
  uint32_t seed = 20;
  for (const auto& dims : ElementwiseShapes()) {
    const ir::Tensor dy = Random(dtype, dims, seed++, -3, 3);
    const ir::Tensor x = RandomWith(dtype, dims, seed++, -6, 3, 0.0, 5);  // X = 0 takes the alpha branch
    for (float alpha : {-1.0f, 1.0f, 0.3f, 2.5f}) {                       // -1: the attribute left out (default 1)
      OpTester t = InternalOp(ops::kEluGradOp);
      t.Input(dy).Input(x);
      if (alpha >= 0) t.Attr(Attribute::Float("alpha", alpha));
      ExpectCudaMatchesCpu(t, "EluGrad " + DimsToString(dims) + " alpha " + std::to_string(alpha));
    }
  }
}

TEST_P(CudaActivationGradTest, GeluGradBothApproximationsMatchCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dtype = GetParam();
  uint32_t seed = 30;
  for (const auto& dims : ElementwiseShapes()) {
    const ir::Tensor dy = Random(dtype, dims, seed++, -3, 3);
    const ir::Tensor x = Random(dtype, dims, seed++, -7, 7);  // both tails and the middle
    for (const std::string& approximate : {std::string(), std::string("none"), std::string("tanh")}) {
      OpTester t = InternalOp(ops::kGeluGradOp);
      t.Input(dy).Input(x);
      if (!approximate.empty()) t.Attr(Attribute::String("approximate", approximate));
      ExpectCudaMatchesCpu(t, "GeluGrad " + DimsToString(dims) + " approximate '" + approximate + "'");
    }
  }
}

// +-inf give the derivative's limits (1 and 0) and NaN stays NaN, as on the CPU; large finite values too.
TEST_P(CudaActivationGradTest, GeluGradAtInfinitiesAsTheCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dtype = GetParam();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> xs = {inf, -inf, std::nanf(""), 14.5f, -14.5f, 16.0f, -16.0f, 120.0f, -120.0f, 0.0f};
  ir::Tensor x = Random(dtype, {static_cast<int64_t>(xs.size())}, 1);
  ir::Tensor dy = Random(dtype, {static_cast<int64_t>(xs.size())}, 2, 0.5, 2);
  const Status set = ops::DispatchFloat(dtype, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    auto v = x.mutable_values<T>();
    for (size_t i = 0; i < xs.size(); ++i) v[i] = ops::Store<T>(static_cast<ops::ComputeType<T>>(xs[i]));
    return Status::Ok();
  });
  ASSERT_TRUE(set.ok());
  for (const std::string& approximate : {std::string("none"), std::string("tanh")}) {
    OpTester t = InternalOp(ops::kGeluGradOp);
    t.Input(dy).Input(x).Attr(Attribute::String("approximate", approximate));
    ExpectCudaMatchesCpu(t, "GeluGrad at infinities, approximate '" + approximate + "'");
  }
}

// com.onnxamp Gelu (the training graphs' fused erf-form GELU) runs on the device as Gelu-20 does.
TEST_P(CudaActivationGradTest, InternalGeluMatchesCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dtype = GetParam();
  uint32_t seed = 40;
  for (const auto& dims : ElementwiseShapes()) {
    for (const std::string& approximate : {std::string(), std::string("tanh")}) {
      OpTester t = InternalOp(ops::kGeluOp);
      t.Input(Random(dtype, dims, seed++, -7, 7));
      if (!approximate.empty()) t.Attr(Attribute::String("approximate", approximate));
      ExpectCudaMatchesCpu(t, "com.onnxamp Gelu " + DimsToString(dims) + " approximate '" + approximate + "'");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, CudaActivationGradTest, ::testing::ValuesIn(FloatTypes()), DTypeParamName());

TEST(CudaActivationGradErrorsTest, RefusedAsOnTheCpu) {
  ONNXAMP_REQUIRE_CUDA();
  OpTester gelu = InternalOp(ops::kGeluGradOp);
  gelu.Input(Random(DType::kFloat32, {4}, 1)).Input(Random(DType::kFloat32, {4}, 2));
  gelu.Attr(Attribute::String("approximate", "fast"));
  ExpectCreateErrorOnBoth(gelu, "attribute 'approximate' must be \"none\" or \"tanh\", got \"fast\"");
  OpTester elu = InternalOp(ops::kEluGradOp);
  elu.Input(Random(DType::kFloat32, {4}, 1)).Input(Random(DType::kFloat32, {5}, 2));
  ExpectRunErrorOnBoth(elu, "dY float[4] and X float[5] must have the same type and shape");
  OpTester relu = InternalOp(ops::kReluGradOp);
  relu.Input(Random(DType::kFloat32, {4}, 1)).Input(Random(DType::kFloat16, {4}, 2));
  ExpectRunErrorOnBoth(relu, "dY and Y must have the same type and shape");
}

// ---- DropoutGrad -------------------------------------------------------------------------------------------------

class CudaDropoutGradTest : public ::testing::TestWithParam<DType> {};

TEST_P(CudaDropoutGradTest, RatiosModesAndSeedsMatchCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dtype = GetParam();
  uint32_t seed = 40;
  for (const auto& dims : {std::vector<int64_t>{33, 65}, std::vector<int64_t>{1}, std::vector<int64_t>{0, 3},
                           std::vector<int64_t>{5, 1, 7}}) {
    const ir::Tensor dy = Random(dtype, dims, seed++, -3, 3);
    for (double ratio : {0.0, 0.1, 0.5, 0.9, 1.0}) {
      for (int seed_form : {0, 1}) {  // 0: attribute seed_from (the session's seed of the forward); 1: seed
        OpTester t = InternalOp(ops::kDropoutGradOp);
        t.options.seed = 77;
        t.Input(dy).Input(TensorOf(DType::kFloat32, {}, {ratio})).Input(Bool(true));
        t.Attr(seed_form == 0 ? Attribute::String("seed_from", "forward_output") : Attribute::Int("seed", 1234));
        ExpectCudaMatchesCpu(t, "DropoutGrad " + DimsToString(dims) + " ratio " + std::to_string(ratio) +
                                    (seed_form == 0 ? " seed_from" : " seed"));
      }
    }
    // Inference mode (explicit or by default) and the default ratio: dX = dY, or the 0.5 mask.
    OpTester inference = InternalOp(ops::kDropoutGradOp);
    inference.Input(dy).Input(TensorOf(DType::kFloat32, {}, {0.5})).Input(Bool(false));
    ExpectCudaMatchesCpu(inference, "DropoutGrad inference " + DimsToString(dims));
    OpTester no_mode = InternalOp(ops::kDropoutGradOp);
    no_mode.Input(dy);
    ExpectCudaMatchesCpu(no_mode, "DropoutGrad without ratio and training_mode " + DimsToString(dims));
    OpTester default_ratio = InternalOp(ops::kDropoutGradOp);
    default_ratio.options.seed = 5;
    default_ratio.Input(dy).OmittedInput().Input(Bool(true));
    default_ratio.Attr(Attribute::String("seed_from", "y"));
    ExpectCudaMatchesCpu(default_ratio, "DropoutGrad default ratio " + DimsToString(dims));
    // A ratio of the data's type.
    OpTester typed_ratio = InternalOp(ops::kDropoutGradOp);
    typed_ratio.Input(dy).Input(TensorOf(dtype, {}, {0.25})).Input(Bool(true));
    typed_ratio.Attr(Attribute::Int("seed", 9));
    ExpectCudaMatchesCpu(typed_ratio, "DropoutGrad ratio of type " + Name(dtype) + " " + DimsToString(dims));
  }
}

INSTANTIATE_TEST_SUITE_P(Types, CudaDropoutGradTest, ::testing::ValuesIn(FloatTypes()), DTypeParamName());

// Dropout -> DropoutGrad in one CUDA session, fed the same tensor as X and dY: the backward recomputes the forward's
// mask, so dX has exactly Y's bits (kept elements scaled alike, dropped ones 0), with the seed taken from the forward
// node (seed_from) or from a shared seed attribute mixed with the run's rng_step; and the CPU session agrees.
// Dropout(x, ratio, training) -> y, mask and DropoutGrad(x, ratio, training) -> dx, the backward's seed from the
// forward node (`seed_form` 0: seed_from) or from a seed attribute both carry (1).
ir::Model DropoutPairModel(DType dtype, const std::vector<int64_t>& dims, int seed_form) {
  ir::Model m;
  m.opset_imports = {{"", 13}, {exec::kInternalDomain, 1}};
  ir::Graph& g = *m.graph;
  ir::Value* x = Input(g, "x", dtype, dims);
  ir::Value* ratio = Input(g, "ratio", DType::kFloat32, {});
  ir::Value* training = Input(g, "training", DType::kBool, {});
  ir::Value* y = g.CreateValue("y");
  ir::Value* mask = g.CreateValue("mask");
  ir::Value* dx = g.CreateValue("dx");
  ir::Node* fwd = g.AddNode("Dropout", {x, ratio, training}, {y, mask}, "dropout");
  ir::Node* bwd = g.AddNode(ops::kDropoutGradOp, {x, ratio, training}, {dx}, "dropout_grad", exec::kInternalDomain);
  if (seed_form == 0) {
    bwd->SetAttribute(Attribute::String("seed_from", "y"));
  } else {
    fwd->SetAttribute(Attribute::Int("seed", 31));
    bwd->SetAttribute(Attribute::Int("seed", 31));
  }
  g.AddOutput(y);
  g.AddOutput(mask);
  g.AddOutput(dx);
  return m;
}

// Dropout -> DropoutGrad in one CUDA session, fed the same tensor as X and dY: the backward recomputes the forward's
// mask, so dX has exactly Y's bits (kept elements scaled alike, dropped ones 0), with the seed taken from the forward
// node (seed_from) or from a shared seed attribute mixed with the run's rng_step; and the CPU session agrees.
TEST(CudaDropoutGradPairTest, BackwardRecomputesTheForwardMask) {
  ONNXAMP_REQUIRE_CUDA();
  for (DType dtype : FloatTypes()) {
    for (int seed_form : {0, 1}) {
      const std::vector<int64_t> dims = {129, 31};
      const std::string what = "Dropout -> DropoutGrad " + Name(dtype) + (seed_form == 0 ? " seed_from" : " seed");
      std::vector<ir::Tensor> feeds = {Random(dtype, dims, 50, -3, 3), TensorOf(DType::kFloat32, {}, {0.4}),
                                       Bool(true)};
      feeds[0].set_name("x");
      feeds[1].set_name("ratio");
      feeds[2].set_name("training");
      exec::RunOptions run;
      run.rng_step = 3;
      exec::SessionOptions options;
      options.seed = 2024;
      options.device = exec::Device::kCuda;
      auto cuda_session = exec::Session::Create(DropoutPairModel(dtype, dims, seed_form), options);
      ASSERT_TRUE(cuda_session.ok()) << what << ": " << cuda_session.status().message();
      ASSERT_TRUE((*cuda_session)->placement().on_cpu.empty()) << what << ": " << (*cuda_session)->DescribePlacement();
      StatusOr<std::vector<ir::Tensor>> got = (*cuda_session)->Run(feeds, run);
      ASSERT_TRUE(got.ok()) << what << ": " << got.status().message();
      ASSERT_EQ(got->size(), 3u);
      const ir::Tensor& gy = (*got)[0];
      const ir::Tensor& gdx = (*got)[2];
      const size_t bytes = static_cast<size_t>(gy.num_elements()) * static_cast<size_t>(DTypeBits(dtype) / 8);
      EXPECT_EQ(std::memcmp(gy.data(), gdx.data(), bytes), 0) << what << ": dX is not Y";
      int64_t kept = 0;
      for (bool k : (*got)[1].values<bool>()) kept += k;
      EXPECT_GT(kept, 0) << what;
      EXPECT_LT(kept, gy.num_elements()) << what;
      options.device = exec::Device::kCpu;
      options.num_threads = 1;
      auto cpu_session = exec::Session::Create(DropoutPairModel(dtype, dims, seed_form), options);
      ASSERT_TRUE(cpu_session.ok()) << what << ": " << cpu_session.status().message();
      StatusOr<std::vector<ir::Tensor>> want = (*cpu_session)->Run(feeds, run);
      ASSERT_TRUE(want.ok()) << what << ": " << want.status().message();
      for (size_t i = 0; i < 3; ++i) {
        ExpectClose((*got)[i], AsDoubles((*want)[i]), what + " output " + std::to_string(i),
                    CudaToleranceFor((*got)[i].dtype()));
      }
    }
  }
}

TEST(CudaDropoutGradErrorsTest, RefusedAsOnTheCpu) {
  ONNXAMP_REQUIRE_CUDA();
  OpTester ratio = InternalOp(ops::kDropoutGradOp);
  ratio.Input(Random(DType::kFloat32, {4}, 1)).Input(TensorOf(DType::kFloat32, {}, {1.5})).Input(Bool(true));
  ExpectRunErrorOnBoth(ratio, "input 1 (ratio) must be in [0, 1], got 1.5");
  OpTester mode = InternalOp(ops::kDropoutGradOp);
  mode.Input(Random(DType::kFloat32, {4}, 1))
      .Input(TensorOf(DType::kFloat32, {}, {0.5}))
      .Input(TensorOf(DType::kFloat32, {}, {1}));
  ExpectRunErrorOnBoth(mode, "input 2 (training_mode) must be a bool scalar, got float");
}

// ---- SoftmaxGrad, LogSoftmaxGrad ---------------------------------------------------------------------------------

class CudaSoftmaxGradTest : public ::testing::TestWithParam<DType> {};

TEST_P(CudaSoftmaxGradTest, AxesLegacyAndRowLengthsMatchCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dtype = GetParam();
  struct Case {
    std::vector<int64_t> dims;
    int64_t axis;  // kNoAxis: the attribute left out
    int64_t legacy;
  };
  constexpr int64_t kNoAxis = 1000;
  const std::vector<Case> cases = {
      // Rows of every group size (8 lanes up to 64, a warp up to 2048, the block above), odd lengths.
      {{4, 1}, -1, 0},
      {{5, 7}, -1, 0},
      {{3, 64}, -1, 0},
      {{3, 65}, 1, 0},
      {{2, 2048}, -1, 0},
      {{3, 2049}, -1, 0},
      {{2, 5000}, kNoAxis, 0},
      // Inner > 1: a thread per position.
      {{2, 3, 5}, 0, 0},
      {{2, 3, 5}, 1, 0},
      {{2, 3, 5}, -1, 0},
      {{4, 37, 1, 3}, 1, 0},
      {{7}, 0, 0},
      {{1, 1}, -1, 0},
      // Legacy (opsets before 13): everything from `axis` on is one row.
      {{2, 3, 4}, 1, 1},
      {{2, 3, 4}, 0, 1},
      {{2, 3, 4}, 2, 1},
      {{2, 3, 4}, kNoAxis, 1},
      {{3, 5, 1, 9}, -2, 1},
      // Empty tensors.
      {{0, 5}, -1, 0},
      {{5, 0}, -1, 0},
      {{2, 0, 3}, 1, 0},
      {{0, 4}, 1, 1},
  };
  uint32_t seed = 60;
  for (const Case& c : cases) {
    const ir::Tensor dy = Random(dtype, c.dims, seed++, -2, 2);
    for (bool log : {false, true}) {
      // Y is what the forward gives: the CPU's Softmax / LogSoftmax of random logits over the same dims (so the
      // sums are those of a real backward, not of arbitrary values that cancel).
      OpTester forward = Op(log ? "LogSoftmax" : "Softmax", c.legacy ? 11 : 13);
      forward.Input(Random(dtype, c.dims, seed++, -4, 4));
      if (c.axis != kNoAxis) forward.Attr(Attribute::Int("axis", c.axis));
      const std::vector<ir::Tensor> y_out = RunOk(forward);
      ASSERT_EQ(y_out.size(), 1u);
      const ir::Tensor& y = y_out[0];
      OpTester t = InternalOp(log ? ops::kLogSoftmaxGradOp : ops::kSoftmaxGradOp);
      t.Input(dy).Input(y);
      if (c.axis != kNoAxis) t.Attr(Attribute::Int("axis", c.axis));
      if (c.legacy) t.Attr(Attribute::Int("legacy", 1));
      ExpectCudaMatchesCpu(t, std::string(log ? "LogSoftmaxGrad " : "SoftmaxGrad ") + DimsToString(c.dims) + " axis " +
                                  (c.axis == kNoAxis ? std::string("default") : std::to_string(c.axis)) +
                                  (c.legacy ? " legacy" : ""));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, CudaSoftmaxGradTest, ::testing::ValuesIn(FloatTypes()), DTypeParamName());

TEST(CudaSoftmaxGradErrorsTest, RefusedAsOnTheCpu) {
  ONNXAMP_REQUIRE_CUDA();
  OpTester legacy = InternalOp(ops::kSoftmaxGradOp);
  legacy.Input(Random(DType::kFloat32, {2, 3}, 1)).Input(Random(DType::kFloat32, {2, 3}, 2));
  legacy.Attr(Attribute::Int("legacy", 2));
  ExpectCreateErrorOnBoth(legacy, "attribute 'legacy' must be 0 or 1, got 2");
  OpTester shape = InternalOp(ops::kLogSoftmaxGradOp);
  shape.Input(Random(DType::kFloat32, {2, 3}, 1)).Input(Random(DType::kFloat32, {3, 2}, 2));
  ExpectRunErrorOnBoth(shape, "; expected dY's type and shape, float [2,3]");
}

// ---- SoftmaxCrossEntropyLossGrad, NegativeLogLikelihoodLossGrad ----------------------------------------------------

class CudaLossGradTest : public ::testing::TestWithParam<DType> {};

TEST_P(CudaLossGradTest, ReductionsWeightsAndIgnoreIndexMatchCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dtype = GetParam();
  const std::vector<std::vector<int64_t>> shapes = {{4, 5}, {3, 4, 6}, {2, 3, 2, 2}, {8, 1000},
                                                    {1, 1}, {5, 1, 3}, {2, 37, 33},  {0, 3}};
  uint32_t seed = 700;
  int variant = 0;
  for (const char* op : {ops::kSoftmaxCrossEntropyLossGradOp, ops::kNegativeLogLikelihoodLossGradOp}) {
    for (const auto& dims : shapes) {
      const int64_t classes = dims[1];
      std::vector<int64_t> label_dims = dims;
      label_dims.erase(label_dims.begin() + 1);
      // Log-probabilities (negative) for both: SCE's log_prob output and NLL's input.
      const ir::Tensor x = Random(dtype, dims, seed++, -6, 0);
      const ir::Tensor weights = Random(dtype, {classes}, seed++, 0.1, 2);
      for (const std::string& reduction :
           {std::string(), std::string("none"), std::string("sum"), std::string("mean")}) {
        const std::vector<int64_t> loss_dims = reduction == "none" ? label_dims : std::vector<int64_t>{};
        const ir::Tensor dloss = Random(dtype, loss_dims, seed++, 0.5, 2);
        for (int with_weights : {0, 1}) {
          for (int64_t ignore : {int64_t{-1000}, int64_t{1}, int64_t{-100}}) {
            const bool use_ignore = ignore != -1000;
            const DType label_type = variant++ % 2 == 0 ? DType::kInt64 : DType::kInt32;
            OpTester t = InternalOp(op);
            t.Input(dloss).Input(x).Input(Labels(label_type, label_dims, classes, seed, use_ignore, ignore));
            seed += 2;
            if (with_weights) t.Input(weights);
            if (!reduction.empty()) t.Attr(Attribute::String("reduction", reduction));
            if (use_ignore) t.Attr(Attribute::Int("ignore_index", ignore));
            ExpectCudaMatchesCpu(t, std::string(op) + " " + DimsToString(dims) + " reduction '" + reduction + "'" +
                                        (with_weights ? " weights" : "") +
                                        (use_ignore ? " ignore_index " + std::to_string(ignore) : "") + " labels " +
                                        Name(label_type));
          }
        }
      }
    }
  }
}

TEST_P(CudaLossGradTest, WeightsOfAnotherTypeAndEveryPositionIgnoredMatchCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dtype = GetParam();
  const ir::Tensor x = Random(dtype, {16, 10}, 1, -5, 0);
  const ir::Tensor labels = Labels(DType::kInt64, {16}, 10, 2, false, 0);
  for (DType weight_type : FloatTypes()) {
    for (const char* op : {ops::kSoftmaxCrossEntropyLossGradOp, ops::kNegativeLogLikelihoodLossGradOp}) {
      OpTester t = InternalOp(op);
      t.Input(Random(dtype, {}, 3, 0.5, 2)).Input(x).Input(labels).Input(Random(weight_type, {10}, 4, 0.1, 2));
      ExpectCudaMatchesCpu(t, std::string(op) + " weights of type " + Name(weight_type));
    }
  }
  // Every position ignored: mean over a zero total; every gradient is 0 on both.
  for (const char* op : {ops::kSoftmaxCrossEntropyLossGradOp, ops::kNegativeLogLikelihoodLossGradOp}) {
    OpTester t = InternalOp(op);
    t.Input(Random(dtype, {}, 3, 0.5, 2)).Input(x).Input(TensorOf(DType::kInt64, {16}, std::vector<double>(16, 7.0)));
    t.Attr(Attribute::Int("ignore_index", 7));
    ExpectCudaMatchesCpu(t, std::string(op) + " with every position ignored");
  }
}

INSTANTIATE_TEST_SUITE_P(Types, CudaLossGradTest, ::testing::ValuesIn(FloatTypes()), DTypeParamName());

TEST(CudaLossGradErrorsTest, RefusedAsOnTheCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const ir::Tensor x = Random(DType::kFloat32, {4, 3}, 1, -3, 0);
  const ir::Tensor labels = Labels(DType::kInt64, {4}, 3, 2, false, 0);
  const ir::Tensor dloss = Random(DType::kFloat32, {}, 3);
  OpTester reduction = InternalOp(ops::kSoftmaxCrossEntropyLossGradOp);
  reduction.Input(dloss).Input(x).Input(labels).Attr(Attribute::String("reduction", "avg"));
  ExpectCreateErrorOnBoth(reduction, "attribute 'reduction' must be 'none', 'sum' or 'mean', got 'avg'");
  OpTester loss_shape = InternalOp(ops::kNegativeLogLikelihoodLossGradOp);
  loss_shape.Input(Random(DType::kFloat32, {4}, 3)).Input(x).Input(labels);
  ExpectRunErrorOnBoth(loss_shape, "; expected float [] (the loss's type and shape)");
  OpTester target = InternalOp(ops::kNegativeLogLikelihoodLossGradOp);
  target.Input(dloss).Input(x).Input(Labels(DType::kInt64, {3}, 3, 2, false, 0));
  ExpectRunErrorOnBoth(target, "checked as the forward's");
  OpTester weights = InternalOp(ops::kSoftmaxCrossEntropyLossGradOp);
  weights.Input(dloss).Input(x).Input(labels).Input(Random(DType::kFloat32, {4}, 3));
  ExpectRunErrorOnBoth(weights, ": expected 3 elements, got shape [4]");
}

TEST(CudaLossGradLabelTest, LabelOutsideTheClassesGivesNanOnTheDevice) {
  ONNXAMP_REQUIRE_CUDA();
  // The CPU refuses the run; the device kernel cannot without synchronising, and marks the position with NaN.
  OpTester t = InternalOp(ops::kSoftmaxCrossEntropyLossGradOp);
  t.Input(Random(DType::kFloat32, {3}, 5, 0.5, 2))
      .Input(Random(DType::kFloat32, {3, 4}, 1, -3, 0))
      .Input(TensorOf(DType::kInt64, {3}, {0, 4, 2}));
  t.Attr(Attribute::String("reduction", "none"));
  StatusOr<std::vector<ir::Tensor>> out = RunOnCuda(t);
  ASSERT_TRUE(out.ok()) << out.status().message();
  const std::vector<double> d = AsDoubles((*out)[0]);
  ASSERT_EQ(d.size(), 12u);
  for (int c = 0; c < 4; ++c) {
    EXPECT_FALSE(std::isnan(d[c])) << c;
    EXPECT_TRUE(std::isnan(d[4 + c])) << c;
    EXPECT_FALSE(std::isnan(d[8 + c])) << c;
  }
}

// ---- SumToShape --------------------------------------------------------------------------------------------------

class CudaSumToShapeTest : public ::testing::TestWithParam<DType> {};

TEST_P(CudaSumToShapeTest, BroadcastSourceShapesMatchCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dtype = GetParam();
  struct Case {
    std::vector<int64_t> g;
    std::vector<int64_t> target;
  };
  const std::vector<Case> cases = {
      {{2, 3}, {3}},
      {{2, 3}, {2, 1}},
      {{2, 3}, {1, 1}},
      {{2, 3}, {}},
      {{4, 5, 6}, {5, 1}},
      {{4, 5, 6}, {1, 5, 1}},
      {{3, 4, 5}, {3, 1, 5}},
      {{2, 3, 4, 5}, {1, 3, 1, 5}},
      {{7}, {7}},
      {{7}, {1}},
      {{}, {}},
      {{1}, {}},
      {{17, 1, 300}, {1, 300}},
      {{1000, 33}, {33}},
      {{33, 1000}, {33, 1}},
      {{5000}, {}},
      {{2, 1, 3}, {1, 1, 3}},
      {{3, 257, 9}, {257, 1}},
      {{0, 3}, {3}},
      {{0, 3}, {1, 3}},
      {{2, 0}, {2, 1}},
      {{3, 0}, {0}},
      {{4, 1, 1, 6}, {1, 1, 6}},
      {{6, 2, 5, 2, 3}, {2, 1, 2, 1}},
  };
  uint32_t seed = 90;
  for (const Case& c : cases) {
    // Mostly positive values: sums grow with their length instead of cancelling to near 0, where the float
    // accumulation of the device (double on the CPU) would be compared against an absolute tolerance alone.
    OpTester t = InternalOp(ops::kSumToShapeOp);
    t.Input(Random(dtype, c.g, seed++, -0.5, 1.5));
    t.Input(Int64Tensor({static_cast<int64_t>(c.target.size())}, c.target));
    ExpectCudaMatchesCpu(t, "SumToShape " + DimsToString(c.g) + " to " + DimsToString(c.target));
  }
}

INSTANTIATE_TEST_SUITE_P(Types, CudaSumToShapeTest, ::testing::ValuesIn(FloatTypes()), DTypeParamName());

TEST(CudaSumToShapeErrorsTest, RefusedAsOnTheCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const ir::Tensor g = Random(DType::kFloat32, {2, 3}, 1);
  OpTester more = InternalOp(ops::kSumToShapeOp);
  more.Input(g).Input(Int64Tensor({3}, {1, 2, 3}));
  ExpectRunErrorOnBoth(more, "cannot sum [2,3] to [1,2,3]: the target has more dims");
  OpTester dim = InternalOp(ops::kSumToShapeOp);
  dim.Input(g).Input(Int64Tensor({2}, {2, 2}));
  ExpectRunErrorOnBoth(dim, "cannot sum [2,3] to [2,2]: dim 1 is 3, target 2");
}

// ---- ReduceProdGrad ----------------------------------------------------------------------------------------------

class CudaReduceProdGradTest : public ::testing::TestWithParam<DType> {};

TEST_P(CudaReduceProdGradTest, ReducedDimsAndZerosMatchCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dtype = GetParam();
  struct Case {
    std::vector<int64_t> x;
    std::vector<int64_t> dy;
  };
  const std::vector<Case> cases = {
      {{2, 3, 4}, {1, 3, 4}},
      {{2, 3, 4}, {2, 1, 4}},
      {{2, 3, 4}, {2, 3, 1}},
      {{2, 3, 4}, {1, 1, 1}},
      {{2, 3, 4}, {3, 4}},
      {{2, 3, 4}, {1, 3, 1}},
      {{2, 3}, {}},
      {{1, 5}, {1, 1}},
      {{5, 1}, {1, 1}},
      {{7}, {7}},
      {{}, {}},
      {{2, 300}, {2, 1}},
      {{300, 3}, {1, 3}},
      {{3, 1, 4, 5}, {1, 1, 4, 1}},
      {{0, 3}, {1, 3}},
      {{2, 0}, {2, 1}},
  };
  uint32_t seed = 120;
  for (const Case& c : cases) {
    // Values near 1 keep the long products finite in fp16; zeros (one and several per group) test the exact path.
    for (int zeros_every : {0, 7, 2}) {
      const ir::Tensor x = zeros_every == 0 ? Random(dtype, c.x, seed++, 0.8, 1.25)
                                            : RandomWith(dtype, c.x, seed++, -1.25, 1.25, 0.0, zeros_every);
      const ir::Tensor dy = Random(dtype, c.dy, seed++, -2, 2);
      OpTester t = InternalOp(ops::kReduceProdGradOp);
      t.Input(dy).Input(x);
      ExpectCudaMatchesCpu(t, "ReduceProdGrad X " + DimsToString(c.x) + " dY " + DimsToString(c.dy) +
                                  (zeros_every ? " zeros every " + std::to_string(zeros_every) : ""));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, CudaReduceProdGradTest, ::testing::ValuesIn(FloatTypes()), DTypeParamName());

TEST(CudaReduceProdGradErrorsTest, RefusedAsOnTheCpu) {
  ONNXAMP_REQUIRE_CUDA();
  OpTester t = InternalOp(ops::kReduceProdGradOp);
  t.Input(Random(DType::kFloat32, {2, 2}, 1)).Input(Random(DType::kFloat32, {2, 3}, 2));
  ExpectRunErrorOnBoth(t, "dY [2,2] is not a reduction of X [2,3]: dim 1 is 2, X has 3");
}

// ---- determinism -------------------------------------------------------------------------------------------------

// Every reduction in these kernels folds in a fixed order (no atomics): the same node run twice gives the same bits,
// here on sizes that take the block-wide and split paths.
TEST(CudaGradDeterminismTest, SameNodeTwiceGivesSameBits) {
  ONNXAMP_REQUIRE_CUDA();
  for (DType dtype : FloatTypes()) {
    const std::string type = " " + Name(dtype);
    for (const char* op : {ops::kSoftmaxGradOp, ops::kLogSoftmaxGradOp}) {
      for (const auto& dims : {std::vector<int64_t>{16, 6000}, std::vector<int64_t>{64, 100, 3}}) {
        OpTester t = InternalOp(op);
        t.Input(Random(dtype, dims, 1, -2, 2)).Input(Random(dtype, dims, 2, 0, 1)).Attr(Attribute::Int("axis", 1));
        ExpectSameBitsTwice(t, std::string(op) + " " + DimsToString(dims) + type);
      }
    }
    for (const char* op : {ops::kSoftmaxCrossEntropyLossGradOp, ops::kNegativeLogLikelihoodLossGradOp}) {
      OpTester t = InternalOp(op);
      t.Input(Random(dtype, {}, 3, 0.5, 2))
          .Input(Random(dtype, {4096, 37}, 4, -5, 0))
          .Input(Labels(DType::kInt64, {4096}, 37, 5, true, 3))
          .Input(Random(DType::kFloat32, {37}, 6, 0.1, 2))
          .Attr(Attribute::Int("ignore_index", 3));
      ExpectSameBitsTwice(t, std::string(op) + " mean with weights" + type);
    }
    for (const auto& target : {std::vector<int64_t>{257}, std::vector<int64_t>{4096, 1}, std::vector<int64_t>{}}) {
      OpTester t = InternalOp(ops::kSumToShapeOp);
      t.Input(Random(dtype, {4096, 257}, 7, -1, 1)).Input(Int64Tensor({static_cast<int64_t>(target.size())}, target));
      ExpectSameBitsTwice(t, "SumToShape [4096, 257] to " + DimsToString(target) + type);
    }
    OpTester prod = InternalOp(ops::kReduceProdGradOp);
    prod.Input(Random(dtype, {64, 1}, 8, -2, 2)).Input(Random(dtype, {64, 500}, 9, 0.9, 1.1));
    ExpectSameBitsTwice(prod, "ReduceProdGrad [64, 500]" + type);
    OpTester gelu = InternalOp(ops::kGeluGradOp);
    gelu.Input(Random(dtype, {100000}, 10, -3, 3)).Input(Random(dtype, {100000}, 11, -5, 5));
    ExpectSameBitsTwice(gelu, "GeluGrad" + type);
    OpTester dropout = InternalOp(ops::kDropoutGradOp);
    dropout.Input(Random(dtype, {100000}, 12, -3, 3)).Input(TensorOf(DType::kFloat32, {}, {0.3})).Input(Bool(true));
    dropout.Attr(Attribute::String("seed_from", "y"));
    ExpectSameBitsTwice(dropout, "DropoutGrad" + type);
  }
}

}  // namespace
}  // namespace onnxamp::testing
