// The session optimizer's GEMM epilogue fusion in training sessions (exec::FuseMatMulEpilogues): on the training graphs
// of the bundled models, in FP32 and FP16/BF16 AMP, the forward products absorb their bias and ReLU (parameters are
// graph inputs, cast to the compute type under AMP, and the backward pass reads Shape of the intermediate values),
// and the loss and every gradient stay what the unfused graph computes. Under BF16 AMP a CPU session's weight
// gradients also come out of their GEMM in FP32 (exec::FuseBackwardGemms: output_type float, the Cast gone).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "converter/model_clone.h"
#include "runtime/executor/session.h"
#include "runtime/ops/matmul/fused_matmul.h"
#include "tests/trainer/train_test_util.h"
#include "trainer/graph/training_graph.h"
#include "trainer/graph/weight_casts.h"

namespace onnxamp::trainer {
namespace {

struct TrainRun {
  std::vector<ir::Tensor> outputs;  // the loss, then every parameter's gradient (unscaled, FP32)
  // The session's FusedMatMul nodes: their activation, alpha and input count.
  struct Fused {
    std::string activation;
    float alpha = 1;
    size_t inputs = 0;
  };
  std::vector<Fused> fused;  // the forward products (no output_type)
  int float_outputs = 0;     // FusedMatMul nodes with output_type float: the fused weight gradients
  int relus = 0;
  int casts = 0;
};

// With `external_weights` (as CUDA training does), the AMP graph reads low-precision copies of the parameters as
// graph inputs instead of casting them (ExternalizeWeightCasts).
TrainRun RunTraining(const ir::Model& model, const TrainingGraphOptions& options, const std::vector<ir::Tensor>& data,
                     exec::GraphOptimization level, bool external_weights = false) {
  TrainRun r;
  StatusOr<TrainingGraphs> g = BuildTrainingGraphs(model, options);
  EXPECT_TRUE(g.ok()) << g.status().message();
  if (!g.ok()) return r;
  std::vector<ir::Tensor> feeds = data;
  feeds[0].set_name(g->data_inputs[0]);
  feeds[1].set_name(g->labels);
  const float scale = options.amp == DType::kUndefined ? 1.0f : 1024.0f;
  test_util::AddInitialStateFeeds(*g, scale, &feeds);
  ir::Model train = converter::CloneModel(g->train);
  if (external_weights) {
    const std::vector<LowPrecisionWeight> low = ExternalizeWeightCasts(train, g->params, options.amp);
    EXPECT_FALSE(low.empty());
    for (const LowPrecisionWeight& w : low) {
      feeds.push_back(test_util::LowCopy(g->params[w.param].initial, options.amp, w.input));
    }
  }
  exec::SessionOptions so;
  so.mode = exec::SessionMode::kTraining;
  so.graph_optimization = level;
  so.num_threads = 1;
  auto session = exec::Session::Create(std::move(train), so);
  EXPECT_TRUE(session.ok()) << session.status().message();
  if (!session.ok()) return r;
  for (const ir::Node* n : (*session)->model().graph->nodes()) {
    if (n->op_type() == ops::kFusedMatMulOp && n->FindAttribute("output_type")) {
      EXPECT_EQ(n->GetInt("output_type", 0), static_cast<int64_t>(DType::kFloat32));
      EXPECT_EQ(n->FindAttribute("bias_grad"), nullptr) << "CPU sessions leave bias gradients to SumToShape";
      ++r.float_outputs;
    } else if (n->op_type() == ops::kFusedMatMulOp) {
      r.fused.push_back({n->GetString("activation", ""), n->GetFloat("alpha", 1.0f), n->inputs().size()});
    }
    r.relus += n->op_type() == "Relu";
    r.casts += n->op_type() == "Cast";
  }
  exec::RunOptions run;
  run.fetch.push_back(g->loss);
  for (const Parameter& p : g->params) run.fetch.push_back(p.gradient);
  auto out = (*session)->Run(feeds, run);
  EXPECT_TRUE(out.ok()) << out.status().message();
  if (!out.ok()) return r;
  for (size_t i = 1; i < out->size(); ++i) {
    for (float& v : (*out)[i].mutable_values<float>()) v /= scale;
  }
  r.outputs = std::move(out).value();
  return r;
}

// Every output of `got` within `rel` of `want` relative to the largest |value| of that output, or to a hundredth of
// the largest gradient where an output is nearly zero (transformer.onnx's key bias: the softmax cancels it, so its
// gradient is rounding noise).
void ExpectClose(const TrainRun& want, const TrainRun& got, double rel, const std::string& what) {
  ASSERT_EQ(want.outputs.size(), got.outputs.size()) << what;
  ASSERT_FALSE(want.outputs.empty()) << what;
  double largest = 0;
  for (size_t i = 1; i < want.outputs.size(); ++i) {
    for (float v : want.outputs[i].values<float>()) largest = std::max(largest, std::abs(static_cast<double>(v)));
  }
  for (size_t i = 0; i < want.outputs.size(); ++i) {
    const auto a = want.outputs[i].values<float>();
    const auto b = got.outputs[i].values<float>();
    ASSERT_EQ(a.size(), b.size()) << what << " output " << i;
    double peak = 0, diff = 0;
    for (size_t k = 0; k < a.size(); ++k) {
      ASSERT_TRUE(std::isfinite(b[k])) << what << " output " << i << " [" << k << "]";
      peak = std::max(peak, std::abs(static_cast<double>(a[k])));
      diff = std::max(diff, std::abs(static_cast<double>(a[k]) - b[k]));
    }
    ASSERT_GT(peak, 0) << what << " output " << i << " is zero";
    EXPECT_LE(diff, rel * std::max(peak, i == 0 ? 0.0 : 1e-2 * largest))
        << what << " output " << i << " (" << want.outputs[i].name() << ")";
  }
}

ir::Tensor Features(std::vector<int64_t> dims, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal;
  ir::Tensor x(DType::kFloat32, std::move(dims));
  for (float& v : x.mutable_values<float>()) v = normal(gen);
  return x;
}

ir::Tensor Classes(std::vector<int64_t> dims, int64_t classes, uint32_t seed) {
  std::mt19937 gen(seed);
  ir::Tensor y(DType::kInt64, std::move(dims));
  for (int64_t& v : y.mutable_values<int64_t>()) v = static_cast<int64_t>(gen() % classes);
  return y;
}

struct Case {
  const char* name;
  DType amp;
  double rel;
};

class TrainingFusionTest : public ::testing::TestWithParam<Case> {};

// mlp.onnx: Gemm(C = bias) + Relu, then a Gemm to the logits. The first Gemm and its ReLU become one node; the
// second (a Gemm with only its C) stays a Gemm.
TEST_P(TrainingFusionTest, MlpGemmAndReluBecomeOneNodeWithTheSameGradients) {
  const Case c = GetParam();
  const ir::Model model = test_util::LoadReference("mlp.onnx");
  TrainingGraphOptions options;
  options.amp = c.amp;
  const std::vector<ir::Tensor> data = {Features({16, 256}, 1), Classes({16}, 10, 2)};
  const TrainRun plain = RunTraining(model, options, data, exec::GraphOptimization::kNone);
  const TrainRun fused = RunTraining(model, options, data, exec::GraphOptimization::kAll);
  EXPECT_TRUE(plain.fused.empty());
  EXPECT_EQ(plain.relus, 1);
  ASSERT_EQ(fused.fused.size(), 1u);
  EXPECT_EQ(fused.fused[0].activation, "Relu");
  EXPECT_EQ(fused.relus, 0);
  // The bias is the parameter itself (FP32) or its cast to the compute type.
  EXPECT_EQ(fused.fused[0].inputs, 3u);
  // BF16: both weight gradients (X^T dY of each Gemm) in FP32 from their GEMM, two Casts fewer; FP16 keeps its
  // Casts (their rounding to inf is how an overflow reaches the loss scaler).
  EXPECT_EQ(plain.float_outputs, 0);
  EXPECT_EQ(fused.float_outputs, c.amp == DType::kBFloat16 ? 2 : 0);
  EXPECT_EQ(plain.casts - fused.casts, c.amp == DType::kBFloat16 ? 2 : 0);
  ExpectClose(plain, fused, c.rel, c.name);
}

// The same with the parameters' low-precision copies as graph inputs (the CUDA trainer's graphs): the bias operand
// is then a graph input of the compute type.
TEST_P(TrainingFusionTest, MlpFusesWithLowPrecisionWeightInputs) {
  const Case c = GetParam();
  if (c.amp == DType::kUndefined) GTEST_SKIP() << "FP32 graphs cast no weights";
  const ir::Model model = test_util::LoadReference("mlp.onnx");
  TrainingGraphOptions options;
  options.amp = c.amp;
  const std::vector<ir::Tensor> data = {Features({16, 256}, 5), Classes({16}, 10, 6)};
  const TrainRun plain = RunTraining(model, options, data, exec::GraphOptimization::kNone, true);
  const TrainRun fused = RunTraining(model, options, data, exec::GraphOptimization::kAll, true);
  ASSERT_EQ(fused.fused.size(), 1u);
  EXPECT_EQ(fused.fused[0].activation, "Relu");
  EXPECT_EQ(fused.fused[0].inputs, 3u);
  EXPECT_EQ(fused.relus, 0);
  EXPECT_EQ(fused.float_outputs, c.amp == DType::kBFloat16 ? 2 : 0);
  ExpectClose(plain, fused, c.rel, c.name);
}

// transformer.onnx: MatMul + Add(bias) everywhere, attention scores divided by a constant, an erf-GELU in the MLP.
// A training graph has that GELU as one com.onnxamp Gelu (UseFusedGelu) whose input the backward reads, so it stays
// beside the product; the products still absorb their biases and the score scale.
TEST_P(TrainingFusionTest, TransformerProductsAbsorbBiasAndScaleWithTheSameGradients) {
  const Case c = GetParam();
  const ir::Model model = test_util::LoadReference("transformer.onnx");
  TrainingGraphOptions options;
  options.amp = c.amp;
  options.loss.class_axis = -1;
  const std::vector<ir::Tensor> data = {Classes({2, 32}, 128, 3), Classes({2, 32}, 128, 4)};
  const TrainRun plain = RunTraining(model, options, data, exec::GraphOptimization::kNone);
  const TrainRun fused = RunTraining(model, options, data, exec::GraphOptimization::kAll);
  EXPECT_TRUE(plain.fused.empty());
  EXPECT_GE(fused.fused.size(), 6u);  // Q, K, V, the output projection and the MLP's two layers at least
  // BF16: the weight gradients of those six Linear layers at least (each one GEMM over the flattened rows).
  if (c.amp == DType::kBFloat16) {
    EXPECT_GE(fused.float_outputs, 6);
  } else {
    EXPECT_EQ(fused.float_outputs, 0);
  }
  bool scaled = false;
  for (const TrainRun::Fused& f : fused.fused) scaled |= f.alpha != 1.0f;
  EXPECT_TRUE(scaled) << "the attention scores' scale was not fused";
  ExpectClose(plain, fused, c.rel, c.name);
}

INSTANTIATE_TEST_SUITE_P(Precisions, TrainingFusionTest,
                         ::testing::Values(Case{"fp32", DType::kUndefined, 1e-5}, Case{"fp16", DType::kFloat16, 2e-2},
                                           Case{"bf16", DType::kBFloat16, 5e-2}),
                         [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace onnxamp::trainer
