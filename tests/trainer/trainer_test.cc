// The training graphs built from the reference models, and the Trainer's step: learning, mixed precision with master
// weights, skipped steps under overflow (no update, no schedule step, no BatchNorm statistics), export.
#include "trainer/trainer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "converter/convert.h"
#include "converter/model_clone.h"
#include "importer/model_io.h"
#include "runtime/executor/session.h"
#include "runtime/ir/verify.h"
#include "tests/trainer/train_test_util.h"
#include "trainer/export.h"
#include "trainer/graph/training_graph.h"
#include "trainer/optim/optim_math.h"

namespace onnxamp::trainer {
namespace {

using test_util::LoadReference;

// n samples of `features` floats whose class is the argmax of a fixed random projection: learnable by an MLP.
Dataset Separable(int64_t n, int64_t features, int64_t classes, const std::string& input, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal;
  std::vector<float> w(static_cast<size_t>(features * classes));
  for (float& v : w) v = normal(gen);
  ir::Tensor x(DType::kFloat32, {n, features});
  ir::Tensor y(DType::kInt64, {n});
  for (int64_t i = 0; i < n; ++i) {
    float* row = x.mutable_values<float>().data() + i * features;
    for (int64_t f = 0; f < features; ++f) row[f] = normal(gen);
    int64_t best = 0;
    float best_score = -1e30f;
    for (int64_t c = 0; c < classes; ++c) {
      float s = 0;
      for (int64_t f = 0; f < features; ++f) s += row[f] * w[static_cast<size_t>(f * classes + c)];
      if (s > best_score) {
        best_score = s;
        best = c;
      }
    }
    y.mutable_values<int64_t>()[i] = best;
  }
  x.set_name(input);
  y.set_name("labels");
  StatusOr<Dataset> d = Dataset::FromTensors({x, y}, "separable");
  EXPECT_TRUE(d.ok()) << d.status().message();
  return std::move(d).value();
}

Dataset Bound(const Dataset& d, const ir::Model& model, const std::string& labels = "labels") {
  BindOptions bind;
  bind.labels.array = labels;
  bind.labels.kind = LabelKind::kClassIndices;
  StatusOr<Dataset> b = d.Bind(DataInputs(*model.graph), bind);
  EXPECT_TRUE(b.ok()) << b.status().message();
  return std::move(b).value();
}

TEST(TrainingGraphs, MlpParametersGradientsAndVerification) {
  const ir::Model model = LoadReference("digits_mlp.onnx");
  TrainingGraphOptions options;
  StatusOr<TrainingGraphs> g = BuildTrainingGraphs(model, options);
  ASSERT_TRUE(g.ok()) << g.status().message();
  ASSERT_EQ(g->params.size(), 4u);  // fc1/fc2 weight and bias
  for (const Parameter& p : g->params) {
    EXPECT_EQ(p.initial.dtype(), DType::kFloat32);
    EXPECT_FALSE(p.gradient.empty()) << p.name;
    const ir::Value* v = g->train.graph->FindValue(p.name);
    ASSERT_NE(v, nullptr);
    EXPECT_TRUE(v->is_graph_input()) << p.name;
    EXPECT_EQ(v->initializer(), nullptr) << p.name << ": parameters are inputs without defaults";
  }
  EXPECT_TRUE(ir::Verify(g->train).ok());
  EXPECT_TRUE(ir::Verify(g->eval).ok());
  EXPECT_FALSE(g->labels.empty());
  // --freeze leaves matching initializers out.
  options.freeze = "fc1\\.";
  g = BuildTrainingGraphs(model, options);
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(g->params.size(), 2u);
  options.freeze = ".";
  g = BuildTrainingGraphs(model, options);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("no trainable parameter"), std::string::npos) << g.status().message();
}

// A file for --trainable/--freeze @FILE under the test's temporary folder.
std::string NamesFile(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/onnxamp_trainer_test_" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// --trainable names the parameters (a regex, or @FILE of whole names), one-element initializers included; --freeze
// takes a file too. Without it a one-element initializer stays a constant, and the graphs report those a gradient
// would reach. Listed names that are no initializer are reported; what cannot train is an error naming the flag.
TEST(TrainingGraphs, TrainableAndFreezeChooseTheParameters) {
  ir::Model model = LoadReference("digits_mlp.onnx");
  ir::Graph& g = *model.graph;
  auto scalar = [&](const std::string& name, DType type) {
    ir::Value* v = g.CreateValue(name);
    ir::Tensor t(type, {1});
    if (type == DType::kFloat32) t.mutable_values<float>()[0] = 1.5f;
    g.SetInitializer(v, std::move(t));
    return v;
  };
  // logits * gate (on the loss's path), and Equal(logits, other): the loss depends on `other` but no gradient flows.
  ir::Value* logits = g.outputs()[0];
  ir::Value* gated = g.CreateValue("gated");
  ir::Value* same = g.CreateValue("same");
  ir::Value* out = g.CreateValue("out");
  out->set_type(logits->type());
  g.AddNode("Mul", {logits, scalar("gate", DType::kFloat32)}, {gated}, "gate_mul");
  g.AddNode("Equal", {logits, scalar("other", DType::kFloat32)}, {same}, "eq");
  g.AddNode("Where", {same, logits, gated}, {out}, "where");
  g.SetOutput(0, out);
  scalar("count", DType::kInt64);  // read by nothing
  ASSERT_TRUE(g.SortTopologically().ok());

  ParameterChoiceReport report;
  StatusOr<std::vector<std::string>> names = SelectParameters(model, "", "", &report);
  ASSERT_TRUE(names.ok()) << names.status().message();
  EXPECT_EQ(*names, (std::vector<std::string>{"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}));
  EXPECT_EQ(report.one_element, (std::vector<std::string>{"gate", "other"}));
  StatusOr<TrainingGraphs> graphs = BuildTrainingGraphs(model, {});
  ASSERT_TRUE(graphs.ok()) << graphs.status().message();
  EXPECT_EQ(graphs->choice.one_element, std::vector<std::string>{"gate"});  // no gradient would reach `other`

  // A regex: whatever it matches trains, one element or more.
  TrainingGraphOptions options;
  options.trainable = "^(gate|fc2)";
  graphs = BuildTrainingGraphs(model, options);
  ASSERT_TRUE(graphs.ok()) << graphs.status().message();
  std::vector<std::string> trained;
  for (const Parameter& p : graphs->params) trained.push_back(p.name);
  EXPECT_EQ(trained, (std::vector<std::string>{"fc2.weight", "fc2.bias", "gate"}));
  EXPECT_TRUE(graphs->choice.one_element.empty());
  EXPECT_TRUE(graphs->choice.unlisted.empty());  // reported for files only: a regex says what it leaves out
  for (const Parameter& p : graphs->params) EXPECT_FALSE(p.gradient.empty()) << p.name;

  // A file: whole names, white space trimmed, comments and blank lines skipped; unknown names reported per flag.
  options.trainable =
      "@" + NamesFile("trainable.txt", "# from named_parameters()\n  fc1.weight\r\n\nfc2.bias\ngate\nlm_head.weight\n");
  options.freeze = "@" + NamesFile("frozen.txt", "fc2.bias\nnot.there\n");
  graphs = BuildTrainingGraphs(model, options);
  ASSERT_TRUE(graphs.ok()) << graphs.status().message();
  trained.clear();
  for (const Parameter& p : graphs->params) trained.push_back(p.name);
  EXPECT_EQ(trained, (std::vector<std::string>{"fc1.weight", "gate"}));
  ASSERT_EQ(graphs->choice.unknown.size(), 2u);
  EXPECT_EQ(graphs->choice.unknown[0].flag, "--trainable");
  EXPECT_EQ(graphs->choice.unknown[0].names, std::vector<std::string>{"lm_head.weight"});
  EXPECT_EQ(graphs->choice.unknown[1].flag, "--freeze");
  EXPECT_EQ(graphs->choice.unknown[1].names, std::vector<std::string>{"not.there"});
  // What the default would train and the file leaves out (fc2.bias: frozen, so not among them).
  EXPECT_EQ(graphs->choice.unlisted, (std::vector<std::string>{"fc1.bias", "fc2.weight"}));
  // A listed weight the loss depends on where no gradient flows is left constant, as by default.
  options.freeze = "";
  options.trainable = "@" + NamesFile("other.txt", "other\nfc1.bias\n");
  graphs = BuildTrainingGraphs(model, options);
  ASSERT_TRUE(graphs.ok()) << graphs.status().message();
  ASSERT_EQ(graphs->params.size(), 1u);
  EXPECT_EQ(graphs->params[0].name, "fc1.bias");
  ASSERT_EQ(graphs->untrained.size(), 1u);
  EXPECT_EQ(graphs->untrained[0].name, "other");
  EXPECT_THAT(graphs->untrained[0].why, ::testing::HasSubstr("Equal 'eq' makes no floating value of it"));

  auto error = [&](const std::string& trainable, const std::string& freeze = "") {
    TrainingGraphOptions o;
    o.trainable = trainable;
    o.freeze = freeze;
    StatusOr<TrainingGraphs> r = BuildTrainingGraphs(model, o);
    EXPECT_FALSE(r.ok()) << trainable;
    return r.ok() ? std::string() : r.status().message();
  };
  const std::string ints = NamesFile("ints.txt", "fc1.weight\ncount\n");
  EXPECT_EQ(error("@" + ints),
            "--trainable @" + ints + ": 'count' holds int64; only floating-point initializers train");
  EXPECT_THAT(error("("), ::testing::StartsWith("--trainable '(': not a valid regular expression: "));
  EXPECT_THAT(error("", "("), ::testing::StartsWith("--freeze '(': not a valid regular expression: "));
  const std::string empty = NamesFile("empty.txt", "# nothing\n\n");
  EXPECT_EQ(error("@" + empty),
            "--trainable @" + empty + ": '" + empty + "' lists no name (one initializer name per line)");
  EXPECT_THAT(error("@/nonexistent/names.txt"), ::testing::StartsWith("--trainable @/nonexistent/names.txt: "));
  EXPECT_THAT(error("@/nonexistent/names.txt"), ::testing::HasSubstr("/nonexistent/names.txt"));
  EXPECT_EQ(error("^nothing$"), "--trainable '^nothing$' names no float initializer that a node reads");
  EXPECT_EQ(error("fc1", "fc"), "--trainable 'fc1' names no float initializer that a node reads and --freeze leaves");
  TrainingGraphOptions lora;
  lora.lora.rank = 2;
  lora.trainable = "fc2";
  StatusOr<TrainingGraphs> r = BuildTrainingGraphs(model, lora);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), ::testing::HasSubstr("--trainable does not combine with LoRA"));

  // BatchNormalization's running statistics never train: a file that lists one is an error, a regex skips them.
  const ir::Model cnn = LoadReference("cnn.onnx");
  const std::string stats = NamesFile("stats.txt", "stem.conv.weight\nstem.bn.running_mean\n");
  names = SelectParameters(cnn, "", "@" + stats);
  ASSERT_FALSE(names.ok());
  EXPECT_EQ(names.status().message(), "--trainable @" + stats +
                                          ": 'stem.bn.running_mean' is a BatchNormalization running statistic, which "
                                          "the forward pass updates (it takes no gradient)");
  names = SelectParameters(cnn, "", "^stem\\.");
  ASSERT_TRUE(names.ok()) << names.status().message();
  EXPECT_EQ(*names, (std::vector<std::string>{"stem.conv.weight", "stem.bn.weight", "stem.bn.bias"}));
}

// DescribeInitializers gives every float initializer its role and reason (onnxamp train --list-parameters).
TEST(TrainingGraphs, DescribeInitializersSaysWhatTrainsAndWhy) {
  using Role = InitializerRole::Role;
  ir::Model model = LoadReference("digits_mlp.onnx");
  ir::Graph& g = *model.graph;
  auto scalar = [&](const std::string& name) {
    ir::Value* v = g.CreateValue(name);
    g.SetInitializer(v, ir::Tensor(DType::kFloat32, {1}));
    return v;
  };
  ir::Value* logits = g.outputs()[0];
  ir::Value* out = g.CreateValue("out");
  out->set_type(logits->type());
  g.AddNode("Mul", {logits, scalar("gate")}, {out}, "gate_mul");
  g.SetOutput(0, out);
  scalar("unused");
  TrainingGraphOptions options;
  options.freeze = "^fc2\\.bias$";
  StatusOr<TrainingGraphs> graphs = BuildTrainingGraphs(model, options);
  ASSERT_TRUE(graphs.ok()) << graphs.status().message();
  StatusOr<std::vector<InitializerRole>> roles = DescribeInitializers(model, options, *graphs);
  ASSERT_TRUE(roles.ok()) << roles.status().message();
  std::map<std::string, std::pair<Role, std::string>> by_name;
  for (const InitializerRole& r : *roles) by_name[r.name] = {r.role, r.why};
  ASSERT_EQ(by_name.size(), 6u);
  EXPECT_EQ(by_name["fc1.weight"].first, Role::kTrained);
  EXPECT_EQ(by_name["fc2.bias"], std::make_pair(Role::kFrozen, std::string("matches --freeze '^fc2\\.bias$'")));
  EXPECT_EQ(by_name["gate"].first, Role::kConstant);
  EXPECT_THAT(by_name["gate"].second, ::testing::StartsWith("one element"));
  EXPECT_EQ(by_name["unused"], std::make_pair(Role::kUnread, std::string("no node reads it")));
  options.freeze.clear();
  options.trainable = "gate";
  graphs = BuildTrainingGraphs(model, options);
  ASSERT_TRUE(graphs.ok()) << graphs.status().message();
  roles = DescribeInitializers(model, options, *graphs);
  ASSERT_TRUE(roles.ok());
  for (const InitializerRole& r : *roles) {
    EXPECT_EQ(r.role == Role::kTrained, r.name == "gate") << r.name;
    if (r.name == "fc1.weight") EXPECT_EQ(r.why, "not matched by --trainable 'gate'");
  }
  // Buffers; LoRA adapters come after the model's initializers, the adapted weights frozen beside them.
  const ir::Model cnn = LoadReference("cnn.onnx");
  graphs = BuildTrainingGraphs(cnn, {});
  ASSERT_TRUE(graphs.ok()) << graphs.status().message();
  roles = DescribeInitializers(cnn, {}, *graphs);
  ASSERT_TRUE(roles.ok());
  int buffers = 0;
  for (const InitializerRole& r : *roles) buffers += r.role == Role::kBuffer;
  EXPECT_EQ(buffers, 12);
  TrainingGraphOptions lora;
  lora.lora.rank = 2;
  graphs = BuildTrainingGraphs(model, lora);
  ASSERT_TRUE(graphs.ok()) << graphs.status().message();
  roles = DescribeInitializers(model, lora, *graphs);
  ASSERT_TRUE(roles.ok());
  ASSERT_EQ(roles->size(), 6u + 2 * graphs->lora.size());
  EXPECT_EQ(roles->back().role, Role::kTrained);
  EXPECT_THAT(roles->back().why, ::testing::StartsWith("LoRA adapter of '"));
  for (const InitializerRole& r : *roles) {
    if (r.name == "fc1.weight") EXPECT_THAT(r.why, ::testing::StartsWith("LoRA adapters '"));
  }
}

// A model before opset 13 is raised only when its gradients cannot be built at its own opset: digits_mlp with a
// PReLU trains at opset 9; at opset 7 PReLU's gradient needs Where (opset 9), so the graphs are built at opset 13 with
// the same parameters. An op without a gradient at any opset reports the error at the model's own opset first.
TEST(TrainingGraphs, OlderOpsetsAreRaisedOnlyWhenTheirGradientsNeedIt) {
  ir::Model model = LoadReference("digits_mlp.onnx");
  for (ir::Node* n : model.graph->nodes()) {
    if (n->op_type() != "Relu") continue;
    ir::Value* slope = model.graph->CreateValue("slope");
    ir::Tensor quarter(DType::kFloat32, {1});
    quarter.mutable_values<float>()[0] = 0.25f;
    model.graph->SetInitializer(slope, std::move(quarter));
    ir::Value* x = n->input(0);
    ir::Value* y = n->output(0);
    model.graph->RemoveNode(n);
    model.graph->AddNode("PRelu", {x, slope}, {y}, "prelu");
    break;
  }
  ASSERT_TRUE(model.graph->SortTopologically().ok());
  auto at = [&](int64_t opset) {
    ir::Model m = converter::CloneModel(model);
    m.SetOpsetVersion("", opset);
    return m;
  };
  StatusOr<TrainingGraphs> g = BuildTrainingGraphs(model, {});
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(g->raised_opset.from, 0);
  std::vector<std::string> names;
  for (const Parameter& p : g->params) names.push_back(p.name);
  g = BuildTrainingGraphs(at(9), {});
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(g->raised_opset.from, 0);
  EXPECT_EQ(g->train.OpsetVersion(""), 9);
  g = BuildTrainingGraphs(at(7), {});
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(g->raised_opset.from, 7);
  EXPECT_EQ(g->raised_opset.to, kTrainingOpsetFloor);
  EXPECT_EQ(g->train.OpsetVersion(""), kTrainingOpsetFloor);
  EXPECT_EQ(g->eval.OpsetVersion(""), kTrainingOpsetFloor);
  EXPECT_NE(g->raised_opset.why.find("PRelu 'prelu'"), std::string::npos) << g->raised_opset.why;
  std::vector<std::string> raised_names;
  for (const Parameter& p : g->params) raised_names.push_back(p.name);
  EXPECT_EQ(raised_names, names);
  // The one-element slope trains: a PRelu's slope is a weight whatever its size.
  EXPECT_NE(std::find(names.begin(), names.end(), "slope"), names.end());

  // logits -> Unsqueeze to [N, 10, 1, 1] -> GlobalLpPool (no gradient at any opset) -> Flatten.
  ir::Model lp = at(9);
  ir::Graph& graph = *lp.graph;
  ir::Value* logits = graph.outputs()[0];
  ir::Value* wide = graph.CreateValue("wide");
  ir::Value* pooled = graph.CreateValue("pooled");
  ir::Value* out = graph.CreateValue("out");
  out->set_type(logits->type());
  graph.AddNode("Unsqueeze", {logits}, {wide}, "wide")->SetAttribute(ir::Attribute::Ints("axes", {2, 3}));
  graph.AddNode("GlobalLpPool", {wide}, {pooled}, "lp");
  graph.AddNode("Flatten", {pooled}, {out}, "flat");
  graph.SetOutput(0, out);
  g = BuildTrainingGraphs(lp, {});
  ASSERT_FALSE(g.ok());
  const std::string message(g.status().message());
  EXPECT_EQ(message.find("pass build_gradients: node GlobalLpPool 'lp': op GlobalLpPool has no gradient"), 0u)
      << message;
  EXPECT_NE(message.find("(at opset 9; raised to opset 13: pass build_gradients: node GlobalLpPool 'lp'"),
            std::string::npos)
      << message;
}

// The raised model must compute what the model computes on the batch: the same model passes, one whose weight an
// adapter would have changed is refused, naming the output and the element.
TEST(TrainingGraphs, CheckRaisedForwardComparesTheOutputs) {
  ir::Model model = LoadReference("digits_mlp.onnx");
  model.SetOpsetVersion("", 9);
  ir::Model raised = converter::CloneModel(model);
  raised.SetOpsetVersion("", 13);
  ir::Tensor x(DType::kFloat32, {3, 64});
  for (int64_t i = 0; i < x.num_elements(); ++i) x.mutable_values<float>()[i] = static_cast<float>(i % 17) / 4;
  x.set_name("input");
  const Status same = CheckRaisedForward(model, raised, {x}, 1);
  EXPECT_TRUE(same.ok()) << same.message();
  for (ir::Value* v : raised.graph->initializers()) {
    if (v->initializer()->dims().size() != 1) continue;  // a bias
    ir::Tensor shifted = *v->initializer();
    shifted.mutable_values<float>()[0] += 0.5f;
    raised.graph->SetInitializer(v, std::move(shifted));
    break;
  }
  const Status st = CheckRaisedForward(model, raised, {x}, 1);
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("the model raised from opset 9 to 13 by ONNX's version converter computes another "
                              "output 'logits' on the first batch (element "),
            std::string::npos)
      << st.message();
}

// AMP: the converter's low-precision GEMMs read a Cast of the FP32 master weight; gradients come back in FP32.
TEST(TrainingGraphs, MixedPrecisionKeepsMasterWeightsInFp32) {
  const ir::Model model = LoadReference("digits_mlp.onnx");
  TrainingGraphOptions options;
  options.amp = DType::kFloat16;
  StatusOr<TrainingGraphs> g = BuildTrainingGraphs(model, options);
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_GT(g->converted_nodes, 0);
  int master_casts = 0;
  for (const ir::Node* n : g->train.graph->nodes()) {
    if (n->op_type() != "Cast" || !n->input(0)) continue;
    for (const Parameter& p : g->params) {
      if (n->input(0)->name() == p.name) {
        ++master_casts;
        EXPECT_EQ(n->GetInt("to", 0), static_cast<int64_t>(DType::kFloat16)) << p.name;
      }
    }
  }
  EXPECT_EQ(master_casts, 4);
  for (const Parameter& p : g->params) {
    const ir::Value* grad = g->train.graph->FindValue(p.gradient);
    ASSERT_NE(grad, nullptr);
    EXPECT_EQ(grad->type().elem_type(), DType::kFloat32) << p.gradient;
  }
}

TrainerOptions Options(int64_t steps, int64_t batch) {
  TrainerOptions o;
  o.steps = steps;
  o.batch_size = batch;
  o.threads = 1;
  o.schedule.base_lr = 0.01;
  return o;
}

// digits_mlp with its logits masked by a weight through a comparison (as a causal mask reaches attention scores) and
// resized by a float scales initializer: both are float initializers of more than one element, which the loss depends
// on only where no gradient flows. With `aux`, a second output from a weight the loss does not read at all.
ir::Tensor FloatTensor(std::vector<int64_t> dims, const std::vector<float>& values) {
  ir::Tensor t(DType::kFloat32, std::move(dims));
  std::copy(values.begin(), values.end(), t.mutable_values<float>().begin());
  return t;
}

ir::Model WithConstantWeights(bool aux) {
  ir::Model model = LoadReference("digits_mlp.onnx");
  ir::Graph& g = *model.graph;
  ir::Value* logits = g.FindValue("logits");
  g.RemoveOutput(0);
  auto init = [&](const std::string& name, ir::Tensor t) {
    ir::Value* v = g.CreateValue(name);
    g.SetInitializer(v, std::move(t));
    return v;
  };
  auto value = [&](const std::string& name, DType t) {
    ir::Value* v = g.CreateValue(name);
    v->set_type(ir::ValueType::Tensor(t));
    return v;
  };
  ir::Value* mask = init("mask", FloatTensor({10}, {1, 1, 1, 1, 1, 1, 1, 1, 1, 0}));
  ir::Value* zero = init("zero", FloatTensor({}, {0}));
  ir::Value* neg = init("neg", FloatTensor({}, {-1e4f}));
  ir::Value* scales = init("scales", FloatTensor({2}, {1, 1}));
  ir::Value* off = value("off", DType::kBool);
  ir::Value* masked = value("masked", DType::kFloat32);
  ir::Value* out = value("out", DType::kFloat32);
  g.AddNode("Equal", {mask, zero}, {off}, "mask_eq");
  g.AddNode("Where", {off, neg, logits}, {masked}, "mask_where");
  g.AddNode("Resize", {masked, nullptr, scales}, {out}, "resize")
      ->SetAttribute(ir::Attribute::String("mode", "nearest"));
  g.AddOutput(out);
  if (aux) {
    ir::Value* w = init("aux_w", FloatTensor({10, 10}, std::vector<float>(100, 0.5f)));
    ir::Value* y = value("aux", DType::kFloat32);
    g.AddNode("MatMul", {masked, w}, {y}, "aux_matmul");
    g.AddOutput(y);
  }
  return model;
}

// A model converted to FP16 (weights stored in float16) computes in float16: StoredLowPrecision says so, graphs without
// amp are refused with the flag to use, and with amp fp16 it trains. Weights in both 16-bit types are an error.
TEST(TrainingGraphs, ModelsStoredInLowPrecisionTrainWithItsAmp) {
  ir::Model model = LoadReference("digits_mlp.onnx");
  converter::ConvertOptions convert;
  convert.target = DType::kFloat16;
  convert.keep_io_types = true;
  ASSERT_TRUE(converter::ConvertModel(model, convert).ok());
  std::string example;
  int count = 0;
  StatusOr<DType> low = StoredLowPrecision(model, "", "", &example, &count);
  ASSERT_TRUE(low.ok()) << low.status().message();
  EXPECT_EQ(*low, DType::kFloat16);
  EXPECT_EQ(count, 4);
  EXPECT_EQ(example, "fc1.weight");
  StatusOr<TrainingGraphs> g = BuildTrainingGraphs(model, {});
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().message(),
            "parameter 'fc1.weight' is stored in float16, so the model computes in float16: train it with --amp fp16 "
            "(FP32 master weights and dynamic loss scaling)");
  TrainingGraphOptions options;
  options.amp = DType::kFloat16;
  g = BuildTrainingGraphs(model, options);
  ASSERT_TRUE(g.ok()) << g.status().message();
  for (const Parameter& p : g->params) EXPECT_EQ(p.initial.dtype(), DType::kFloat32) << p.name;
  const Dataset data = Bound(Separable(64, 64, 10, "input", 6), model);
  TrainerOptions o = Options(3, 16);
  o.graph.amp = DType::kFloat16;
  StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(model, o, data);
  ASSERT_TRUE(t.ok()) << t.status().message();
  while (!(*t)->Done()) ASSERT_TRUE((*t)->Step().ok());
  EXPECT_TRUE(StoredLowPrecision(LoadReference("digits_mlp.onnx"), "", "").ok());
  EXPECT_EQ(*StoredLowPrecision(LoadReference("digits_mlp.onnx"), "", ""), DType::kUndefined);
  // --freeze leaves the 16-bit ones out.
  EXPECT_EQ(*StoredLowPrecision(model, ".", ""), DType::kUndefined);
  ir::Value* w2 = model.graph->FindValue("fc2.weight");
  ir::Tensor bf(DType::kBFloat16, w2->initializer()->dims());
  model.graph->SetInitializer(w2, std::move(bf));
  low = StoredLowPrecision(model, "", "");
  ASSERT_FALSE(low.ok());
  EXPECT_THAT(low.status().message(), ::testing::HasSubstr("is stored in float16 and 'fc2.weight' in bfloat16"));
  // float64 weights: FP32 masters cannot feed a float64 graph, refused before anything runs (before: step 1 failed
  // in the first Gemm).
  ir::Model wide = LoadReference("digits_mlp.onnx");
  ir::Value* w1 = wide.graph->FindValue("fc1.weight");
  wide.graph->SetInitializer(w1, ir::Tensor(DType::kFloat64, w1->initializer()->dims()));
  for (DType amp : {DType::kUndefined, DType::kFloat16}) {
    TrainingGraphOptions o64;
    o64.amp = amp;
    g = BuildTrainingGraphs(wide, o64);
    ASSERT_FALSE(g.ok());
    EXPECT_THAT(g.status().message(), ::testing::HasSubstr("parameter 'fc1.weight' is stored in float64"));
  }
}

// Two LayerNormalizations after the logits reading one scale (the second through an Identity) and one bias, as
// torch.onnx.export in eval mode merges fresh LayerNorms: reported, and trained as one weight.
TEST(TrainingGraphs, NormalizationWeightsReadBySeveralNodesAreReported) {
  ir::Model model = LoadReference("digits_mlp.onnx");
  ir::Graph& g = *model.graph;
  ir::Value* logits = g.FindValue("logits");
  g.RemoveOutput(0);
  ir::Value* scale = g.CreateValue("ln.weight");
  g.SetInitializer(scale, FloatTensor({10}, std::vector<float>(10, 1.0f)));
  ir::Value* bias = g.CreateValue("ln.bias");
  g.SetInitializer(bias, FloatTensor({10}, std::vector<float>(10, 0.0f)));
  ir::Value *copy = g.CreateValue("ln2.weight"), *h = g.CreateValue("h"), *y = g.CreateValue("y");
  g.AddNode("Identity", {scale}, {copy}, "merged");
  g.AddNode("LayerNormalization", {logits, scale, bias}, {h}, "ln1");
  g.AddNode("LayerNormalization", {h, copy, bias}, {y}, "ln2");
  y->set_type(ir::ValueType::Tensor(DType::kFloat32));
  g.AddOutput(y);
  StatusOr<TrainingGraphs> graphs = BuildTrainingGraphs(model, {});
  ASSERT_TRUE(graphs.ok()) << graphs.status().message();
  ASSERT_EQ(graphs->shared_norm_weights.size(), 2u);
  EXPECT_EQ(graphs->shared_norm_weights[0].name, "ln.weight");
  EXPECT_EQ(graphs->shared_norm_weights[0].op_type, "LayerNormalization");
  EXPECT_EQ(graphs->shared_norm_weights[0].nodes, 2);
  EXPECT_EQ(graphs->shared_norm_weights[1].name, "ln.bias");
  EXPECT_EQ(graphs->shared_norm_weights[1].nodes, 2);
  // digits_mlp itself shares nothing.
  graphs = BuildTrainingGraphs(LoadReference("digits_mlp.onnx"), {});
  ASSERT_TRUE(graphs.ok()) << graphs.status().message();
  EXPECT_TRUE(graphs->shared_norm_weights.empty());
}

// A weight the loss depends on only through inputs that take no gradient is a constant in both graphs (as PyTorch
// leaves a registered buffer), reported with the node where the gradient stops; one the loss does not read is an
// error. In FP32 and FP16 AMP, and the trainer runs.
TEST(TrainingGraphs, WeightsNoGradientReachesStayConstants) {
  const ir::Model model = WithConstantWeights(false);
  for (DType amp : {DType::kUndefined, DType::kFloat16}) {
    TrainingGraphOptions options;
    options.amp = amp;
    StatusOr<TrainingGraphs> g = BuildTrainingGraphs(model, options);
    ASSERT_TRUE(g.ok()) << g.status().message();
    std::vector<std::string> params;
    for (const Parameter& p : g->params) params.push_back(p.name);
    EXPECT_THAT(params, ::testing::UnorderedElementsAre("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"));
    ASSERT_EQ(g->untrained.size(), 2u);
    EXPECT_EQ(g->untrained[0].name, "mask");
    EXPECT_THAT(g->untrained[0].why, ::testing::HasSubstr("Equal 'mask_eq' makes no floating value of it"));
    EXPECT_EQ(g->untrained[1].name, "scales");
    EXPECT_THAT(g->untrained[1].why, ::testing::HasSubstr("input 2 of Resize 'resize', which takes no gradient"));
    for (const ir::Model* m : {&g->train, &g->eval}) {
      for (const char* name : {"mask", "scales"}) {
        const ir::Value* v = m->graph->FindValue(name);
        ASSERT_NE(v, nullptr) << name;
        EXPECT_NE(v->initializer(), nullptr) << name;
        EXPECT_FALSE(v->is_graph_input()) << name;
      }
    }
    EXPECT_TRUE(ir::Verify(g->train).ok());
    EXPECT_TRUE(ir::Verify(g->eval).ok());
  }
  TrainerOptions o = Options(3, 16);
  o.graph.amp = DType::kFloat16;
  const Dataset data = Bound(Separable(64, 64, 10, "input", 5), model);
  StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(model, o, data);
  ASSERT_TRUE(t.ok()) << t.status().message();
  while (!(*t)->Done()) {
    StatusOr<StepRecord> r = (*t)->Step();
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_TRUE(std::isfinite(r->loss));
  }
  // The loss does not read aux_w: still an error, which names it.
  TrainingGraphOptions options;
  options.loss.output = "out";
  StatusOr<TrainingGraphs> g = BuildTrainingGraphs(WithConstantWeights(true), options);
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), ::testing::HasSubstr("parameter 'aux_w' does not affect the loss"));
}

// FP32 and FP16 AMP both learn a separable problem; the FP16 run's loss follows the FP32 run's.
TEST(Trainer, LearnsInFp32AndFp16) {
  const ir::Model model = LoadReference("digits_mlp.onnx");
  const Dataset data = Bound(Separable(512, 64, 10, "input", 3), model);
  std::vector<double> losses[2];
  for (int amp = 0; amp < 2; ++amp) {
    TrainerOptions o = Options(80, 64);
    o.graph.amp = amp ? DType::kFloat16 : DType::kUndefined;
    StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(model, o, data);
    ASSERT_TRUE(t.ok()) << t.status().message();
    while (!(*t)->Done()) {
      StatusOr<StepRecord> r = (*t)->Step();
      ASSERT_TRUE(r.ok()) << r.status().message();
      EXPECT_FALSE(r->skipped) << "step " << r->step;
      EXPECT_EQ(r->loss_scale, amp ? 65536.0f : 1.0f);
      losses[amp].push_back(r->loss);
    }
    StatusOr<EvalRecord> e = (*t)->Evaluate(data);
    ASSERT_TRUE(e.ok()) << e.status().message();
    EXPECT_GT(e->accuracy, 0.8) << (amp ? "fp16" : "fp32");
    EXPECT_LT(losses[amp].back(), 0.5 * losses[amp].front());
  }
  for (size_t i = 0; i < losses[0].size(); ++i) {
    EXPECT_NEAR(losses[1][i], losses[0][i], 2e-2 * std::max(1.0, losses[0][i])) << "step " << i + 1;
  }
}

// A static scale far too large makes every FP16 gradient overflow: each step is skipped, and then nothing moves —
// not the weights, not the LR schedule, not BatchNormalization's running statistics.
TEST(Trainer, SkippedStepsChangeNothing) {
  const ir::Model model = LoadReference("cnn.onnx");
  ir::Tensor x(DType::kFloat32, {8, 3, 32, 32});
  std::mt19937 gen(5);
  std::normal_distribution<float> normal;
  for (float& v : x.mutable_values<float>()) v = normal(gen);
  x.set_name("input");
  ir::Tensor y(DType::kInt64, {8});
  for (int64_t i = 0; i < 8; ++i) y.mutable_values<int64_t>()[i] = i % 10;
  y.set_name("labels");
  const Dataset data = Bound(std::move(Dataset::FromTensors({x, y}, "cnn data")).value(), model);
  TrainerOptions o = Options(2, 4);
  o.graph.amp = DType::kFloat16;
  o.scaler.mode = LossScaleMode::kStatic;
  o.scaler.init_scale = 3e38;
  o.schedule.kind = LrScheduleKind::kStep;
  StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(model, o, data);
  ASSERT_TRUE(t.ok()) << t.status().message();
  const std::vector<ir::Tensor> before = (*t)->TrainedValues();
  ASSERT_FALSE((*t)->graphs().buffers.empty());
  for (int s = 0; s < 2; ++s) {
    StatusOr<StepRecord> r = (*t)->Step();
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_TRUE(r->skipped);
    EXPECT_EQ(r->skipped_total, s + 1);
    EXPECT_EQ(r->lr, 0.01);  // the schedule has not moved
  }
  const std::vector<ir::Tensor> after = (*t)->TrainedValues();
  ASSERT_EQ(before.size(), after.size());
  for (size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(before[i].SameContents(after[i])) << before[i].name();
}

// `n` cnn.onnx samples drawn from N(0.5, 2) with `seed`, labelled (3 i) % 10.
Dataset CnnData(const ir::Model& model, int64_t n, uint32_t seed) {
  ir::Tensor x(DType::kFloat32, {n, 3, 32, 32});
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.5f, 2.0f);
  for (float& v : x.mutable_values<float>()) v = normal(gen);
  x.set_name("input");
  ir::Tensor y(DType::kInt64, {n});
  for (int64_t i = 0; i < n; ++i) y.mutable_values<int64_t>()[i] = (3 * i) % 10;
  y.set_name("labels");
  return Bound(std::move(Dataset::FromTensors({x, y}, "cnn data")).value(), model);
}

// With a sane scale the same model trains and its running statistics move.
// cnn as torch.onnx.export(training=TrainingMode.TRAINING) writes a network: every BatchNormalization with
// training_mode = 1 and its running-statistics outputs, and a Dropout after the stem whose training_mode is a true
// constant; with `training` false, the same network in inference form (no training_mode, a Dropout without it).
ir::Model CnnExportedFor(bool training) {
  ir::Model model = LoadReference("cnn.onnx");
  ir::Graph& g = *model.graph;
  std::vector<ir::Node*> bns;
  for (ir::Node* n : g.nodes()) {
    if (n->op_type() == "BatchNormalization") bns.push_back(n);
  }
  for (ir::Node* n : bns) {
    if (!training) continue;
    n->SetAttribute(ir::Attribute::Int("training_mode", 1));
    for (int i = 1; i <= 2; ++i) n->SetOutput(i, g.CreateValue(g.UniqueName(n->name() + "_stat")));
  }
  ir::Value* relu = g.FindValue("stem.relu");
  ir::Value* dropped = g.CreateValue("stem.drop");
  const std::vector<ir::Use> uses = relu->uses();
  for (const ir::Use& u : uses) u.node->SetInput(u.index, dropped);
  std::vector<ir::Value*> inputs = {relu};
  if (training) {
    ir::Value* ratio = g.CreateValue("drop_ratio");
    g.SetInitializer(ratio, FloatTensor({}, {0.3f}));
    ir::Tensor on(DType::kBool, {});
    on.mutable_values<bool>()[0] = true;
    ir::Value* mode = g.CreateValue("drop_training");
    g.SetInitializer(mode, std::move(on));
    inputs = {relu, ratio, mode};
  }
  g.AddNode("Dropout", inputs, {dropped}, "stem.drop");
  EXPECT_TRUE(g.SortTopologically().ok());
  return model;
}

// Evaluation runs a model exported in training mode as PyTorch evaluates after model.eval(): running statistics, no
// dropout. Its eval graph gives the losses of the same model written in inference form (before, the batch statistics
// and a dropped-out stem).
TEST(TrainingGraphs, EvalGraphRunsTrainingModeNodesInInferenceMode) {
  const ir::Model exported = CnnExportedFor(true), inference = CnnExportedFor(false);
  StatusOr<TrainingGraphs> g = BuildTrainingGraphs(exported, {});
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(g->eval_inference_mode.batch_norms, 6);
  EXPECT_EQ(g->eval_inference_mode.dropouts, 1);
  for (const ir::Node* n : g->eval.graph->nodes()) {
    if (n->op_type() == "BatchNormalization") {
      EXPECT_EQ(n->GetInt("training_mode", 0), 0) << n->Describe();
      EXPECT_EQ(n->outputs().size(), 1u) << n->Describe();
    }
    if (n->op_type() == "Dropout") EXPECT_EQ(n->input(2), nullptr) << n->Describe();
  }
  EXPECT_TRUE(ir::Verify(g->eval).ok());
  StatusOr<TrainingGraphs> plain = BuildTrainingGraphs(inference, {});
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_EQ(plain->eval_inference_mode.batch_norms + plain->eval_inference_mode.dropouts, 0);
  const Dataset data = CnnData(exported, 8, 9);
  std::vector<double> losses;
  for (const ir::Model* m : {&exported, &inference}) {
    StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(*m, Options(1, 4), data);
    ASSERT_TRUE(t.ok()) << t.status().message();
    StatusOr<EvalRecord> e = (*t)->Evaluate(data);
    ASSERT_TRUE(e.ok()) << e.status().message();
    losses.push_back(e->loss);
  }
  EXPECT_EQ(losses[0], losses[1]);
  // `onnxamp export --inference-mode`: the file in inference form computes what the inference-form model computes.
  ExportOptions options;
  options.inference_mode = true;
  InferenceModeReport report;
  StatusOr<ir::Model> written = ExportTrainedModel(exported, {}, options, &report);
  ASSERT_TRUE(written.ok()) << written.status().message();
  EXPECT_EQ(report.batch_norms, 6);
  EXPECT_EQ(report.dropouts, 1);
  EXPECT_TRUE(ir::Verify(*written).ok());
  EXPECT_EQ(written->graph->FindValue("drop_training"), nullptr) << "the training-mode constant is removed";
  ir::Tensor x(DType::kFloat32, {3, 3, 32, 32});
  std::mt19937 gen(4);
  std::normal_distribution<float> normal;
  for (float& v : x.mutable_values<float>()) v = normal(gen);
  x.set_name("input");
  std::vector<std::vector<float>> outputs;
  for (const ir::Model* m : {static_cast<const ir::Model*>(&*written), &inference}) {
    StatusOr<std::unique_ptr<exec::Session>> s = exec::Session::Create(converter::CloneModel(*m));
    ASSERT_TRUE(s.ok()) << s.status().message();
    StatusOr<std::vector<ir::Tensor>> y = (*s)->Run({x});
    ASSERT_TRUE(y.ok()) << y.status().message();
    outputs.emplace_back((*y)[0].values<float>().begin(), (*y)[0].values<float>().end());
  }
  EXPECT_EQ(outputs[0], outputs[1]);
}

TEST(Trainer, BatchNormStatisticsMoveOnTakenStepsAndExport) {
  const ir::Model model = LoadReference("cnn.onnx");
  const Dataset data = CnnData(model, 8, 6);
  TrainerOptions o = Options(3, 4);
  o.optimizer = OptimizerKind::kSgd;
  StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(model, o, data);
  ASSERT_TRUE(t.ok()) << t.status().message();
  const std::vector<ir::Tensor> before = (*t)->TrainedValues();
  while (!(*t)->Done()) ASSERT_TRUE((*t)->Step().ok());
  const std::vector<ir::Tensor> after = (*t)->TrainedValues();
  int changed = 0;
  for (size_t i = 0; i < before.size(); ++i) changed += !before[i].SameContents(after[i]);
  EXPECT_EQ(changed, static_cast<int>(before.size()));  // every parameter and every running statistic
  StatusOr<ir::Model> exported = ExportTrainedModel(model, after, {});
  ASSERT_TRUE(exported.ok()) << exported.status().message();
  for (const ir::Tensor& v : after) {
    const ir::Value* init = exported->graph->FindValue(v.name());
    ASSERT_NE(init, nullptr);
    ASSERT_NE(init->initializer(), nullptr);
    EXPECT_TRUE(init->initializer()->SameContents(v)) << v.name();
  }
  // The inference graph is the original one: BatchNormalization in inference form, no training ops.
  for (const ir::Node* n : exported->graph->nodes()) EXPECT_TRUE(n->domain().empty()) << n->Describe();
  StatusOr<ir::Model> fp16 = ExportTrainedModel(model, after, {DType::kFloat16, true});
  ASSERT_TRUE(fp16.ok()) << fp16.status().message();
  // The trainer keeps no second copy of the initial weights (the store holds them), and a model whose trained
  // initializers lost their data (DropInitializerData, as `onnxamp train` keeps it for the export) exports the same.
  for (const Parameter& p : (*t)->graphs().params) {
    EXPECT_FALSE(p.initial.has_data()) << p.name;
    EXPECT_FALSE(p.initial.dims().empty()) << p.name;
  }
  ir::Model shell = converter::CloneModel(model);
  std::vector<std::string> names;
  for (const ir::Tensor& v : after) names.push_back(v.name());
  ASSERT_TRUE(DropInitializerData(shell, names).ok());
  for (const std::string& name : names) EXPECT_FALSE(shell.graph->FindValue(name)->initializer()->has_data()) << name;
  for (DType precision : {DType::kFloat32, DType::kFloat16}) {
    StatusOr<ir::Model> full = ExportTrainedModel(model, after, {precision, true});
    StatusOr<ir::Model> from_shell = ExportTrainedModel(shell, after, {precision, true});
    ASSERT_TRUE(full.ok() && from_shell.ok()) << from_shell.status().message();
    for (const ir::Value* v : full->graph->initializers()) {
      const ir::Value* w = from_shell->graph->FindValue(v->name());
      ASSERT_TRUE(w && w->initializer()) << v->name();
      EXPECT_TRUE(w->initializer()->SameContents(*v->initializer())) << v->name();
    }
  }
}

// The EMA weight: 1 - decay, or with warm-up 1 - min(decay, (1 + n) / (10 + n)), rounded once to float32.
TEST(Trainer, EmaWeightFollowsTheDecayAndItsWarmUp) {
  EXPECT_EQ(optim_math::EmaWeight(0.999, false, 0), static_cast<float>(1.0 - 0.999));
  EXPECT_EQ(optim_math::EmaWeight(0.999, false, 500), static_cast<float>(1.0 - 0.999));
  EXPECT_EQ(optim_math::EmaWeight(0.999, true, 0), static_cast<float>(1.0 - 0.1));
  EXPECT_EQ(optim_math::EmaWeight(0.999, true, 90), static_cast<float>(1.0 - 91.0 / 100.0));
  EXPECT_EQ(optim_math::EmaWeight(0.5, true, 90), 0.5f);  // the ramp has passed the decay
}

// --ema: the moving average of every parameter and running statistic follows EmaWeight's lerp after each step taken
// (skipped steps leave it, the warm-up counts taken steps only); Evaluate measures the averaged model, which is what
// ExportValues gives, and leaves the live values as they were.
TEST(Trainer, EmaAveragesParametersAndBuffersOnTakenSteps) {
  const ir::Model model = LoadReference("cnn.onnx");
  const Dataset data = CnnData(model, 16, 7);
  TrainerOptions o = Options(8, 4);
  o.graph.amp = DType::kFloat16;
  o.scaler.init_scale = 1048576.0;  // 2^20: the first steps overflow and are skipped while the scale backs off
  o.ema_decay = 0.95;
  o.ema_warmup = true;
  StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(model, o, data);
  ASSERT_TRUE(t.ok()) << t.status().message();
  std::vector<ir::Tensor> ema = (*t)->TrainedValues();
  for (ir::Tensor& v : ema) {
    ir::Tensor copy(v.dtype(), v.dims());
    std::copy_n(v.values<float>().data(), v.num_elements(), copy.mutable_values<float>().data());
    copy.set_name(v.name());
    v = std::move(copy);
  }
  int64_t updates = 0, skipped = 0;
  while (!(*t)->Done()) {
    StatusOr<StepRecord> r = (*t)->Step();
    ASSERT_TRUE(r.ok()) << r.status().message();
    if (r->skipped) {
      ++skipped;
      continue;
    }
    const float w = optim_math::EmaWeight(0.95, true, updates++);
    const std::vector<ir::Tensor> live = (*t)->TrainedValues();
    for (size_t k = 0; k < ema.size(); ++k) {
      const std::span<const float> v = live[k].values<float>();
      const std::span<float> e = ema[k].mutable_values<float>();
      for (size_t j = 0; j < e.size(); ++j) e[j] = optim_math::Lerp(e[j], v[j], w);
    }
  }
  EXPECT_GT(skipped, 0);
  EXPECT_GT(updates, 2);
  const std::vector<ir::Tensor> exported = (*t)->ExportValues();
  ASSERT_EQ(exported.size(), ema.size());
  for (size_t k = 0; k < ema.size(); ++k) {
    EXPECT_EQ(exported[k].name(), ema[k].name());
    EXPECT_TRUE(exported[k].SameContents(ema[k])) << ema[k].name();
  }
  const std::vector<ir::Tensor> live = (*t)->TrainedValues();
  EXPECT_FALSE(live[0].SameContents(exported[0]));

  StatusOr<EvalRecord> averaged = (*t)->Evaluate(data);
  ASSERT_TRUE(averaged.ok()) << averaged.status().message();
  const std::vector<ir::Tensor> after = (*t)->TrainedValues();
  for (size_t k = 0; k < live.size(); ++k) EXPECT_TRUE(after[k].SameContents(live[k])) << live[k].name();
  // The averaged model, exported and trained no further, evaluates to the same loss.
  StatusOr<ir::Model> m = ExportTrainedModel(model, exported, {});
  ASSERT_TRUE(m.ok()) << m.status().message();
  TrainerOptions plain = o;
  plain.ema_decay = 0;
  plain.ema_warmup = false;
  StatusOr<std::unique_ptr<Trainer>> fresh = Trainer::Create(*m, plain, data);
  ASSERT_TRUE(fresh.ok()) << fresh.status().message();
  StatusOr<EvalRecord> direct = (*fresh)->Evaluate(data);
  ASSERT_TRUE(direct.ok()) << direct.status().message();
  EXPECT_EQ(averaged->loss, direct->loss);
  EXPECT_EQ(averaged->accuracy, direct->accuracy);

  // The state carries the averages: a trainer restored from it exports the same values.
  StatusOr<std::unique_ptr<Trainer>> restored = Trainer::Create(model, o, data);
  ASSERT_TRUE(restored.ok()) << restored.status().message();
  ASSERT_TRUE((*restored)->Restore((*t)->State()).ok());
  const std::vector<ir::Tensor> again = (*restored)->ExportValues();
  for (size_t k = 0; k < ema.size(); ++k) EXPECT_TRUE(again[k].SameContents(ema[k])) << ema[k].name();
  // A state without averages does not restore into a run that keeps them, nor the other way round.
  StatusOr<std::unique_ptr<Trainer>> other = Trainer::Create(model, plain, data);
  ASSERT_TRUE(other.ok()) << other.status().message();
  const Status no_ema = (*restored)->Restore((*other)->State());
  EXPECT_EQ(no_ema.message(), "the state has no moving average of the weights for --ema or --swa-start");
  const Status has_ema = (*other)->Restore((*t)->State());
  EXPECT_EQ(has_ema.message(),
            "the state has a moving average of the weights and this run keeps none (--ema or --swa-start)");

  o.ema_decay = 1.0;
  EXPECT_EQ(Trainer::Create(model, o, data).status().message(), "--ema 1: expected a decay in (0, 1)");
  o.ema_decay = 0;
  EXPECT_EQ(Trainer::Create(model, o, data).status().message(), "--ema-warmup needs --ema");
}

// Stochastic weight averaging: the exported values are the mean, in double, of the values after each step taken
// from step swa_start + 1 on (parameters and BatchNorm statistics), to float32 rounding of the running mean; the
// options' errors.
TEST(Trainer, SwaIsTheEqualAverageOfTheStepsAfterItsStart) {
  const ir::Model model = LoadReference("cnn.onnx");
  const Dataset data = CnnData(model, 16, 8);
  TrainerOptions o = Options(7, 4);
  o.swa_start = 3;
  StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(model, o, data);
  ASSERT_TRUE(t.ok()) << t.status().message();
  std::vector<std::vector<double>> sum;
  int64_t averaged = 0;
  while (!(*t)->Done()) {
    StatusOr<StepRecord> r = (*t)->Step();
    ASSERT_TRUE(r.ok()) << r.status().message();
    ASSERT_FALSE(r->skipped);
    if (r->step <= o.swa_start) continue;
    const std::vector<ir::Tensor> live = (*t)->TrainedValues();
    sum.resize(live.size());
    for (size_t k = 0; k < live.size(); ++k) {
      const std::span<const float> v = live[k].values<float>();
      sum[k].resize(v.size(), 0.0);
      for (size_t j = 0; j < v.size(); ++j) sum[k][j] += v[j];
    }
    ++averaged;
  }
  ASSERT_EQ(averaged, 4);
  const std::vector<ir::Tensor> exported = (*t)->ExportValues();
  const std::vector<ir::Tensor> live = (*t)->TrainedValues();
  ASSERT_EQ(exported.size(), sum.size());
  for (size_t k = 0; k < exported.size(); ++k) {
    const std::span<const float> e = exported[k].values<float>();
    double largest = 0;
    for (double x : sum[k]) largest = std::max(largest, std::fabs(x / averaged));
    for (size_t j = 0; j < e.size(); ++j) {
      ASSERT_NEAR(e[j], sum[k][j] / averaged, 1e-6 * std::max(1.0, largest)) << exported[k].name() << " " << j;
    }
  }
  EXPECT_FALSE(live[0].SameContents(exported[0]));
  TrainerOptions both = o;
  both.ema_decay = 0.9;
  EXPECT_NE(Trainer::Create(model, both, data).status().message().find("--ema and --swa-start"), std::string::npos);
  TrainerOptions negative = o;
  negative.swa_start = -2;
  EXPECT_NE(Trainer::Create(model, negative, data).status().message().find("--swa-start -2"), std::string::npos);
}

// The plateau schedule through the trainer: metrics reported between steps lower the rate of the steps after them;
// the state round-trips through State/Restore, and a restored trainer continues with the lowered rate; a trainer of
// another schedule refuses a plateau state (and reports of metrics change nothing for it).
TEST(Trainer, PlateauReportsLowerTheRateAndRestore) {
  const ir::Model model = LoadReference("digits_mlp.onnx");
  const Dataset data = test_util::RandomClassData(model, {64}, 64, 10, 9);
  TrainerOptions o = Options(8, 8);
  o.schedule.kind = LrScheduleKind::kPlateau;
  o.schedule.base_lr = 0.01;
  o.schedule.patience = 0;
  o.schedule.gamma = 0.5;
  StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(model, o, data);
  ASSERT_TRUE(t.ok()) << t.status().message();
  std::vector<double> lrs;
  auto step = [&](Trainer& tr) {
    StatusOr<StepRecord> r = tr.Step();
    ASSERT_TRUE(r.ok()) << r.status().message();
    lrs.push_back(r->lr);
  };
  for (int i = 0; i < 2; ++i) step(**t);
  ASSERT_TRUE((*t)->ReportMetric(1.0).ok());  // the best
  step(**t);
  StatusOr<bool> lowered = (*t)->ReportMetric(1.5);  // no better: halved
  ASSERT_TRUE(lowered.ok());
  EXPECT_TRUE(*lowered);
  step(**t);
  const TrainerState saved = (*t)->State();
  ASSERT_TRUE(saved.plateau.has_value());
  EXPECT_EQ(saved.plateau->lr, 0.005);
  EXPECT_EQ(saved.plateau->best, 1.0);
  EXPECT_EQ(lrs, (std::vector<double>{0.01, 0.01, 0.01, 0.005}));
  StatusOr<std::unique_ptr<Trainer>> again = Trainer::Create(model, o, data);
  ASSERT_TRUE(again.ok());
  ASSERT_TRUE((*again)->Restore(saved).ok());
  step(**again);
  EXPECT_EQ(lrs.back(), 0.005);
  o.schedule.kind = LrScheduleKind::kConstant;
  StatusOr<std::unique_ptr<Trainer>> constant = Trainer::Create(model, o, data);
  ASSERT_TRUE(constant.ok());
  EXPECT_THAT((*constant)->Restore(saved).message(),
              ::testing::HasSubstr("the state has a plateau schedule and this run's schedule is another"));
  StatusOr<bool> ignored = (*constant)->ReportMetric(5.0);
  ASSERT_TRUE(ignored.ok());
  EXPECT_FALSE(*ignored);
}

TEST(Trainer, ErrorsAreOneLineAndNameTheProblem) {
  const ir::Model model = LoadReference("digits_mlp.onnx");
  const Dataset data = Bound(Separable(64, 64, 10, "input", 4), model);
  TrainerOptions o = Options(0, 8);
  EXPECT_EQ(Trainer::Create(model, o, data).status().message(), "give --steps or --epochs");
  o = Options(1, 8);
  o.graph.loss.output = "nope";
  EXPECT_EQ(Trainer::Create(model, o, data).status().message(),
            "pass attach_loss: output 'nope' is not an output of the model (outputs: logits)");
  o = Options(1, 8);
  o.graph.loss.class_axis = 5;
  StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(model, o, data);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("--class-axis 5"), std::string::npos) << t.status().message();
  // FP32 training whose loss is not finite stops with the step named.
  ir::Tensor big(DType::kFloat32, {8, 64});
  for (float& v : big.mutable_values<float>()) v = 3e38f;
  big.set_name("input");
  ir::Tensor labels(DType::kInt64, {8});
  labels.set_name("labels");
  const Dataset huge = Bound(std::move(Dataset::FromTensors({big, labels}, "huge")).value(), model);
  o = Options(1, 8);
  t = Trainer::Create(model, o, huge);
  ASSERT_TRUE(t.ok()) << t.status().message();
  StatusOr<StepRecord> r = (*t)->Step();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("step 1: the loss is"), std::string::npos) << r.status().message();
}

// CPU mixed precision: the graphs read the trainer's low-precision weight copies, so no step runs a Cast of a weight
// (the profile's node table names none), and the copies follow the master weights: the evaluation after the steps
// equals that of an FP32-cast model computed from the trained values.
TEST(Trainer, CpuAmpGraphsReadLowPrecisionWeightCopies) {
  const ir::Model model = LoadReference("digits_mlp.onnx");
  const Dataset data = Bound(Separable(64, 64, 10, "input", 6), model);
  for (DType amp : {DType::kFloat16, DType::kBFloat16}) {
    SCOPED_TRACE(DTypeName(amp));
    TrainerOptions o = Options(3, 16);
    o.graph.amp = amp;
    o.profile = true;
    StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(model, o, data);
    ASSERT_TRUE(t.ok()) << t.status().message();
    while (!(*t)->Done()) ASSERT_TRUE((*t)->Step().ok());
    const std::string profile = (*t)->profile()->Format();
    EXPECT_NE(profile.find("FusedMatMul"), std::string::npos) << profile;
    EXPECT_EQ(profile.find("weight_" + std::string(amp == DType::kFloat16 ? "fp16" : "bf16") + "_cast'"),
              std::string::npos)
        << profile;
    StatusOr<EvalRecord> after = (*t)->Evaluate(data);
    ASSERT_TRUE(after.ok()) << after.status().message();
    // A new trainer whose master weights are the trained ones: its copies come from them at creation.
    ir::Model trained = converter::CloneModel(model);
    for (const ir::Tensor& v : (*t)->TrainedValues()) {
      ir::Value* value = trained.graph->FindValue(v.name());
      ASSERT_TRUE(value && value->initializer()) << v.name();
      trained.graph->SetInitializer(value, v);
    }
    StatusOr<std::unique_ptr<Trainer>> fresh = Trainer::Create(trained, o, data);
    ASSERT_TRUE(fresh.ok()) << fresh.status().message();
    StatusOr<EvalRecord> again = (*fresh)->Evaluate(data);
    ASSERT_TRUE(again.ok()) << again.status().message();
    EXPECT_EQ(after->loss, again->loss);
  }
}

// --label-smoothing ε: the loss is (1 - ε) * NLL + ε * S, S the mean over the kept positions of the mean over classes
// of -log p; --class-weights weigh both terms (PyTorch's definitions; tests/peer/train_parity.py checks them against
// torch step by step). Evaluated on one batch: the loss at ε = 0.3 mixes those at 0 and 1, and positions labelled
// ignore_index count for nothing in S.
TEST(Trainer, LabelSmoothingAndClassWeightsAsPyTorchDefinesThem) {
  const ir::Model model = LoadReference("digits_mlp.onnx");
  const Dataset separable = Separable(16, 64, 10, "input", 5);
  ir::Tensor x = separable.arrays()[0];
  ir::Tensor y = separable.arrays()[1];
  ASSERT_EQ(x.name(), "input");
  ASSERT_EQ(y.name(), "labels");
  ir::Tensor ignored = y;
  ignored.mutable_values<int64_t>()[3] = -100;
  ignored.mutable_values<int64_t>()[7] = -100;
  // The same samples without rows 3 and 7.
  ir::Tensor x_kept(DType::kFloat32, {14, 64});
  ir::Tensor y_kept(DType::kInt64, {14});
  for (int64_t i = 0, k = 0; i < 16; ++i) {
    if (i == 3 || i == 7) continue;
    std::copy_n(x.values<float>().data() + i * 64, 64, x_kept.mutable_values<float>().data() + k * 64);
    y_kept.mutable_values<int64_t>()[k++] = y.values<int64_t>()[i];
  }
  x_kept.set_name("input");
  y_kept.set_name("labels");
  auto data = [&](const ir::Tensor& a, const ir::Tensor& b) {
    StatusOr<Dataset> d = Dataset::FromTensors({a, b}, "smoothing");
    EXPECT_TRUE(d.ok()) << d.status().message();
    BindOptions bind;
    bind.labels.array = "labels";
    bind.labels.kind = LabelKind::kClassIndices;
    bind.labels.ignore_index = -100;
    StatusOr<Dataset> bound = d->Bind(DataInputs(*model.graph), bind);
    EXPECT_TRUE(bound.ok()) << bound.status().message();
    return std::move(bound).value();
  };
  auto eval = [&](double eps, const Dataset& d, std::vector<float> weights = {}) {
    TrainerOptions o = Options(1, 16);
    o.graph.loss.label_smoothing = eps;
    o.graph.loss.class_weights = std::move(weights);
    StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(model, o, d);
    EXPECT_TRUE(t.ok()) << t.status().message();
    if (!t.ok()) return std::nan("");
    StatusOr<EvalRecord> r = (*t)->Evaluate(d);
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? r->loss : std::nan("");
  };
  const Dataset with_ignored = data(x, ignored);
  const double hard = eval(0.0, with_ignored);
  const double uniform = eval(1.0, with_ignored);
  EXPECT_NEAR(eval(0.3, with_ignored), 0.7 * hard + 0.3 * uniform, 1e-6 * std::abs(hard));
  EXPECT_GT(std::abs(uniform - hard), 1e-2);  // the two terms differ, so the mix above tells ε apart
  const Dataset kept = data(x_kept, y_kept);
  EXPECT_NEAR(uniform, eval(1.0, kept), 1e-6 * uniform);
  EXPECT_NEAR(hard, eval(0.0, kept), 1e-6 * hard);

  // Class weights: all 1 is no weighting; scaling them all changes nothing (the mean divides by the labels'
  // weights); uneven weights change the loss and still mix linearly with the smoothing term.
  auto eval_weighted = [&](double eps, std::vector<float> weights) { return eval(eps, with_ignored, weights); };
  std::vector<float> uneven(10);
  for (int c = 0; c < 10; ++c) uneven[static_cast<size_t>(c)] = 0.5f + 0.25f * static_cast<float>(c);
  std::vector<float> doubled = uneven;
  for (float& w : doubled) w *= 2;
  EXPECT_NEAR(eval_weighted(0.0, std::vector<float>(10, 1.0f)), hard, 1e-6 * hard);
  EXPECT_NEAR(eval_weighted(0.3, std::vector<float>(10, 1.0f)), 0.7 * hard + 0.3 * uniform, 1e-6 * hard);
  const double weighted_hard = eval_weighted(0.0, uneven);
  const double weighted_uniform = eval_weighted(1.0, uneven);
  EXPECT_GT(std::abs(weighted_hard - hard), 1e-3);
  EXPECT_NEAR(eval_weighted(0.0, doubled), weighted_hard, 1e-6 * weighted_hard);
  EXPECT_NEAR(eval_weighted(1.0, doubled), weighted_uniform, 1e-6 * weighted_uniform);
  EXPECT_NEAR(eval_weighted(0.3, uneven), 0.7 * weighted_hard + 0.3 * weighted_uniform, 1e-6 * weighted_hard);

  TrainerOptions o = Options(1, 16);
  for (const auto& [weights, text] : std::vector<std::pair<std::vector<float>, std::string>>{
           {{1, 2, 3}, "--class-weights: 3 weights for output 'logits' of 10 classes"},
           {std::vector<float>(10, 0.0f), "--class-weights: every weight is 0"},
           {{1, 1, 1, -1, 1, 1, 1, 1, 1, 1}, "--class-weights: class 3's weight -1 is not finite and >= 0"}}) {
    o.graph.loss.class_weights = weights;
    StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(model, o, kept);
    ASSERT_FALSE(t.ok());
    EXPECT_NE(t.status().message().find(text), std::string::npos) << t.status().message();
  }
  o.graph.loss.class_weights.clear();
  o.graph.loss.label_smoothing = 1.5;
  StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(model, o, kept);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("--label-smoothing 1.5: expected a value in [0, 1]"), std::string::npos)
      << t.status().message();
  o.graph.loss.label_smoothing = 0.1;
  o.graph.loss.kind = LossKind::kNll;
  t = Trainer::Create(model, o, kept);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("--label-smoothing applies to --loss ce, not to --loss nll"), std::string::npos)
      << t.status().message();
}

}  // namespace
}  // namespace onnxamp::trainer
