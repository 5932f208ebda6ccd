// IR tests: building graphs, use lists, rewiring, topological order, subgraphs, cloning.
#include <gtest/gtest.h>

#include "runtime/ir/graph.h"
#include "runtime/ir/model.h"
#include "runtime/ir/verify.h"

namespace onnxamp::ir {
namespace {

// y = Relu(Add(x, b)); z = Mul(y, y)
struct SmallGraph {
  Graph g{"small"};
  Value* x = g.CreateValue("x");
  Value* b = g.CreateValue("b");
  Value* s = g.CreateValue("s");
  Value* y = g.CreateValue("y");
  Value* z = g.CreateValue("z");
  Node* add = nullptr;
  Node* relu = nullptr;
  Node* mul = nullptr;

  SmallGraph() {
    x->set_type(ValueType::Tensor(DType::kFloat32, Shape{Dim::Param("batch"), Dim::Value(4)}));
    g.AddInput(x);
    g.SetInitializer(b, Tensor(DType::kFloat32, {4}));
    add = g.AddNode("Add", {x, b}, {s}, "add");
    relu = g.AddNode("Relu", {s}, {y}, "relu");
    mul = g.AddNode("Mul", {y, y}, {z}, "mul");
    g.AddOutput(z);
  }
};

TEST(GraphTest, ProducersAndUses) {
  SmallGraph t;
  EXPECT_EQ(t.s->producer(), t.add);
  EXPECT_EQ(t.s->producer_index(), 0);
  ASSERT_EQ(t.y->uses().size(), 2u);
  EXPECT_EQ(t.y->uses()[0], (Use{t.mul, 0}));
  EXPECT_EQ(t.y->uses()[1], (Use{t.mul, 1}));
  EXPECT_TRUE(t.x->is_graph_input());
  EXPECT_TRUE(t.z->is_graph_output());
  EXPECT_NE(t.b->initializer(), nullptr);
  EXPECT_EQ(t.b->initializer()->name(), "b");
  EXPECT_EQ(t.g.num_nodes(), 3u);
  EXPECT_TRUE(Verify(t.g).ok()) << Verify(t.g).message();
}

TEST(GraphTest, RewiringKeepsUseListsRight) {
  SmallGraph t;
  t.mul->SetInput(1, t.s);
  ASSERT_EQ(t.y->uses().size(), 1u);
  ASSERT_EQ(t.s->uses().size(), 2u);
  EXPECT_EQ(t.s->uses()[1], (Use{t.mul, 1}));
  t.add->RemoveInput(0);
  EXPECT_TRUE(t.x->uses().empty());
  ASSERT_EQ(t.b->uses().size(), 1u);
  EXPECT_EQ(t.b->uses()[0], (Use{t.add, 0}));  // index shifted down
  t.add->AddInput(t.x);
  EXPECT_EQ(t.x->uses()[0], (Use{t.add, 1}));
  EXPECT_TRUE(Verify(t.g).ok());
}

TEST(GraphTest, RemoveNodeDetachesEverything) {
  SmallGraph t;
  t.g.RemoveNode(t.mul);
  EXPECT_TRUE(t.y->uses().empty());
  EXPECT_EQ(t.z->producer(), nullptr);
  EXPECT_EQ(t.g.num_nodes(), 2u);
  // z is still a graph output with no definition now: the verifier says so.
  Status st = Verify(t.g);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("output 0 'z'"), std::string::npos) << st.message();
}

TEST(GraphTest, TopologicalSortKeepsValidOrderAndFixesInvalid) {
  SmallGraph t;
  auto order = t.g.TopologicalOrder();
  ASSERT_TRUE(order.ok());
  EXPECT_EQ((*order)[0], t.add);
  EXPECT_EQ((*order)[2], t.mul);
  t.g.MoveNodeBefore(t.mul, t.add);  // mul first: not topological
  ASSERT_TRUE(t.g.SortTopologically().ok());
  std::vector<Node*> nodes;
  for (Node* n : t.g.nodes()) nodes.push_back(n);
  EXPECT_EQ(nodes, (std::vector<Node*>{t.add, t.relu, t.mul}));
}

TEST(GraphTest, CycleIsReportedWithANode) {
  Graph g("cyclic");
  Value* a = g.CreateValue("a");
  Value* b = g.CreateValue("b");
  g.AddNode("Relu", {b}, {a}, "r1");
  g.AddNode("Relu", {a}, {b}, "r2");
  g.AddOutput(b);
  Status st = Verify(g);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("cycle"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("Relu 'r"), std::string::npos) << st.message();
}

TEST(GraphTest, UndefinedInputIsReported) {
  Graph g("g");
  Value* ghost = g.CreateValue("ghost");
  Value* y = g.CreateValue("y");
  g.AddNode("Neg", {ghost}, {y}, "neg");
  g.AddOutput(y);
  Status st = Verify(g);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("node Neg 'neg'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("'ghost' is not produced"), std::string::npos) << st.message();
}

TEST(GraphTest, ProducedValueThatIsAlsoAnInputIsReported) {
  Graph g("g");
  Value* x = g.CreateValue("x");
  Value* y = g.CreateValue("y");
  g.AddInput(x);
  g.AddInput(y);
  g.AddNode("Neg", {x}, {y}, "neg");
  g.AddOutput(y);
  Status st = Verify(g);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("also a graph input"), std::string::npos) << st.message();
}

TEST(GraphTest, InitializerTypeMismatchIsReported) {
  Graph g("g");
  Value* w = g.CreateValue("w");
  w->set_type(ValueType::Tensor(DType::kFloat16, Shape{Dim::Value(2), Dim::Value(3)}));
  g.SetInitializer(w, Tensor(DType::kFloat32, {2, 4}));
  g.AddOutput(w);
  std::vector<Finding> findings = VerifyAll(g);
  ASSERT_EQ(findings.size(), 2u);
  EXPECT_NE(findings[0].message.find("float16"), std::string::npos);
  EXPECT_NE(findings[1].message.find("dim 1 = 3"), std::string::npos);
}

// If node whose then-branch reads `x` from the enclosing graph.
struct IfGraph {
  Graph g{"main"};
  Value* cond = g.CreateValue("cond");
  Value* x = g.CreateValue("x");
  Value* pre = g.CreateValue("pre");
  Value* out = g.CreateValue("out");
  Node* if_node = nullptr;

  IfGraph() {
    g.AddInput(cond);
    g.AddInput(x);
    g.AddNode("Relu", {x}, {pre}, "pre");
    if_node = g.AddNode("If", {cond}, {out}, "if");
    auto then_g = std::make_unique<Graph>("then");
    Value* captured = then_g->CreateOuterScopeValue("pre");
    Value* r = then_g->CreateValue("then_out");
    then_g->AddNode("Neg", {captured}, {r}, "neg");
    then_g->AddOutput(r);
    auto else_g = std::make_unique<Graph>("else");
    Value* captured_x = else_g->CreateOuterScopeValue("x");
    else_g->AddOutput(captured_x);
    if_node->SetAttribute(Attribute::GraphValue("then_branch", std::move(then_g)));
    if_node->SetAttribute(Attribute::GraphValue("else_branch", std::move(else_g)));
    g.AddOutput(out);
  }
};

TEST(GraphTest, SubgraphsKnowTheirParentAndResolveOuterValues) {
  IfGraph t;
  std::vector<Graph*> subs = t.if_node->subgraphs();
  ASSERT_EQ(subs.size(), 2u);
  EXPECT_EQ(subs[0]->parent_node(), t.if_node);
  EXPECT_EQ(subs[0]->parent(), &t.g);
  EXPECT_EQ(subs[0]->ResolveValue("pre"), t.pre);
  EXPECT_TRUE(Verify(t.g).ok()) << Verify(t.g).message();
  std::vector<Value*> implicit = t.g.ImplicitInputs(t.if_node);
  EXPECT_EQ(implicit, (std::vector<Value*>{t.cond, t.pre, t.x}));
}

TEST(GraphTest, TopologicalOrderSeesDependenciesThroughSubgraphs) {
  IfGraph t;
  Node* pre_node = t.pre->producer();
  t.g.MoveNodeBefore(t.if_node, pre_node);  // If now reads `pre` (inside then_branch) before it exists
  ASSERT_TRUE(t.g.SortTopologically().ok());
  EXPECT_EQ(*t.g.nodes().begin(), pre_node);
}

TEST(GraphTest, DanglingOuterReferenceIsReported) {
  IfGraph t;
  Graph* then_g = t.if_node->subgraphs()[0];
  Value* bad = then_g->CreateOuterScopeValue("nowhere");
  Value* r2 = then_g->CreateValue("r2");
  then_g->AddNode("Neg", {bad}, {r2});
  Status st = Verify(t.g);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("'nowhere'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("subgraph 'then'"), std::string::npos) << st.message();
}

TEST(GraphTest, RenameUpdatesOuterReferences) {
  IfGraph t;
  ASSERT_TRUE(t.g.RenameValue(t.pre, "pre_renamed").ok());
  Graph* then_g = t.if_node->subgraphs()[0];
  EXPECT_NE(then_g->FindValue("pre_renamed"), nullptr);
  EXPECT_EQ(then_g->FindValue("pre"), nullptr);
  EXPECT_TRUE(Verify(t.g).ok()) << Verify(t.g).message();
  EXPECT_FALSE(t.g.RenameValue(t.pre, "x").ok());  // taken
}

TEST(GraphTest, UniqueNameAvoidsNamesInSubgraphs) {
  IfGraph t;
  EXPECT_EQ(t.g.UniqueName("fresh"), "fresh");
  EXPECT_EQ(t.g.UniqueName("then_out"), "then_out_1");
  EXPECT_EQ(t.g.UniqueName("x"), "x_1");
}

TEST(GraphTest, CloneIsDeepAndEquivalent) {
  IfGraph t;
  std::unique_ptr<Graph> copy = t.g.Clone();
  ASSERT_TRUE(Verify(*copy).ok()) << Verify(*copy).message();
  EXPECT_EQ(copy->num_nodes(), t.g.num_nodes());
  Node* if_copy = copy->FindValue("out")->producer();
  ASSERT_NE(if_copy, nullptr);
  ASSERT_EQ(if_copy->subgraphs().size(), 2u);
  EXPECT_NE(if_copy->subgraphs()[0], t.if_node->subgraphs()[0]);
  EXPECT_EQ(if_copy->subgraphs()[0]->parent_node(), if_copy);
  EXPECT_EQ(copy->inputs().size(), 2u);
  // Changing the copy leaves the original alone.
  copy->RemoveNode(if_copy);
  EXPECT_EQ(t.g.num_nodes(), 2u);
}

TEST(GraphTest, AttributeGetters) {
  Graph g;
  Value* x = g.CreateValue("x");
  Value* y = g.CreateValue("y");
  g.AddInput(x);
  Node* n = g.AddNode("Transpose", {x}, {y});
  n->SetAttribute(Attribute::Ints("perm", {1, 0}));
  n->SetAttribute(Attribute::Float("alpha", 0.5f));
  n->SetAttribute(Attribute::Int("axis", 3));
  n->SetAttribute(Attribute::Int("axis", 4));  // replaces
  EXPECT_EQ(n->attributes().size(), 3u);
  EXPECT_EQ(n->GetInts("perm"), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(n->GetInt("axis", 0), 4);
  EXPECT_EQ(n->GetInt("missing", 7), 7);
  EXPECT_FLOAT_EQ(n->GetFloat("alpha", 0), 0.5f);
  EXPECT_EQ(n->GetString("alpha", "d"), "d");  // wrong kind: default
  EXPECT_TRUE(n->RemoveAttribute("alpha"));
  EXPECT_FALSE(n->RemoveAttribute("alpha"));
  EXPECT_EQ(n->Describe(), "Transpose (unnamed, output 'y')");
}

TEST(ModelTest, OpsetLookupTreatsDefaultDomainSpellingsAlike) {
  Model m;
  m.opset_imports = {{"ai.onnx", 17}, {"com.microsoft", 1}};
  EXPECT_EQ(m.OpsetVersion(""), 17);
  EXPECT_EQ(m.OpsetVersion("ai.onnx"), 17);
  EXPECT_EQ(m.OpsetVersion("com.microsoft"), 1);
  EXPECT_EQ(m.OpsetVersion("ai.onnx.ml"), 0);
  m.SetOpsetVersion("", 18);
  EXPECT_EQ(m.opset_imports[0].version, 18);
  m.SetOpsetVersion("ai.onnx.ml", 3);
  EXPECT_EQ(m.opset_imports.size(), 3u);
}

TEST(ModelTest, VerifierFlagsDuplicateOpsetAndMissingImport) {
  Model m;
  m.opset_imports = {{"", 17}, {"ai.onnx", 16}};
  Value* x = m.graph->CreateValue("x");
  Value* y = m.graph->CreateValue("y");
  m.graph->AddInput(x);
  m.graph->AddNode("Custom", {x}, {y}, "c", "com.example");
  m.graph->AddOutput(y);
  std::vector<Finding> findings = VerifyAll(m);
  ASSERT_EQ(findings.size(), 2u);
  EXPECT_TRUE(findings[0].is_error());
  EXPECT_NE(findings[0].message.find("imported twice"), std::string::npos);
  EXPECT_FALSE(findings[1].is_error());
  EXPECT_NE(findings[1].message.find("com.example"), std::string::npos);
}

}  // namespace
}  // namespace onnxamp::ir
