// The backward GEMMs of the bundled mlp's training graphs in a CUDA training session (cuda::FuseBackwardGemms): which
// nodes fuse (checked without a GPU), and on a GPU the fused train step (the forward Gemm + ReLU fused too) against
// the same graph with graph optimization off: the same loss, and FP32 gradients that differ by no more than the
// fp16/bf16 rounding the fused GEMMs skip.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "converter/model_clone.h"
#include "importer/model_io.h"
#include "runtime/cuda/cuda_context.h"
#include "runtime/cuda/graph_rewrite.h"
#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/session.h"
#include "runtime/ops/gradient_ops.h"
#include "tests/trainer/train_test_util.h"
#include "trainer/graph/training_graph.h"

namespace onnxamp::trainer {
namespace {

StatusOr<TrainingGraphs> MlpGraphs(DType amp) {
  ONNXAMP_ASSIGN_OR_RETURN(ir::Model model, importer::LoadModel(test_util::ReferenceModelsDir() + "/mlp.onnx"));
  TrainingGraphOptions options;
  options.loss.kind = LossKind::kMse;
  options.amp = amp;
  return BuildTrainingGraphs(model, options);
}

// The mlp's graphs under FP32, FP16 and BF16 AMP, named for messages.
struct MlpCase {
  DType amp;
  std::string what;
  TrainingGraphs graphs;
};
std::vector<MlpCase> MlpCases() {
  std::vector<MlpCase> cases;
  for (const DType amp : {DType::kUndefined, DType::kFloat16, DType::kBFloat16}) {
    const std::string what = amp == DType::kUndefined ? "fp32" : std::string(DTypeName(amp));
    StatusOr<TrainingGraphs> g = MlpGraphs(amp);
    EXPECT_TRUE(g.ok()) << what << ": " << g.status().message();
    if (g.ok()) cases.push_back({amp, what, std::move(g).value()});
  }
  EXPECT_EQ(cases.size(), 3u);
  return cases;
}

exec::SessionOptions TrainingOptions(bool optimize) {
  exec::SessionOptions o;
  o.device = exec::Device::kCuda;
  o.mode = exec::SessionMode::kTraining;
  if (!optimize) o.graph_optimization = exec::GraphOptimization::kNone;
  return o;
}

std::map<std::string, int> OpCounts(const ir::Graph& g) {
  std::map<std::string, int> counts;
  for (const ir::Node* n : g.nodes()) ++counts[n->op_type()];
  return counts;
}

// mlp: Gemm 256-128, Relu, Gemm 128-10, each with a bias. Its backward pass has two weight-gradient GEMMs (dY^T X)
// with their bias gradients, and one input gradient (of the Relu's output).
TEST(CudaBackwardGemms, MlpWeightAndBiasGradientsFuseUnderEveryPrecision) {
  for (const MlpCase& c : MlpCases()) {
    ir::Model model = converter::CloneModel(c.graphs.train);
    const std::map<std::string, int> before = OpCounts(*model.graph);
    ASSERT_TRUE(cuda::OptimizeGraphForCuda(model, TrainingOptions(true)).ok());
    const std::map<std::string, int> after = OpCounts(*model.graph);
    auto count = [](const std::map<std::string, int>& m, const std::string& op) {
      const auto it = m.find(op);
      return it == m.end() ? 0 : it->second;
    };
    EXPECT_EQ(count(after, cuda::kFusedMatMulOp), 2) << c.what;
    // Both bias gradients' SumToShapes went into the GEMMs (the loss's own stay).
    EXPECT_EQ(count(before, ops::kSumToShapeOp) - count(after, ops::kSumToShapeOp), 2) << c.what;
    // Under AMP the four Casts back to FP32 of the parameters' gradients went too.
    EXPECT_EQ(count(before, "Cast") - count(after, "Cast"), c.amp == DType::kUndefined ? 0 : 4) << c.what;
    for (const ir::Node* n : model.graph->nodes()) {
      if (n->op_type() != cuda::kFusedMatMulOp) continue;
      EXPECT_EQ(n->GetString("bias_grad", ""), "A") << c.what;
      EXPECT_EQ(n->GetInt("transA", 0), 1) << c.what;
      EXPECT_EQ(n->GetInt("output_type", 0), c.amp == DType::kUndefined ? 0 : 1) << c.what;
      ASSERT_EQ(n->outputs().size(), 2u);
      for (const ir::Value* v : n->outputs()) {
        ASSERT_NE(v, nullptr);
        EXPECT_EQ(v->type().elem_type(), DType::kFloat32) << c.what << ": " << v->name();
      }
    }
  }
}

// transformer.onnx: Linear layers on [batch, seq, features] (MatMul + Add of a bias). Each weight gradient is one
// GEMM over the flattened rows (the autodiff infers the shapes the model does not declare), which under AMP writes
// the FP32 gradient itself and takes in the bias gradient: the sum of dY over its rows (the bias Add's gradient
// reaches the product unreduced, since the product's last dim is known to be the bias's).
TEST(CudaBackwardGemms, TransformerWeightGradientsAreFlatGemmsWithFp32OutputsAndBiasGradients) {
  StatusOr<ir::Model> loaded = importer::LoadModel(test_util::ReferenceModelsDir() + "/transformer.onnx");
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  const ir::Model& model = *loaded;
  int weight_products = 0, linear_biases = 0;
  for (const ir::Node* n : model.graph->nodes()) {
    weight_products += n->op_type() == "MatMul" && n->input(1) && n->input(1)->initializer();
    const ir::Node* p = n->op_type() == "Add" && n->input(0) ? n->input(0)->producer() : nullptr;
    linear_biases += p && p->op_type() == "MatMul" && n->input(1) && n->input(1)->initializer();
  }
  ASSERT_GT(weight_products, 0);
  ASSERT_GT(linear_biases, 0);
  TrainingGraphOptions options;
  options.loss.class_axis = -1;
  options.amp = DType::kFloat16;
  StatusOr<TrainingGraphs> g = BuildTrainingGraphs(model, options);
  ASSERT_TRUE(g.ok()) << g.status().message();
  ir::Model train = converter::CloneModel(g->train);
  ASSERT_TRUE(cuda::OptimizeGraphForCuda(train, TrainingOptions(true)).ok());
  int fp32_weight_grads = 0, bias_grads = 0;
  for (const ir::Node* n : train.graph->nodes()) {
    if (n->op_type() != cuda::kFusedMatMulOp || n->GetInt("transA", 0) != 1) continue;
    fp32_weight_grads += n->GetInt("output_type", 0) == static_cast<int64_t>(DType::kFloat32);
    bias_grads += n->GetString("bias_grad", "") == "B";
  }
  EXPECT_EQ(fp32_weight_grads, weight_products);
  EXPECT_EQ(bias_grads, linear_biases);
}

double MaxAbs(std::span<const float> v) {
  double m = 0;
  for (float x : v) m = std::max(m, static_cast<double>(std::fabs(x)));
  return m;
}

// A batch of 64 random samples and targets for the mlp's graphs, the initial weights, a loss scale of 1024.
std::vector<ir::Tensor> MlpFeeds(const TrainingGraphs& g) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<ir::Tensor> feeds;
  auto random = [&](const std::string& name, std::vector<int64_t> dims) {
    ir::Tensor t(DType::kFloat32, std::move(dims));
    for (float& x : t.mutable_values<float>()) x = dist(rng);
    t.set_name(name);
    feeds.push_back(std::move(t));
  };
  random(g.data_inputs.at(0), {64, 256});
  random(g.labels, {64, 10});
  ir::Tensor scale(DType::kFloat32, {});
  scale.mutable_values<float>()[0] = 1024.0f;
  scale.set_name(g.loss_scale);
  feeds.push_back(scale);
  for (const Parameter& p : g.params) {
    ir::Tensor t = p.initial;
    t.set_name(p.name);
    feeds.push_back(std::move(t));
  }
  return feeds;
}

// The outputs of `fused` and of `plain` run on the same feeds, or nullopt (and a test failure) when either fails or
// their counts differ.
struct BothRuns {
  std::vector<ir::Tensor> got, want;
};
std::optional<BothRuns> RunBoth(exec::Session& fused, exec::Session& plain, const std::vector<ir::Tensor>& feeds,
                                const std::string& what) {
  StatusOr<std::vector<ir::Tensor>> got = fused.Run(feeds);
  StatusOr<std::vector<ir::Tensor>> want = plain.Run(feeds);
  EXPECT_TRUE(got.ok()) << what << ": " << got.status().message();
  EXPECT_TRUE(want.ok()) << what << ": " << want.status().message();
  if (!got.ok() || !want.ok()) return std::nullopt;
  EXPECT_EQ(got->size(), want->size()) << what;
  if (got->size() != want->size()) return std::nullopt;
  return BothRuns{std::move(got).value(), std::move(want).value()};
}

// The ReLU's gradient in a CUDA training session (exec::FuseActivationGradients): the forward Gemm + ReLU writes its
// mask and the input gradient's GEMM applies it. Run on the CPU kernels (the references of the CUDA ones), the step is
// the one without that pass, bit for bit: the loss, the logits and every gradient.
TEST(CudaBackwardGemms, ReluGradientFusionLeavesTheMlpStepAsItWas) {
  for (const MlpCase& c : MlpCases()) {
    // What a CUDA session makes of the graph: the generic passes, then the CUDA ones; and the same without the ReLU
    // gradient fusion.
    ir::Model with = converter::CloneModel(c.graphs.train);
    ASSERT_TRUE(exec::OptimizeForInference(with, TrainingOptions(true)).ok());
    ir::Model without = converter::CloneModel(with);
    ASSERT_TRUE(cuda::OptimizeGraphForCuda(with, TrainingOptions(true)).ok());
    bool changed = false;
    ASSERT_TRUE(exec::FuseBackwardGemms(*without.graph, &changed).ok());
    ASSERT_TRUE(changed);
    if (without.OpsetVersion(cuda::kFusedMatMulDomain) == 0) without.SetOpsetVersion(cuda::kFusedMatMulDomain, 1);
    const std::map<std::string, int> a = OpCounts(*with.graph), b = OpCounts(*without.graph);
    EXPECT_EQ(b.at(ops::kReluGradOp), 1) << c.what;
    EXPECT_EQ(a.count(ops::kReluGradOp), 0u) << c.what;
    int masks = 0, masked = 0;
    for (const ir::Node* n : with.graph->nodes()) {
      masks += n->GetInt("relu_mask", 0) == 1;
      masked += n->GetString("activation_grad", "") == "Relu";
    }
    EXPECT_EQ(masks, 1) << c.what;
    EXPECT_EQ(masked, 1) << c.what;
    exec::SessionOptions cpu;
    cpu.mode = exec::SessionMode::kTraining;
    cpu.graph_optimization = exec::GraphOptimization::kNone;
    cpu.num_threads = 2;
    auto fused = exec::Session::Create(std::move(with), cpu);
    auto plain = exec::Session::Create(std::move(without), cpu);
    ASSERT_TRUE(fused.ok()) << c.what << ": " << fused.status().message();
    ASSERT_TRUE(plain.ok()) << c.what << ": " << plain.status().message();
    const std::optional<BothRuns> runs = RunBoth(**fused, **plain, MlpFeeds(c.graphs), c.what);
    ASSERT_TRUE(runs.has_value());
    for (size_t i = 0; i < runs->got.size(); ++i) {
      const ir::Tensor& x = runs->got[i];
      const std::string name = c.what + ": " + c.graphs.train.graph->outputs()[i]->name();
      EXPECT_EQ(x.dims(), runs->want[i].dims()) << name;
      EXPECT_TRUE(std::ranges::equal(x.bytes(), runs->want[i].bytes())) << name;
      EXPECT_GT(MaxAbs(x.values<float>()), 0) << name;
    }
  }
}

TEST(CudaBackwardGemms, FusedMlpStepMatchesTheUnfusedOne) {
  if (!cuda::RegisterCudaBackend()) GTEST_SKIP() << "no CUDA device here";
  for (const MlpCase& c : MlpCases()) {
    const std::vector<ir::Tensor> feeds = MlpFeeds(c.graphs);
    auto fused = exec::Session::Create(converter::CloneModel(c.graphs.train), TrainingOptions(true));
    auto plain = exec::Session::Create(converter::CloneModel(c.graphs.train), TrainingOptions(false));
    ASSERT_TRUE(fused.ok()) << fused.status().message();
    ASSERT_TRUE(plain.ok()) << plain.status().message();
    // The two backward GEMMs with their bias gradients, the forward Gemm with its ReLU (the session optimizer's
    // exec::FuseMatMulEpilogues) writing its mask, and the input gradient's GEMM applying it (cuBLASLt's DRELU).
    int backward_nodes = 0, forward_nodes = 0, masked_nodes = 0;
    for (const ir::Node* n : (*fused)->model().graph->nodes()) {
      if (n->op_type() != cuda::kFusedMatMulOp) continue;
      backward_nodes += n->FindAttribute("bias_grad") != nullptr;
      forward_nodes += n->GetString("activation", "") == "Relu" && n->GetInt("relu_mask", 0) == 1;
      masked_nodes += n->GetString("activation_grad", "") == "Relu";
    }
    EXPECT_EQ(backward_nodes, 2) << c.what;
    EXPECT_EQ(forward_nodes, 1) << c.what;
    EXPECT_EQ(masked_nodes, 1) << c.what;
    EXPECT_TRUE((*fused)->placement().on_cpu.empty()) << c.what << ": " << (*fused)->DescribePlacement();
    for (int run = 0; run < 2; ++run) {  // the second run reuses the cached cuBLASLt plans
      const std::optional<BothRuns> runs = RunBoth(**fused, **plain, feeds, c.what);
      ASSERT_TRUE(runs.has_value());
      const std::vector<ir::Tensor>* got = &runs->got;
      const std::vector<ir::Tensor>* want = &runs->want;
      const std::vector<ir::Value*>& outs = c.graphs.train.graph->outputs();
      for (size_t i = 0; i < got->size(); ++i) {
        const std::string name = outs[i]->name();
        const auto x = (*got)[i].values<float>();
        const auto y = (*want)[i].values<float>();
        ASSERT_EQ(x.size(), y.size()) << c.what << ": " << name;
        // The forward pass computes the same (Gemm + ReLU fused or not): the loss and logits agree to FP32 GEMM
        // rounding. A gradient of the fused step is the unfused one before its rounding to fp16/bf16 (unit roundoff
        // 2^-11 / 2^-8), up to the FP32 sums' order; relative to the tensor's largest element.
        const double unit = c.amp == DType::kFloat16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
        const double rel = c.amp == DType::kUndefined ? 1e-4 : 2 * unit;
        const double scale_of = std::max(MaxAbs(y), 1e-30);
        double worst = 0;
        for (size_t j = 0; j < x.size(); ++j) worst = std::max(worst, std::fabs(double{x[j]} - y[j]) / scale_of);
        EXPECT_LE(worst, rel) << c.what << " run " << run << ": " << name;
      }
    }
  }
}

}  // namespace
}  // namespace onnxamp::trainer
