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
#include "tests/trainer/conv_chain.h"
#include "tests/trainer/train_test_util.h"
#include "trainer/graph/training_graph.h"

namespace onnxamp::trainer {
namespace {

using test_util::ConvChain;
using test_util::kChainChannels;
using test_util::kChainSide;

constexpr int64_t kBatch = 4, kChannels = kChainChannels, kSide = kChainSide, kClasses = test_util::kChainClasses;
// Bytes of one [batch, channels, side, side] float activation.
constexpr uint64_t kActivation = kBatch * kChannels * kSide * kSide * sizeof(float);

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
