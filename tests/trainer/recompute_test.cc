// Activation recomputation (trainer/graph/recompute.h): the train graph with segments recomputed computes the same
// bits as without (gradients, loss, updated statistics; Dropout masks included), on the bundled models in FP32 and
// mixed precision and through the trainer, while its planned arena holds fewer activations.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "converter/model_clone.h"
#include "runtime/executor/session.h"
#include "tests/trainer/conv_chain.h"
#include "tests/trainer/train_test_util.h"
#include "tools/gen_models/builder.h"
#include "trainer/graph/recompute.h"
#include "trainer/graph/training_graph.h"
#include "trainer/trainer.h"

namespace onnxamp::trainer {
namespace {

using ir::Attribute;
using test_util::AddInitialStateFeeds;
using test_util::LoadReference;

constexpr int64_t kBatch = 4, kChannels = test_util::kChainChannels, kSide = test_util::kChainSide,
                  kClasses = test_util::kChainClasses;
constexpr uint64_t kActivation = kBatch * kChannels * kSide * kSide * sizeof(float);

// The memory tests' chain, with residual Adds (and Dropout).
ir::Model Chain(int blocks, bool dropout) {
  return test_util::ConvChain(blocks, {.dropout = dropout, .residual = true});
}

TrainingGraphs Build(const ir::Model& model, TrainingGraphOptions options, int segments) {
  options.recompute.segments = segments;
  options.recompute.batch = kBatch;
  StatusOr<TrainingGraphs> g = BuildTrainingGraphs(model, options);
  EXPECT_TRUE(g.ok()) << g.status().message();
  return g.ok() ? std::move(g).value() : TrainingGraphs();
}

struct Result {
  std::vector<ir::Tensor> outputs;  // loss, gradients, updated buffers
  exec::RunStats stats;             // of the second (planned) run
};

// Two runs of the train graph on `data` (the feeds of the model's inputs and the labels) with rng_step 7; the second
// run's outputs and stats.
Result RunTrain(const TrainingGraphs& g, std::vector<ir::Tensor> feeds) {
  AddInitialStateFeeds(g, 1024.0f, &feeds);
  exec::SessionOptions session_options;
  session_options.mode = exec::SessionMode::kTraining;
  session_options.num_threads = 1;
  StatusOr<std::unique_ptr<exec::Session>> session =
      exec::Session::Create(converter::CloneModel(g.train), session_options);
  EXPECT_TRUE(session.ok()) << session.status().message();
  if (!session.ok()) return {};
  exec::RunOptions run;
  run.rng_step = 7;
  run.fetch = {g.loss};
  for (const Parameter& p : g.params) run.fetch.push_back(p.gradient);
  for (const Buffer& b : g.buffers) {
    if (!b.updated.empty()) run.fetch.push_back(b.updated);
  }
  Result r;
  for (int i = 0; i < 2; ++i) {
    StatusOr<std::vector<ir::Tensor>> out = (*session)->Run(feeds, run, &r.stats);
    EXPECT_TRUE(out.ok()) << out.status().message();
    if (!out.ok()) return {};
    r.outputs = std::move(out).value();
  }
  return r;
}

void ExpectSameBits(const Result& a, const Result& b, const TrainingGraphs& g) {
  ASSERT_EQ(a.outputs.size(), b.outputs.size());
  for (size_t i = 0; i < a.outputs.size(); ++i) {
    const std::string what = i == 0 ? "loss" : i <= g.params.size() ? g.params[i - 1].gradient : "a buffer";
    ASSERT_EQ(a.outputs[i].dims(), b.outputs[i].dims()) << what;
    ASSERT_EQ(a.outputs[i].nbytes(), b.outputs[i].nbytes()) << what;
    EXPECT_EQ(std::memcmp(a.outputs[i].data(), b.outputs[i].data(), a.outputs[i].nbytes()), 0) << what;
  }
}

std::vector<ir::Tensor> ChainFeeds(const TrainingGraphs& g, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal;
  ir::Tensor x(DType::kFloat32, {kBatch, kChannels, kSide, kSide});
  for (float& v : x.mutable_values<float>()) v = normal(gen);
  x.set_name("x");
  ir::Tensor labels(DType::kInt64, {kBatch});
  for (int64_t i = 0; i < kBatch; ++i) labels.mutable_values<int64_t>()[i] = (i * 3) % kClasses;
  labels.set_name(g.labels);
  return {x, labels};
}

int CountOps(const ir::Model& m, const std::string& op) {
  int n = 0;
  for (const ir::Node* node : m.graph->nodes()) n += node->op_type() == op;
  return n;
}

TEST(Recompute, ChainHoldsFewerActivationsForTheSameBits) {
  const ir::Model model = Chain(12, /*dropout=*/false);
  const TrainingGraphs plain = Build(model, {}, 0);
  const TrainingGraphs recomputed = Build(model, {}, kRecomputeAuto);
  EXPECT_EQ(plain.recompute.segments, 0);
  EXPECT_EQ(std::count(plain.train_passes.begin(), plain.train_passes.end(), "recompute"), 0);
  EXPECT_EQ(recomputed.train_passes.back(), "recompute");
  const RecomputeReport& r = recomputed.recompute;
  EXPECT_GE(r.segments, 3) << r.why_not;
  EXPECT_GT(r.nodes, 0);
  EXPECT_FALSE(r.checkpoints.empty());
  EXPECT_LT(r.bytes_after, r.bytes_before / 2);
  // Each block's Conv and Relu outputs are what the backward pass reads (2 activations a block).
  EXPECT_GE(r.bytes_before, 24 * kActivation);
  EXPECT_GT(CountOps(recomputed.train, "Conv"), CountOps(plain.train, "Conv"));

  const Result a = RunTrain(plain, ChainFeeds(plain, 1));
  const Result b = RunTrain(recomputed, ChainFeeds(recomputed, 1));
  ExpectSameBits(a, b, plain);
  ASSERT_TRUE(a.stats.planned && b.stats.planned);
  EXPECT_LT(b.stats.arena_bytes, a.stats.arena_bytes * 6 / 10)
      << "arena " << a.stats.arena_bytes / kActivation << " -> " << b.stats.arena_bytes / kActivation << " activations";
  EXPECT_GE(a.stats.arena_bytes, 24 * kActivation);
}

TEST(Recompute, CopiedDropoutDrawsTheOriginalsMask) {
  const ir::Model model = Chain(8, /*dropout=*/true);
  const TrainingGraphs plain = Build(model, {}, 0);
  const TrainingGraphs recomputed = Build(model, {}, 4);
  ASSERT_GT(recomputed.recompute.segments, 1) << recomputed.recompute.why_not;
  int copies = 0;
  for (const ir::Node* n : recomputed.train.graph->nodes()) {
    if (n->op_type() != "Dropout" || n->name().find("_recompute") == std::string::npos) continue;
    ++copies;
    const ir::Attribute* from = n->FindAttribute("seed_from");
    ASSERT_NE(from, nullptr) << n->name();
    const ir::Value* original = recomputed.train.graph->FindValue(from->s);
    ASSERT_NE(original, nullptr) << from->s;
    ASSERT_NE(original->producer(), nullptr);
    EXPECT_EQ(original->producer()->op_type(), "Dropout");
  }
  EXPECT_GT(copies, 0);
  ExpectSameBits(RunTrain(plain, ChainFeeds(plain, 2)), RunTrain(recomputed, ChainFeeds(recomputed, 2)), plain);
}

// models/ in FP32, FP16 and BF16 AMP, two and three segments: the same loss, gradients and statistics, bit for bit.
TEST(Recompute, BundledModelsComputeTheSameBits) {
  struct Case {
    const char* model;
    std::vector<int64_t> dims;
    int64_t class_axis;
  };
  for (const Case& c :
       {Case{"mlp.onnx", {256}, 1}, Case{"cnn.onnx", {3, 32, 32}, 1}, Case{"transformer.onnx", {32}, -1}}) {
    const ir::Model model = LoadReference(c.model);
    for (DType amp : {DType::kUndefined, DType::kFloat16, DType::kBFloat16}) {
      for (int segments : {2, 3, 40}) {
        SCOPED_TRACE(std::string(c.model) + " " + std::string(amp == DType::kUndefined ? "fp32" : DTypeName(amp)) +
                     " " + std::to_string(segments) + " segments");
        TrainingGraphOptions options;
        options.amp = amp;
        options.loss.class_axis = c.class_axis;
        const TrainingGraphs plain = Build(model, options, 0);
        const TrainingGraphs recomputed = Build(model, options, segments);
        EXPECT_GE(recomputed.recompute.segments, 2) << recomputed.recompute.why_not;
        EXPECT_GT(recomputed.recompute.nodes, 0);
        // The same feeds for both.
        std::mt19937 gen(5);
        const bool tokens = std::string(c.model) == "transformer.onnx";
        std::vector<int64_t> dims = {kBatch};
        dims.insert(dims.end(), c.dims.begin(), c.dims.end());
        ir::Tensor x(tokens ? DType::kInt64 : DType::kFloat32, dims);
        if (tokens) {
          for (int64_t& v : x.mutable_values<int64_t>()) v = static_cast<int64_t>(gen() % 128);
        } else {
          std::normal_distribution<float> normal;
          for (float& v : x.mutable_values<float>()) v = normal(gen);
        }
        x.set_name(model.graph->inputs()[0]->name());
        ir::Tensor labels(DType::kInt64, tokens ? std::vector<int64_t>{kBatch, 32} : std::vector<int64_t>{kBatch});
        for (int64_t& v : labels.mutable_values<int64_t>()) v = static_cast<int64_t>(gen() % (tokens ? 128 : 10));
        labels.set_name(plain.labels);
        const std::vector<ir::Tensor> feeds = {x, labels};
        ExpectSameBits(RunTrain(plain, feeds), RunTrain(recomputed, feeds), plain);
      }
    }
  }
}

TEST(Recompute, TrainerStepsMatchWithoutIt) {
  const ir::Model model = LoadReference("cnn.onnx");
  const Dataset data = test_util::RandomClassData(model, {3, 32, 32}, 24, 10, 9);
  std::vector<ir::Tensor> values[2];
  for (int on = 0; on < 2; ++on) {
    TrainerOptions o;
    o.steps = 3;
    o.batch_size = 8;
    o.threads = 1;
    o.accumulate = 2;
    o.schedule.base_lr = 0.01;
    o.graph.amp = DType::kFloat16;
    o.graph.recompute.segments = on ? kRecomputeAuto : 0;
    o.graph.recompute.batch = 4;
    StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(model, o, data);
    ASSERT_TRUE(t.ok()) << t.status().message();
    if (on) {
      EXPECT_GE((*t)->graphs().recompute.segments, 2) << (*t)->graphs().recompute.why_not;
    }
    while (!(*t)->Done()) {
      StatusOr<StepRecord> r = (*t)->Step();
      ASSERT_TRUE(r.ok()) << r.status().message();
    }
    values[on] = (*t)->TrainedValues();
  }
  ASSERT_EQ(values[0].size(), values[1].size());
  for (size_t i = 0; i < values[0].size(); ++i) {
    ASSERT_EQ(values[0][i].nbytes(), values[1][i].nbytes());
    EXPECT_EQ(std::memcmp(values[0][i].data(), values[1][i].data(), values[0][i].nbytes()), 0) << values[0][i].name();
  }
}

// A graph whose backward pass reads nothing worth recomputing is left as it is, and says why.
TEST(Recompute, NothingToGainLeavesTheGraph) {
  ir::Model model = gen::NewModel("linear", "one Gemm");
  gen::GraphBuilder b(*model.graph);
  ir::Value* x = b.Input("x", DType::kFloat32, gen::Dims("batch", 16));
  ir::Value* w = b.Param("w", {4, 16}, 0.25);
  ir::Value* y = b.Op("Gemm", "fc", {x, w}, {Attribute::Int("transB", 1)});
  b.Output(y, "y", DType::kFloat32, gen::Dims("batch", 4));
  const TrainingGraphs plain = Build(model, {}, 0);
  const TrainingGraphs asked = Build(model, {}, kRecomputeAuto);
  EXPECT_EQ(asked.recompute.segments, 0);
  EXPECT_FALSE(asked.recompute.why_not.empty());
  EXPECT_EQ(asked.train.graph->num_nodes(), plain.train.graph->num_nodes());
}

TEST(Recompute, ParsesItsOption) {
  EXPECT_EQ(*ParseRecompute("off"), 0);
  EXPECT_EQ(*ParseRecompute("auto"), kRecomputeAuto);
  EXPECT_EQ(*ParseRecompute("5"), 5);
  for (const char* bad : {"1", "0", "-3", "x", "4x", ""}) {
    EXPECT_EQ(ParseRecompute(bad).status().message(),
              std::string("--recompute must be 'off', 'auto' or a number of segments >= 2, got '") + bad + "'");
  }
  EXPECT_EQ(RecomputeName(0), "off");
  EXPECT_EQ(RecomputeName(kRecomputeAuto), "auto");
  EXPECT_EQ(RecomputeName(3), "3");
}

}  // namespace
}  // namespace onnxamp::trainer
