// LoRA (trainer/graph/lora.h): which weights get adapters, the adapted graph computing the model plus the low-rank
// path, the merge back into a model of the original structure, and training only the adapters.
#include "trainer/graph/lora.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "converter/model_clone.h"
#include "runtime/executor/session.h"
#include "runtime/ir/verify.h"
#include "tests/trainer/train_test_util.h"
#include "trainer/export.h"
#include "trainer/trainer.h"

namespace onnxamp::trainer {
namespace {

using test_util::LoadReference;

ir::Tensor Normal(const std::string& name, std::vector<int64_t> dims, uint32_t seed, float stddev = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, stddev);
  ir::Tensor t(DType::kFloat32, std::move(dims));
  for (float& v : t.mutable_values<float>()) v = normal(gen);
  t.set_name(name);
  return t;
}

std::vector<ir::Tensor> RunModel(const ir::Model& model, const std::vector<ir::Tensor>& feeds) {
  StatusOr<std::unique_ptr<exec::Session>> s = exec::Session::Create(converter::CloneModel(model));
  EXPECT_TRUE(s.ok()) << s.status().message();
  if (!s.ok()) return {};
  StatusOr<std::vector<ir::Tensor>> out = (*s)->Run(feeds);
  EXPECT_TRUE(out.ok()) << out.status().message();
  return out.ok() ? std::move(out).value() : std::vector<ir::Tensor>{};
}

float MaxAbsDiff(const ir::Tensor& a, const ir::Tensor& b) {
  EXPECT_EQ(a.dims(), b.dims());
  float m = 0;
  const auto x = a.values<float>();
  const auto y = b.values<float>();
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) m = std::max(m, std::fabs(x[i] - y[i]));
  return m;
}

// Random adapters for every planned weight, in peft's orientation.
std::vector<ir::Tensor> RandomInit(const LoraPlan& plan, int64_t rank) {
  std::vector<ir::Tensor> init;
  uint32_t seed = 100;
  for (const LoraAdapter& a : plan.adapters) {
    init.push_back(Normal(a.a, {rank, a.in}, seed++, 0.1f));
    init.push_back(Normal(a.b, {a.out, rank}, seed++, 0.1f));
  }
  return init;
}

TEST(Lora, PlansTheLinearWeights) {
  const ir::Model mlp = LoadReference("mlp.onnx");
  LoraOptions o;
  o.rank = 4;
  StatusOr<LoraPlan> plan = PlanLora(mlp, o);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ASSERT_EQ(plan->adapters.size(), 2u);
  EXPECT_EQ(plan->adapters[0].weight, "fc1.weight");
  EXPECT_TRUE(plan->adapters[0].transposed);  // Gemm transB = 1: stored [out, in]
  EXPECT_EQ(plan->adapters[0].in, 256);
  EXPECT_EQ(plan->adapters[0].out, 128);
  EXPECT_EQ(plan->adapters[0].a, "fc1.weight.lora_A");
  EXPECT_FLOAT_EQ(plan->adapters[0].scale, 2.0f);  // alpha 8 / rank 4
  o.rslora = true;
  EXPECT_FLOAT_EQ(PlanLora(mlp, o)->adapters[0].scale, 4.0f);  // 8 / sqrt 4

  const ir::Model transformer = LoadReference("transformer.onnx");
  LoraOptions t;
  t.rank = 2;
  t.targets = "attn\\.(q|v)\\.weight";
  plan = PlanLora(transformer, t);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ASSERT_EQ(plan->adapters.size(), 2u);
  EXPECT_EQ(plan->adapters[0].weight, "attn.q.weight");
  EXPECT_EQ(plan->adapters[1].weight, "attn.v.weight");
  EXPECT_FALSE(plan->adapters[0].transposed);
}

TEST(Lora, RefusesBadOptionsAndWeightsItCannotAdapt) {
  const ir::Model mlp = LoadReference("mlp.onnx");
  LoraOptions o;
  o.rank = 0;
  EXPECT_EQ(PlanLora(mlp, o).status().message(), "--lora-rank must be >= 1, got 0");
  o.rank = 2;
  o.alpha = -1;
  EXPECT_EQ(PlanLora(mlp, o).status().message(), "--lora-alpha must be finite and > 0, got -1");
  o.alpha = 8;
  o.dropout = 1;
  EXPECT_EQ(PlanLora(mlp, o).status().message(), "--lora-dropout must be in [0, 1), got 1");
  o.dropout = 0;
  o.targets = "(";
  EXPECT_NE(PlanLora(mlp, o).status().message().find("--lora-targets '(': not a valid regular expression"),
            std::string::npos);
  o.targets = "no_such_weight";
  EXPECT_NE(PlanLora(mlp, o).status().message().find("no weight to adapt matches --lora-targets 'no_such_weight'"),
            std::string::npos);
  // A bias matched by the targets is named with the reason it gets no adapter.
  o.targets = "fc1";
  StatusOr<LoraPlan> plan = PlanLora(mlp, o);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ASSERT_EQ(plan->skipped.size(), 1u);
  EXPECT_NE(plan->skipped[0].find("fc1.bias: read by Gemm"), std::string::npos) << plan->skipped[0];
  // Initial adapters must fit.
  o.targets.clear();
  o.init = {Normal("fc1.weight.lora_A", {2, 255}, 1)};
  EXPECT_EQ(PlanLora(mlp, o).status().message(),
            "--lora-init: 'fc1.weight.lora_A' is float [2, 255], expected float [2, 256]");
  o.init = {Normal("fc9.weight.lora_A", {2, 256}, 1)};
  EXPECT_NE(PlanLora(mlp, o).status().message().find("not the lora_A or lora_B of an adapted weight"),
            std::string::npos);

  // A weight another node reads too (here a Gather, as a tied embedding) keeps no adapter: its merged value would
  // change that reader.
  ir::Model tied = converter::CloneModel(mlp);
  ir::Graph& g = *tied.graph;
  ir::Value* index = g.CreateValue("tied_index");
  ir::Tensor zero(DType::kInt64, {1});
  zero.mutable_values<int64_t>()[0] = 0;
  index->set_type(ir::ValueType::Tensor(DType::kInt64, ir::Shape{ir::Dim::Value(1)}));
  g.SetInitializer(index, std::move(zero));
  ir::Value* row = g.CreateValue("tied_row");
  row->set_type(ir::ValueType::Tensor(DType::kFloat32));
  g.AddNode("Gather", {g.FindValue("fc2.weight"), index}, {row}, "tied_gather");
  g.AddOutput(row);
  o.init.clear();
  plan = PlanLora(tied, o);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ASSERT_EQ(plan->adapters.size(), 1u);
  EXPECT_EQ(plan->adapters[0].weight, "fc1.weight");
  bool named = false;
  for (const std::string& s : plan->skipped) named |= s.find("fc2.weight: read by Gather 'tied_gather'") == 0;
  EXPECT_TRUE(named) << (plan->skipped.empty() ? "" : plan->skipped[0]);
}

// The adapted graph computes x·W + scale·x·A·B; B = 0 (the default start) gives the model's own outputs, and the
// merged weights give the adapted graph's outputs, for Gemm (transB, alpha) and MatMul weights.
TEST(Lora, AdaptedGraphsAndMergedModelsComputeTheSame) {
  struct Case {
    std::string model;
    std::vector<int64_t> input;
  };
  for (const Case& c : {Case{"mlp.onnx", {3, 256}}, Case{"transformer.onnx", {}}}) {
    ir::Model model = LoadReference(c.model);
    std::vector<ir::Tensor> feeds;
    if (c.model == "transformer.onnx") {
      // Its token ids.
      const ir::Value* in = model.graph->inputs()[0];
      ir::Tensor ids(DType::kInt64, {2, 32});
      for (int64_t i = 0; i < 64; ++i) ids.mutable_values<int64_t>()[i] = (i * 7) % 50;
      ids.set_name(in->name());
      feeds.push_back(ids);
    } else {
      feeds.push_back(Normal(model.graph->inputs()[0]->name(), c.input, 7));
    }
    // Gemm's alpha takes part in the path and the merge.
    for (ir::Node* n : model.graph->nodes()) {
      if (n->op_type() == "Gemm") n->SetAttribute(ir::Attribute::Float("alpha", 0.5f));
    }
    const std::vector<ir::Tensor> plain = RunModel(model, feeds);
    ASSERT_FALSE(plain.empty()) << c.model;
    LoraOptions o;
    o.rank = 3;
    o.alpha = 6;
    o.seed = 5;
    StatusOr<LoraPlan> plan = PlanLora(model, o);
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    ir::Model adapted = converter::CloneModel(model);
    ASSERT_TRUE(AddLoraAdapters(adapted, o, *plan).ok());
    ASSERT_TRUE(ir::Verify(adapted).ok()) << c.model;
    // The model's own outputs: x·W + 0 (up to the rounding of a bias add fused into the GEMM or not).
    const std::vector<ir::Tensor> start = RunModel(adapted, feeds);
    ASSERT_EQ(start.size(), plain.size());
    EXPECT_LT(MaxAbsDiff(start[0], plain[0]), 1e-5f) << c.model;
    // Every seeded A within peft's bound, B zero.
    for (const LoraAdapter& a : plan->adapters) {
      const ir::Tensor& ta = *adapted.graph->FindValue(a.a)->initializer();
      const ir::Tensor& tb = *adapted.graph->FindValue(a.b)->initializer();
      EXPECT_EQ(ta.dims(), (std::vector<int64_t>{a.in, 3}));
      float most = 0;
      for (float v : ta.values<float>()) most = std::max(most, std::fabs(v));
      EXPECT_LE(most, 1.0f / std::sqrt(static_cast<float>(a.in))) << a.a;
      EXPECT_GT(most, 0.5f / std::sqrt(static_cast<float>(a.in))) << a.a;
      for (float v : tb.values<float>()) EXPECT_EQ(v, 0.0f) << a.b;
    }
    // Random adapters (as trained ones): the merged model computes what the adapted graph does.
    o.init = RandomInit(*plan, 3);
    ir::Model trained = converter::CloneModel(model);
    ASSERT_TRUE(AddLoraAdapters(trained, o, *plan).ok());
    const std::vector<ir::Tensor> with = RunModel(trained, feeds);
    std::vector<ir::Tensor> values;
    for (const LoraAdapter& a : plan->adapters) {
      values.push_back(*trained.graph->FindValue(a.a)->initializer());
      values.push_back(*trained.graph->FindValue(a.b)->initializer());
    }
    StatusOr<std::vector<ir::Tensor>> merged = MergeLora(model, plan->adapters, values);
    ASSERT_TRUE(merged.ok()) << merged.status().message();
    ASSERT_EQ(merged->size(), plan->adapters.size());  // the adapters out, the weights in
    StatusOr<ir::Model> exported = ExportTrainedModel(model, *merged, {});
    ASSERT_TRUE(exported.ok()) << exported.status().message();
    EXPECT_EQ(exported->graph->num_nodes(), model.graph->num_nodes());
    const std::vector<ir::Tensor> out = RunModel(*exported, feeds);
    ASSERT_EQ(out.size(), with.size());
    EXPECT_GT(MaxAbsDiff(with[0], plain[0]), 1e-3f) << c.model << ": the adapters changed nothing";
    EXPECT_LT(MaxAbsDiff(out[0], with[0]), 2e-5f) << c.model;
    // Round trip through peft's orientation.
    StatusOr<std::vector<ir::Tensor>> saved = LoraAdapterTensors(plan->adapters, values);
    ASSERT_TRUE(saved.ok()) << saved.status().message();
    for (size_t i = 0; i < saved->size(); ++i) EXPECT_TRUE((*saved)[i].SameContents(o.init[i])) << o.init[i].name();
  }
}

// Conv weights, when --lora-targets names them (never by default): A a convolution of the layer's own kernel, stride
// and padding into `rank` channels, B a 1x1 convolution; B = 0 computes the model, random adapters the merged model.
TEST(Lora, ConvWeightsWhenNamed) {
  const ir::Model cnn = LoadReference("cnn.onnx");
  LoraOptions o;
  o.rank = 2;
  StatusOr<LoraPlan> plan = PlanLora(cnn, o);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  for (const LoraAdapter& a : plan->adapters) EXPECT_FALSE(a.conv()) << a.weight;  // the classifier's Gemm only
  o.targets = "conv";
  plan = PlanLora(cnn, o);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ASSERT_EQ(plan->adapters.size(), 6u);
  const LoraAdapter* strided = nullptr;
  for (const LoraAdapter& a : plan->adapters) {
    EXPECT_TRUE(a.conv()) << a.weight;
    if (a.weight == "layer2.conv1.weight") strided = &a;
  }
  ASSERT_NE(strided, nullptr);
  EXPECT_EQ(strided->in, 16);
  EXPECT_EQ(strided->out, 32);
  EXPECT_EQ(strided->kernel, (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(strided->peft_a_dims(2), (std::vector<int64_t>{2, 16, 3, 3}));
  EXPECT_EQ(strided->peft_b_dims(2), (std::vector<int64_t>{32, 2, 1, 1}));
  EXPECT_EQ(strided->weight_elements(), 32 * 16 * 9);

  const std::vector<ir::Tensor> feeds = {Normal(cnn.graph->inputs()[0]->name(), {2, 3, 32, 32}, 9)};
  const std::vector<ir::Tensor> plain = RunModel(cnn, feeds);
  ASSERT_FALSE(plain.empty());
  ir::Model adapted = converter::CloneModel(cnn);
  ASSERT_TRUE(AddLoraAdapters(adapted, o, *plan).ok());
  ASSERT_TRUE(ir::Verify(adapted).ok());
  const std::vector<ir::Tensor> start = RunModel(adapted, feeds);
  ASSERT_EQ(start.size(), plain.size());
  EXPECT_LT(MaxAbsDiff(start[0], plain[0]), 1e-5f);
  std::vector<ir::Tensor> init;
  uint32_t seed = 200;
  for (const LoraAdapter& a : plan->adapters) {
    init.push_back(Normal(a.a, a.peft_a_dims(2), seed++, 0.1f));
    init.push_back(Normal(a.b, a.peft_b_dims(2), seed++, 0.1f));
  }
  o.init = init;
  ir::Model trained = converter::CloneModel(cnn);
  ASSERT_TRUE(AddLoraAdapters(trained, o, *plan).ok());
  const std::vector<ir::Tensor> with = RunModel(trained, feeds);
  StatusOr<std::vector<ir::Tensor>> merged = MergeLora(cnn, plan->adapters, init);
  ASSERT_TRUE(merged.ok()) << merged.status().message();
  StatusOr<ir::Model> exported = ExportTrainedModel(cnn, *merged, {});
  ASSERT_TRUE(exported.ok()) << exported.status().message();
  EXPECT_EQ(exported->graph->num_nodes(), cnn.graph->num_nodes());
  const std::vector<ir::Tensor> out = RunModel(*exported, feeds);
  ASSERT_EQ(out.size(), with.size());
  EXPECT_GT(MaxAbsDiff(with[0], plain[0]), 1e-3f) << "the adapters changed nothing";
  EXPECT_LT(MaxAbsDiff(out[0], with[0]), 2e-5f * std::max(1.0f, MaxAbsDiff(with[0], plain[0])));
  StatusOr<std::vector<ir::Tensor>> saved = LoraAdapterTensors(plan->adapters, init);
  ASSERT_TRUE(saved.ok()) << saved.status().message();
  for (size_t i = 0; i < saved->size(); ++i) EXPECT_TRUE((*saved)[i].SameContents(init[i])) << init[i].name();
}

// Under AMP the multiplication by the scale stays FP32 (training uses the scale the merge does; bf16 would round 8/3 to
// 2.671875), and a layer --keep-node keeps in FP32 keeps its adapters' path too; --freeze may not freeze an adapter,
// --lora-train must match something other than an adapted weight.
TEST(Lora, AmpKeepsTheScaleInFp32AndFreezeCannotTakeAnAdapter) {
  const ir::Model model = LoadReference("mlp.onnx");
  TrainingGraphOptions o;
  o.amp = DType::kBFloat16;
  o.lora.rank = 3;
  ASSERT_TRUE(o.policy.AddKeepNodePattern("fc2.*").ok());
  StatusOr<TrainingGraphs> g = BuildTrainingGraphs(model, o);
  ASSERT_TRUE(g.ok()) << g.status().message();
  int scales = 0, kept_path = 0;
  for (const ir::Node* n : g->eval.graph->nodes()) {
    const std::string& name = n->name();
    if (name.find("_lora_scaled") != std::string::npos && n->op_type() == "Mul") {
      ++scales;
      for (const ir::Value* in : n->inputs()) {
        if (in && in->initializer()) {
          EXPECT_EQ(in->initializer()->dtype(), DType::kFloat32) << name;
        }
      }
    }
    // fc2's path in FP32: its MatMuls read no bfloat16 value.
    if (name.rfind("fc2", 0) == 0 && name.find("_lora_") != std::string::npos && n->op_type() == "MatMul") {
      ++kept_path;
      for (const ir::Value* in : n->inputs()) {
        EXPECT_NE(in->type().elem_type(), DType::kBFloat16) << name << " reads " << in->name();
      }
    }
  }
  EXPECT_EQ(scales, 2);
  EXPECT_EQ(kept_path, 2);
  // --lora-train must train something, and not an adapted weight.
  TrainingGraphOptions extra;
  extra.lora.rank = 2;
  extra.lora.train = "nothing";
  EXPECT_EQ(BuildTrainingGraphs(model, extra).status().message(),
            "--lora-train 'nothing' matches no trainable initializer");
  extra.lora.train = "fc2";
  EXPECT_EQ(BuildTrainingGraphs(model, extra).status().message(),
            "--lora-train 'fc2' matches 'fc2.weight', which has adapters and stays frozen (leave it out of "
            "--lora-targets to train it)");
  extra.lora.train = "fc2\\.bias";
  EXPECT_TRUE(BuildTrainingGraphs(model, extra).ok());
  TrainingGraphOptions frozen;
  frozen.lora.rank = 2;
  frozen.freeze = "fc1";
  EXPECT_EQ(BuildTrainingGraphs(model, frozen).status().message(),
            "--freeze 'fc1' matches the LoRA adapter 'fc1.weight.lora_A': every adapter trains (leave its weight out "
            "of --lora-targets instead)");
}

// Training with LoRA: only the adapters are parameters (plus --lora-train's), the loss falls, the frozen weights stay,
// and the merged export computes what the trained adapted graph evaluates.
TEST(Lora, TrainsOnlyTheAdaptersAndExportsTheMergedModel) {
  const ir::Model model = LoadReference("mlp.onnx");
  const Dataset data = test_util::RandomClassData(model, {256}, 64, 10, 3);
  TrainerOptions o;
  o.graph.lora.rank = 4;
  o.graph.lora.alpha = 16;
  o.graph.lora.train = "fc2\\.bias";
  o.optimizer = OptimizerKind::kAdamW;
  o.schedule.base_lr = 0.01;
  o.batch_size = 16;
  o.steps = 30;
  o.threads = 1;
  StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(model, o, data);
  ASSERT_TRUE(t.ok()) << t.status().message();
  std::vector<std::string> names;
  for (const Parameter& p : (*t)->graphs().params) names.push_back(p.name);
  EXPECT_EQ(names, (std::vector<std::string>{"fc2.bias", "fc1.weight.lora_A", "fc1.weight.lora_B", "fc2.weight.lora_A",
                                             "fc2.weight.lora_B"}));
  ASSERT_EQ((*t)->graphs().lora.size(), 2u);
  StatusOr<EvalRecord> before = (*t)->Evaluate(data);
  ASSERT_TRUE(before.ok()) << before.status().message();
  while (!(*t)->Done()) ASSERT_TRUE((*t)->Step().ok());
  StatusOr<EvalRecord> after = (*t)->Evaluate(data);
  ASSERT_TRUE(after.ok()) << after.status().message();
  EXPECT_LT(after->loss, 0.8 * before->loss);
  StatusOr<std::vector<ir::Tensor>> values = MergeLora(model, (*t)->graphs().lora, (*t)->ExportValues());
  ASSERT_TRUE(values.ok()) << values.status().message();
  StatusOr<ir::Model> exported = ExportTrainedModel(model, *values, {});
  ASSERT_TRUE(exported.ok()) << exported.status().message();
  // fc1.bias was frozen: unchanged.
  EXPECT_TRUE(exported->graph->FindValue("fc1.bias")
                  ->initializer()
                  ->SameContents(*model.graph->FindValue("fc1.bias")->initializer()));
  EXPECT_FALSE(exported->graph->FindValue("fc1.weight")
                   ->initializer()
                   ->SameContents(*model.graph->FindValue("fc1.weight")->initializer()));
  // The exported model's loss on the data is the trainer's evaluation of its adapted graph.
  TrainerOptions plain;
  plain.steps = 1;
  plain.threads = 1;
  StatusOr<std::unique_ptr<Trainer>> check = Trainer::Create(*exported, plain, data);
  ASSERT_TRUE(check.ok()) << check.status().message();
  StatusOr<EvalRecord> merged = (*check)->Evaluate(data);
  ASSERT_TRUE(merged.ok()) << merged.status().message();
  EXPECT_NEAR(merged->loss, after->loss, 1e-5 * after->loss);
  EXPECT_EQ(merged->accuracy, after->accuracy);
}

}  // namespace
}  // namespace onnxamp::trainer
