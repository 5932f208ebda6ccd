// The training session's static memory plan over forward and backward: for a chain of Conv-BatchNormalization-Relu
// blocks the planned arena stays within the activations the backward pass needs (each block's Conv and Relu outputs,
// what autograd keeps) plus a few values of working space, however deep the chain.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "converter/model_clone.h"
#include "runtime/executor/session.h"
#include "tests/trainer/train_test_util.h"
#include "tools/gen_models/builder.h"
#include "trainer/graph/training_graph.h"

namespace onnxamp::trainer {
namespace {

using ir::Attribute;

constexpr int64_t kBatch = 4, kChannels = 8, kSide = 16, kClasses = 10;
// Bytes of one [batch, channels, side, side] float activation.
constexpr uint64_t kActivation = kBatch * kChannels * kSide * kSide * sizeof(float);

// x [batch, 8, 16, 16] -> `blocks` x (Conv 3x3 -> BatchNormalization -> Relu) -> GlobalAveragePool -> Flatten -> Gemm.
ir::Model ConvChain(int blocks) {
  ir::Model model = gen::NewModel("conv_chain", "Conv-BatchNormalization-Relu blocks for the memory plan test");
  gen::GraphBuilder b(*model.graph);
  ir::Value* h = b.Input("x", DType::kFloat32, gen::Dims("batch", kChannels, kSide, kSide));
  for (int i = 0; i < blocks; ++i) {
    const std::string name = "block" + std::to_string(i);
    ir::Value* w = b.Param(name + ".conv.weight", {kChannels, kChannels, 3, 3}, gen::KaimingBound(kChannels * 9));
    h = b.Op("Conv", name + ".conv", {h, w},
             {Attribute::Ints("kernel_shape", {3, 3}), Attribute::Ints("pads", {1, 1, 1, 1})});
    ir::Value* scale = b.ParamRange(name + ".bn.weight", {kChannels}, 0.5, 1.5);
    ir::Value* bias = b.ParamRange(name + ".bn.bias", {kChannels}, -0.2, 0.2);
    ir::Value* mean = b.ParamRange(name + ".bn.running_mean", {kChannels}, -0.2, 0.2);
    ir::Value* var = b.ParamRange(name + ".bn.running_var", {kChannels}, 0.5, 1.5);
    h = b.Op("BatchNormalization", name + ".bn", {h, scale, bias, mean, var}, {Attribute::Float("epsilon", 1e-5f)});
    h = b.Op("Relu", name + ".relu", {h});
  }
  h = b.Op("GlobalAveragePool", "pool", {h});
  h = b.Op("Flatten", "flatten", {h}, {Attribute::Int("axis", 1)});
  ir::Value* w = b.Param("fc.weight", {kClasses, kChannels}, gen::KaimingBound(kChannels));
  ir::Value* bias = b.Param("fc.bias", {kClasses}, gen::KaimingBound(kChannels));
  h = b.Op("Gemm", "fc", {h, w, bias}, {Attribute::Int("transB", 1)});
  b.Output(h, "logits", DType::kFloat32, gen::Dims("batch", kClasses));
  return model;
}

// RunStats of the second run of the chain's training graph (the first one makes the plan).
exec::RunStats PlannedStats(int blocks) {
  TrainingGraphOptions options;
  options.loss.kind = LossKind::kCrossEntropy;
  StatusOr<TrainingGraphs> graphs = BuildTrainingGraphs(ConvChain(blocks), options);
  EXPECT_TRUE(graphs.ok()) << graphs.status().message();
  if (!graphs.ok()) return {};
  exec::SessionOptions session_options;
  session_options.mode = exec::SessionMode::kTraining;
  session_options.num_threads = 1;
  StatusOr<std::unique_ptr<exec::Session>> session =
      exec::Session::Create(converter::CloneModel(graphs->train), session_options);
  EXPECT_TRUE(session.ok()) << session.status().message();
  if (!session.ok()) return {};

  std::mt19937 gen(3);
  std::normal_distribution<float> normal;
  std::vector<ir::Tensor> feeds;
  ir::Tensor x(DType::kFloat32, {kBatch, kChannels, kSide, kSide});
  for (float& v : x.mutable_values<float>()) v = normal(gen);
  x.set_name("x");
  feeds.push_back(x);
  ir::Tensor labels(DType::kInt64, {kBatch});
  for (int64_t i = 0; i < kBatch; ++i) labels.mutable_values<int64_t>()[i] = i % kClasses;
  labels.set_name(graphs->labels);
  feeds.push_back(labels);
  test_util::AddInitialStateFeeds(*graphs, 1.0f, &feeds);
  exec::RunOptions run;
  run.fetch = {graphs->loss};
  for (const Parameter& p : graphs->params) run.fetch.push_back(p.gradient);
  for (const Buffer& buffer : graphs->buffers) {
    if (!buffer.updated.empty()) run.fetch.push_back(buffer.updated);
  }
  exec::RunStats stats;
  for (int i = 0; i < 2; ++i) {
    StatusOr<std::vector<ir::Tensor>> out = (*session)->Run(feeds, run, &stats);
    EXPECT_TRUE(out.ok()) << out.status().message();
    if (!out.ok()) return {};
  }
  EXPECT_TRUE(stats.planned);
  EXPECT_EQ(stats.unplanned_values, 0);
  return stats;
}

TEST(TrainingMemory, PlannedArenaStaysNearTheActivationsBackwardNeeds) {
  for (int blocks : {2, 6}) {
    SCOPED_TRACE("blocks " + std::to_string(blocks));
    const exec::RunStats stats = PlannedStats(blocks);
    // Autograd keeps each block's Conv output (BatchNormalization's input) and Relu output; the graph input is the
    // caller's. Per-channel statistics, the pooled values and the logits are a few hundred bytes.
    const uint64_t kept = 2 * static_cast<uint64_t>(blocks) * kActivation;
    // Working space: the gradient flowing back, the one being made, and one more while a block's gradients form.
    const uint64_t bound = kept + 3 * kActivation + 64 * 1024;
    EXPECT_GT(stats.arena_bytes, kept);
    EXPECT_LE(stats.arena_bytes, bound) << "arena " << stats.arena_bytes << " bytes, "
                                        << stats.arena_bytes / kActivation << " activations of " << kActivation
                                        << " bytes";
    EXPECT_LE(stats.peak_bytes, bound + 64 * 1024 * blocks);
  }
}

}  // namespace
}  // namespace onnxamp::trainer
