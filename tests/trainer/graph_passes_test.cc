// The trainer's graph steps as GraphPasses (trainer/graph/passes.h): loss and gradients built by one PassPipeline
// with ir::Verify after each pass, and the result computing the analytic gradient.
#include "trainer/graph/passes.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "runtime/executor/session.h"
#include "runtime/ir/verify.h"
#include "runtime/passes/pass.h"
#include "tests/runtime/ir_build_util.h"
#include "tests/runtime/op_tester.h"
#include "trainer/autodiff/element_types.h"
#include "trainer/graph/loss.h"
#include "trainer/graph/training_graph.h"

namespace onnxamp::trainer {
namespace {

using testing::MakeTensor;
using testing::Node1;
using testing::Values;

// y [2, 1] = MatMul(x [2, 3], W [3, 1]); W is a parameter (a graph input with a default).
ir::Model Linear() {
  ir::Model m;
  m.opset_imports = {{"", 17}};
  ir::Graph& g = *m.graph;
  ir::Value* x = g.CreateValue("x");
  x->set_type(ir::ValueType::Tensor(DType::kFloat32, ir::Shape{ir::Dim::Value(2), ir::Dim::Value(3)}));
  g.AddInput(x);
  ir::Value* w = g.CreateValue("W");
  w->set_type(ir::ValueType::Tensor(DType::kFloat32, ir::Shape{ir::Dim::Value(3), ir::Dim::Value(1)}));
  g.SetInitializer(w, MakeTensor<float>({3, 1}, {0.5f, -1.0f, 2.0f}));
  g.AddInput(w);
  ir::Value* y = g.CreateValue("y");
  y->set_type(ir::ValueType::Tensor(DType::kFloat32, ir::Shape{ir::Dim::Value(2), ir::Dim::Value(1)}));
  g.AddNode("MatMul", {x, w}, {y}, "mm");
  g.AddOutput(y);
  return m;
}

TEST(TrainerPasses, LossAndGradientsRunAsAVerifiedPipeline) {
  ir::Model m = Linear();
  AttachedLoss loss;
  GradientResult grads;
  LossOptions loss_options;
  loss_options.kind = LossKind::kMse;
  GradientRequest request;
  request.wrt = {"W"};
  passes::PassPipeline pipeline;
  pipeline.Add(MakeAttachLossPass(loss_options, &loss));
  pipeline.Add(MakeGradientPass(request, &loss, &grads));
  EXPECT_EQ(pipeline.names(), (std::vector<std::string>{"attach_loss", "build_gradients"}));
  passes::PassContext ctx;
  ctx.training = true;
  bool changed = false;
  const Status st = pipeline.Run(m, ctx, &changed);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(changed);
  ASSERT_FALSE(loss.loss.empty());
  ASSERT_FALSE(loss.labels.empty());
  ASSERT_EQ(grads.gradients.size(), 1u);
  ASSERT_FALSE(grads.gradients[0].empty());

  exec::SessionOptions options;
  options.mode = exec::SessionMode::kTraining;
  auto session = exec::Session::Create(std::move(m), options);
  ASSERT_TRUE(session.ok()) << session.status().message();
  const std::vector<float> xv = {1, 2, 3, -1, 0, 1}, t = {1, -2}, w = {0.5f, -1.0f, 2.0f};
  ir::Tensor x = MakeTensor<float>({2, 3}, xv);
  x.set_name("x");
  ir::Tensor labels = MakeTensor<float>({2, 1}, t);
  labels.set_name(loss.labels);
  exec::RunOptions run;
  run.fetch = {grads.gradients[0]};
  auto out = (*session)->Run({x, labels}, run);
  ASSERT_TRUE(out.ok()) << out.status().message();
  // L = mean((x W - t)^2) over 2 rows: dL/dW[k] = sum_i (x W - t)_i x[i, k].
  std::vector<double> r(2);
  for (int i = 0; i < 2; ++i) r[i] = xv[3 * i] * w[0] + xv[3 * i + 1] * w[1] + xv[3 * i + 2] * w[2] - t[i];
  const auto got = (*out)[0].values<float>();
  ASSERT_EQ(got.size(), 3u);
  for (int k = 0; k < 3; ++k) EXPECT_NEAR(got[k], r[0] * xv[k] + r[1] * xv[3 + k], 1e-5) << k;
}

// Huber and smooth L1 on the linear model: y = (4.5, 1.5), targets (4, -2), so d = (0.5, 3.5) straddles delta 2:
// Huber's terms 0.5 d^2 = 0.125 and 2 (3.5 - 1) = 5 (mean 2.5625), its gradient dL/dy = clamp(d, -2, 2) / 2 =
// (0.25, 1); smooth L1 (beta 2) is both divided by 2. The options' errors.
TEST(TrainerPasses, HuberAndSmoothL1LossesAndGradients) {
  for (LossKind kind : {LossKind::kHuber, LossKind::kSmoothL1}) {
    ir::Model m = Linear();
    AttachedLoss loss;
    GradientResult grads;
    LossOptions loss_options;
    loss_options.kind = kind;
    loss_options.delta = 2.0;
    GradientRequest request;
    request.wrt = {"W"};
    passes::PassPipeline pipeline;
    pipeline.Add(MakeAttachLossPass(loss_options, &loss));
    pipeline.Add(MakeGradientPass(request, &loss, &grads));
    passes::PassContext ctx;
    ctx.training = true;
    const Status st = pipeline.Run(m, ctx);
    ASSERT_TRUE(st.ok()) << st.message();
    exec::SessionOptions options;
    options.mode = exec::SessionMode::kTraining;
    auto session = exec::Session::Create(std::move(m), options);
    ASSERT_TRUE(session.ok()) << session.status().message();
    ir::Tensor x = MakeTensor<float>({2, 3}, {1, 2, 3, -1, 0, 1});
    x.set_name("x");
    ir::Tensor labels = MakeTensor<float>({2, 1}, {4.0f, -2.0f});
    labels.set_name(loss.labels);
    exec::RunOptions run;
    run.fetch = {loss.loss, grads.gradients[0]};
    auto out = (*session)->Run({x, labels}, run);
    ASSERT_TRUE(out.ok()) << out.status().message();
    const double scale = kind == LossKind::kSmoothL1 ? 0.5 : 1.0;
    EXPECT_FLOAT_EQ((*out)[0].values<float>()[0], 2.5625 * scale) << LossKindName(kind);
    // dW[k] = 0.25 x[0, k] + 1 x[1, k].
    const std::vector<double> want = {-0.75, 0.5, 1.75};
    for (int k = 0; k < 3; ++k) EXPECT_FLOAT_EQ((*out)[1].values<float>()[k], want[k] * scale) << k;
  }
  for (const auto& [kind, delta, text] : std::vector<std::tuple<LossKind, double, std::string>>{
           {LossKind::kHuber, 0.0, "--delta 0: expected a finite value > 0"},
           {LossKind::kSmoothL1, std::nan(""), "--delta nan: expected a finite value > 0"},
           {LossKind::kMse, 0.5, "--delta applies to --loss huber and smooth_l1, not to --loss mse"}}) {
    ir::Model m = Linear();
    LossOptions o;
    o.kind = kind;
    o.delta = delta;
    EXPECT_NE(AttachLoss(m, o).status().message().find(text), std::string::npos) << AttachLoss(m, o).status().message();
  }
}

// logits [2, 4] = MatMul(x [2, 3], W [3, 4]) followed by `op` (Softmax with `axis` when given, Sigmoid, or "" for
// none) and, with `cast`, a Cast to float16, the output "out" [2, 4] (rank 3, [2, 4, 1], with `rank3`).
ir::Model Classifier(int64_t opset, const std::string& op, std::optional<int64_t> axis, bool cast, bool rank3 = false) {
  ir::Model m;
  m.opset_imports = {{"", opset}};
  ir::Graph& g = *m.graph;
  ir::Value* x = g.CreateValue("x");
  x->set_type(ir::ValueType::Tensor(DType::kFloat32, ir::Shape{ir::Dim::Value(2), ir::Dim::Value(3)}));
  g.AddInput(x);
  ir::Value* w = g.CreateValue("W");
  g.SetInitializer(w, MakeTensor<float>({3, 4}, {0.5f, -1, 2, 0.25f, 1, 0, -0.5f, 1.5f, -2, 0.75f, 1, -1}));
  g.AddInput(w);
  ir::Value* v = g.CreateValue("logits");
  g.AddNode("MatMul", {x, w}, {v}, "mm");
  ir::Shape shape = {ir::Dim::Value(2), ir::Dim::Value(4)};
  if (rank3) {
    ir::Value* r = g.CreateValue("logits3");
    ir::Value* dims = g.CreateValue("dims");
    g.SetInitializer(dims, MakeTensor<int64_t>({3}, {2, 4, 1}));
    g.AddNode("Reshape", {v, dims}, {r}, "reshape");
    v = r;
    shape.push_back(ir::Dim::Value(1));
  }
  if (!op.empty()) {
    ir::Value* p = g.CreateValue("probs");
    ir::Node* n = g.AddNode(op, {v}, {p}, "normalize");
    if (axis) n->SetAttribute(ir::Attribute::Int("axis", *axis));
    v = p;
  }
  DType out_type = DType::kFloat32;
  if (cast) {
    ir::Value* c = g.CreateValue("probs16");
    g.AddNode("Cast", {v}, {c}, "cast")->SetAttribute(ir::Attribute::Int("to", static_cast<int64_t>(DType::kFloat16)));
    v = c;
    out_type = DType::kFloat16;
  }
  EXPECT_TRUE(g.RenameValue(v, "out").ok());
  v->set_type(ir::ValueType::Tensor(out_type, shape));
  g.AddOutput(v);
  return m;
}

// A classifier exported with its Softmax (a binary one with its Sigmoid): cross-entropy (BCE with logits) reads the
// scores before it, the cross-entropy of its probabilities, and gives the loss the model without it gives. Softmaxes
// over another axis, the flattening Softmax of opset 11 over more than the last dim, and other losses read the
// output.
TEST(TrainerPasses, ALossOnProbabilitiesReadsTheScoresBeforeThem) {
  auto loss_of = [](ir::Model m, LossKind kind, std::string* scores, bool rank3 = false) -> double {
    AttachedLoss attached;
    LossOptions o;
    o.kind = kind;
    StatusOr<AttachedLoss> a = AttachLoss(m, o);
    EXPECT_TRUE(a.ok()) << a.status().message();
    if (!a.ok()) return NAN;
    *scores = a->scores;
    exec::SessionOptions options;
    auto session = exec::Session::Create(std::move(m), options);
    EXPECT_TRUE(session.ok()) << session.status().message();
    if (!session.ok()) return NAN;
    ir::Tensor x = MakeTensor<float>({2, 3}, {1, 2, 3, -1, 0, 1});
    x.set_name("x");
    ir::Tensor labels = kind != LossKind::kCrossEntropy ? MakeTensor<float>({2, 4}, {1, 0, 0, 1, 0, 1, 1, 0})
                        : rank3                         ? MakeTensor<int64_t>({2, 1}, {2, 0})
                                                        : MakeTensor<int64_t>({2}, {2, 0});
    labels.set_name(a->labels);
    exec::RunOptions run;
    run.fetch = {a->loss};
    auto out = (*session)->Run({x, labels}, run);
    EXPECT_TRUE(out.ok()) << out.status().message();
    return out.ok() ? (*out)[0].values<float>()[0] : NAN;
  };
  std::string scores;
  const double plain = loss_of(Classifier(17, "", std::nullopt, false), LossKind::kCrossEntropy, &scores);
  EXPECT_EQ(scores, "");
  for (const auto& [opset, axis, cast] : std::vector<std::tuple<int64_t, std::optional<int64_t>, bool>>{
           {17, std::nullopt, false}, {17, 1, false}, {17, -1, true}, {11, std::nullopt, false}, {11, 1, true}}) {
    const double got = loss_of(Classifier(opset, "Softmax", axis, cast), LossKind::kCrossEntropy, &scores);
    EXPECT_EQ(scores, "logits") << opset;
    EXPECT_EQ(got, plain) << opset;
  }
  const double bce = loss_of(Classifier(17, "", std::nullopt, false), LossKind::kBceWithLogits, &scores);
  EXPECT_EQ(loss_of(Classifier(17, "Sigmoid", std::nullopt, true), LossKind::kBceWithLogits, &scores), bce);
  EXPECT_EQ(scores, "logits");
  // Read as they are: a Softmax over the batch dim, opset 11's over dims 1 and 2 of [2, 4, 1], an MSE.
  loss_of(Classifier(17, "Softmax", 0, false), LossKind::kCrossEntropy, &scores);
  EXPECT_EQ(scores, "");
  loss_of(Classifier(11, "Softmax", 1, false, /*rank3=*/true), LossKind::kCrossEntropy, &scores, /*rank3=*/true);
  EXPECT_EQ(scores, "");
  ir::Model m = Classifier(17, "Softmax", std::nullopt, false);
  LossOptions mse;
  mse.kind = LossKind::kMse;
  StatusOr<AttachedLoss> a = AttachLoss(m, mse);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->scores, "");
}

TEST(TrainerPasses, GradientPassWithoutALossSaysSo) {
  ir::Model m = Linear();
  GradientResult grads;
  GradientRequest request;
  request.wrt = {"W"};
  passes::PassPipeline pipeline;
  pipeline.Add(MakeGradientPass(request, nullptr, &grads));
  const Status st = pipeline.Run(m, passes::PassContext{});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("pass build_gradients: no loss to differentiate"), std::string::npos) << st.message();
}

// BuildTrainingGraphs is three verified pipelines: the passes both graphs share, then each graph's own.
TEST(TrainerPasses, TrainingGraphsAreBuiltByNamedPasses) {
  TrainingGraphOptions options;
  options.loss.kind = LossKind::kMse;
  options.amp = DType::kFloat16;
  auto graphs = BuildTrainingGraphs(Linear(), options);
  ASSERT_TRUE(graphs.ok()) << graphs.status().message();
  // Linear's weight is a graph input with an initializer (a default): the first pass makes it an initializer alone.
  const std::vector<std::string> shared = {"initializers_not_inputs", "make_batch_dim_symbolic", "convert_to_fp16",
                                           "restore_master_weights"};
  std::vector<std::string> train = shared, eval = shared;
  for (const char* name : {"use_training_mode", "use_fused_gelu", "use_fake_quantize", "attach_loss",
                           "parameters_as_inputs", "loss_scale_input", "build_gradients", "select_train_outputs"}) {
    train.push_back(name);
  }
  for (const char* name : {"use_inference_mode", "attach_loss", "parameters_as_inputs", "select_eval_outputs"}) {
    eval.push_back(name);
  }
  EXPECT_EQ(graphs->train_passes, train);
  EXPECT_EQ(graphs->eval_passes, eval);
  EXPECT_TRUE(ir::Verify(graphs->train).ok());
  EXPECT_TRUE(ir::Verify(graphs->eval).ok());

  options.amp = DType::kUndefined;
  graphs = BuildTrainingGraphs(Linear(), options);
  ASSERT_TRUE(graphs.ok()) << graphs.status().message();
  EXPECT_EQ(graphs->train_passes[1], "make_batch_dim_symbolic");
  EXPECT_EQ(graphs->train_passes[2], "use_training_mode");  // no conversion passes in FP32
}

// Adds to `m` (the Linear model, or one with more nodes before its MatMul) a Gradient node dy_dx = dy/dx and the
// output loss = sum(dy_dx^2), a gradient penalty.
void AddInputGradientPenalty(ir::Model& m) {
  m.SetOpsetVersion("ai.onnx.preview.training", 1);
  ir::Graph& g = *m.graph;
  ir::Value* dx = g.CreateValue("dy_dx");
  ir::Node* n = g.AddNode("Gradient", {g.FindValue("x")}, {dx}, "input_gradient", "ai.onnx.preview.training");
  n->SetAttribute(ir::Attribute::Strings("xs", {"x"}));
  n->SetAttribute(ir::Attribute::String("y", "y"));
  ir::Value* sq = g.CreateValue("sq");
  g.AddNode("Mul", {dx, dx}, {sq}, "square");
  ir::Value* loss = g.CreateValue("loss");
  g.AddNode("ReduceSum", {sq}, {loss}, "penalty")->SetAttribute(ir::Attribute::Int("keepdims", 0));
  g.AddOutput(loss);
}

// Runs `graph` (the train or eval graph of `graphs`) and returns its outputs `fetch`, or an empty list after an EXPECT
// failure: the inputs named in `data` from it, the parameters and buffers at their initial values, the loss scale 1.
std::vector<ir::Tensor> RunGraph(ir::Model graph, const TrainingGraphs& graphs,
                                 const std::map<std::string, ir::Tensor>& data, const std::vector<std::string>& fetch) {
  StatusOr<std::unique_ptr<exec::Session>> session = exec::Session::Create(std::move(graph));
  EXPECT_TRUE(session.ok()) << session.status().message();
  if (!session.ok()) return {};
  std::vector<ir::Tensor> feeds;
  for (const exec::IoInfo& io : (*session)->inputs()) {
    ir::Tensor t = MakeTensor<float>({}, {1});  // the loss scale
    if (auto it = data.find(io.name); it != data.end()) t = it->second;
    for (const Parameter& p : graphs.params) {
      if (p.name == io.name) t = p.initial;
    }
    for (const Buffer& b : graphs.buffers) {
      if (b.name == io.name) t = b.initial;
    }
    t.set_name(io.name);
    feeds.push_back(std::move(t));
  }
  exec::RunOptions run;
  run.fetch = fetch;
  StatusOr<std::vector<ir::Tensor>> out = (*session)->Run(feeds, run);
  EXPECT_TRUE(out.ok()) << out.status().message();
  return out.ok() ? *out : std::vector<ir::Tensor>{};
}

// A model holding ONNX's Gradient operator: its nodes are expanded first (in the train graph right after training
// mode is turned on; both graphs run the expansion), and a loss output that reads the Gradient's output, a gradient
// penalty, is differentiated through the expansion.
TEST(TrainerPasses, GradientNodesAreExpandedFirst) {
  ir::Model m = Linear();
  // loss = sum(dy/dx^2) = 2 * sum(W^2) (each row of dy/dx is W^T): dloss/dW = 4 W.
  AddInputGradientPenalty(m);
  TrainingGraphOptions options;
  options.loss.kind = LossKind::kModelOutput;
  options.loss.output = "loss";
  auto graphs = BuildTrainingGraphs(std::move(m), options);
  ASSERT_TRUE(graphs.ok()) << graphs.status().message();
  // The train graph turns training mode on first, so that the expansion sees it (the next test); the eval graph
  // expands the inference forms.
  ASSERT_GE(graphs->train_passes.size(), 3u);
  EXPECT_EQ(graphs->train_passes[0], "initializers_not_inputs");  // W, a graph input with an initializer
  EXPECT_EQ(graphs->train_passes[1], "use_training_mode");
  EXPECT_EQ(graphs->train_passes[2], "expand_gradient_ops");
  EXPECT_EQ(std::count(graphs->train_passes.begin(), graphs->train_passes.end(), "use_training_mode"), 1);
  EXPECT_EQ(graphs->eval_passes[1], "expand_gradient_ops");
  EXPECT_EQ(std::count(graphs->eval_passes.begin(), graphs->eval_passes.end(), "use_training_mode"), 0);
  for (const ir::Node* node : graphs->train.graph->nodes()) EXPECT_NE(node->op_type(), "Gradient");
  ASSERT_EQ(graphs->params.size(), 1u);  // W, at its initial [0.5, -1, 2]
  const std::vector<ir::Tensor> out =
      RunGraph(std::move(graphs->train), *graphs, {{"x", MakeTensor<float>({2, 3}, {1, 2, 3, 4, 5, 6})}},
               {graphs->params[0].gradient});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(Values<float>(out[0]), (std::vector<float>{2, -4, 8}));
}

// A gradient penalty through a Dropout: in the train graph the Gradient node's backward pass multiplies by the mask
// the forward drew (as PyTorch's double backward in train() mode does), in the eval graph it is the inference form.
// y = Dropout(x, 0.5) W, loss = sum((dy/dx)^2): each row of dy/dx is W^T times the row's mask times 2, so the eval
// loss is 2 sum(W^2) = 10.5 and the train loss 4 sum_j W_j^2 k_j (k_j the kept elements of column j): an integer,
// never 10.5.
TEST(TrainerPasses, GradientNodesSeeEachGraphsMode) {
  ir::Model m = Linear();
  ir::Graph& g = *m.graph;
  ir::Node* mm = nullptr;
  for (ir::Node* n : g.nodes()) mm = n;
  ir::Value* dropped = g.CreateValue("dropped");
  ir::Value* ratio = g.CreateValue("ratio");
  g.SetInitializer(ratio, MakeTensor<float>({}, {0.5f}));
  g.AddNode("Dropout", {g.FindValue("x"), ratio}, {dropped}, "drop");
  mm->SetInput(0, dropped);
  AddInputGradientPenalty(m);
  ASSERT_TRUE(g.SortTopologically().ok());
  TrainingGraphOptions options;
  options.loss.kind = LossKind::kModelOutput;
  options.loss.output = "loss";
  auto graphs = BuildTrainingGraphs(std::move(m), options);
  ASSERT_TRUE(graphs.ok()) << graphs.status().message();
  auto loss_of = [&](ir::Model graph) {  // W at its initial [0.5, -1, 2]
    const std::vector<ir::Tensor> out =
        RunGraph(std::move(graph), *graphs, {{"x", MakeTensor<float>({2, 3}, {1, 2, 3, 4, 5, 6})}}, {graphs->loss});
    return out.size() == 1 ? Values<float>(out[0])[0] : -1.0f;
  };
  EXPECT_EQ(loss_of(std::move(graphs->eval)), 10.5f);
  const float train = loss_of(std::move(graphs->train));
  EXPECT_NE(train, 10.5f);
  EXPECT_EQ(train, std::round(train)) << train;
}

// A model exported with a fixed batch size (4), a BatchNormalization, a Reshape whose shape constant holds the batch
// size, and a gradient penalty: the train graph turns training mode on before the batch dim becomes symbolic, so that
// pass must see BatchNormTraining as the batch-first op it is (else the Reshape after it is refused). The train graph
// then runs at batch 2.
TEST(TrainerPasses, FixedBatchModelWithBatchNormalizationAndGradientNodes) {
  ir::Model m;
  m.opset_imports = {{"", 17}};
  ir::Graph& g = *m.graph;
  ir::Value* x = g.CreateValue("x");
  x->set_type(
      ir::ValueType::Tensor(DType::kFloat32, ir::Shape{ir::Dim::Value(4), ir::Dim::Value(2), ir::Dim::Value(3)}));
  g.AddInput(x);
  auto init = [&](const std::string& name, std::vector<int64_t> dims, std::vector<float> v) {
    ir::Value* value = g.CreateValue(name);
    g.SetInitializer(value, MakeTensor<float>(std::move(dims), v));
    return value;
  };
  ir::Value* bn = g.CreateValue("bn");
  g.AddNode("BatchNormalization",
            {x, init("scale", {2}, {1.0f, 0.5f}), init("bias", {2}, {0.1f, -0.2f}), init("mean", {2}, {0, 0}),
             init("var", {2}, {1, 1})},
            {bn}, "bn_node");
  ir::Value* shape = g.CreateValue("shape");
  g.SetInitializer(shape, MakeTensor<int64_t>({2}, {4, 6}));
  ir::Value* flat = g.CreateValue("flat");
  g.AddNode("Reshape", {bn, shape}, {flat}, "flatten");
  ir::Value* y = g.CreateValue("y");
  y->set_type(ir::ValueType::Tensor(DType::kFloat32, ir::Shape{ir::Dim::Value(4), ir::Dim::Value(1)}));
  g.AddNode("MatMul", {flat, init("W", {6, 1}, {0.5f, -1.0f, 2.0f, 0.25f, 1.5f, -0.75f})}, {y}, "mm");
  g.AddOutput(y);
  AddInputGradientPenalty(m);
  TrainingGraphOptions options;
  options.loss.kind = LossKind::kModelOutput;
  options.loss.output = "loss";
  options.freeze = "bias";  // the penalty does not depend on it (y is affine in it)
  auto graphs = BuildTrainingGraphs(std::move(m), options);
  ASSERT_TRUE(graphs.ok()) << graphs.status().message();
  const std::vector<ir::Tensor> out =
      RunGraph(std::move(graphs->train), *graphs,
               {{"x", MakeTensor<float>({2, 2, 3}, {1, 2, 3, 4, 5, 6, 6, 5, 4, 3, 2, 1})}}, {graphs->loss});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(std::isfinite(Values<float>(out[0])[0]));
}

// Under --amp, the nodes that compute with a Gradient node's outputs (the penalty) run in FP32: a gradient of a mean
// over the batch is small, and its square underflows fp16. The expanded backward Gemm that writes dy/dx runs in fp16 as
// the forward's does.
TEST(TrainerPasses, GradientConsumersStayInFp32UnderAmp) {
  ir::Model m = Linear();
  for (ir::Node* n : m.graph->nodes()) n->set_op_type("Gemm");  // whose x-gradient is a Gemm writing dy/dx itself
  AddInputGradientPenalty(m);
  TrainingGraphOptions options;
  options.loss.kind = LossKind::kModelOutput;
  options.loss.output = "loss";
  options.amp = DType::kFloat16;
  auto graphs = BuildTrainingGraphs(std::move(m), options);
  ASSERT_TRUE(graphs.ok()) << graphs.status().message();
  for (const ir::Model* graph : {&graphs->train, &graphs->eval}) {
    const ElementTypes types = InferElementTypes(*graph->graph);
    auto type_of = [&](const ir::Value* v) { return types.count(v) ? types.at(v) : DType::kUndefined; };
    int kept = 0;
    for (const ir::Node* n : graph->graph->nodes()) {
      if (n->name() == "square" || n->name() == "penalty") {
        ++kept;
        EXPECT_EQ(type_of(n->output(0)), DType::kFloat32) << n->Describe();
        EXPECT_EQ(type_of(n->input(0)), DType::kFloat32) << n->Describe();
      }
    }
    EXPECT_EQ(kept, 2);
    const ir::Value* dx = graph->graph->FindValue("dy_dx");
    ASSERT_TRUE(dx && dx->producer());
    EXPECT_EQ(dx->producer()->op_type(), "Gemm");
    EXPECT_EQ(type_of(dx), DType::kFloat16);
  }
}

// An adversarial example from the Gradient node's output, x + 0.1 Sign(dy/dx), and the forward pass through it under
// --amp: the walk that keeps a penalty in FP32 stops at Sign, so that forward pass's Gemm converts to fp16 as the
// first one does; the Mul of the gradient by itself (the penalty) stays FP32.
TEST(TrainerPasses, AdversarialForwardThroughSignConvertsUnderAmp) {
  ir::Model m = Linear();
  for (ir::Node* n : m.graph->nodes()) n->set_op_type("Gemm");
  AddInputGradientPenalty(m);
  ir::Graph& g = *m.graph;
  ir::Value* eps = g.CreateValue("eps");
  g.SetInitializer(eps, MakeTensor<float>({}, {0.1f}));
  ir::Value* step = Node1(g, "Mul", {Node1(g, "Sign", {g.FindValue("dy_dx")}, "direction"), eps}, "step");
  ir::Value* x_adv = Node1(g, "Add", {g.FindValue("x"), step}, "x_adv");
  ir::Value* y_adv = g.CreateValue("y_adv");
  g.AddNode("Gemm", {x_adv, g.FindValue("W")}, {y_adv}, "adversarial_forward");
  ir::Value* sq = g.CreateValue("adv_sq");
  g.AddNode("ReduceSum", {Node1(g, "Mul", {y_adv, y_adv}, "adv_prod")}, {sq}, "adv_sum")
      ->SetAttribute(ir::Attribute::Int("keepdims", 0));
  ir::Value* total = Node1(g, "Add", {g.FindValue("loss"), sq}, "total");
  g.AddOutput(total);
  TrainingGraphOptions options;
  options.loss.kind = LossKind::kModelOutput;
  options.loss.output = "total";
  options.amp = DType::kFloat16;
  auto graphs = BuildTrainingGraphs(std::move(m), options);
  ASSERT_TRUE(graphs.ok()) << graphs.status().message();
  const ElementTypes types = InferElementTypes(*graphs->train.graph);
  auto type_of = [&](const ir::Value* v) { return types.count(v) ? types.at(v) : DType::kUndefined; };
  int seen = 0;
  for (const ir::Node* n : graphs->train.graph->nodes()) {
    if (n->name() == "adversarial_forward") {
      ++seen;
      EXPECT_EQ(type_of(n->output(0)), DType::kFloat16);
    }
    if (n->name() == "square") {
      ++seen;
      EXPECT_EQ(type_of(n->output(0)), DType::kFloat32);
    }
  }
  EXPECT_EQ(seen, 2);
}

// Cross-entropy over the last dim of [N, S, C] logits (--class-axis -1): the scores are read as [N * S, C] rows, no
// Transpose, and the loss is the mean over the positions that are not ignore_index, of -log softmax at the label.
TEST(TrainerPasses, ClassesLastCrossEntropyReadsRowsAndAveragesThePositions) {
  ir::Model m;
  m.opset_imports = {{"", 17}};
  ir::Graph& g = *m.graph;
  ir::Value* x = g.CreateValue("x");
  x->set_type(
      ir::ValueType::Tensor(DType::kFloat32, ir::Shape{ir::Dim::Param("batch"), ir::Dim::Value(3), ir::Dim::Value(4)}));
  g.AddInput(x);
  ir::Value* y = g.CreateValue("y");
  y->set_type(x->type());
  g.AddNode("Identity", {x}, {y}, "id");
  g.AddOutput(y);
  AttachedLoss loss;
  LossOptions loss_options;
  loss_options.class_axis = -1;
  passes::PassPipeline pipeline;
  pipeline.Add(MakeAttachLossPass(loss_options, &loss));
  bool changed = false;
  const Status st = pipeline.Run(m, passes::PassContext{}, &changed);
  ASSERT_TRUE(st.ok()) << st.message();
  for (const ir::Node* n : m.graph->nodes()) EXPECT_NE(n->op_type(), "Transpose");

  auto session = exec::Session::Create(std::move(m));
  ASSERT_TRUE(session.ok()) << session.status().message();
  std::vector<float> xv(2 * 3 * 4);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>((i * 7) % 11) / 4.0f - 1.0f;
  const std::vector<int64_t> t = {0, 3, -100, 2, 1, 1};  // one position ignored
  ir::Tensor xt = MakeTensor<float>({2, 3, 4}, xv);
  xt.set_name("x");
  ir::Tensor labels = MakeTensor<int64_t>({2, 3}, t);
  labels.set_name(loss.labels);
  exec::RunOptions run;
  run.fetch = {loss.loss};
  auto out = (*session)->Run({xt, labels}, run);
  ASSERT_TRUE(out.ok()) << out.status().message();
  double total = 0;
  int count = 0;
  for (int p = 0; p < 6; ++p) {
    if (t[p] == -100) continue;
    double m_ = -1e30, sum = 0;
    for (int c = 0; c < 4; ++c) m_ = std::max(m_, static_cast<double>(xv[p * 4 + c]));
    for (int c = 0; c < 4; ++c) sum += std::exp(xv[p * 4 + c] - m_);
    total += -(xv[p * 4 + t[p]] - m_ - std::log(sum));
    ++count;
  }
  EXPECT_NEAR((*out)[0].values<float>()[0], total / count, 1e-6);
}

// A pass's error names the pass, and the model's own names stay in the message.
TEST(TrainerPasses, AFailingTrainingPassIsNamed) {
  TrainingGraphOptions options;
  options.loss.kind = LossKind::kMse;
  options.loss.output = "nope";
  auto graphs = BuildTrainingGraphs(Linear(), options);
  ASSERT_FALSE(graphs.ok());
  EXPECT_NE(graphs.status().message().find("pass attach_loss: output 'nope' is not an output of the model"),
            std::string::npos)
      << graphs.status().message();
}

}  // namespace
}  // namespace onnxamp::trainer
