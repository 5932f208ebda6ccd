// InspectModel and its text rendering, on models built in memory with the IR API.
#include "tools/onnxamp/inspect.h"

#include <gtest/gtest.h>

#include <algorithm>

#include <memory>
#include <string>

#include "importer/model_io.h"
#include "runtime/ir/model.h"
#include "tests/tools/process_util.h"

namespace onnxamp::tools {
namespace {

using Json = nlohmann::ordered_json;
using ir::Dim;
using ir::ValueType;

ir::Value* AddInput(ir::Graph& g, const std::string& name, DType dtype, ir::Shape shape) {
  ir::Value* v = g.CreateValue(name);
  v->set_type(ValueType::Tensor(dtype, std::move(shape)));
  g.AddInput(v);
  return v;
}

ir::Value* AddInit(ir::Graph& g, const std::string& name, DType dtype, std::vector<int64_t> dims) {
  ir::Value* v = g.CreateValue(name);
  g.SetInitializer(v, ir::Tensor(dtype, std::move(dims)));
  return v;
}

ir::Value* AddOp(ir::Graph& g, const std::string& op, std::vector<ir::Value*> inputs, const std::string& out) {
  ir::Value* y = g.CreateValue(out);
  g.AddNode(op, std::move(inputs), {y}, out);
  return y;
}

ir::Model BaseModel() {
  ir::Model m;
  m.ir_version = 9;
  m.opset_imports = {{"", 18}, {"com.example", 2}};
  m.producer_name = "test";
  m.producer_version = "1.2";
  return m;
}

// x -> Relu -> Relu -> Add(w) -> Mul(h) -> Add(b) -> y: Add 2, Relu 2, Mul 1.
ir::Model ChainModel() {
  ir::Model m = BaseModel();
  ir::Graph& g = *m.graph;
  ir::Value* x = AddInput(g, "x", DType::kFloat32, {Dim::Param("batch"), Dim::Value(8), Dim::Unknown()});
  ir::Value* w = AddInit(g, "w", DType::kFloat32, {8, 4});
  ir::Value* h = AddInit(g, "h", DType::kFloat16, {3});
  ir::Value* b = AddInit(g, "b", DType::kInt64, {2, 5});
  ir::Value* t = AddOp(g, "Relu", {x}, "r1");
  t = AddOp(g, "Relu", {t}, "r2");
  t = AddOp(g, "Add", {t, w}, "a1");
  t = AddOp(g, "Mul", {t, h}, "m1");
  t = AddOp(g, "Add", {t, b}, "y");
  t->set_type(ValueType::Tensor(DType::kFloat32, std::nullopt));
  g.AddOutput(t);
  return m;
}

TEST(InspectModelTest, ReportsHeaderSignatureAndSortedOpCounts) {
  const Json r = InspectModel(ChainModel());
  EXPECT_EQ(r["ir_version"], 9);
  EXPECT_EQ(r["producer"]["name"], "test");
  EXPECT_EQ(r["producer"]["version"], "1.2");
  ASSERT_EQ(r["opsets"].size(), 2u);
  EXPECT_EQ(r["opsets"][0]["domain"], "");
  EXPECT_EQ(r["opsets"][0]["version"], 18);
  EXPECT_EQ(r["opsets"][1]["domain"], "com.example");

  ASSERT_EQ(r["inputs"].size(), 1u);
  EXPECT_EQ(r["inputs"][0]["name"], "x");
  EXPECT_EQ(r["inputs"][0]["dtype"], "float");
  EXPECT_EQ(r["inputs"][0]["shape"], Json::parse(R"(["batch", 8, null])"));
  EXPECT_EQ(r["inputs"][0]["initializer"], false);
  EXPECT_EQ(r["outputs"][0]["shape"], nullptr);  // rank unknown
  EXPECT_EQ(r["outputs"][0]["type"], "tensor(float)[*]");

  EXPECT_EQ(r["nodes"]["total"], 5);
  // Count descending, then op type: Add 2, Relu 2, Mul 1.
  const Json& ops = r["nodes"]["by_op"];
  ASSERT_EQ(ops.size(), 3u);
  EXPECT_EQ(ops[0]["op_type"], "Add");
  EXPECT_EQ(ops[0]["count"], 2);
  EXPECT_EQ(ops[1]["op_type"], "Relu");
  EXPECT_EQ(ops[1]["count"], 2);
  EXPECT_EQ(ops[2]["op_type"], "Mul");
  EXPECT_EQ(ops[2]["count"], 1);
  EXPECT_EQ(r["subgraph_nodes"]["subgraphs"], 0);
  EXPECT_EQ(r["subgraph_nodes"]["total"], 0);
  EXPECT_TRUE(r["findings"].empty()) << r["findings"].dump();
}

TEST(InspectModelTest, CountsParametersByDType) {
  const Json r = InspectModel(ChainModel());
  const Json& p = r["parameters"];
  EXPECT_EQ(p["tensors"], 3);
  EXPECT_EQ(p["count"], 32 + 3 + 10);
  EXPECT_EQ(p["bytes"], 32 * 4 + 3 * 2 + 10 * 8);
  EXPECT_EQ(p["sparse_tensors"], 0);
  // by_dtype is ordered by ONNX dtype code: float (1), int64 (7), float16 (10).
  ASSERT_EQ(p["by_dtype"].size(), 3u);
  EXPECT_EQ(p["by_dtype"][0], Json::parse(R"({"dtype": "float", "tensors": 1, "count": 32, "bytes": 128})"));
  EXPECT_EQ(p["by_dtype"][1], Json::parse(R"({"dtype": "int64", "tensors": 1, "count": 10, "bytes": 80})"));
  EXPECT_EQ(p["by_dtype"][2], Json::parse(R"({"dtype": "float16", "tensors": 1, "count": 3, "bytes": 6})"));
  EXPECT_TRUE(r["external_data"].empty());
}

TEST(InspectModelTest, CountsSubgraphNodesSeparately) {
  ir::Model m = BaseModel();
  ir::Graph& g = *m.graph;
  ir::Value* cond = AddInput(g, "cond", DType::kBool, {});
  AddInput(g, "x", DType::kFloat32, {Dim::Value(4)});
  ir::Value* y = g.CreateValue("y");
  ir::Node* if_node = g.AddNode("If", {cond}, {y}, "if");
  for (const char* branch : {"then_branch", "else_branch"}) {
    auto sub = std::make_unique<ir::Graph>(branch);
    ir::Value* outer = sub->CreateOuterScopeValue("x");
    ir::Value* t = AddOp(*sub, "Neg", {outer}, std::string(branch) + "_neg");
    t = AddOp(*sub, "Abs", {t}, std::string(branch) + "_out");
    t->set_type(ValueType::Tensor(DType::kFloat32, ir::Shape{Dim::Value(4)}));
    sub->AddOutput(t);
    if_node->SetAttribute(ir::Attribute::GraphValue(branch, std::move(sub)));
  }
  y->set_type(ValueType::Tensor(DType::kFloat32, ir::Shape{Dim::Value(4)}));
  g.AddOutput(y);

  const Json r = InspectModel(m);
  EXPECT_EQ(r["nodes"]["total"], 1);
  EXPECT_EQ(r["nodes"]["by_op"][0]["op_type"], "If");
  EXPECT_EQ(r["subgraph_nodes"]["subgraphs"], 2);
  EXPECT_EQ(r["subgraph_nodes"]["total"], 4);
  const Json& ops = r["subgraph_nodes"]["by_op"];
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[0]["op_type"], "Abs");  // equal counts: by name
  EXPECT_EQ(ops[1]["op_type"], "Neg");
  EXPECT_TRUE(r["findings"].empty()) << r["findings"].dump();
  const std::string text = RenderInspectText(r, "");
  EXPECT_NE(text.find("subgraph nodes: 4 in 2 subgraphs"), std::string::npos) << text;
}

TEST(InspectModelTest, ReportsFunctionsAndVerifierFindings) {
  ir::Model m = ChainModel();
  ir::Function f;
  f.name = "MyRelu";
  f.domain = "com.example";
  f.opset_imports = {{"", 18}};
  f.body = std::make_unique<ir::Graph>("MyRelu");
  ir::Value* in = f.body->CreateValue("X");
  f.body->AddInput(in);
  ir::Value* out = AddOp(*f.body, "Relu", {in}, "Y");
  f.body->AddOutput(out);
  m.functions.push_back(std::move(f));
  // A node reading a value nothing defines.
  ir::Value* ghost = m.graph->CreateValue("ghost");
  ir::Value* z = AddOp(*m.graph, "Neg", {ghost}, "z");
  m.graph->AddOutput(z);

  const Json r = InspectModel(m);
  ASSERT_EQ(r["functions"].size(), 1u);
  EXPECT_EQ(r["functions"][0], Json::parse(R"({"name": "MyRelu", "domain": "com.example", "nodes": 1})"));
  ASSERT_FALSE(r["findings"].empty());
  EXPECT_NE(r["findings"].dump().find("ghost"), std::string::npos) << r["findings"].dump();
  const std::string text = RenderInspectText(r, "model.onnx");
  EXPECT_EQ(text.rfind("model.onnx\n", 0), 0u) << text;
  EXPECT_NE(text.find("com.example::MyRelu: 1 nodes"), std::string::npos) << text;
  EXPECT_NE(text.find("verifier: " + std::to_string(r["findings"].size()) + " findings"), std::string::npos) << text;
}

TEST(InspectModelTest, SizesExternalDataWithoutLoadingIt) {
  tools_test::TempDir dir;
  ir::Model m = ChainModel();
  AddInit(*m.graph, "big", DType::kFloat32, {256, 4});  // 4 KiB: external under kAlways
  importer::SaveOptions save;
  save.external_data = importer::ExternalDataMode::kAlways;
  save.external_data_file = "weights.bin";
  const std::string path = dir / "model.onnx";
  ASSERT_TRUE(importer::SaveModel(m, path, save).ok());

  importer::LoadOptions load;
  load.load_external_data = false;
  StatusOr<ir::Model> loaded = importer::LoadModel(path, load);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const Json r = InspectModel(*loaded);
  ASSERT_EQ(r["external_data"].size(), 1u);
  EXPECT_EQ(r["external_data"][0], Json::parse(R"({"location": "weights.bin", "tensors": 1, "bytes": 4096})"));
  EXPECT_EQ(r["parameters"]["tensors"], 4);
  EXPECT_EQ(r["parameters"]["count"], 32 + 3 + 10 + 1024);
  EXPECT_EQ(r["parameters"]["bytes"], 128 + 6 + 80 + 4096);
  const std::string text = RenderInspectText(r, "");
  EXPECT_NE(text.find("weights.bin: 1 tensors, 4.0 KiB"), std::string::npos) << text;
}

TEST(InspectModelTest, TextRenderingListsEverySection) {
  const std::string text = RenderInspectText(InspectModel(ChainModel()), "chain.onnx");
  for (const char* expected :
       {"chain.onnx\n", "ir_version: 9  producer: test 1.2\n", "opsets: ai.onnx=18 com.example=2\n", "inputs (1):\n",
        "  x  tensor(float)[batch,8,?]\n", "nodes: 5\n", "  Add   2\n", "  Relu  2\n", "  Mul   1\n",
        "parameters: 45 (214 B) in 3 initializers\n", "  float16: 3 (6 B) in 1 initializers\n", "external data: none\n",
        "functions: none\n", "verifier: no findings\n"}) {
    EXPECT_NE(text.find(expected), std::string::npos) << "missing '" << expected << "' in\n" << text;
  }
}

// Names come from the model: a line break or a terminal escape sequence in them is written as \xNN in the text
// report (the JSON one escapes them itself), so a hostile model can neither forge report lines nor drive the terminal.
TEST(InspectModelTest, TextRenderingEscapesControlBytes) {
  ir::Model m = ChainModel();
  m.producer_name = "evil\x1b[2J";
  ASSERT_TRUE(m.graph->RenameValue(m.graph->inputs()[0], "x\nverifier: no findings").ok());
  const std::string text = RenderInspectText(InspectModel(m), "m\x07.onnx");
  EXPECT_NE(text.find("m\\x07.onnx\n"), std::string::npos) << text;
  EXPECT_NE(text.find("producer: evil\\x1b[2J 1.2"), std::string::npos) << text;
  EXPECT_NE(text.find("  x\\x0averifier: no findings  tensor(float)"), std::string::npos) << text;
  for (char c : text) EXPECT_TRUE(c == '\n' || static_cast<unsigned char>(c) >= 0x20) << static_cast<int>(c);
  const std::string plain = RenderInspectText(InspectModel(ChainModel()), "m.onnx");
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), std::count(plain.begin(), plain.end(), '\n'));
}

TEST(InspectFormatTest, BytesAndCounts) {
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(1023), "1023 B");
  EXPECT_EQ(FormatBytes(1024), "1.0 KiB");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(201326592), "192.0 MiB");
  EXPECT_EQ(FormatBytes(uint64_t{3} << 40), "3.0 TiB");
  EXPECT_EQ(FormatCount(0), "0");
  EXPECT_EQ(FormatCount(999), "999");
  EXPECT_EQ(FormatCount(1000), "1,000");
  EXPECT_EQ(FormatCount(34186), "34,186");
  EXPECT_EQ(FormatCount(50343936), "50,343,936");
}

}  // namespace
}  // namespace onnxamp::tools
