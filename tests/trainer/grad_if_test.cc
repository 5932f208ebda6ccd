// The gradient of If (trainer/autodiff/if_gradient.h) against central differences, in float64: branches reading
// different enclosing values (the other branch's gradient is zeros), an If nested in a branch, a branch whose output is
// an enclosing value itself, an output no loss reaches, and both values of each condition. Also what the backward
// graph holds (one backward If, no forward value of a branch outside it) and that a parameter read inside a Loop body
// is refused, naming the Loop, where it used to get no gradient.
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

namespace onnxamp::testing {
namespace {

using namespace gradtest;  // NOLINT

using G = SubgraphBuilder;

std::unique_ptr<ir::Graph> Graph(const std::string& name) { return std::make_unique<ir::Graph>(name); }

ir::Tensor Named(ir::Tensor t, const std::string& name) {
  t.set_name(name);
  return t;
}

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

TEST(IfGradTest, AParameterReadInsideALoopBodyIsRefused) {
  ir::Model m;
  m.opset_imports = {{"", 17}};
  G top(m.graph.get());
  top.In("x", DType::kFloat64, std::vector<int64_t>{2});
  top.In("w", DType::kFloat64, std::vector<int64_t>{2});
  top.In("M", DType::kInt64, std::vector<int64_t>{});
  auto body = Graph("body");
  G b(body.get());
  b.In("i", DType::kInt64, std::vector<int64_t>{});
  b.In("cond_in", DType::kBool, std::vector<int64_t>{});
  b.In("v_in", DType::kFloat64, std::vector<int64_t>{2});
  b.N("Identity", {"cond_in"}, {"cond_out"});
  b.N("Mul", {"v_in", "w"}, {"v_out"});
  b.Out("cond_out", DType::kBool);
  b.Out("v_out", DType::kFloat64);
  ir::Node* loop = top.N("Loop", {"M", "", "x"}, {"v"});
  loop->SetAttribute(ir::Attribute::GraphValue("body", std::move(body)));
  top.N("ReduceSum", {"v"}, {"loss"}, {ir::Attribute::Int("keepdims", 0)});
  top.Out("loss", DType::kFloat64);
  auto grads = trainer::BuildGradients(m, {.loss = "loss", .wrt = {"w"}});
  ASSERT_FALSE(grads.ok());
  EXPECT_NE(grads.status().message().find("Loop"), std::string::npos) << grads.status().message();
  EXPECT_NE(grads.status().message().find("has no gradient"), std::string::npos) << grads.status().message();
}

}  // namespace
}  // namespace onnxamp::testing
