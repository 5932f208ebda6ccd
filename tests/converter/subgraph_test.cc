// Converter on If and Loop bodies: casts land in the graph of their consumers, subgraph inputs and outputs
// keep the types their node binds, and the result passes the ONNX checker.
#include <gtest/gtest.h>

#include "converter/convert.h"
#include "tests/converter/converter_test_util.h"

namespace onnxamp::converter::testing {
namespace {

std::unique_ptr<ir::Graph> Branch(const std::string& name, const std::string& op, const std::string& out) {
  auto g = std::make_unique<ir::Graph>(name);
  Builder b(g.get());
  if (op == "MatMul") {
    b.Node("MatMul", {"x", "x"}, {out});
  } else {
    b.Node(op, {"x"}, {out});
  }
  b.Output(out, DType::kFloat32, {2, 2});
  return g;
}

// y = If(c, then: MatMul(x, x), else: Softmax(x)); out = Relu(y).
ir::Model IfModel() {
  ir::Model m = NewModel();
  Builder b(m.graph.get());
  b.Input("x", DType::kFloat32, {2, 2});
  b.Input("c", DType::kBool, {});
  ir::Node* n = b.Node("If", {"c"}, {"y"}, {}, "if");
  n->SetAttribute(ir::Attribute::GraphValue("then_branch", Branch("then", "MatMul", "t")));
  n->SetAttribute(ir::Attribute::GraphValue("else_branch", Branch("else", "Softmax", "e")));
  b.Node("Relu", {"y"}, {"out"});
  b.Output("out", DType::kFloat32, {2, 2});
  return m;
}

TEST(SubgraphTest, IfBranchesGetTheirOwnCasts) {
  ir::Model m = IfModel();
  ConvertReport report;
  ASSERT_TRUE(ConvertModel(m, ConvertOptions{}, &report).ok());
  ASSERT_TRUE(ir::Verify(m).ok()) << ir::Verify(m).message();
  const ir::Graph& g = *m.graph;
  ir::Node* if_node = NodesOf(g, "If")[0];
  const ir::Graph* then_g = if_node->FindAttribute("then_branch")->g.get();
  const ir::Graph* else_g = if_node->FindAttribute("else_branch")->g.get();
  // Then: MatMul reads the fp16 x directly and its output is cast back to the If's float output.
  ir::Node* mm = NodesOf(*then_g, "MatMul")[0];
  EXPECT_EQ(mm->input(0)->name(), "x");
  EXPECT_EQ(NodesOf(*then_g, "Cast").size(), 1u);
  EXPECT_EQ(then_g->outputs()[0]->type().elem_type(), DType::kFloat32);
  // Else: Softmax reads x through a Cast to float inside the branch.
  ir::Node* sm = NodesOf(*else_g, "Softmax")[0];
  ASSERT_NE(sm->input(0)->producer(), nullptr);
  EXPECT_EQ(sm->input(0)->producer()->graph(), else_g);
  EXPECT_EQ(sm->input(0)->type().elem_type(), DType::kFloat32);
  EXPECT_EQ(ElemType(g, "x"), DType::kFloat16);
  EXPECT_EQ(ElemType(g, "y"), DType::kFloat32);
  EXPECT_EQ(OnnxCheck(m), "");
  EXPECT_TRUE(IsConverted(m, ConvertOptions{}));
}

// v = Loop(M=3, cond=true, v0=x) { v_out = Add(MatMul(v_in, W), v_in) }; y = Relu(v).
ir::Model LoopModel() {
  ir::Model m = NewModel();
  Builder b(m.graph.get());
  b.Input("x", DType::kFloat32, {2, 2});
  b.Init("W", {2, 2}, {0.5f, 0.25f, -0.5f, 1.0f});
  b.InitInt64("M", {3});
  ir::Value* cond = m.graph->CreateValue("cond");
  ir::Tensor t(DType::kBool, {});
  t.mutable_values<uint8_t>()[0] = 1;
  cond->set_type(ir::ValueType::Tensor(DType::kBool, ir::Shape{}));
  m.graph->SetInitializer(cond, std::move(t));
  auto body = std::make_unique<ir::Graph>("body");
  Builder bb(body.get());
  bb.Input("i", DType::kInt64, {});
  bb.Input("cond_in", DType::kBool, {});
  bb.Input("v_in", DType::kFloat32, {2, 2});
  bb.Node("Identity", {"cond_in"}, {"cond_out"});
  bb.Node("MatMul", {"v_in", "W"}, {"p"});
  bb.Node("Add", {"p", "v_in"}, {"v_out"});
  bb.Output("cond_out", DType::kBool, {});
  bb.Output("v_out", DType::kFloat32, {2, 2});
  ir::Node* loop = b.Node("Loop", {"", "cond", "x"}, {"v"}, {}, "loop");
  loop->SetInput(0, m.graph->FindValue("M"));
  loop->SetAttribute(ir::Attribute::GraphValue("body", std::move(body)));
  b.Node("Relu", {"v"}, {"y"});
  b.Output("y", DType::kFloat32, {2, 2});
  return m;
}

TEST(SubgraphTest, LoopCarriedValuesKeepTheirType) {
  ir::Model m = LoopModel();
  ConvertReport report;
  Status st = ConvertModel(m, ConvertOptions{}, &report);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_TRUE(ir::Verify(m).ok()) << ir::Verify(m).message();
  const ir::Graph& g = *m.graph;
  ir::Node* loop = NodesOf(g, "Loop")[0];
  const ir::Graph* body = loop->FindAttribute("body")->g.get();
  EXPECT_EQ(body->inputs()[2]->type().elem_type(), DType::kFloat32);
  EXPECT_EQ(body->outputs()[1]->type().elem_type(), DType::kFloat32);
  EXPECT_EQ(loop->input(2)->type().elem_type(), DType::kFloat32);  // x (fp16) is cast up in the main graph
  EXPECT_EQ(testing::ProducerOp(loop, 2), "Cast");
  ir::Node* mm = NodesOf(*body, "MatMul")[0];
  EXPECT_EQ(mm->input(0)->type().elem_type(), DType::kFloat16);
  EXPECT_EQ(mm->input(0)->producer()->graph(), body);  // its Cast lives in the body
  // W is read by the body by name: it keeps its type in the main graph.
  EXPECT_EQ(g.FindValue("W")->initializer()->dtype(), DType::kFloat32);
  EXPECT_EQ(OnnxCheck(m), "");
  EXPECT_TRUE(IsConverted(m, ConvertOptions{}));
}

// s_final, ys = Scan(s0, xs) { p = MatMul(x_e, W); s_out = Add(s_in, p); y_e = Identity(s_out) }.
TEST(SubgraphTest, ScanStateAndScanOutputsKeepTheirType) {
  ir::Model m = NewModel();
  Builder b(m.graph.get());
  b.Input("s0", DType::kFloat32, {2});
  b.Input("xs", DType::kFloat32, {3, 2});
  b.Init("W", {2, 2}, {1.0f, 0.5f, -0.5f, 2.0f});
  auto body = std::make_unique<ir::Graph>("scan_body");
  Builder bb(body.get());
  bb.Input("s_in", DType::kFloat32, {2});
  bb.Input("x_e", DType::kFloat32, {2});
  bb.Node("MatMul", {"x_e", "W"}, {"p"});
  bb.Node("Add", {"s_in", "p"}, {"s_out"});
  bb.Node("Identity", {"s_out"}, {"y_e"});
  bb.Output("s_out", DType::kFloat32, {2});
  bb.Output("y_e", DType::kFloat32, {2});
  ir::Node* scan = b.Node("Scan", {"s0", "xs"}, {"s_final", "ys"}, {ir::Attribute::Int("num_scan_inputs", 1)}, "scan");
  scan->SetAttribute(ir::Attribute::GraphValue("body", std::move(body)));
  b.Output("s_final", DType::kFloat32, {2});
  b.Output("ys", DType::kFloat32, {3, 2});
  ConvertReport report;
  Status st = ConvertModel(m, ConvertOptions{}, &report);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_TRUE(ir::Verify(m).ok()) << ir::Verify(m).message();
  const ir::Graph& g = *m.graph;
  ir::Node* sc = NodesOf(g, "Scan")[0];
  const ir::Graph* sb = sc->FindAttribute("body")->g.get();
  for (const ir::Value* v : sb->inputs()) EXPECT_EQ(v->type().elem_type(), DType::kFloat32) << v->name();
  for (const ir::Value* v : sb->outputs()) EXPECT_EQ(v->type().elem_type(), DType::kFloat32) << v->name();
  EXPECT_EQ(NodesOf(*sb, "MatMul")[0]->input(0)->type().elem_type(), DType::kFloat16);
  EXPECT_EQ(ElemType(g, "s_final"), DType::kFloat16);  // graph outputs: cast after the Scan
  EXPECT_EQ(OnnxCheck(m), "");
  EXPECT_TRUE(IsConverted(m, ConvertOptions{}));
}

}  // namespace
}  // namespace onnxamp::converter::testing
