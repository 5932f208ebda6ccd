// HoistLoopInvariants (runtime/executor/hoist_loop_invariants.h), run by Session::Create: which body nodes move in
// front of a Loop or Scan (chains of Cast, Transpose and unary math reading only enclosing values; out of nested
// loops; two sibling loops moving values of one name; a body's If reading a moved value) and which stay (nodes
// reading the iteration's values, random ops, body outputs), each model's outputs compared with the same model run
// without graph optimizations.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "runtime/executor/hoist_loop_invariants.h"
#include "runtime/executor/session.h"
#include "tests/runtime/op_tester.h"
#include "tests/runtime/subgraph_builder.h"

namespace onnxamp::testing {
namespace {

using G = SubgraphBuilder;

ir::Attribute Value(ir::Tensor t) { return ir::Attribute::TensorValue("value", std::move(t)); }
ir::Tensor I64(int64_t v) { return MakeTensor<int64_t>({}, {v}); }
ir::Attribute To(DType t) { return ir::Attribute::Int("to", static_cast<int64_t>(t)); }

ir::Tensor Floats(std::vector<int64_t> dims, float first, float step) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = first + step * static_cast<float>(i);
  return MakeTensor<float>(dims, v);
}

ir::Model NewModel() {
  ir::Model m;
  m.opset_imports = {{"", 17}};
  return m;
}

ir::Model Copy(const ir::Model& m) {
  ir::Model copy;
  copy.opset_imports = m.opset_imports;
  copy.graph = m.graph->Clone();
  return copy;
}

// The body of a loop: its formal inputs i, cond and the state h [2, 3] (float).
std::unique_ptr<ir::Graph> LoopBody(const std::string& name) {
  auto body = Graph(name);
  G b(body.get());
  b.In("i", DType::kInt64, std::vector<int64_t>{});
  b.In("cond", DType::kBool, std::vector<int64_t>{});
  b.In("h", DType::kFloat32, std::vector<int64_t>{2, 3});
  return body;
}

// Ends a loop body: cond passed on, `next` the new state, then `extra` outputs (scan outputs).
void EndBody(ir::Graph* body, const std::string& next, const std::vector<std::string>& extra = {}) {
  G b(body);
  b.N("Identity", {"cond"}, {"cond_out"});
  b.Out("cond_out", DType::kBool);
  b.Out(next, DType::kFloat32);
  for (const std::string& e : extra) b.Out(e, DType::kFloat32);
}

// The ops of the graph and of every graph inside it, each prefixed with its depth ("0:Loop", "1:Cast").
std::vector<std::string> Ops(const ir::Graph& g, int depth = 0) {
  std::vector<std::string> ops;
  for (const ir::Node* n : g.nodes()) {
    ops.push_back(std::to_string(depth) + ":" + n->op_type());
    for (const ir::Graph* sub : n->subgraphs()) {
      for (std::string& s : Ops(*sub, depth + 1)) ops.push_back(std::move(s));
    }
  }
  return ops;
}

int Count(const std::vector<std::string>& ops, const std::string& op) {
  return static_cast<int>(std::count(ops.begin(), ops.end(), op));
}

// Runs `m` optimized and not, expects the same outputs (bit for bit: the same kernels in the same order), and returns
// the optimized session's ops.
std::vector<std::string> RunBothWays(const ir::Model& m, const std::vector<ir::Tensor>& inputs) {
  exec::SessionOptions plain = CpuSessionOptions(1);
  plain.graph_optimization = exec::GraphOptimization::kNone;
  auto reference = exec::Session::Create(Copy(m), plain);
  auto optimized = exec::Session::Create(Copy(m), CpuSessionOptions(1));
  EXPECT_TRUE(reference.ok()) << reference.status().message();
  EXPECT_TRUE(optimized.ok()) << optimized.status().message();
  if (!reference.ok() || !optimized.ok()) return {};
  auto want = (*reference)->Run(inputs);
  auto got = (*optimized)->Run(inputs);
  EXPECT_TRUE(want.ok()) << want.status().message();
  EXPECT_TRUE(got.ok()) << got.status().message();
  if (want.ok() && got.ok()) {
    EXPECT_EQ(got->size(), want->size());
    for (size_t k = 0; k < got->size() && k < want->size(); ++k) {
      EXPECT_EQ((*got)[k].dims(), (*want)[k].dims()) << "output " << k;
      EXPECT_EQ(Values<float>((*got)[k]), Values<float>((*want)[k])) << "output " << k;
    }
  }
  return Ops(*(*optimized)->model().graph);
}

// h' = Tanh(h x -(W^T in float16, back in float) + x) - x (through an Einsum): Transpose, Neg, the Einsum and the two
// Casts read only W and x and move out; the
// Cast of the state h (per iteration) stays. The loop also emits -W^T as a scan output through an Identity, which
// stays (its input is moved, the Identity is not hoistable), and a RandomNormalLike of W, which stays.
TEST(HoistLoopInvariantsTest, ChainsReadingEnclosingValuesMoveOut) {
  ir::Model m = NewModel();
  G top(m.graph.get());
  top.In("x", DType::kFloat32, std::vector<int64_t>{2, 3});
  top.In("W", DType::kFloat32, std::vector<int64_t>{3, 3});
  top.N("Constant", {}, {"M"}, {Value(I64(3))});
  top.N("Constant", {}, {"h0"}, {Value(Floats({2, 3}, 0.1f, 0.05f))});
  auto body = LoopBody("body");
  G b(body.get());
  b.N("Transpose", {"W"}, {"Wt"}, {ir::Attribute::Ints("perm", {1, 0})});
  b.N("Neg", {"Wt"}, {"nWt"});
  b.N("Cast", {"nWt"}, {"nWt16"}, {To(DType::kFloat16)});
  b.N("Cast", {"nWt16"}, {"nWt32"}, {To(DType::kFloat32)});
  b.N("Cast", {"h"}, {"h64"}, {To(DType::kFloat64)});
  b.N("Cast", {"h64"}, {"h32"}, {To(DType::kFloat32)});
  b.N("MatMul", {"h32", "nWt32"}, {"hw"});
  b.N("Add", {"hw", "x"}, {"a"});
  b.N("Tanh", {"a"}, {"h_next0"});
  b.N("Einsum", {"x"}, {"xe"}, {ir::Attribute::String("equation", "...ij->...ij")});
  b.N("Sub", {"h_next0", "xe"}, {"h_next"});
  b.N("Identity", {"nWt"}, {"nWt_out"});
  b.N("RandomNormalLike", {"W"}, {"noise"}, {ir::Attribute::Float("seed", 0.0f)});
  b.N("Mul", {"noise", "nWt"}, {"noise_w"});
  EndBody(body.get(), "h_next", {"nWt_out", "noise_w"});
  ir::Node* loop = top.N("Loop", {"M", "", "h0"}, {"hT", "ws", "noises"});
  loop->SetAttribute(ir::Attribute::GraphValue("body", std::move(body)));
  top.Out("hT", DType::kFloat32);
  top.Out("ws", DType::kFloat32);
  top.Out("noises", DType::kFloat32);
  const std::vector<std::string> ops =
      RunBothWays(m, {Named(Floats({2, 3}, -0.3f, 0.1f), "x"), Named(Floats({3, 3}, -0.4f, 0.1f), "W")});
  EXPECT_EQ(Count(ops, "0:Transpose"), 1);
  EXPECT_EQ(Count(ops, "0:Neg"), 1);
  EXPECT_EQ(Count(ops, "0:Einsum"), 1);
  EXPECT_EQ(Count(ops, "0:Cast"), 2);
  EXPECT_EQ(Count(ops, "1:Transpose") + Count(ops, "1:Neg"), 0);
  EXPECT_EQ(Count(ops, "1:Cast"), 2) << "the state's Casts stay";
  EXPECT_EQ(Count(ops, "1:RandomNormalLike"), 1) << "random ops stay";
  EXPECT_EQ(Count(ops, "1:Identity"), 2);
}

// A Scan body moves its invariants too.
TEST(HoistLoopInvariantsTest, ScanBodies) {
  ir::Model m = NewModel();
  G top(m.graph.get());
  top.In("xs", DType::kFloat32, std::vector<int64_t>{4, 3});
  top.In("w", DType::kFloat32, std::vector<int64_t>{3});
  top.In("s0", DType::kFloat32, std::vector<int64_t>{3});
  auto body = Graph("body");
  G b(body.get());
  b.In("s", DType::kFloat32, std::vector<int64_t>{3});
  b.In("x", DType::kFloat32, std::vector<int64_t>{3});
  b.N("Exp", {"w"}, {"ew"});
  b.N("Mul", {"x", "ew"}, {"xw"});
  b.N("Add", {"s", "xw"}, {"s_next"});
  b.N("Identity", {"s_next"}, {"y"});
  b.Out("s_next", DType::kFloat32);
  b.Out("y", DType::kFloat32);
  ir::Node* scan = top.N("Scan", {"s0", "xs"}, {"sT", "ys"}, {ir::Attribute::Int("num_scan_inputs", 1)});
  scan->SetAttribute(ir::Attribute::GraphValue("body", std::move(body)));
  top.Out("sT", DType::kFloat32);
  top.Out("ys", DType::kFloat32);
  const std::vector<std::string> ops = RunBothWays(
      m, {Named(Floats({4, 3}, -1, 0.2f), "xs"), Named(Floats({3}, -0.5f, 0.5f), "w"), Named(Floats({3}, 0, 1), "s0")});
  EXPECT_EQ(Count(ops, "0:Exp"), 1);
  EXPECT_EQ(Count(ops, "1:Exp"), 0);
}

// An inner loop's Cast of a value from outside the outer loop leaves both; one reading the outer loop's state leaves
// the inner loop only. Two sibling loops move values both named "Wc" (the second gets a new name). An If in a body
// reads a moved value by its name.
TEST(HoistLoopInvariantsTest, NestedLoopsSiblingLoopsAndSubgraphsOfTheBody) {
  ir::Model m = NewModel();
  G top(m.graph.get());
  top.In("W", DType::kFloat32, std::vector<int64_t>{2, 3});
  top.In("c", DType::kBool, std::vector<int64_t>{});
  top.N("Constant", {}, {"M"}, {Value(I64(2))});
  top.N("Constant", {}, {"h0"}, {Value(Floats({2, 3}, 0.5f, -0.1f))});
  // Outer loop: inner loop (h'' = h' * Abs(W) * Sigmoid(h_outer)), then h' = Tanh(h'').
  auto inner = LoopBody("inner");
  {
    G b(inner.get());
    b.N("Abs", {"W"}, {"aw"});
    b.N("Sigmoid", {"h_outer"}, {"sh"});
    b.N("Mul", {"h", "aw"}, {"p"});
    b.N("Mul", {"p", "sh"}, {"h_in_next"});
    EndBody(inner.get(), "h_in_next");
  }
  auto outer = LoopBody("outer");
  {
    G b(outer.get());
    b.N("Identity", {"h"}, {"h_outer"});
    ir::Node* l = b.N("Loop", {"M", "", "h"}, {"h_inner"});
    l->SetAttribute(ir::Attribute::GraphValue("body", std::move(inner)));
    b.N("Tanh", {"h_inner"}, {"h_next"});
    EndBody(outer.get(), "h_next");
  }
  ir::Node* l1 = top.N("Loop", {"M", "", "h0"}, {"h1"});
  l1->SetAttribute(ir::Attribute::GraphValue("body", std::move(outer)));
  // Two sibling loops, each with a body value "Wc" = Cos(W); the first's body reads it in an If.
  for (int k = 0; k < 2; ++k) {
    auto body = LoopBody("sibling" + std::to_string(k));
    G b(body.get());
    b.N("Cos", {"W"}, {"Wc"});
    if (k == 1) {
      b.N("Add", {"h", "Wc"}, {"h_next"});
    } else {
      auto then_g = Graph("then");
      G t(then_g.get());
      t.N("Mul", {"h", "Wc"}, {"prod"});
      t.Out("prod", DType::kFloat32);
      auto else_g = Graph("else");
      G e(else_g.get());
      e.N("Sub", {"h", "Wc"}, {"diff"});
      e.Out("diff", DType::kFloat32);
      ir::Node* n = b.N("If", {"c"}, {"h_next"});
      n->SetAttribute(ir::Attribute::GraphValue("then_branch", std::move(then_g)));
      n->SetAttribute(ir::Attribute::GraphValue("else_branch", std::move(else_g)));
    }
    EndBody(body.get(), "h_next");
    ir::Node* l = top.N("Loop", {"M", "", "h1"}, {"y" + std::to_string(k)});
    l->SetAttribute(ir::Attribute::GraphValue("body", std::move(body)));
    top.Out("y" + std::to_string(k), DType::kFloat32);
  }
  for (bool c : {false, true}) {
    ir::Tensor cond(DType::kBool, {});
    cond.mutable_values<uint8_t>()[0] = c ? 1 : 0;
    const std::vector<std::string> ops =
        RunBothWays(m, {Named(Floats({2, 3}, -0.5f, 0.2f), "W"), Named(std::move(cond), "c")});
    EXPECT_EQ(Count(ops, "0:Abs"), 1) << "out of both loops";
    EXPECT_EQ(Count(ops, "1:Sigmoid"), 1) << "out of the inner loop only";
    EXPECT_EQ(Count(ops, "2:Sigmoid") + Count(ops, "2:Abs"), 0);
    EXPECT_EQ(Count(ops, "0:Cos"), 2) << "both siblings' Cos";
    EXPECT_EQ(Count(ops, "1:Cos"), 0);
  }
  // The first sibling's Cos keeps its name (its If reads it by name), the second one's is renamed.
  ir::Model hoisted = Copy(m);
  bool changed = false;
  ASSERT_TRUE(exec::HoistLoopInvariants(*hoisted.graph, &changed).ok());
  EXPECT_TRUE(changed);
  int named = 0;
  for (const ir::Node* n : hoisted.graph->nodes()) {
    if (n->op_type() == "Cos") named += n->output(0)->name() == "Wc";
  }
  EXPECT_EQ(named, 1);
}

// A loop whose body reads no enclosing value through a hoistable op: nothing changes.
TEST(HoistLoopInvariantsTest, NothingToMove) {
  ir::Model m = NewModel();
  G top(m.graph.get());
  top.In("x", DType::kFloat32, std::vector<int64_t>{2, 3});
  top.N("Constant", {}, {"M"}, {Value(I64(2))});
  auto body = LoopBody("body");
  G b(body.get());
  b.N("Add", {"h", "x"}, {"h_next"});
  EndBody(body.get(), "h_next");
  ir::Node* l = top.N("Loop", {"M", "", "x"}, {"y"});
  l->SetAttribute(ir::Attribute::GraphValue("body", std::move(body)));
  top.Out("y", DType::kFloat32);
  bool changed = true;
  ASSERT_TRUE(exec::HoistLoopInvariants(*m.graph, &changed).ok());
  EXPECT_FALSE(changed);
}

}  // namespace
}  // namespace onnxamp::testing
