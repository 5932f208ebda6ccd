// BuildGradients on small graphs: accumulation over several uses, where gradients stop, the seed, dead terms, errors
// that leave the model unchanged, and the IR staying valid.
#include "trainer/autodiff/autodiff.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "runtime/executor/session.h"
#include "runtime/ir/verify.h"
#include "tests/runtime/ir_build_util.h"
#include "tests/runtime/op_tester.h"

namespace onnxamp::trainer {
namespace {

using testing::Input;
using testing::MakeTensor;
using testing::Named;
using testing::Node1;
using testing::Values;

// x -> a = Relu(x); c = a * a + a; loss = ReduceSum(c, keepdims 0). dL/dx = (2a + 1) where x > 0.
TEST(Autodiff, SumsTheGradientsOfEveryUse) {
  ir::Model m;
  m.opset_imports = {{"", 17}};
  ir::Graph& g = *m.graph;
  ir::Value* x = Input(g, "x", DType::kFloat32, {4});
  ir::Value* a = Node1(g, "Relu", {x}, "a");
  ir::Value* b = Node1(g, "Mul", {a, a}, "b");
  ir::Value* c = Node1(g, "Add", {b, a}, "c");
  ir::Value* loss = g.CreateValue("loss");
  g.AddNode("ReduceSum", {c}, {loss}, "sum")->SetAttribute(ir::Attribute::Int("keepdims", 0));
  g.AddOutput(loss);
  StatusOr<GradientResult> r = BuildGradients(m, {"loss", {"x"}, ""});
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->gradients, (std::vector<std::string>{"x_grad"}));
  ASSERT_TRUE(ir::Verify(m).ok());
  auto session = std::move(exec::Session::Create(std::move(m))).value();
  exec::RunOptions run;
  run.fetch = {"x_grad"};
  auto out = session->Run({Named(MakeTensor<float>({4}, {-1, 0.5f, 2, -3}), "x")}, run);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(Values<float>((*out)[0]), (std::vector<float>{0, 2, 5, 0}));
}

// loss = ReduceSum(x * w): with wrt = {w} only, no term for x is left in the graph; the seed scales the gradient.
TEST(Autodiff, SeedScalesAndUnneededTermsAreRemoved) {
  ir::Model m;
  m.opset_imports = {{"", 17}};
  ir::Graph& g = *m.graph;
  ir::Value* x = Input(g, "x", DType::kFloat32, {3});
  ir::Value* w = Input(g, "w", DType::kFloat32, {3});
  Input(g, "loss_scale", DType::kFloat32, {});
  ir::Value* p = Node1(g, "Mul", {x, w}, "p");
  ir::Value* loss = g.CreateValue("loss");
  g.AddNode("ReduceSum", {p}, {loss}, "sum")->SetAttribute(ir::Attribute::Int("keepdims", 0));
  g.AddOutput(loss);
  StatusOr<GradientResult> r = BuildGradients(m, {"loss", {"w"}, "loss_scale"});
  ASSERT_TRUE(r.ok()) << r.status().message();
  // The backward pass: Shape(loss), Reshape (the seed), Shape(p), Expand (ReduceSum's gradient), Mul (dp * x), and
  // the Identity naming w's gradient; SumToShape is skipped since x, w and p have the same static shape. No Mul by
  // w (x's term).
  int muls = 0;
  for (const ir::Node* n : m.graph->nodes()) muls += n->op_type() == "Mul";
  EXPECT_EQ(muls, 2);  // the forward Mul and dp * x
  auto session = std::move(exec::Session::Create(std::move(m))).value();
  exec::RunOptions run;
  run.fetch = {r->gradients[0], "loss"};
  auto out = session->Run({Named(MakeTensor<float>({3}, {1, 2, 3}), "x"), Named(MakeTensor<float>({3}, {4, 5, 6}), "w"),
                           Named(MakeTensor<float>({}, {8}), "loss_scale")},
                          run);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(Values<float>((*out)[0]), (std::vector<float>{8, 16, 24}));
  EXPECT_EQ(Values<float>((*out)[1]), (std::vector<float>{32}));
}

// Gradients stop at integer values: Shape -> Reshape's shape input needs no builder for Shape.
TEST(Autodiff, IntegerPathsNeedNoGradient) {
  ir::Model m;
  m.opset_imports = {{"", 17}};
  ir::Graph& g = *m.graph;
  ir::Value* x = Input(g, "x", DType::kFloat32, {2, 3});
  ir::Value* s = Node1(g, "Shape", {x}, "s");
  ir::Value* y = Node1(g, "Reshape", {Node1(g, "Relu", {x}, "r"), s}, "y");
  ir::Value* loss = g.CreateValue("loss");
  g.AddNode("ReduceSum", {y}, {loss}, "sum")->SetAttribute(ir::Attribute::Int("keepdims", 0));
  g.AddOutput(loss);
  StatusOr<GradientResult> r = BuildGradients(m, {"loss", {"x"}, ""});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(ir::Verify(m).ok());
}

TEST(Autodiff, AnOpWithoutABuilderIsNamedAndTheModelIsUnchanged) {
  ir::Model m;
  m.opset_imports = {{"", 17}};
  ir::Graph& g = *m.graph;
  // DynamicQuantizeLinear's float output (the scale, a statistic of x's range) has no gradient.
  ir::Value* x = Input(g, "x", DType::kFloat32, {3});
  ir::Value* q = g.CreateValue("q");
  ir::Value* scale = g.CreateValue("scale");
  ir::Value* zero = g.CreateValue("zero");
  g.AddNode("DynamicQuantizeLinear", {x}, {q, scale, zero}, "dq");
  ir::Value* loss = g.CreateValue("loss");
  g.AddNode("ReduceSum", {scale}, {loss}, "sum")->SetAttribute(ir::Attribute::Int("keepdims", 0));
  g.AddOutput(loss);
  const size_t nodes = m.graph->num_nodes();
  StatusOr<GradientResult> r = BuildGradients(m, {"loss", {"x"}, ""});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "node DynamicQuantizeLinear 'dq': op DynamicQuantizeLinear has no gradient, and it lies between the "
            "trained parameters and the loss");
  EXPECT_EQ(m.graph->num_nodes(), nodes);
  EXPECT_EQ(m.graph->outputs().size(), 1u);
}

TEST(Autodiff, BadRequestsAreRefused) {
  ir::Model m;
  m.opset_imports = {{"", 17}};
  ir::Graph& g = *m.graph;
  ir::Value* x = Input(g, "x", DType::kFloat32, {3});
  ir::Value* i = Input(g, "i", DType::kInt64, {3});
  Input(g, "unused", DType::kFloat32, {3});
  ir::Value* loss = g.CreateValue("loss");
  g.AddNode("ReduceSum", {x}, {loss}, "sum")->SetAttribute(ir::Attribute::Int("keepdims", 0));
  g.AddOutput(loss);
  EXPECT_EQ(BuildGradients(m, {"nope", {"x"}, ""}).status().message(), "loss 'nope' is not a value of the graph");
  EXPECT_EQ(BuildGradients(m, {"loss", {"i"}, ""}).status().message(),
            "'i' is not a floating tensor: it has no gradient");
  EXPECT_EQ(BuildGradients(m, {"i", {"x"}, ""}).status().message(), "loss 'i' is not a floating tensor (int64)");
  (void)i;
  StatusOr<GradientResult> r = BuildGradients(m, {"loss", {"x", "unused"}, ""});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->gradients, (std::vector<std::string>{"x_grad", ""}));
}

// ReduceMean's Size stashes are placed right after the forward node, not at the end of the graph.
TEST(Autodiff, StashesFollowTheirForwardNode) {
  ir::Model m;
  m.opset_imports = {{"", 17}};
  ir::Graph& g = *m.graph;
  ir::Value* x = Input(g, "x", DType::kFloat32, {2, 3});
  ir::Value* mean = g.CreateValue("mean");
  g.AddNode("ReduceMean", {x}, {mean}, "mean_node")->SetAttribute(ir::Attribute::Int("keepdims", 0));
  ir::Value* e = Node1(g, "Exp", {mean}, "e");
  ir::Value* loss = g.CreateValue("loss");
  g.AddNode("ReduceSum", {e}, {loss}, "sum")->SetAttribute(ir::Attribute::Int("keepdims", 0));
  g.AddOutput(loss);
  ASSERT_TRUE(BuildGradients(m, {"loss", {"x"}, ""}).ok());
  std::vector<std::string> order;
  for (const ir::Node* n : m.graph->nodes()) order.push_back(n->op_type());
  ASSERT_GE(order.size(), 4u);
  EXPECT_EQ(order[0], "Shape");  // Shape(x), before the first forward node
  EXPECT_EQ(order[1], "ReduceMean");
  EXPECT_EQ(order[2], "Size");
  EXPECT_EQ(order[3], "Size");
  EXPECT_EQ(order[4], "Exp");
  auto session = std::move(exec::Session::Create(std::move(m))).value();
  exec::RunOptions run;
  run.fetch = {"x_grad"};
  auto out = session->Run({Named(MakeTensor<float>({2, 3}, {0, 0, 0, 3, 3, 3}), "x")}, run);
  ASSERT_TRUE(out.ok()) << out.status().message();
  const std::vector<float> got = Values<float>((*out)[0]);
  // mean over all 6 elements is 1.5 (keepdims 0, no axes): dL/dx = exp(1.5) / 6 everywhere.
  for (float v : got) EXPECT_NEAR(v, std::exp(1.5f) / 6, 1e-6);
}

// A gradient nothing else reads is itself the graph output (no Identity, which an executor would copy out of its
// arena); one that a node reads (here ds, which Add's gradient reads for a) is named by an Identity.
TEST(Autodiff, GradientOutputsAreTheGradientsThemselves) {
  ir::Model m;
  m.opset_imports = {{"", 17}};
  ir::Graph& g = *m.graph;
  ir::Value* a = Input(g, "a", DType::kFloat32, {3});
  ir::Value* b = Input(g, "b", DType::kFloat32, {3});
  ir::Value* w = Input(g, "w", DType::kFloat32, {3});
  ir::Value* s = Node1(g, "Add", {a, b}, "s");
  ir::Value* p = Node1(g, "Mul", {s, w}, "p");
  ir::Value* loss = g.CreateValue("loss");
  g.AddNode("ReduceSum", {p}, {loss}, "sum")->SetAttribute(ir::Attribute::Int("keepdims", 0));
  g.AddOutput(loss);
  StatusOr<GradientResult> r = BuildGradients(m, {"loss", {"w", "a", "s"}, ""});
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->gradients.size(), 3u);
  auto producer_op = [&](const std::string& name) -> std::string {
    const ir::Value* v = m.graph->FindValue(name);
    return v && v->producer() ? v->producer()->op_type() : "";
  };
  EXPECT_EQ(r->gradients[0], "w_grad");
  EXPECT_EQ(r->gradients[1], "a_grad");
  EXPECT_NE(producer_op(r->gradients[0]), "Identity");
  EXPECT_NE(producer_op(r->gradients[1]), "Identity");
  EXPECT_EQ(producer_op(r->gradients[2]), "Identity");
  EXPECT_TRUE(ir::Verify(*m.graph).ok());
  auto session = std::move(exec::Session::Create(std::move(m))).value();
  exec::RunOptions run;
  run.fetch = r->gradients;
  auto out = session->Run({Named(MakeTensor<float>({3}, {1, 2, 3}), "a"), Named(MakeTensor<float>({3}, {1, 1, 1}), "b"),
                           Named(MakeTensor<float>({3}, {4, 5, 6}), "w")},
                          run);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(Values<float>((*out)[0]), (std::vector<float>{2, 3, 4}));
  EXPECT_EQ(Values<float>((*out)[1]), (std::vector<float>{4, 5, 6}));
  EXPECT_EQ(Values<float>((*out)[2]), (std::vector<float>{4, 5, 6}));
}

}  // namespace
}  // namespace onnxamp::trainer
