// Activation recomputation (trainer/graph/recompute.h), run as the training session's last rewrite: the session
// computes the same bits as without it (gradients, loss, updated statistics; Dropout masks included), on the bundled
// models and on models whose fusions depend on how many nodes read a value, in FP32 and mixed precision and through
// the trainer, while its planned arena holds fewer activations.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "converter/model_clone.h"
#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/session.h"
#include "runtime/ops/gradient_ops.h"
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

TrainingGraphs Build(const ir::Model& model, const TrainingGraphOptions& options = {}) {
  StatusOr<TrainingGraphs> g = BuildTrainingGraphs(model, options);
  EXPECT_TRUE(g.ok()) << g.status().message();
  return g.ok() ? std::move(g).value() : TrainingGraphs();
}

struct Result {
  std::vector<ir::Tensor> outputs;  // loss, gradients, updated buffers
  exec::RunStats stats;             // of the second (planned) run
  RecomputeReport report;
  ir::Model model;  // the session's graph
};

// A training session of `g` with `segments` (RecomputeHook; 0: none) and two runs on `feeds` (the model's inputs and
// the labels) with rng_step 7: the second run's outputs and stats.
Result RunTrain(const TrainingGraphs& g, std::vector<ir::Tensor> feeds, int segments) {
  AddInitialStateFeeds(g, 1024.0f, &feeds);
  Result r;
  exec::SessionOptions session_options;
  session_options.mode = exec::SessionMode::kTraining;
  session_options.num_threads = 1;
  RecomputeOptions recompute;
  recompute.segments = segments;
  recompute.batch = kBatch;
  session_options.finalize_graph = RecomputeHook(g.train, g.loss_scale, recompute, &r.report);
  EXPECT_EQ(static_cast<bool>(session_options.finalize_graph), segments != 0);
  StatusOr<std::unique_ptr<exec::Session>> session =
      exec::Session::Create(converter::CloneModel(g.train), session_options);
  EXPECT_TRUE(session.ok()) << session.status().message();
  if (!session.ok()) return {};
  r.model = converter::CloneModel((*session)->model());
  exec::RunOptions run;
  run.rng_step = 7;
  run.fetch = {g.loss};
  for (const Parameter& p : g.params) run.fetch.push_back(p.gradient);
  for (const Buffer& b : g.buffers) {
    if (!b.updated.empty()) run.fetch.push_back(b.updated);
  }
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
  const TrainingGraphs g = Build(Chain(12, /*dropout=*/false));
  const Result a = RunTrain(g, ChainFeeds(g, 1), 0);
  const Result b = RunTrain(g, ChainFeeds(g, 1), kRecomputeAuto);
  EXPECT_EQ(a.report.segments, 0);
  const RecomputeReport& r = b.report;
  EXPECT_GE(r.segments, 3) << r.why_not;
  EXPECT_GT(r.nodes, 0);
  EXPECT_FALSE(r.checkpoints.empty());
  EXPECT_LT(r.bytes_after, r.bytes_before / 2);
  // Each block's Conv and Relu outputs are what the backward pass reads (2 activations a block).
  EXPECT_GE(r.bytes_before, 24 * kActivation);
  EXPECT_EQ(CountOps(b.model, "Conv"), CountOps(a.model, "Conv") + r.nodes / 3);
  // Every copy has a name of its own (profiles list nodes by name).
  std::set<std::string> names;
  for (const ir::Node* n : b.model.graph->nodes()) {
    if (!n->name().empty()) {
      EXPECT_TRUE(names.insert(n->name()).second) << n->name();
    }
  }
  ExpectSameBits(a, b, g);
  ASSERT_TRUE(a.stats.planned && b.stats.planned);
  EXPECT_LT(b.stats.arena_bytes, a.stats.arena_bytes * 6 / 10)
      << "arena " << a.stats.arena_bytes / kActivation << " -> " << b.stats.arena_bytes / kActivation << " activations";
  EXPECT_GE(a.stats.arena_bytes, 24 * kActivation);
}

// cheap: each block's Relu output is computed again from its Conv output (which BatchNormalization's gradient keeps)
// through copies of the BatchNormalization and the Relu: half of the chain's activations, the same bits.
TEST(Recompute, CheapRecomputesNormalisationsAndActivations) {
  const TrainingGraphs g = Build(test_util::ConvChain(8));
  const Result a = RunTrain(g, ChainFeeds(g, 3), 0);
  const Result b = RunTrain(g, ChainFeeds(g, 3), kRecomputeCheap);
  const RecomputeReport& r = b.report;
  EXPECT_EQ(r.values, 8) << r.why_not;  // the Relu outputs
  EXPECT_EQ(r.nodes, 16);               // BatchNormTraining and Relu per block
  EXPECT_EQ(CountOps(b.model, "Conv"), CountOps(a.model, "Conv"));
  EXPECT_EQ(CountOps(b.model, "Relu"), 2 * CountOps(a.model, "Relu"));
  ExpectSameBits(a, b, g);
  ASSERT_TRUE(a.stats.planned && b.stats.planned);
  // 16 activations kept become 8 (and working space).
  EXPECT_LT(b.stats.arena_bytes, a.stats.arena_bytes * 7 / 10)
      << "arena " << a.stats.arena_bytes / kActivation << " -> " << b.stats.arena_bytes / kActivation << " activations";

  // With residual Adds after every second block: the Add reads the Relu before it (recomputed), so its output is
  // kept rather than copying that Relu's nodes a second time; every copy has a name of its own.
  const TrainingGraphs residual = Build(test_util::ConvChain(8, {.residual = true}));
  const Result c = RunTrain(residual, ChainFeeds(residual, 4), 0);
  const Result d = RunTrain(residual, ChainFeeds(residual, 4), kRecomputeCheap);
  EXPECT_EQ(d.report.nodes, 16) << d.report.why_not;
  std::set<std::string> names;
  int copies = 0;
  for (const ir::Node* n : d.model.graph->nodes()) {
    if (n->name().empty()) continue;
    EXPECT_TRUE(names.insert(n->name()).second) << n->name();
    copies += n->name().find("_recompute") != std::string::npos;
  }
  EXPECT_EQ(copies, d.report.nodes);
  ExpectSameBits(c, d, residual);
}

TEST(Recompute, CopiedDropoutDrawsTheOriginalsMask) {
  const TrainingGraphs g = Build(Chain(8, /*dropout=*/true));
  const Result a = RunTrain(g, ChainFeeds(g, 2), 0);
  const Result b = RunTrain(g, ChainFeeds(g, 2), 4);
  ASSERT_GT(b.report.segments, 1) << b.report.why_not;
  int copies = 0;
  for (const ir::Node* n : b.model.graph->nodes()) {
    if (n->op_type() != "Dropout" || n->name().find("_recompute") == std::string::npos) continue;
    ++copies;
    const ir::Attribute* from = n->FindAttribute("seed_from");
    ASSERT_NE(from, nullptr) << n->name();
    const ir::Value* original = b.model.graph->FindValue(from->s);
    ASSERT_NE(original, nullptr) << from->s;
    ASSERT_NE(original->producer(), nullptr);
    EXPECT_EQ(original->producer()->op_type(), "Dropout");
  }
  EXPECT_GT(copies, 0);
  ExpectSameBits(a, b, g);
}

// Feeds for a model of models/ (or any model with one float or token input), `classes` labels per sample or position.
std::vector<ir::Tensor> ModelFeeds(const ir::Model& model, const TrainingGraphs& g, std::vector<int64_t> sample,
                                   bool tokens, int64_t classes) {
  std::mt19937 gen(5);
  std::vector<int64_t> dims = {kBatch};
  dims.insert(dims.end(), sample.begin(), sample.end());
  ir::Tensor x(tokens ? DType::kInt64 : DType::kFloat32, dims);
  if (tokens) {
    for (int64_t& v : x.mutable_values<int64_t>()) v = static_cast<int64_t>(gen() % 128);
  } else {
    std::normal_distribution<float> normal;
    for (float& v : x.mutable_values<float>()) v = normal(gen);
  }
  x.set_name(model.graph->inputs()[0]->name());
  ir::Tensor labels(DType::kInt64, tokens ? dims : std::vector<int64_t>{kBatch});
  for (int64_t& v : labels.mutable_values<int64_t>()) v = static_cast<int64_t>(gen() % classes);
  labels.set_name(g.labels);
  return {x, labels};
}

const char* AmpName(DType amp) { return amp == DType::kUndefined ? "fp32" : DTypeName(amp).data(); }

// models/ in FP32, FP16 and BF16 AMP, 2, 3 and (as near as the plans come) 40 segments, and cheap: the same loss,
// gradients and statistics, bit for bit. The mlp's stashed Relu outputs come from Gemms, whose outputs the backward
// pass does not keep: nothing cheap to recompute but, under AMP, the input's Cast.
TEST(Recompute, BundledModelsComputeTheSameBits) {
  struct Case {
    const char* model;
    std::vector<int64_t> dims;
    int64_t class_axis;
  };
  for (const Case& c :
       {Case{"mlp.onnx", {256}, 1}, Case{"cnn.onnx", {3, 32, 32}, 1}, Case{"transformer.onnx", {32}, -1}}) {
    const ir::Model model = LoadReference(c.model);
    const bool tokens = std::string(c.model) == "transformer.onnx";
    for (DType amp : {DType::kUndefined, DType::kFloat16, DType::kBFloat16}) {
      TrainingGraphOptions options;
      options.amp = amp;
      options.loss.class_axis = c.class_axis;
      const TrainingGraphs g = Build(model, options);
      const std::vector<ir::Tensor> feeds = ModelFeeds(model, g, c.dims, tokens, tokens ? 128 : 10);
      const Result plain = RunTrain(g, feeds, 0);
      for (int segments : {2, 3, 40, kRecomputeCheap}) {
        SCOPED_TRACE(std::string(c.model) + " " + AmpName(amp) + " " + RecomputeName(segments));
        const Result b = RunTrain(g, feeds, segments);
        const RecomputeReport& r = b.report;
        if (segments != kRecomputeCheap) {
          EXPECT_GE(r.segments, 2) << r.why_not;
          EXPECT_GT(r.nodes, 0);
        } else if (std::string(c.model) == "mlp.onnx" && amp == DType::kUndefined) {
          EXPECT_EQ(r.nodes, 0);
          EXPECT_EQ(r.why_not,
                    "no activation the backward pass reads is made by cheap ops from values it keeps anyway");
        } else if (std::string(c.model) == "mlp.onnx") {
          // Under AMP the input's Cast to FP16/BF16, which the first Gemm's weight gradient reads.
          EXPECT_EQ(r.nodes, 1);
          EXPECT_EQ(r.values, 1);
        } else {
          EXPECT_EQ(r.segments, 0);
          EXPECT_GT(r.values, 0) << r.why_not;
          EXPECT_GT(r.nodes, 0);
          EXPECT_LT(r.bytes_after, r.bytes_before);
        }
        ExpectSameBits(plain, b, g);
      }
    }
  }
}

// Models whose session fusions depend on how many nodes read a value: MatMul + Add + Gelu-20 (fused into one
// FusedMatMul only where the Add's output has no other reader; GeluGrad reads it), and Conv + bias + Add + Relu with
// frozen convolutions (FusedConv where the Conv's output has one reader). The copies are made after the fusions, so
// each is the node its original became: the same bits in FP32, FP16 and BF16.
TEST(Recompute, CopiesAreTheNodesTheSessionRuns) {
  ir::Model gelu = gen::NewModel("gelu_mlp", "MatMul + Add + Gelu layers");
  gelu.SetOpsetVersion("", 20);
  {
    gen::GraphBuilder b(*gelu.graph);
    ir::Value* h = b.Input("x", DType::kFloat32, gen::Dims("batch", 16));
    for (int i = 0; i < 6; ++i) {
      const std::string name = "layer" + std::to_string(i);
      ir::Value* w = b.Param(name + ".weight", {16, 16}, gen::KaimingBound(16));
      ir::Value* bias = b.Param(name + ".bias", {16}, gen::KaimingBound(16));
      h = b.Op("MatMul", name + ".matmul", {h, w});
      h = b.Op("Add", name + ".add", {h, bias});
      h = b.Op("Gelu", name + ".gelu", {h});
    }
    ir::Value* w = b.Param("head.weight", {16, kClasses}, gen::KaimingBound(16));
    b.Output(b.Op("MatMul", "head", {h, w}), "logits", DType::kFloat32, gen::Dims("batch", kClasses));
  }
  ir::Model conv = gen::NewModel("conv_residual", "Conv + bias + Add + Relu blocks, every other one frozen");
  {
    gen::GraphBuilder b(*conv.graph);
    ir::Value* h = b.Input("x", DType::kFloat32, gen::Dims("batch", kChannels, kSide, kSide));
    for (int i = 0; i < 6; ++i) {
      const std::string name = "block" + std::to_string(i);
      ir::Value* w = b.Param(name + ".conv.weight", {kChannels, kChannels, 3, 3}, gen::KaimingBound(kChannels * 9));
      ir::Value* bias = b.Param(name + ".conv.bias", {kChannels}, 0.1);
      ir::Value* y = b.Op("Conv", name + ".conv", {h, w, bias},
                          {Attribute::Ints("kernel_shape", {3, 3}), Attribute::Ints("pads", {1, 1, 1, 1})});
      y = b.Op("Add", name + ".residual", {y, h});
      h = b.Op("Relu", name + ".relu", {y});
    }
    h = b.Op("GlobalAveragePool", "pool", {h});
    h = b.Op("Flatten", "flatten", {h}, {Attribute::Int("axis", 1)});
    ir::Value* w = b.Param("fc.weight", {kClasses, kChannels}, gen::KaimingBound(kChannels));
    b.Output(b.Op("Gemm", "fc", {h, w}, {Attribute::Int("transB", 1)}), "logits", DType::kFloat32,
             gen::Dims("batch", kClasses));
  }
  for (DType amp : {DType::kUndefined, DType::kFloat16, DType::kBFloat16}) {
    for (bool is_conv : {false, true}) {
      const ir::Model& model = is_conv ? conv : gelu;
      TrainingGraphOptions options;
      options.amp = amp;
      if (is_conv) options.freeze = "block[024]\\.conv";
      const TrainingGraphs g = Build(model, options);
      const std::vector<ir::Tensor> feeds =
          ModelFeeds(model, g, is_conv ? std::vector<int64_t>{kChannels, kSide, kSide} : std::vector<int64_t>{16},
                     false, kClasses);
      const Result plain = RunTrain(g, feeds, 0);
      for (int segments : {2, 3, kRecomputeCheap}) {
        SCOPED_TRACE(std::string(model.graph->name()) + " " + AmpName(amp) + " " + RecomputeName(segments));
        const Result b = RunTrain(g, feeds, segments);
        if (is_conv && segments == kRecomputeCheap) {
          // The Relu reads an Add whose inputs the backward pass does not keep: nothing cheap to recompute.
          EXPECT_EQ(b.report.nodes, 0);
        } else {
          EXPECT_GT(b.report.nodes, 0) << b.report.why_not;
          // The fusion happened, and was copied.
          const char* fused = is_conv ? "FusedConv" : "FusedMatMul";
          EXPECT_GT(CountOps(plain.model, fused), 0);
          // (cheap copies the Gelu alone: its input, the fused product's output, is kept for GeluGrad.)
          if (segments != kRecomputeCheap) {
            EXPECT_GT(CountOps(b.model, fused), CountOps(plain.model, fused));
          }
        }
        ExpectSameBits(plain, b, g);
      }
    }
  }
}

TEST(Recompute, TrainerStepsMatchWithoutIt) {
  const ir::Model model = LoadReference("cnn.onnx");
  const Dataset data = test_util::RandomClassData(model, {3, 32, 32}, 24, 10, 9);
  std::vector<ir::Tensor> values[3];
  for (int mode = 0; mode < 3; ++mode) {
    TrainerOptions o;
    o.steps = 3;
    o.batch_size = 8;
    o.threads = 1;
    o.accumulate = 2;
    o.schedule.base_lr = 0.01;
    o.graph.amp = DType::kFloat16;
    o.graph.recompute.segments = mode == 0 ? 0 : mode == 1 ? kRecomputeAuto : kRecomputeCheap;
    o.graph.recompute.batch = 4;
    StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(model, o, data);
    ASSERT_TRUE(t.ok()) << t.status().message();
    if (mode == 1) {
      EXPECT_GE((*t)->recompute_report().segments, 2) << (*t)->recompute_report().why_not;
    }
    if (mode == 2) {
      EXPECT_GT((*t)->recompute_report().values, 0) << (*t)->recompute_report().why_not;
    }
    int taken = 0;
    while (!(*t)->Done()) {
      StatusOr<StepRecord> r = (*t)->Step();
      ASSERT_TRUE(r.ok()) << r.status().message();
      taken += !r->skipped;
    }
    EXPECT_GT(taken, 0);  // the weights moved: their bits compare gradients
    values[mode] = (*t)->TrainedValues();
  }
  for (int mode = 1; mode < 3; ++mode) {
    ASSERT_EQ(values[0].size(), values[mode].size());
    for (size_t i = 0; i < values[0].size(); ++i) {
      ASSERT_EQ(values[0][i].nbytes(), values[mode][i].nbytes());
      EXPECT_EQ(std::memcmp(values[0][i].data(), values[mode][i].data(), values[0][i].nbytes()), 0)
          << values[0][i].name() << " mode " << mode;
    }
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
  const TrainingGraphs g = Build(model);
  ir::Tensor xt(DType::kFloat32, {kBatch, 16});
  for (size_t i = 0; i < xt.mutable_values<float>().size(); ++i) xt.mutable_values<float>()[i] = 0.01f * i;
  xt.set_name("x");
  ir::Tensor labels(DType::kInt64, {kBatch});
  for (int64_t i = 0; i < kBatch; ++i) labels.mutable_values<int64_t>()[i] = i;
  labels.set_name(g.labels);
  const Result plain = RunTrain(g, {xt, labels}, 0);
  const Result asked = RunTrain(g, {xt, labels}, kRecomputeAuto);
  EXPECT_EQ(asked.report.segments, 0);
  EXPECT_EQ(asked.report.nodes, 0);
  EXPECT_FALSE(asked.report.why_not.empty());
  EXPECT_EQ(asked.model.graph->num_nodes(), plain.model.graph->num_nodes());
  ExpectSameBits(plain, asked, g);
}

// A training session's com.onnxamp RNNTraining (stash_recurrent_traces) holds its traces from the forward to the
// backward pass: the planner's estimate is their size ([directions, seq x batch x hidden x (gates + states)], batch
// from a symbolic dim 0 of X), not the largest input's.
TEST(Recompute, EstimatesRecurrentTraces) {
  for (const char* op : {"LSTM", "GRU", "RNN"}) {
    SCOPED_TRACE(op);
    const int64_t seq = 5, batch = 8, input = 3, hidden = 4,
                  gates = std::string(op) == "LSTM" ? 4
                          : op[0] == 'G'            ? 3
                                                    : 1;
    const int64_t states = std::string(op) == "LSTM" ? 2 : 1;
    ir::Model m;
    m.opset_imports = {{"", 17}, {std::string(exec::kInternalDomain), 1}};
    ir::Graph& g = *m.graph;
    ir::Value* x = g.CreateValue("x");
    x->set_type(ir::ValueType::Tensor(DType::kFloat32,
                                      ir::Shape{ir::Dim::Param("N"), ir::Dim::Value(seq), ir::Dim::Value(input)}));
    g.AddInput(x);
    std::vector<ir::Value*> in = {x};
    for (const auto& [name, dims] : std::vector<std::pair<std::string, std::vector<int64_t>>>{
             {"w", {2, gates * hidden, input}}, {"r", {2, gates * hidden, hidden}}}) {
      ir::Value* v = g.CreateValue(name);
      ir::Shape shape;
      for (int64_t d : dims) shape.push_back(ir::Dim::Value(d));
      v->set_type(ir::ValueType::Tensor(DType::kFloat32, shape));
      g.AddInput(v);
      in.push_back(v);
    }
    std::vector<ir::Value*> out;
    for (const char* name : {"y", "y_h", "y_c", "trace"}) out.push_back(g.CreateValue(name));
    ir::Node* n = g.AddNode(ops::kRnnTrainingOp, in, out, "rnn", exec::kInternalDomain);
    n->SetAttribute(Attribute::String("forward_op", op));
    n->SetAttribute(Attribute::Int("hidden_size", hidden));
    n->SetAttribute(Attribute::String("direction", "bidirectional"));
    n->SetAttribute(Attribute::Int("layout", 1));
    g.AddOutput(out[3]);
    const ValueSizes sizes = EstimateValueSizes(m, batch);
    ASSERT_TRUE(sizes.count("trace"));
    EXPECT_EQ(sizes.at("trace"), static_cast<uint64_t>(2 * seq * batch * hidden * (gates + states) * 4));
  }
}

TEST(Recompute, ParsesItsOption) {
  EXPECT_EQ(*ParseRecompute("off"), 0);
  EXPECT_EQ(*ParseRecompute("auto"), kRecomputeAuto);
  EXPECT_EQ(*ParseRecompute("cheap"), kRecomputeCheap);
  EXPECT_EQ(*ParseRecompute("5"), 5);
  for (const char* bad : {"1", "0", "-3", "x", "4x", ""}) {
    EXPECT_EQ(
        ParseRecompute(bad).status().message(),
        std::string("--recompute must be 'off', 'auto', 'cheap' or a number of segments >= 2, got '") + bad + "'");
  }
  EXPECT_EQ(RecomputeName(0), "off");
  EXPECT_EQ(RecomputeName(kRecomputeAuto), "auto");
  EXPECT_EQ(RecomputeName(kRecomputeCheap), "cheap");
  EXPECT_EQ(RecomputeName(3), "3");
}

}  // namespace
}  // namespace onnxamp::trainer
