// The gradient of If (trainer/autodiff/if_gradient.h) against central differences, in float64: branches reading
// different enclosing values (the other branch's gradient is zeros), an If nested in a branch, a branch whose output is
// an enclosing value itself, an output no loss reaches, and both values of each condition. Also what the backward
// graph holds (one backward If, no forward value of a branch outside it). Loop and Scan: grad_loop_test.cc.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "converter/model_clone.h"
#include "runtime/executor/session.h"
#include "tests/runtime/op_tester.h"
#include "tests/runtime/subgraph_builder.h"
#include "tests/trainer/grad_check.h"
#include "trainer/autodiff/autodiff.h"
#include "trainer/graph/training_graph.h"

namespace onnxamp::testing {
namespace {

using namespace gradtest;  // NOLINT

using G = SubgraphBuilder;

ir::Tensor Bool(bool b) {
  ir::Tensor t(DType::kBool, {});
  t.mutable_values<uint8_t>()[0] = b ? 1 : 0;
  return t;
}

// x [2,3], w [2,3], b [3] (float64), c and c2 (bool). y, z = If(c):
//   then: y = Tanh(x * w) + If(c2) { Sin(b) } else { x }, z = w (an enclosing value as the output)
//   else: y = Exp(x) * 0.5 (reads neither w nor b), z = x * x
// loss = sum(y * R) + sum(z * S) (or without z when `loss_reads_z` is false).
ir::Model IfModel(bool loss_reads_z) {
  ir::Model m;
  m.opset_imports = {{"", 17}};
  G top(m.graph.get());
  top.In("x", DType::kFloat64, std::vector<int64_t>{2, 3});
  top.In("w", DType::kFloat64, std::vector<int64_t>{2, 3});
  top.In("b", DType::kFloat64, std::vector<int64_t>{3});
  top.In("c", DType::kBool, std::vector<int64_t>{});
  top.In("c2", DType::kBool, std::vector<int64_t>{});
  auto inner_then = Graph("inner_then");
  G it(inner_then.get());
  it.N("Sin", {"b"}, {"sb"});
  it.Out("sb", DType::kFloat64);
  auto inner_else = Graph("inner_else");
  G ie(inner_else.get());
  ie.Out("x", DType::kFloat64);
  auto then_g = Graph("then");
  G t(then_g.get());
  t.N("Mul", {"x", "w"}, {"xw"});
  t.N("Tanh", {"xw"}, {"th"});
  ir::Node* inner = t.N("If", {"c2"}, {"inner"});
  inner->SetAttribute(ir::Attribute::GraphValue("then_branch", std::move(inner_then)));
  inner->SetAttribute(ir::Attribute::GraphValue("else_branch", std::move(inner_else)));
  t.N("Add", {"th", "inner"}, {"ty"});
  t.Out("ty", DType::kFloat64);
  t.Out("w", DType::kFloat64);
  auto else_g = Graph("else");
  G e(else_g.get());
  e.N("Exp", {"x"}, {"ex"});
  e.N("Constant", {}, {"half"}, {ir::Attribute::TensorValue("value", MakeTensor<double>({}, {0.5}))});
  e.N("Mul", {"ex", "half"}, {"ey"});
  e.N("Mul", {"x", "x"}, {"ez"});
  e.Out("ey", DType::kFloat64);
  e.Out("ez", DType::kFloat64);
  ir::Node* n = top.N("If", {"c"}, {"y", "z"});
  n->SetAttribute(ir::Attribute::GraphValue("then_branch", std::move(then_g)));
  n->SetAttribute(ir::Attribute::GraphValue("else_branch", std::move(else_g)));
  top.N("Constant", {}, {"R"}, {ir::Attribute::TensorValue("value", Doubles({2, 3}, 5, -1, 1))});
  top.N("Mul", {"y", "R"}, {"yr"});
  top.N("ReduceSum", {"yr"}, {"ly"}, {ir::Attribute::Int("keepdims", 0)});
  if (loss_reads_z) {
    top.N("Constant", {}, {"S"}, {ir::Attribute::TensorValue("value", Doubles({2, 3}, 6, -1, 1))});
    top.N("Mul", {"z", "S"}, {"zs"});
    top.N("ReduceSum", {"zs"}, {"lz"}, {ir::Attribute::Int("keepdims", 0)});
    top.N("Add", {"ly", "lz"}, {"loss"});
  } else {
    top.N("Identity", {"ly"}, {"loss"});
  }
  top.Out("loss", DType::kFloat64);
  return m;
}

double Loss(const ir::Model& m, const std::vector<ir::Tensor>& inputs) {
  auto s = exec::Session::Create(converter::CloneModel(m), CpuSessionOptions(1));
  EXPECT_TRUE(s.ok()) << s.status().message();
  if (!s.ok()) return NAN;
  exec::RunOptions run;
  run.fetch = {"loss"};
  auto out = (*s)->Run(inputs, run);
  EXPECT_TRUE(out.ok()) << out.status().message();
  return out.ok() ? (*out)[0].values<double>()[0] : NAN;
}

struct IfCase {
  bool c, c2, loss_reads_z;
};

class IfGradTest : public ::testing::TestWithParam<IfCase> {};

TEST_P(IfGradTest, MatchesFiniteDifferences) {
  const IfCase k = GetParam();
  const ir::Model model = IfModel(k.loss_reads_z);
  std::vector<ir::Tensor> inputs = {Named(Doubles({2, 3}, 1, -1, 1), "x"), Named(Doubles({2, 3}, 2, -1, 1), "w"),
                                    Named(Doubles({3}, 3, -1, 1), "b"), Named(Bool(k.c), "c"), Named(Bool(k.c2), "c2")};
  ir::Model train = converter::CloneModel(model);
  trainer::GradientRequest request{.loss = "loss", .wrt = {"x", "w", "b"}};
  auto grads = trainer::BuildGradients(train, request);
  ASSERT_TRUE(grads.ok()) << grads.status().message();
  // One backward If; the forward branches' values stay inside the If nodes.
  int ifs = 0;
  for (const ir::Node* n : train.graph->nodes()) {
    ifs += n->op_type() == "If";
    for (const ir::Value* v : n->outputs()) EXPECT_NE(v->name(), "xw") << "a branch value in the main graph";
  }
  EXPECT_EQ(ifs, 2);
  auto s = exec::Session::Create(converter::CloneModel(train), CpuSessionOptions(2));
  ASSERT_TRUE(s.ok()) << s.status().message();
  exec::RunOptions run;
  for (const std::string& g : grads->gradients) {
    ASSERT_FALSE(g.empty());
    run.fetch.push_back(g);
  }
  auto got = (*s)->Run(inputs, run);
  ASSERT_TRUE(got.ok()) << got.status().message();
  for (size_t w = 0; w < 3; ++w) {
    const ir::Tensor& analytic = (*got)[w];
    ASSERT_EQ(analytic.dims(), inputs[w].dims());
    for (int64_t i = 0; i < analytic.num_elements(); ++i) {
      std::vector<ir::Tensor> plus = inputs, minus = inputs;
      const double eps = 1e-6;
      plus[w].mutable_values<double>()[i] += eps;
      minus[w].mutable_values<double>()[i] -= eps;
      const double fd = (Loss(model, plus) - Loss(model, minus)) / (2 * eps);
      const double a = analytic.values<double>()[i];
      EXPECT_NEAR(a, fd, 1e-6 + 1e-5 * std::abs(fd)) << request.wrt[w] << "[" << i << "] c=" << k.c << " c2=" << k.c2;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, IfGradTest,
                         ::testing::Values(IfCase{true, true, true}, IfCase{true, false, true},
                                           IfCase{false, true, true}, IfCase{true, true, false},
                                           IfCase{true, false, false}, IfCase{false, false, false}));

// a, b = If(c) { x * w, Sin(x) } else { x, w }; loss = sum((a + b) * R): Add hands both If outputs one gradient.
TEST(IfGradTest, TwoOutputsWithOneIncomingGradient) {
  for (bool c : {true, false}) {
    ir::Model m;
    m.opset_imports = {{"", 17}};
    G top(m.graph.get());
    top.In("x", DType::kFloat64, std::vector<int64_t>{2, 3});
    top.In("w", DType::kFloat64, std::vector<int64_t>{2, 3});
    top.In("c", DType::kBool, std::vector<int64_t>{});
    auto then_g = Graph("then");
    G t(then_g.get());
    t.N("Mul", {"x", "w"}, {"p"});
    t.N("Sin", {"x"}, {"s"});
    t.Out("p", DType::kFloat64, std::vector<int64_t>{2, 3});
    t.Out("s", DType::kFloat64, std::vector<int64_t>{2, 3});
    auto else_g = Graph("else");
    G e(else_g.get());
    e.Out("x", DType::kFloat64);
    e.Out("w", DType::kFloat64);
    ir::Node* n = top.N("If", {"c"}, {"a", "b"});
    n->SetAttribute(ir::Attribute::GraphValue("then_branch", std::move(then_g)));
    n->SetAttribute(ir::Attribute::GraphValue("else_branch", std::move(else_g)));
    m.graph->FindValue("a")->set_type(
        ir::ValueType::Tensor(DType::kFloat64, ir::Shape{ir::Dim::Value(2), ir::Dim::Value(3)}));
    m.graph->FindValue("b")->set_type(
        ir::ValueType::Tensor(DType::kFloat64, ir::Shape{ir::Dim::Value(2), ir::Dim::Value(3)}));
    top.N("Add", {"a", "b"}, {"ab"});
    top.N("Constant", {}, {"R"}, {ir::Attribute::TensorValue("value", Doubles({2, 3}, 7, -1, 1))});
    top.N("Mul", {"ab", "R"}, {"abr"});
    top.N("ReduceSum", {"abr"}, {"loss"}, {ir::Attribute::Int("keepdims", 0)});
    top.Out("loss", DType::kFloat64);
    const ir::Tensor x = Doubles({2, 3}, 8, -1, 1), w = Doubles({2, 3}, 9, -1, 1), r = Doubles({2, 3}, 7, -1, 1);
    auto grads = trainer::BuildGradients(m, {.loss = "loss", .wrt = {"x", "w"}});
    ASSERT_TRUE(grads.ok()) << grads.status().message();
    auto s = exec::Session::Create(std::move(m), CpuSessionOptions(1));
    ASSERT_TRUE(s.ok()) << s.status().message();
    exec::RunOptions run;
    run.fetch = grads->gradients;
    auto got = (*s)->Run({Named(x, "x"), Named(w, "w"), Named(Bool(c), "c")}, run);
    ASSERT_TRUE(got.ok()) << got.status().message();
    for (int64_t i = 0; i < 6; ++i) {
      const double xi = x.values<double>()[i], wi = w.values<double>()[i], ri = r.values<double>()[i];
      const double dx = c ? ri * (wi + std::cos(xi)) : ri, dw = c ? ri * xi : ri;
      EXPECT_NEAR((*got)[0].values<double>()[i], dx, 1e-12) << c << " " << i;
      EXPECT_NEAR((*got)[1].values<double>()[i], dw, 1e-12) << c << " " << i;
    }
  }
}

// y = If(c) { Dropout(x * w, 0.5, training) } else { x }: the backward If draws the forward's mask, so dL/dw is
// R * x * 2 where the forward kept the element and 0 where it dropped it.
TEST(IfGradTest, DropoutInABranchDrawsTheForwardMaskInTheBackward) {
  ir::Model m;
  m.opset_imports = {{"", 17}};
  G top(m.graph.get());
  top.In("x", DType::kFloat64, std::vector<int64_t>{64});
  top.In("w", DType::kFloat64, std::vector<int64_t>{64});
  top.In("c", DType::kBool, std::vector<int64_t>{});
  auto then_g = Graph("then");
  G t(then_g.get());
  t.N("Mul", {"x", "w"}, {"xw"});
  t.N("Constant", {}, {"ratio"}, {ir::Attribute::TensorValue("value", MakeTensor<double>({}, {0.5}))});
  ir::Tensor on(DType::kBool, {});
  on.mutable_values<uint8_t>()[0] = 1;
  t.N("Constant", {}, {"training"}, {ir::Attribute::TensorValue("value", on)});
  t.N("Dropout", {"xw", "ratio", "training"}, {"d"});
  t.Out("d", DType::kFloat64);
  auto else_g = Graph("else");
  G e(else_g.get());
  e.Out("x", DType::kFloat64);
  ir::Node* n = top.N("If", {"c"}, {"y"});
  n->SetAttribute(ir::Attribute::GraphValue("then_branch", std::move(then_g)));
  n->SetAttribute(ir::Attribute::GraphValue("else_branch", std::move(else_g)));
  top.N("Constant", {}, {"R"}, {ir::Attribute::TensorValue("value", Doubles({64}, 4, 0.5, 1))});
  top.N("Mul", {"y", "R"}, {"yr"});
  top.N("ReduceSum", {"yr"}, {"loss"}, {ir::Attribute::Int("keepdims", 0)});
  top.Out("y", DType::kFloat64);
  top.Out("loss", DType::kFloat64);
  auto grads = trainer::BuildGradients(m, {.loss = "loss", .wrt = {"w"}});
  ASSERT_TRUE(grads.ok()) << grads.status().message();
  exec::SessionOptions options = CpuSessionOptions(1, /*seed=*/17);
  options.mode = exec::SessionMode::kTraining;
  auto s = exec::Session::Create(std::move(m), options);
  ASSERT_TRUE(s.ok()) << s.status().message();
  const ir::Tensor x = Doubles({64}, 2, 0.5, 1), w = Doubles({64}, 3, 0.5, 1), r = Doubles({64}, 4, 0.5, 1);
  for (uint64_t step : {1, 2}) {
    exec::RunOptions run;
    run.fetch = {"y", grads->gradients[0]};
    run.rng_step = step;
    auto got = (*s)->Run({Named(x, "x"), Named(w, "w"), Named(Bool(true), "c")}, run);
    ASSERT_TRUE(got.ok()) << got.status().message();
    int kept = 0;
    for (int64_t i = 0; i < 64; ++i) {
      const bool keep = (*got)[0].values<double>()[i] != 0;
      kept += keep;
      const double want = keep ? r.values<double>()[i] * x.values<double>()[i] * 2 : 0;
      EXPECT_NEAR((*got)[1].values<double>()[i], want, 1e-12) << "step " << step << " element " << i;
    }
    EXPECT_GT(kept, 10);
    EXPECT_LT(kept, 54);
  }
}

// Parameters: a weight read only inside an If branch trains, and so does one read only by a Loop body.
TEST(IfGradTest, WeightsReadInBranchesAndLoopBodiesAreParameters) {
  ir::Model m;
  m.opset_imports = {{"", 17}};
  G top(m.graph.get());
  top.In("x", DType::kFloat32, std::vector<int64_t>{2});
  top.In("c", DType::kBool, std::vector<int64_t>{});
  top.In("M", DType::kInt64, std::vector<int64_t>{});
  top.Init("in_branch", MakeTensor<float>({2}, {1, 2}));
  top.Init("in_loop", MakeTensor<float>({2}, {3, 4}));
  auto then_g = Graph("then");
  G t(then_g.get());
  t.N("Mul", {"x", "in_branch"}, {"p"});
  t.Out("p", DType::kFloat32);
  auto else_g = Graph("else");
  G e(else_g.get());
  e.Out("x", DType::kFloat32);
  ir::Node* n = top.N("If", {"c"}, {"y"});
  n->SetAttribute(ir::Attribute::GraphValue("then_branch", std::move(then_g)));
  n->SetAttribute(ir::Attribute::GraphValue("else_branch", std::move(else_g)));
  auto body = Graph("body");
  G b(body.get());
  b.In("i", DType::kInt64, std::vector<int64_t>{});
  b.In("cond_in", DType::kBool, std::vector<int64_t>{});
  b.In("v_in", DType::kFloat32, std::vector<int64_t>{2});
  b.N("Identity", {"cond_in"}, {"cond_out"});
  b.N("Add", {"v_in", "in_loop"}, {"v_out"});
  b.Out("cond_out", DType::kBool);
  b.Out("v_out", DType::kFloat32);
  ir::Node* loop = top.N("Loop", {"M", "", "y"}, {"v"});
  loop->SetAttribute(ir::Attribute::GraphValue("body", std::move(body)));
  top.Out("v", DType::kFloat32);
  auto params = trainer::SelectParameters(m, "");
  ASSERT_TRUE(params.ok()) << params.status().message();
  EXPECT_EQ(*params, (std::vector<std::string>{"in_branch", "in_loop"}));
}

}  // namespace
}  // namespace onnxamp::testing
