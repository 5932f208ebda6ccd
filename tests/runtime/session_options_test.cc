// Per-session options (SessionOptions): graph optimization level, layouts, linalg implementation and training mode
// are chosen per session, so sessions with different settings coexist in one process; the environment is read
// only by the CLI's CliSessionOptionsFromEnvironment.
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/session.h"
#include "runtime/executor/session_env.h"
#include "runtime/ops/common/conv_onednn.h"
#include "tests/runtime/layout_test_util.h"

namespace onnxamp::testing {
namespace {

// X [1, 2, 5, 5] -> Conv(W [3, 2, 3, 3], pads 1) -> Relu -> Y; W is a graph input with a default (a parameter a
// training graph binds on every run) when `weights_are_inputs`, else a plain initializer.
ir::Model ConvReluModel(bool weights_are_inputs) {
  ir::Model m;
  m.opset_imports = {{"", 17}};
  ir::Graph& g = *m.graph;
  ir::Value* x = g.CreateValue("X");
  x->set_type(ir::ValueType::Tensor(
      DType::kFloat32, ir::Shape{ir::Dim::Value(1), ir::Dim::Value(2), ir::Dim::Value(5), ir::Dim::Value(5)}));
  g.AddInput(x);
  ir::Value* w = g.CreateValue("W");
  w->set_type(ir::ValueType::Tensor(
      DType::kFloat32, ir::Shape{ir::Dim::Value(3), ir::Dim::Value(2), ir::Dim::Value(3), ir::Dim::Value(3)}));
  g.SetInitializer(w, TensorOf(DType::kFloat32, {3, 2, 3, 3}, RandomValues(DType::kFloat32, 54, 5)));
  if (weights_are_inputs) g.AddInput(w);
  ir::Value* c = g.CreateValue("c");
  ir::Node* conv = g.AddNode("Conv", {x, w}, {c}, "conv");
  conv->SetAttribute(ir::Attribute::Ints("pads", {1, 1, 1, 1}));
  ir::Value* y = g.CreateValue("Y");
  y->set_type(ir::ValueType::Tensor(DType::kFloat32));
  g.AddNode("Relu", {c}, {y}, "relu");
  g.AddOutput(y);
  return m;
}

// Fused convolutions (FusedConv, or BlockedConv when the blocked layout took the FusedConv over).
int Fused(const ir::Model& m) { return Count(m, exec::kFusedConvOp) + Count(m, exec::kBlockedConvOp); }

ir::Tensor Input() {
  ir::Tensor x = TensorOf(DType::kFloat32, {1, 2, 5, 5}, RandomValues(DType::kFloat32, 50, 9));
  x.set_name("X");
  return x;
}

std::unique_ptr<exec::Session> Create(ir::Model model, const exec::SessionOptions& options) {
  auto s = exec::Session::Create(std::move(model), options);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(s).value() : nullptr;
}

TEST(SessionOptions, GraphOptimizationIsChosenPerSession) {
  exec::SessionOptions optimized, plain;
  optimized.num_threads = plain.num_threads = 1;
  plain.graph_optimization = exec::GraphOptimization::kNone;
  // Both sessions alive at once, created in either order: neither setting leaks into the other.
  auto a = Create(ConvReluModel(false), plain);
  auto b = Create(ConvReluModel(false), optimized);
  auto c = Create(ConvReluModel(false), plain);
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(Fused(a->model()), 0);
  EXPECT_EQ(Fused(b->model()), 1);
  EXPECT_EQ(Fused(c->model()), 0);
  auto ya = a->Run({Input()});
  auto yb = b->Run({Input()});
  ASSERT_TRUE(ya.ok() && yb.ok());
  const std::vector<float> va((*ya)[0].values<float>().begin(), (*ya)[0].values<float>().end());
  const std::vector<float> vb((*yb)[0].values<float>().begin(), (*yb)[0].values<float>().end());
  ASSERT_EQ(va.size(), vb.size());
  for (size_t i = 0; i < va.size(); ++i) EXPECT_NEAR(va[i], vb[i], 1e-5) << i;
}

TEST(SessionOptions, TrainingModeFusesNoConvWhoseWeightsAreInputs) {
  exec::SessionOptions inference, training;
  inference.num_threads = training.num_threads = 1;
  training.mode = exec::SessionMode::kTraining;
  // Inference: fusing is exact whatever W is bound to, so the Conv and Relu fuse.
  auto inf = Create(ConvReluModel(true), inference);
  ASSERT_TRUE(inf);
  EXPECT_EQ(Fused(inf->model()), 1);
  // Training: W is a parameter bound on every run; the Conv stays as it is.
  auto train = Create(ConvReluModel(true), training);
  ASSERT_TRUE(train);
  EXPECT_EQ(Count(train->model(), exec::kFusedConvOp), 0);
  EXPECT_EQ(Count(train->model(), "Conv"), 1);
  EXPECT_EQ(Count(train->model(), "Relu"), 1);
  // A weight that no input can override is a constant even in training mode.
  auto fixed = Create(ConvReluModel(false), training);
  ASSERT_TRUE(fixed);
  EXPECT_EQ(Fused(fixed->model()), 1);
  // The training session binds a new W and computes with it.
  ir::Tensor w = TensorOf(DType::kFloat32, {3, 2, 3, 3}, std::vector<double>(54, 0.0));
  w.set_name("W");
  auto y = train->Run({Input(), w});
  ASSERT_TRUE(y.ok()) << y.status().ToString();
  for (float v : (*y)[0].values<float>()) EXPECT_EQ(v, 0.0f);
}

TEST(SessionOptions, LevelsLayoutAndLinalgDecideTheLayoutPass) {
  if (ops::PreferredChannelBlock(ops::AvailableLinalgImpl(exec::LinalgImpl::kOneDnn)) == 0) {
    GTEST_SKIP() << "no blocked layout on this build or CPU";
  }
  exec::SessionOptions all;
  all.num_threads = 1;
  exec::SessionOptions basic = all, no_blocked = all, reference = all;
  basic.graph_optimization = exec::GraphOptimization::kBasic;
  no_blocked.blocked_layout = false;
  reference.kernels.linalg = exec::LinalgImpl::kReference;
  auto s_all = Create(ResNetLike(3, 16, 32), all);
  auto s_basic = Create(ResNetLike(3, 16, 32), basic);
  auto s_no_blocked = Create(ResNetLike(3, 16, 32), no_blocked);
  auto s_reference = Create(ResNetLike(3, 16, 32), reference);
  ASSERT_TRUE(s_all && s_basic && s_no_blocked && s_reference);
  EXPECT_GT(Count(s_all->model(), exec::kBlockedConvOp), 0);
  for (const exec::Session* s : {s_basic.get(), s_no_blocked.get(), s_reference.get()}) {
    EXPECT_EQ(Count(s->model(), exec::kBlockedConvOp), 0);
    EXPECT_EQ(Count(s->model(), exec::kFusedConvOp), 5);
  }
}

// Sets environment variables for one test and removes them after.
class EnvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* n : {"ONNXAMP_GRAPH_OPT", "ONNXAMP_BLOCKED_LAYOUT", "ONNXAMP_CHANNELS_LAST", "ONNXAMP_LINALG",
                          "ONNXAMP_CUDA_TF32", "ONNXAMP_CUDA_CONV_DIRECT"}) {
      unsetenv(n);
    }
  }
  void Set(const char* name, const char* value) {
    setenv(name, value, 1);
    names_.push_back(name);
  }
  void TearDown() override {
    for (const char* n : names_) unsetenv(n);
  }

 private:
  std::vector<const char*> names_;
};

TEST_F(EnvTest, CliReadsEveryVariable) {
  // Nothing set: the options come back as given.
  exec::SessionOptions given;
  given.num_threads = 3;
  auto same = exec::CliSessionOptionsFromEnvironment(given);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->graph_optimization, exec::GraphOptimization::kAll);
  EXPECT_EQ(same->num_threads, 3);

  Set("ONNXAMP_GRAPH_OPT", "basic");
  Set("ONNXAMP_BLOCKED_LAYOUT", "0");
  Set("ONNXAMP_CHANNELS_LAST", "0");
  Set("ONNXAMP_LINALG", "reference");
  Set("ONNXAMP_CUDA_TF32", "1");
  Set("ONNXAMP_CUDA_CONV_DIRECT", "1");
  auto o = exec::CliSessionOptionsFromEnvironment(given);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->graph_optimization, exec::GraphOptimization::kBasic);
  EXPECT_FALSE(o->blocked_layout);
  EXPECT_FALSE(o->channels_last);
  EXPECT_EQ(o->kernels.linalg, exec::LinalgImpl::kReference);
  EXPECT_TRUE(o->kernels.cuda_tf32);
  EXPECT_TRUE(o->kernels.cuda_conv_direct);
  EXPECT_EQ(o->num_threads, 3);

  Set("ONNXAMP_GRAPH_OPT", "0");
  EXPECT_EQ(exec::CliSessionOptionsFromEnvironment()->graph_optimization, exec::GraphOptimization::kNone);
  // The library never reads the variables: a session created with default options still optimizes.
  auto s = Create(ConvReluModel(false), exec::SessionOptions{});
  ASSERT_TRUE(s);
  EXPECT_EQ(Fused(s->model()), 1);
}

TEST_F(EnvTest, CliRefusesUnknownValuesNamingTheVariable) {
  Set("ONNXAMP_LINALG", "fastest");
  auto o = exec::CliSessionOptionsFromEnvironment();
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.status().message(), "ONNXAMP_LINALG=fastest: expected reference, portable or onednn");
  unsetenv("ONNXAMP_LINALG");
  Set("ONNXAMP_GRAPH_OPT", "2");
  o = exec::CliSessionOptionsFromEnvironment();
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("ONNXAMP_GRAPH_OPT=2"), std::string::npos) << o.status().message();
}

}  // namespace
}  // namespace onnxamp::testing
