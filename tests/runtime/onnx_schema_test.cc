// The ONNX schema checks (runtime/ir/onnx_schema.h): each kind of finding on a hand-built model, what must pass
// (omitted optional inputs, variadic inputs, deprecated ops, other domains), subgraphs, and the version lookup.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/ir/graph.h"
#include "runtime/ir/model.h"
#include "runtime/ir/onnx_schema.h"

namespace onnxamp::ir {
namespace {

// x [2, 3] -> (nodes added by the test) -> y.
class SchemaModel {
 public:
  explicit SchemaModel(int64_t opset = 17) {
    model.opset_imports = {{"", opset}};
    model.graph->set_name("main");
    x = model.graph->CreateValue("x");
    x->set_type(ValueType::Tensor(DType::kFloat32, Shape{Dim::Value(2), Dim::Value(3)}));
    model.graph->AddInput(x);
  }
  Node* Add(const std::string& op, std::vector<Value*> inputs, int outputs = 1, const std::string& domain = "") {
    std::vector<Value*> outs;
    for (int i = 0; i < outputs; ++i) outs.push_back(model.graph->CreateValue(StrCat("v", values_++)));
    Node* n = model.graph->AddNode(op, std::move(inputs), outs, op + "_node");
    n->set_domain(domain);
    return n;
  }
  // The findings' "where: message" lines.
  std::vector<std::string> Findings() const {
    std::vector<std::string> out;
    for (const Finding& f : CheckOnnxSchemas(model)) out.push_back(f.ToString());
    return out;
  }

  Model model;
  Value* x = nullptr;

 private:
  int values_ = 0;
};

TEST(OnnxSchemaTest, ValidNodesPass) {
  SchemaModel m;
  m.Add("Relu", {m.x});
  m.Add("Clip", {m.x, nullptr, m.x});  // the optional min omitted, max given
  m.Add("Concat", {m.x, m.x, m.x, m.x, m.x})->SetAttribute(Attribute::Int("axis", 0));
  m.Add("Transpose", {m.x})->SetAttribute(Attribute::Ints("perm", {1, 0}));
  m.Add("Dropout", {m.x}, 2);  // the optional mask output
  m.Add("MyOp", {m.x, m.x}, 3, "com.example")->SetAttribute(Attribute::Float("anything", 1));
  EXPECT_EQ(m.Findings(), std::vector<std::string>{});
}

TEST(OnnxSchemaTest, ArityRequiredInputsAndAttributes) {
  SchemaModel m;
  m.Add("Relu", {m.x, m.x});
  m.Add("Gemm", {m.x});
  m.Add("Gemm", {m.x, nullptr})->set_name("gemm_b");
  m.Add("Concat", {})->SetAttribute(Attribute::Int("axis", 0));
  m.Add("Relu", {m.x}, 2)->set_name("relu_two");
  m.Add("Cast", {m.x});
  m.Add("Transpose", {m.x})->SetAttribute(Attribute::Floats("perm", {1, 0}));
  m.Add("Sigmoid", {m.x})->SetAttribute(Attribute::Int("alpha", 1));
  EXPECT_EQ(m.Findings(),
            (std::vector<std::string>{
                "graph 'main' node Relu 'Relu_node': 2 inputs; Relu-14 takes 1",
                "graph 'main' node Gemm 'Gemm_node': 1 input; Gemm-13 takes 2 to 3",
                "graph 'main' node Gemm 'gemm_b': input 1 is required by Gemm-13",
                "graph 'main' node Concat 'Concat_node': 0 inputs; Concat-13 takes 1 or more",
                "graph 'main' node Relu 'relu_two': 2 outputs; Relu-14 has 1",
                "graph 'main' node Cast 'Cast_node': attribute 'to' is required by Cast-13",
                "graph 'main' node Transpose 'Transpose_node': attribute 'perm' is floats; Transpose-13 takes ints",
                "graph 'main' node Sigmoid 'Sigmoid_node': attribute 'alpha' is not one of Sigmoid-13's"}));
}

// The opset decides the version: an op ONNX added later, or never, is a finding; a deprecated version only exists.
TEST(OnnxSchemaTest, OpsTheOpsetLacksAndDeprecatedOps) {
  SchemaModel m(17);
  m.Add("Gelu", {m.x});
  m.Add("Frobnicate", {m.x});
  EXPECT_EQ(m.Findings(),
            (std::vector<std::string>{
                "graph 'main' node Gelu 'Gelu_node': Gelu is in ONNX from opset 20; the model imports opset 17",
                "graph 'main' node Frobnicate 'Frobnicate_node': ONNX has no op Frobnicate (ai.onnx)"}));
  SchemaModel old(10);
  old.Add("Upsample", {old.x, old.x})->SetAttribute(Attribute::String("mode", "nearest"));
  EXPECT_EQ(old.Findings(), std::vector<std::string>{});
  EXPECT_EQ(OnnxSchemaVersion("Gelu", 23), 20);
  EXPECT_EQ(OnnxSchemaVersion("Gelu", 19), 0);
  EXPECT_EQ(OnnxSchemaVersion("Relu", 13), 13);
  EXPECT_EQ(OnnxSchemaVersion("Relu", 12), 6);
}

TEST(OnnxSchemaTest, SubgraphNodesAreChecked) {
  SchemaModel m(17);
  auto branch = [&](const std::string& name, bool bad) {
    auto g = std::make_unique<Graph>();
    g->set_name(name);
    Value* c = g->CreateValue(name + "_c");
    g->AddNode("Constant", {}, {c}, name + "_const")
        ->SetAttribute(Attribute::TensorValue("value", Tensor(DType::kFloat32, {2})));
    Value* out = g->CreateValue(name + "_y");
    g->AddNode("Relu", bad ? std::vector<Value*>{c, c} : std::vector<Value*>{c}, {out}, name + "_relu");
    g->AddOutput(out);
    return g;
  };
  Value* cond = m.model.graph->CreateValue("cond");
  cond->set_type(ValueType::Tensor(DType::kBool, Shape{}));
  m.model.graph->AddInput(cond);
  Node* n = m.Add("If", {cond});
  n->SetAttribute(Attribute::GraphValue("then_branch", branch("then", true)));
  n->SetAttribute(Attribute::GraphValue("else_branch", branch("else", false)));
  EXPECT_EQ(m.Findings(), std::vector<std::string>{"graph 'main' node If 'If_node' / subgraph 'then' node Relu "
                                                   "'then_relu': 2 inputs; Relu-14 takes 1"});
}

}  // namespace
}  // namespace onnxamp::ir
