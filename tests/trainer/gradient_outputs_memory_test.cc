// The memory plan of an FP16 AMP training graph of an MLP, with the weight casts externalized as on a device: the
// gradients are the graph outputs themselves (no Identity copied out of the arena) and each layer's FP16 weight
// gradient is cast to FP32 right after its GEMM, so the arena holds one of them at a time, not every layer's. And the
// CPU trainer's gradients computed straight into its store on the bundled models' training graphs.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "converter/model_clone.h"
#include "runtime/executor/session.h"
#include "tests/trainer/train_test_util.h"
#include "tools/gen_models/models.h"
#include "trainer/graph/training_graph.h"
#include "trainer/graph/weight_casts.h"
#include "trainer/state/parameter_store.h"

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

// The CPU trainer has each step's gradients computed straight into its store (RunOptions::output_into with views of
// the gradient buffer): on the training graphs of the bundled models, in FP32 and FP16 AMP, every gradient is made by
// a kernel that allocates it, so every one lands in the store, with the values a run without output_into gives.
TEST(GradientOutputsMemory, BundledModelsGradientsLandInTheStore) {
  struct Case {
    const char* file;
    std::vector<int64_t> x;  // a batch of 2
    DType x_type;
    int64_t classes, class_axis;
    std::vector<int64_t> labels;
  };
  const std::vector<Case> cases = {{"mlp.onnx", {2, 256}, DType::kFloat32, 10, 1, {2}},
                                   {"cnn.onnx", {2, 3, 32, 32}, DType::kFloat32, 10, 1, {2}},
                                   {"transformer.onnx", {2, 32}, DType::kInt64, 128, -1, {2, 32}}};
  for (const Case& c : cases) {
    for (DType amp : {DType::kUndefined, DType::kFloat16}) {
      const std::string what = StrCat(c.file, amp == DType::kUndefined ? " fp32" : " fp16");
      const ir::Model model = test_util::LoadReference(c.file);
      TrainingGraphOptions options;
      options.amp = amp;
      options.loss.class_axis = c.class_axis;
      StatusOr<TrainingGraphs> graphs = BuildTrainingGraphs(model, options);
      ASSERT_TRUE(graphs.ok()) << what << ": " << graphs.status().message();
      std::vector<ParameterSpec> specs;
      for (const Parameter& p : graphs->params) specs.push_back({p.name, p.initial.dims()});
      StatusOr<ParameterStore> store = ParameterStore::Create(std::move(specs));
      ASSERT_TRUE(store.ok()) << what;
      exec::SessionOptions session_options;
      session_options.mode = exec::SessionMode::kTraining;
      session_options.num_threads = 1;
      StatusOr<std::unique_ptr<exec::Session>> session =
          exec::Session::Create(converter::CloneModel(graphs->train), session_options);
      ASSERT_TRUE(session.ok()) << what << ": " << session.status().message();
      std::vector<ir::Tensor> feeds;
      ir::Tensor x(c.x_type, c.x);
      if (c.x_type == DType::kFloat32) {
        float v = 0.1f;
        for (float& e : x.mutable_values<float>()) e = (v = v * 1.37f > 2 ? -1.9f : v * 1.37f);
      } else {
        int64_t k = 0;
        for (int64_t& e : x.mutable_values<int64_t>()) e = (k += 37) % c.classes;
      }
      x.set_name(graphs->data_inputs[0]);
      feeds.push_back(x);
      ir::Tensor labels(DType::kInt64, c.labels);
      int64_t k = 0;
      for (int64_t& e : labels.mutable_values<int64_t>()) e = (k += 3) % c.classes;
      labels.set_name(graphs->labels);
      feeds.push_back(labels);
      test_util::AddInitialStateFeeds(*graphs, amp == DType::kUndefined ? 1.0f : 1024.0f, &feeds);
      exec::RunOptions run;
      for (const Parameter& p : graphs->params) run.fetch.push_back(p.gradient);
      StatusOr<std::vector<ir::Tensor>> want = (*session)->Run(feeds, run);
      ASSERT_TRUE(want.ok()) << what << ": " << want.status().message();
      for (size_t i = 0; i < graphs->params.size(); ++i) run.output_into.push_back(store->GradView(i));
      for (int r = 0; r < 2; ++r) {  // the first and a planned run
        StatusOr<std::vector<ir::Tensor>> got = (*session)->Run(feeds, run);
        ASSERT_TRUE(got.ok()) << what << ": " << got.status().message();
        for (size_t i = 0; i < graphs->params.size(); ++i) {
          EXPECT_EQ((*got)[i].data(), static_cast<const void*>(store->grad(i).data()))
              << what << ": the gradient of " << graphs->params[i].name << " did not land in the store";
          EXPECT_TRUE((*got)[i].SameContents((*want)[i])) << what << ": " << graphs->params[i].name;
        }
      }
    }
  }
}

}  // namespace
}  // namespace onnxamp::trainer
