// The memory plan of an FP16 AMP training graph of an MLP, with the weight casts externalized as on a device: the
// gradients are the graph outputs themselves (no Identity copied out of the arena) and each layer's FP16 weight
// gradient is cast to FP32 right after its GEMM, so the arena holds one of them at a time, not every layer's.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "converter/model_clone.h"
#include "runtime/executor/session.h"
#include "tests/trainer/train_test_util.h"
#include "tools/gen_models/models.h"
#include "trainer/graph/training_graph.h"
#include "trainer/graph/weight_casts.h"

namespace onnxamp::trainer {
namespace {

constexpr int64_t kWidth = 256, kLayers = 4, kBatch = 8;

TEST(GradientOutputsMemory, AmpMlpArenaHoldsOneLowPrecisionWeightGradient) {
  const ir::Model model = gen::DeepMlp("mlp", kWidth, kLayers, "MLP for the gradient outputs memory test");
  TrainingGraphOptions options;
  options.amp = DType::kFloat16;
  options.loss.kind = LossKind::kMse;
  StatusOr<TrainingGraphs> graphs = BuildTrainingGraphs(model, options);
  ASSERT_TRUE(graphs.ok()) << graphs.status().message();
  ir::Model train = converter::CloneModel(graphs->train);
  const std::vector<LowPrecisionWeight> low = ExternalizeWeightCasts(train, graphs->params, DType::kFloat16);
  ASSERT_EQ(low.size(), graphs->params.size());
  for (const Parameter& p : graphs->params) {
    const ir::Value* g = train.graph->FindValue(p.gradient);
    ASSERT_NE(g, nullptr) << p.gradient;
    ASSERT_NE(g->producer(), nullptr) << p.gradient;
    EXPECT_NE(g->producer()->op_type(), "Identity") << p.gradient;
  }

  exec::SessionOptions session_options;
  session_options.mode = exec::SessionMode::kTraining;
  session_options.num_threads = 1;
  StatusOr<std::unique_ptr<exec::Session>> session = exec::Session::Create(std::move(train), session_options);
  ASSERT_TRUE(session.ok()) << session.status().message();
  std::vector<ir::Tensor> feeds;
  ir::Tensor x(DType::kFloat32, {kBatch, kWidth});
  for (float& v : x.mutable_values<float>()) v = 0.5f;
  x.set_name(model.graph->inputs()[0]->name());
  feeds.push_back(x);
  ir::Tensor y(DType::kFloat32, {kBatch, kWidth});
  y.set_name(graphs->labels);
  feeds.push_back(y);
  test_util::AddInitialStateFeeds(*graphs, 1.0f, &feeds);
  exec::RunOptions run;
  run.fetch = {graphs->loss};
  for (const Parameter& p : graphs->params) run.fetch.push_back(p.gradient);
  for (const LowPrecisionWeight& w : low) {
    ir::Tensor t(DType::kFloat16, graphs->params[w.param].initial.dims());
    t.set_name(w.input);
    feeds.push_back(t);
  }
  exec::RunStats stats;
  for (int i = 0; i < 2; ++i) {
    StatusOr<std::vector<ir::Tensor>> out = (*session)->Run(feeds, run, &stats);
    ASSERT_TRUE(out.ok()) << out.status().message();
  }
  ASSERT_TRUE(stats.planned);
  // One layer's FP16 weight gradient, plus the activations and small values of a batch of 8 (a few KiB each).
  const uint64_t weight_grad_fp16 = kWidth * kWidth * 2;
  EXPECT_LE(stats.arena_bytes, weight_grad_fp16 + weight_grad_fp16 / 2) << "arena " << stats.arena_bytes;
}

}  // namespace
}  // namespace onnxamp::trainer
