// The onnxamp binary, run as a subprocess: inspect on the reference models, repack round trips, and the error
// contract (exit codes, one "error: " line on stderr, no output left behind).
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "importer/model_io.h"
#include "runtime/ir/model.h"
#include "tests/tools/process_util.h"

namespace onnxamp::tools_test {
namespace {

using Json = nlohmann::json;

struct ExpectedModel {
  std::string name;
  std::map<std::string, int> ops;  // op type -> count in the top-level graph
  int64_t parameters;
  Json input_shape;
  Json output_shape;
};

int64_t Linear(int64_t in, int64_t out) { return in * out + out; }

const std::vector<ExpectedModel>& Expected() {
  static const std::vector<ExpectedModel> models = {
      {"mlp", {{"Gemm", 2}, {"Relu", 1}}, 256 * 128 + 128 + 128 * 10 + 10, {"batch", 256}, {"batch", 10}},
      {"digits_mlp", {{"Gemm", 2}, {"Relu", 1}}, Linear(64, 128) + Linear(128, 10), {"batch", 64}, {"batch", 10}},
      {"cnn",
       {{"Conv", 6},
        {"BatchNormalization", 6},
        {"Relu", 5},
        {"Add", 2},
        {"MaxPool", 1},
        {"GlobalAveragePool", 1},
        {"Flatten", 1},
        {"Gemm", 1}},
       // conv weights (no bias), 4 tensors per BatchNormalization channel, the classifier.
       (3 * 16 * 9 + 16 * 16 * 9 * 2 + 16 * 32 * 9 + 32 * 32 * 9 + 16 * 32) + 4 * (16 * 3 + 32 * 3) + Linear(32, 10),
       {"batch", 3, 32, 32},
       {"batch", 10}},
      {"transformer",
       {{"Add", 11},
        {"MatMul", 9},
        {"Constant", 7},
        {"Reshape", 4},
        {"Transpose", 4},
        {"LayerNormalization", 3},
        {"Mul", 3},
        {"Div", 1},
        {"Erf", 1},
        {"Gather", 1},
        {"Softmax", 1}},
       // embeddings, 3 LayerNorms, q/k/v/proj, MLP, LM head without bias.
       128 * 64 + 32 * 64 + 3 * 2 * 64 + 4 * Linear(64, 64) + Linear(64, 256) + Linear(256, 64) + 64 * 128,
       {"batch", 32},
       {"batch", 32, 128}},
  };
  return models;
}

std::string ModelPath(const std::string& name) { return ModelsDir() + "/" + name + ".onnx"; }

// The process failed with `code`, printed nothing on stdout and exactly one "error: " line on stderr.
void ExpectOneLineError(const ProcessResult& r, int code, const std::string& mentions = "") {
  EXPECT_EQ(r.exit_code, code) << r.err;
  EXPECT_EQ(r.out, "");
  const std::vector<std::string> lines = Lines(r.err);
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_EQ(lines[0].rfind("error: ", 0), 0u) << lines[0];
  EXPECT_EQ(r.err.back(), '\n');
  if (!mentions.empty()) {
    EXPECT_NE(lines[0].find(mentions), std::string::npos) << lines[0];
  }
}

Json InspectJson(const std::string& path) {
  ProcessResult r = RunOnnxamp({"inspect", "--json", path});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  return Json::parse(r.out, nullptr, /*allow_exceptions=*/false);
}

// ---- inspect on the reference models

TEST(CliInspectTest, ExpectationsCoverEveryCheckedInModel) {
  std::vector<std::string> on_disk;
  for (const auto& e : std::filesystem::directory_iterator(ModelsDir())) {
    if (e.path().extension() == ".onnx") on_disk.push_back(e.path().stem().string());
  }
  std::sort(on_disk.begin(), on_disk.end());
  std::vector<std::string> expected;
  for (const ExpectedModel& m : Expected()) expected.push_back(m.name);
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(on_disk, expected);
}

class CliInspectModelTest : public ::testing::TestWithParam<ExpectedModel> {};

TEST_P(CliInspectModelTest, JsonReportsCounts) {
  const ExpectedModel& want = GetParam();
  const Json r = InspectJson(ModelPath(want.name));
  ASSERT_FALSE(r.is_discarded());
  EXPECT_EQ(r["file"], ModelPath(want.name));
  EXPECT_EQ(r["ir_version"], 8);
  EXPECT_EQ(r["producer"]["name"], "onnxamp");
  EXPECT_EQ(r["opsets"], Json::parse(R"([{"domain": "", "version": 17}])"));

  int total = 0;
  std::map<std::string, int> ops;
  for (const Json& op : r["nodes"]["by_op"]) {
    EXPECT_EQ(op["domain"], "");
    ops[op["op_type"].get<std::string>()] = op["count"].get<int>();
    total += op["count"].get<int>();
  }
  EXPECT_EQ(ops, want.ops);
  EXPECT_EQ(r["nodes"]["total"], total);
  EXPECT_EQ(r["subgraph_nodes"]["total"], 0);

  EXPECT_EQ(r["parameters"]["count"], want.parameters);
  EXPECT_EQ(r["parameters"]["bytes"], want.parameters * 4);
  ASSERT_EQ(r["parameters"]["by_dtype"].size(), 1u);
  EXPECT_EQ(r["parameters"]["by_dtype"][0]["dtype"], "float");

  ASSERT_EQ(r["inputs"].size(), 1u);
  EXPECT_EQ(r["inputs"][0]["shape"], want.input_shape);
  ASSERT_EQ(r["outputs"].size(), 1u);
  EXPECT_EQ(r["outputs"][0]["shape"], want.output_shape);
  EXPECT_EQ(r["outputs"][0]["name"], "logits");
  EXPECT_TRUE(r["external_data"].empty());
  EXPECT_TRUE(r["functions"].empty());
  EXPECT_TRUE(r["findings"].empty());
}

TEST_P(CliInspectModelTest, TextReportsCounts) {
  const ExpectedModel& want = GetParam();
  ProcessResult r = RunOnnxamp({"inspect", ModelPath(want.name)});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const std::vector<std::string> lines = Lines(r.out);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines[0], ModelPath(want.name));
  EXPECT_NE(r.out.find("opsets: ai.onnx=17\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("verifier: no findings\n"), std::string::npos) << r.out;
  for (const auto& [op, count] : want.ops) {
    bool found = false;
    for (const std::string& line : lines) {
      const size_t pos = line.find("  " + op + " ");
      if (pos == 0 && line.substr(line.find_last_of(' ') + 1) == std::to_string(count)) found = true;
    }
    EXPECT_TRUE(found) << op << " x" << count << " not listed in\n" << r.out;
  }
}

INSTANTIATE_TEST_SUITE_P(Models, CliInspectModelTest, ::testing::ValuesIn(Expected()),
                         [](const ::testing::TestParamInfo<ExpectedModel>& info) { return info.param.name; });

TEST(CliInspectTest, LargeGeneratedMlp) {
  TempDir dir;
  ProcessResult gen = RunProcess({GenModelsBinary(), dir.path().string(), "--only", "mlp4096"});
  ASSERT_EQ(gen.exit_code, 0) << gen.err;
  const Json r = InspectJson(dir / "mlp4096.onnx");
  ASSERT_FALSE(r.is_discarded());
  EXPECT_EQ(r["nodes"]["total"], 5);
  EXPECT_EQ(r["nodes"]["by_op"], Json::parse(R"([{"op_type": "Gemm", "domain": "", "count": 3},
                                                 {"op_type": "Relu", "domain": "", "count": 2}])"));
  EXPECT_EQ(r["parameters"]["count"], 3 * Linear(4096, 4096));
  EXPECT_EQ(r["inputs"][0]["shape"], Json::parse(R"(["batch", 4096])"));
}

// ---- repack

// Op types and names of the top-level nodes, in file order.
std::vector<std::string> NodeList(const ir::Model& m) {
  std::vector<std::string> out;
  for (const ir::Node* n : m.graph->nodes()) out.push_back(n->op_type() + " " + n->name());
  return out;
}

void ExpectSameModel(const std::string& a_path, const std::string& b_path) {
  StatusOr<ir::Model> a = importer::LoadModel(a_path);
  StatusOr<ir::Model> b = importer::LoadModel(b_path);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(NodeList(*a), NodeList(*b));
  ASSERT_EQ(a->graph->initializers().size(), b->graph->initializers().size());
  for (const ir::Value* v : a->graph->initializers()) {
    const ir::Value* w = b->graph->FindValue(v->name());
    ASSERT_TRUE(w && w->initializer()) << v->name();
    EXPECT_TRUE(v->initializer()->SameContents(*w->initializer())) << v->name();
  }
}

class CliRepackModelTest : public ::testing::TestWithParam<ExpectedModel> {};

TEST_P(CliRepackModelTest, RoundTripIsAFixedPoint) {
  TempDir dir;
  const std::string in = ModelPath(GetParam().name);
  const std::string out = dir / "out.onnx";
  ProcessResult r = RunOnnxamp({"repack", in, "-o", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  ASSERT_EQ(Lines(r.err).size(), 1u) << r.err;
  EXPECT_EQ(r.err.rfind("repack: " + in + " -> " + out, 0), 0u) << r.err;
  EXPECT_NE(r.err.find("no external data"), std::string::npos) << r.err;
  EXPECT_EQ(dir.List(), std::vector<std::string>{"out.onnx"});
  ExpectSameModel(in, out);
  // Our own files are already canonical: exporting what was imported gives the same bytes.
  EXPECT_TRUE(ReadWholeFile(in) == ReadWholeFile(out));
}

INSTANTIATE_TEST_SUITE_P(Models, CliRepackModelTest, ::testing::ValuesIn(Expected()),
                         [](const ::testing::TestParamInfo<ExpectedModel>& info) { return info.param.name; });

TEST(CliRepackTest, MovesWeightsToExternalDataAndBack) {
  TempDir dir;
  const std::string ext = dir / "ext.onnx";
  ProcessResult r = RunOnnxamp({"repack", ModelPath("mlp"), "-o", ext, "--external-data", "always"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("external data ext.onnx.data (2 tensors"), std::string::npos) << r.err;
  EXPECT_EQ(dir.List(), (std::vector<std::string>{"ext.onnx", "ext.onnx.data"}));
  ExpectSameModel(ModelPath("mlp"), ext);

  // Weights of 1 KiB or more went out: fc1.weight (128 KiB) and fc2.weight (5 KiB); the biases stayed inline.
  const Json j = InspectJson(ext);
  ASSERT_FALSE(j.is_discarded());
  EXPECT_EQ(j["external_data"], Json::parse(R"([{"location": "ext.onnx.data", "tensors": 2, "bytes": )" +
                                            std::to_string((256 * 128 + 128 * 10) * 4) + "}]"));
  EXPECT_EQ(j["parameters"]["count"], 256 * 128 + 128 + 128 * 10 + 10);

  // auto keeps external tensors external, in a file of the chosen name.
  const std::string again = dir / "again.onnx";
  r = RunOnnxamp({"repack", ext, "-o", again, "--external-data-file", "weights.bin"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("external data weights.bin (2 tensors"), std::string::npos) << r.err;
  EXPECT_TRUE(std::filesystem::exists(dir / "weights.bin"));
  ExpectSameModel(ModelPath("mlp"), again);

  // never brings everything back inline: the original bytes again.
  const std::string inline_path = dir / "inline.onnx";
  r = RunOnnxamp({"repack", again, "-o", inline_path, "--external-data", "never"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir / "inline.onnx.data"));
  EXPECT_TRUE(ReadWholeFile(inline_path) == ReadWholeFile(ModelPath("mlp")));
}

TEST(CliRepackTest, SortPutsProducersFirst) {
  // y = Neg(Relu(x)) with the Neg node written first.
  ir::Model m;
  m.opset_imports = {{"", 17}};
  ir::Graph& g = *m.graph;
  ir::Value* x = g.CreateValue("x");
  x->set_type(ir::ValueType::Tensor(DType::kFloat32, ir::Shape{ir::Dim::Value(2)}));
  g.AddInput(x);
  ir::Value* h = g.CreateValue("h");
  ir::Value* y = g.CreateValue("y");
  y->set_type(ir::ValueType::Tensor(DType::kFloat32, ir::Shape{ir::Dim::Value(2)}));
  g.AddNode("Neg", {h}, {y}, "neg");
  g.AddNode("Relu", {x}, {h}, "relu");
  g.AddOutput(y);
  TempDir dir;
  const std::string unsorted = dir / "unsorted.onnx";
  ASSERT_TRUE(importer::SaveModel(m, unsorted).ok());

  const std::string kept = dir / "kept.onnx";
  ASSERT_EQ(RunOnnxamp({"repack", unsorted, "-o", kept}).exit_code, 0);
  const std::string sorted = dir / "sorted.onnx";
  ProcessResult r = RunOnnxamp({"repack", unsorted, "-o", sorted, "--sort"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  StatusOr<ir::Model> a = importer::LoadModel(kept);
  StatusOr<ir::Model> b = importer::LoadModel(sorted);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(NodeList(*a), (std::vector<std::string>{"Neg neg", "Relu relu"}));
  EXPECT_EQ(NodeList(*b), (std::vector<std::string>{"Relu relu", "Neg neg"}));
}

// ---- the error contract

class BadInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteWholeFile(inputs_ / "empty.onnx", "");
    // Bytes from a fixed linear congruential generator: the same "random" file on every run.
    std::string noise(4096, '\0');
    uint32_t state = 12345;
    for (char& c : noise) {
      state = state * 1664525u + 1013904223u;
      c = static_cast<char>(state >> 24);
    }
    WriteWholeFile(inputs_ / "random.onnx", noise);
    const std::string mlp = ReadWholeFile(ModelPath("mlp"));
    WriteWholeFile(inputs_ / "truncated.onnx", mlp.substr(0, mlp.size() / 2));
    std::filesystem::create_directory(inputs_.path() / "folder.onnx");
    // A well-formed file whose node reads a value nothing defines.
    ir::Model m;
    m.opset_imports = {{"", 17}};
    ir::Value* ghost = m.graph->CreateValue("ghost");
    ir::Value* y = m.graph->CreateValue("y");
    y->set_type(ir::ValueType::Tensor(DType::kFloat32, ir::Shape{}));
    m.graph->AddNode("Relu", {ghost}, {y}, "relu");
    m.graph->AddOutput(y);
    ASSERT_TRUE(importer::SaveModel(m, inputs_ / "dangling.onnx").ok());
    // Well-formed, but its Relu reads two inputs where the schema takes one (onnx.checker refuses it).
    ir::Model two;
    two.opset_imports = {{"", 17}};
    ir::Value* x = two.graph->CreateValue("x");
    x->set_type(ir::ValueType::Tensor(DType::kFloat32, ir::Shape{ir::Dim::Value(2)}));
    two.graph->AddInput(x);
    ir::Value* out = two.graph->CreateValue("y");
    two.graph->AddNode("Relu", {x, x}, {out}, "relu");
    two.graph->AddOutput(out);
    ASSERT_TRUE(importer::SaveModel(two, inputs_ / "two_input_relu.onnx").ok());
  }

  // Every bad input, with a word the error line must contain besides the path.
  std::vector<std::pair<std::string, std::string>> BadInputs() const {
    return {{inputs_ / "missing.onnx", ""},   {inputs_ / "empty.onnx", "empty"}, {inputs_ / "random.onnx", ""},
            {inputs_ / "truncated.onnx", ""}, {inputs_ / "folder.onnx", ""},     {inputs_ / "dangling.onnx", "ghost"}};
  }

  TempDir inputs_;
  TempDir outputs_;
};

TEST_F(BadInputTest, InspectFailsWithOneLine) {
  for (const auto& [path, word] : BadInputs()) {
    SCOPED_TRACE(path);
    ExpectOneLineError(RunOnnxamp({"inspect", path}), 1, "error: " + path + ": ");
    ExpectOneLineError(RunOnnxamp({"inspect", "--json", path}), 1, word);
  }
}

TEST_F(BadInputTest, RepackFailsWithOneLineAndWritesNothing) {
  for (const auto& [path, word] : BadInputs()) {
    SCOPED_TRACE(path);
    ExpectOneLineError(RunOnnxamp({"repack", path, "-o", outputs_ / "out.onnx", "--external-data", "always"}), 1,
                       "error: " + path + ": ");
    EXPECT_TRUE(outputs_.List().empty());
  }
}

// Control bytes in what an error quotes (a file name here, a hostile model's node names elsewhere) are written as
// \xNN: a terminal escape sequence cannot recolour or rewrite the user's terminal, a NUL cannot cut the line.
TEST_F(BadInputTest, ControlBytesInErrorsAreEscaped) {
  const std::string path = inputs_ / "evil\x1b[2J\x07\x7f.onnx";
  const ProcessResult r = RunOnnxamp({"inspect", path});
  ExpectOneLineError(r, 1, "evil\\x1b[2J\\x07\\x7f.onnx");
  for (char c : r.err) EXPECT_TRUE(c == '\n' || static_cast<unsigned char>(c) >= 0x20) << static_cast<int>(c);
}

// A model its ops' schemas refuse (a Relu reading two inputs): every command fails with one line naming the node and
// the schema; inspect still prints its report, with the finding.
TEST_F(BadInputTest, SchemaViolationsAreRefusedByEveryCommand) {
  const std::string path = inputs_ / "two_input_relu.onnx";
  const std::string finding = "node Relu 'relu': 2 inputs; Relu-14 takes 1";
  const ProcessResult inspect = RunOnnxamp({"inspect", path});
  EXPECT_EQ(inspect.exit_code, 1);
  EXPECT_NE(inspect.out.find("verifier: 1 findings"), std::string::npos) << inspect.out;
  EXPECT_NE(inspect.out.find(finding), std::string::npos) << inspect.out;
  EXPECT_EQ(Lines(inspect.err).size(), 1u) << inspect.err;
  EXPECT_NE(inspect.err.find(finding), std::string::npos) << inspect.err;
  ExpectOneLineError(RunOnnxamp({"convert", path, "-o", outputs_ / "out.onnx"}), 1, finding);
  ExpectOneLineError(RunOnnxamp({"repack", path, "-o", outputs_ / "out.onnx"}), 1, finding);
  ExpectOneLineError(RunOnnxamp({"export", path, "-o", outputs_ / "out.onnx"}), 1, finding);
  EXPECT_TRUE(outputs_.List().empty());
}

TEST_F(BadInputTest, RepackIntoMissingFolderFails) {
  const std::string out = outputs_ / "no/such/folder/out.onnx";
  ExpectOneLineError(RunOnnxamp({"repack", ModelPath("mlp"), "-o", out}), 1, "no/such/folder");
  EXPECT_TRUE(outputs_.List().empty());
}

TEST_F(BadInputTest, UsageErrorsExitTwo) {
  const std::string model = ModelPath("mlp");
  const std::string out = outputs_ / "out.onnx";
  const std::vector<std::vector<std::string>> usages = {
      {},
      {"frobnicate"},
      {"frobnicate", "--help"},
      {"inspect"},
      {"inspect", "--bogus", model},
      {"inspect", model, model},
      {"repack", model},
      {"repack", model, "-o", out, "--external-data", "sometimes"},
      {"repack", model, "-o", out, "--external-data", "never", "--external-data-file", "w.bin"},
      {"version", "extra"},
      {"export", model, "-o", out, "--precision", "fp8"},
      {"run", model, "--threads", "1.5"},
      {"run", model, "--ignore-index", "-100"},
  };
  for (const std::vector<std::string>& args : usages) {
    SCOPED_TRACE(::testing::PrintToString(args));
    ExpectOneLineError(RunOnnxamp(args), 2);
    EXPECT_TRUE(outputs_.List().empty());
  }
}

TEST(CliInspectTest, ReportsEveryVerifierFindingOfARefusedModel) {
  // Two problems the importer converts but the verifier refuses: a cycle, and an initializer whose data
  // disagree with its declared type.
  ir::Model m;
  m.opset_imports = {{"", 17}};
  ir::Graph& g = *m.graph;
  ir::Value* w = g.CreateValue("w");
  w->set_type(ir::ValueType::Tensor(DType::kInt64, ir::Shape{ir::Dim::Value(2)}));
  g.AddInput(w);
  g.SetInitializer(w, ir::Tensor(DType::kFloat32, {2}));
  ir::Value* a = g.CreateValue("a");
  ir::Value* b = g.CreateValue("b");
  g.AddNode("Add", {b, w}, {a}, "first");
  g.AddNode("Relu", {a}, {b}, "second");
  a->set_type(ir::ValueType::Tensor(DType::kFloat32, ir::Shape{ir::Dim::Value(2)}));
  g.AddOutput(a);
  TempDir dir;
  const std::string path = dir / "refused.onnx";
  ASSERT_TRUE(importer::SaveModel(m, path).ok());

  for (bool json : {true, false}) {
    ProcessResult r = json ? RunOnnxamp({"inspect", "--json", path}) : RunOnnxamp({"inspect", path});
    EXPECT_EQ(r.exit_code, 1);
    const std::vector<std::string> err = Lines(r.err);
    ASSERT_EQ(err.size(), 1u) << r.err;
    EXPECT_EQ(err[0].rfind("error: " + path + ": ", 0), 0u) << err[0];
    if (json) {
      const Json j = Json::parse(r.out, nullptr, false);
      ASSERT_FALSE(j.is_discarded()) << r.out;
      ASSERT_EQ(j["findings"].size(), 2u) << j["findings"].dump();
      const std::string findings = j["findings"].dump();
      EXPECT_NE(findings.find("cycle"), std::string::npos) << findings;
      EXPECT_NE(findings.find("int64"), std::string::npos) << findings;
      EXPECT_EQ(j["nodes"]["total"], 2);
    } else {
      EXPECT_NE(r.out.find("verifier: 2 findings"), std::string::npos) << r.out;
    }
  }
}

// ---- inspect checks external data references (without reading the data)

// Writes `model.onnx` into `dir`: y = (x + a) * b with a and b (1024 floats each) in `weights.bin` at offsets 0
// and 4096.
std::string SaveExternalDataModel(const TempDir& dir) {
  ir::Model m;
  m.opset_imports = {{"", 17}};
  ir::Graph& g = *m.graph;
  const ir::ValueType type = ir::ValueType::Tensor(DType::kFloat32, ir::Shape{ir::Dim::Value(1024)});
  ir::Value* x = g.CreateValue("x");
  x->set_type(type);
  g.AddInput(x);
  ir::Value* a = g.CreateValue("a");
  g.SetInitializer(a, ir::Tensor(DType::kFloat32, {1024}));
  ir::Value* b = g.CreateValue("b");
  g.SetInitializer(b, ir::Tensor(DType::kFloat32, {1024}));
  ir::Value* t = g.CreateValue("t");
  ir::Value* y = g.CreateValue("y");
  y->set_type(type);
  g.AddNode("Add", {x, a}, {t}, "add");
  g.AddNode("Mul", {t, b}, {y}, "mul");
  g.AddOutput(y);
  importer::SaveOptions save;
  save.external_data = importer::ExternalDataMode::kAlways;
  save.external_data_file = "weights.bin";
  const std::string path = dir / "model.onnx";
  EXPECT_TRUE(importer::SaveModel(m, path, save).ok());
  return path;
}

// Sets the external_data entry `key` of initializer `tensor` in the model file at `path`.
void SetExternalEntry(const std::string& path, const std::string& tensor, const std::string& key,
                      const std::string& value) {
  onnx::ModelProto proto;
  ASSERT_TRUE(proto.ParseFromString(ReadWholeFile(path))) << path;
  bool found = false;
  for (onnx::TensorProto& t : *proto.mutable_graph()->mutable_initializer()) {
    if (t.name() != tensor) continue;
    for (onnx::StringStringEntryProto& kv : *t.mutable_external_data()) {
      if (kv.key() == key) {
        kv.set_value(value);
        found = true;
      }
    }
  }
  ASSERT_TRUE(found) << tensor << " " << key;
  WriteWholeFile(path, proto.SerializeAsString());
}

TEST(CliInspectTest, ValidExternalDataPasses) {
  TempDir dir;
  const std::string path = SaveExternalDataModel(dir);
  const Json j = InspectJson(path);
  ASSERT_FALSE(j.is_discarded());
  EXPECT_EQ(j["external_data"], Json::parse(R"([{"location": "weights.bin", "tensors": 2, "bytes": 8192}])"));
  ProcessResult r = RunOnnxamp({"inspect", path});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_NE(r.out.find("weights.bin: 2 tensors"), std::string::npos) << r.out;
}

struct BadReference {
  std::string name;
  std::function<void(const TempDir& dir, const TempDir& outside)> spoil;
  std::string tensor;  // the initializer the error must name
  std::string says;
};

void PrintTo(const BadReference& c, std::ostream* os) { *os << c.name; }

class CliInspectBadReferenceTest : public ::testing::TestWithParam<BadReference> {};

// Inspect (text and --json) fails with one error line naming the model, the tensor and the data file, exactly as a
// command that reads the data does.
TEST_P(CliInspectBadReferenceTest, FailsWithOneLineNamingTensorAndFile) {
  const BadReference& c = GetParam();
  TempDir dir;
  TempDir outside;
  const std::string path = SaveExternalDataModel(dir);
  c.spoil(dir, outside);
  const std::string prefix = "error: " + path + ": initializer '" + c.tensor + "': ";
  ProcessResult text = RunOnnxamp({"inspect", path});
  ExpectOneLineError(text, 1, prefix);
  ExpectOneLineError(text, 1, c.says);
  ExpectOneLineError(text, 1, "weights.bin");
  ProcessResult json = RunOnnxamp({"inspect", "--json", path});
  ExpectOneLineError(json, 1, prefix);
  EXPECT_EQ(json.err, text.err);
  // The same check, with the same words, as when the data are read.
  ProcessResult convert = RunOnnxamp({"convert", path, "-o", outside / "out.onnx"});
  EXPECT_EQ(convert.exit_code, 1);
  EXPECT_EQ(convert.err, text.err);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, CliInspectBadReferenceTest,
    ::testing::Values(
        BadReference{"MissingFile",
                     [](const TempDir& dir, const TempDir&) { std::filesystem::remove(dir / "weights.bin"); }, "a",
                     "weights.bin' does not exist"},
        BadReference{"SymlinkOutOfTheFolder",
                     [](const TempDir& dir, const TempDir& outside) {
                       std::filesystem::rename(dir / "weights.bin", outside / "weights.bin");
                       std::filesystem::create_symlink(outside / "weights.bin", dir / "weights.bin");
                     },
                     "a", "outside the model folder"},
        BadReference{
            "OffsetPastTheEnd",
            [](const TempDir& dir, const TempDir&) { SetExternalEntry(dir / "model.onnx", "b", "offset", "1048576"); },
            "b", "external data offset 1048576 is past the end of '"},
        BadReference{
            "LengthPastTheEnd",
            [](const TempDir& dir, const TempDir&) { std::filesystem::resize_file(dir / "weights.bin", 4096 + 100); },
            "b", "external data offset 4096 + length 4096 is past the end of '"},
        BadReference{
            "LengthDisagreesWithTheShape",
            [](const TempDir& dir, const TempDir&) { SetExternalEntry(dir / "model.onnx", "a", "length", "4000"); },
            "a", "external data length 4000 for 'weights.bin' disagrees with 4096 bytes"}),
    [](const ::testing::TestParamInfo<BadReference>& info) { return info.param.name; });

TEST(CliTest, HelpAndVersion) {
  ProcessResult r = RunOnnxamp({"--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* word : {"inspect", "repack", "version"}) EXPECT_NE(r.out.find(word), std::string::npos) << r.out;
  r = RunOnnxamp({"repack", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("--external-data"), std::string::npos) << r.out;

  r = RunOnnxamp({"version"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> lines = Lines(r.out);
  ASSERT_GE(lines.size(), 2u) << r.out;
  EXPECT_EQ(lines[0].rfind("onnxamp ", 0), 0u) << lines[0];
  EXPECT_NE(lines[0].find(" build)"), std::string::npos) << lines[0];
  EXPECT_EQ(lines[1].rfind("CUDA backend: ", 0), 0u) << lines[1];
}

}  // namespace
}  // namespace onnxamp::tools_test
