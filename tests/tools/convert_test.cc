// `onnxamp convert`, run as a subprocess: the converted model and its summary and report, idempotence,
// --keep-io-types, bf16, --print-policy, the auto mode with .npz and test_data_set folders, and the error contract
// (one "error: " line, exit 1 for bad input, exit 2 for usage errors, nothing written on failure).
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "importer/model_io.h"
#include "importer/tensor_file.h"
#include "runtime/ir/model.h"
#include "tests/tools/process_util.h"

namespace onnxamp::tools_test {
namespace {

using Json = nlohmann::json;

const std::string kMlp = ModelsDir() + "/mlp.onnx";
const std::string kCnn = ModelsDir() + "/cnn.onnx";

ir::Tensor Input(const std::string& name, std::vector<int64_t> dims) {
  ir::Tensor t(DType::kFloat32, dims);
  t.set_name(name);
  uint64_t state = 99;
  for (float& x : t.mutable_values<float>()) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    x = static_cast<float>(static_cast<double>(state >> 11) / static_cast<double>(1ull << 53) * 2 - 1);
  }
  return t;
}

DType InputType(const ir::Model& m) { return m.graph->inputs()[0]->type().elem_type(); }
DType OutputType(const ir::Model& m) { return m.graph->outputs()[0]->type().elem_type(); }

class ConvertTest : public ::testing::Test {
 protected:
  ProcessResult Convert(std::vector<std::string> args) {
    std::vector<std::string> argv = {"convert"};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunOnnxamp(argv);
  }
  ir::Model Load(const std::string& path) {
    StatusOr<ir::Model> m = importer::LoadModel(path);
    EXPECT_TRUE(m.ok()) << m.status().message();
    return std::move(m).value();
  }
  // The usual failure: exit `code`, one "error: " line naming `needle`, no output written.
  void ExpectFailure(const ProcessResult& r, int code, const std::string& needle) {
    EXPECT_EQ(r.exit_code, code) << r.err;
    EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
    EXPECT_EQ(Lines(r.err).size(), 1u) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
    EXPECT_TRUE(dir_.List().empty() || dir_.List() == inputs_) << "left behind: " << dir_.List().size() << " files";
  }
  TempDir dir_;
  std::vector<std::string> inputs_;  // files the test itself wrote into dir_, sorted
};

TEST_F(ConvertTest, WritesFp16ModelAndPrintsSummary) {
  const std::string out = dir_ / "mlp16.onnx";
  ProcessResult r = Convert({kMlp, "-o", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("convert: " + kMlp + " -> " + out + " (fp16)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("3 / 3 nodes in float16"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("casts: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("initializers: 4 converted, 136744 -> 68372 bytes"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("time: "), std::string::npos) << r.err;
  ir::Model m = Load(out);
  EXPECT_EQ(InputType(m), DType::kFloat16);
  EXPECT_EQ(OutputType(m), DType::kFloat16);
  for (const ir::Value* v : m.graph->initializers()) EXPECT_EQ(v->initializer()->dtype(), DType::kFloat16) << v->name();
  EXPECT_EQ(dir_.List(), std::vector<std::string>{"mlp16.onnx"});
}

TEST_F(ConvertTest, ReportJsonDescribesTheConversion) {
  ProcessResult r = Convert({kMlp, "-o", dir_ / "out.onnx", "--report", dir_ / "report.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json doc = Json::parse(ReadWholeFile(dir_ / "report.json"));
  EXPECT_EQ(doc["model"], kMlp);
  EXPECT_EQ(doc["output"], dir_ / "out.onnx");
  const Json& c = doc["conversion"];
  EXPECT_EQ(c["target"], "float16");
  EXPECT_EQ(c["nodes_total"], 3);
  EXPECT_EQ(c["nodes_low"], 3);
  EXPECT_EQ(c["initializers_converted"], 4);
  EXPECT_EQ(c["bytes_before"], 136744);
  EXPECT_EQ(c["bytes_after"], 68372);
  ASSERT_EQ(c["tensors"].size(), 4u);
  EXPECT_EQ(c["tensors"][0]["name"], "fc1.weight");
  EXPECT_EQ(c["tensors"][0]["elements"], 256 * 128);
  EXPECT_FALSE(doc.contains("auto"));
  EXPECT_TRUE(doc["seconds"]["convert"].is_number());
}

TEST_F(ConvertTest, SecondConversionChangesNothing) {
  ASSERT_EQ(Convert({kCnn, "-o", dir_ / "once.onnx"}).exit_code, 0);
  ProcessResult r = Convert({dir_ / "once.onnx", "-o", dir_ / "twice.onnx", "--report", dir_ / "r.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json c = Json::parse(ReadWholeFile(dir_ / "r.json"))["conversion"];
  EXPECT_EQ(c["casts_inserted"], 0);
  EXPECT_EQ(c["bytes_before"], c["bytes_after"]);
  EXPECT_TRUE(ReadWholeFile(dir_ / "once.onnx") == ReadWholeFile(dir_ / "twice.onnx"))
      << "converting a converted model changed it";
}

TEST_F(ConvertTest, KeepIoTypesKeepsFp32Boundary) {
  ProcessResult r = Convert({kMlp, "-o", dir_ / "out.onnx", "--keep-io-types"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("FP32 inputs/outputs"), std::string::npos) << r.err;
  ir::Model m = Load(dir_ / "out.onnx");
  EXPECT_EQ(InputType(m), DType::kFloat32);
  EXPECT_EQ(OutputType(m), DType::kFloat32);
  int casts = 0;
  for (const ir::Node* n : m.graph->nodes()) casts += n->op_type() == "Cast" ? 1 : 0;
  EXPECT_EQ(casts, 2);  // one after the input, one before the output
  EXPECT_EQ(m.graph->FindValue("fc1.weight")->initializer()->dtype(), DType::kFloat16);
}

TEST_F(ConvertTest, Bf16TargetAndExternalData) {
  ProcessResult r = Convert({kMlp, "-o", dir_ / "out.onnx", "--target", "bf16", "--external-data", "always"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(dir_.List(), (std::vector<std::string>{"out.onnx", "out.onnx.data"}));
  ir::Model m = Load(dir_ / "out.onnx");
  EXPECT_EQ(InputType(m), DType::kBFloat16);
  EXPECT_EQ(m.graph->FindValue("fc1.weight")->initializer()->dtype(), DType::kBFloat16);
}

TEST_F(ConvertTest, KeepOpAndKeepNodeOverrides) {
  ProcessResult r = Convert({kCnn, "-o", dir_ / "out.onnx", "--keep-op", "Gemm", "--keep-node", "layer2\\..*"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ir::Model m = Load(dir_ / "out.onnx");
  EXPECT_EQ(m.graph->FindValue("fc.weight")->initializer()->dtype(), DType::kFloat32);
  EXPECT_EQ(m.graph->FindValue("layer2.conv1.weight")->initializer()->dtype(), DType::kFloat32);
  EXPECT_EQ(m.graph->FindValue("layer1.conv1.weight")->initializer()->dtype(), DType::kFloat16);
}

TEST_F(ConvertTest, PrintPolicyShowsOverrides) {
  ProcessResult r = Convert({"--print-policy", "--keep-op", "MatMul", "--keep-node", "head/.*"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json policy = Json::parse(r.out);
  bool matmul_kept = false;
  for (const Json& op : policy["keep"]) matmul_kept = matmul_kept || op == "MatMul";
  EXPECT_TRUE(matmul_kept) << r.out;
  EXPECT_EQ(policy["keep_nodes"], Json::array({"head/.*"}));
  bool softmax_kept = false;
  for (const Json& op : policy["keep"]) softmax_kept = softmax_kept || op == "Softmax";
  EXPECT_TRUE(softmax_kept) << r.out;
}

TEST_F(ConvertTest, AutoModeWithNpzReportsKeptNodesAndErrors) {
  const std::string data = dir_ / "data.npz";
  ASSERT_TRUE(importer::WriteNpz({Input("input", {8, 256})}, data).ok());
  inputs_ = {"data.npz"};
  ProcessResult r = Convert({kMlp, "-o", dir_ / "out.onnx", "--auto", "--data", data, "--rtol", "0.01", "--atol",
                             "0.001", "--report", dir_ / "r.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("auto: rtol 0.01, atol 0.001, 1 sample set"), std::string::npos) << r.err;
  const Json a = Json::parse(ReadWholeFile(dir_ / "r.json"))["auto"];
  EXPECT_EQ(a["within_tolerance"], true);
  EXPECT_EQ(a["sample_sets"], 1);
  EXPECT_TRUE(a["kept"].is_array());
  ASSERT_EQ(a["outputs"].size(), 1u);
  EXPECT_EQ(a["outputs"][0]["name"], "logits");
  EXPECT_LE(a["outputs"][0]["worst_excess"].get<double>(), 0.0);
  EXPECT_EQ(a["outputs"][0]["below_atol"], false);
  EXPECT_TRUE(a["warnings"].empty());
  EXPECT_GT(a["outputs"][0]["max_abs"].get<double>(), 0.0);
}

TEST_F(ConvertTest, AutoModeWarnsAboutOutputsFarBelowAtolAndJudgesThemAtTheirScale) {
  // y = x W with W ~1e-9: y ~1e-9, all zeros in fp16 (W flushes), which atol 1e-3 alone would accept.
  ir::Model m;
  m.ir_version = 8;
  m.opset_imports = {{"", 17}};
  ir::Graph& g = *m.graph;
  ir::Value* x = g.CreateValue("x");
  x->set_type(ir::ValueType::Tensor(DType::kFloat32, ir::Shape{ir::Dim::Value(4), ir::Dim::Value(16)}));
  g.AddInput(x);
  ir::Tensor w = Input("w", {16, 16});
  for (float& v : w.mutable_values<float>()) v *= 2e-9f;
  ir::Value* wv = g.CreateValue("w");
  g.SetInitializer(wv, std::move(w));
  ir::Value* y = g.CreateValue("y");
  y->set_type(ir::ValueType::Tensor(DType::kFloat32, ir::Shape{ir::Dim::Value(4), ir::Dim::Value(16)}));
  g.AddNode("MatMul", {x, wv}, {y}, "tiny");
  g.AddOutput(y);
  const std::string model = dir_ / "tiny.onnx";
  ASSERT_TRUE(importer::SaveModel(m, model).ok());
  const std::string data = dir_ / "data.npz";
  ASSERT_TRUE(importer::WriteNpz({Input("x", {4, 16})}, data).ok());
  inputs_ = {"data.npz", "tiny.onnx"};

  // fp16 graph outputs cannot hold ~1e-9: that used to pass (max abs error 1e-9 < atol), now it fails and says why.
  ExpectFailure(Convert({model, "-o", dir_ / "out.onnx", "--auto", "--data", data}), 1,
                "all zero where FP32 is not (max |FP32| ");
  ExpectFailure(Convert({model, "-o", dir_ / "out.onnx", "--auto", "--data", data}), 1,
                "fp16 graph outputs cannot hold these values: use --keep-io-types");

  ProcessResult r = Convert(
      {model, "-o", dir_ / "out.onnx", "--auto", "--data", data, "--keep-io-types", "--report", dir_ / "r.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("1 node kept FP32"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("warning: output 'y': every |FP32 value| is below atol 0.001"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(atol scaled to "), std::string::npos) << r.err;
  const Json a = Json::parse(ReadWholeFile(dir_ / "r.json"))["auto"];
  EXPECT_EQ(a["within_tolerance"], true);
  ASSERT_EQ(a["warnings"].size(), 1u);
  EXPECT_NE(a["warnings"][0].get<std::string>().find("output 'y'"), std::string::npos) << a["warnings"];
  ASSERT_EQ(a["kept"].size(), 1u);
  EXPECT_EQ(a["kept"][0]["name"], "tiny");
  ASSERT_EQ(a["outputs"].size(), 1u);
  const Json& o = a["outputs"][0];
  EXPECT_EQ(o["below_atol"], true);
  EXPECT_EQ(o["all_zero"], false);
  EXPECT_LT(o["max_fp32"].get<double>(), 1e-8);
  EXPECT_DOUBLE_EQ(o["atol_used"].get<double>(), 1e-3 * o["max_fp32"].get<double>());
  EXPECT_LE(o["worst_excess"].get<double>(), 0.0);
  EXPECT_EQ(Load(dir_ / "out.onnx").graph->FindValue("w")->initializer()->dtype(), DType::kFloat32);
}

TEST_F(ConvertTest, AutoModeReadsTestDataSetFolders) {
  for (int s = 0; s < 2; ++s) {
    const std::string set = dir_ / ("test_data_set_" + std::to_string(s));
    std::filesystem::create_directories(set);
    ASSERT_TRUE(importer::WriteTensorFile(Input("input", {2, 256}), set + "/input_0.pb").ok());
  }
  inputs_ = {"test_data_set_0", "test_data_set_1"};
  ProcessResult r =
      Convert({kMlp, "-o", dir_ / "out.onnx", "--auto", "--data", dir_.path().string(), "--report", dir_ / "r.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Json::parse(ReadWholeFile(dir_ / "r.json"))["auto"]["sample_sets"], 2);
}

TEST_F(ConvertTest, AutoModeUnreachableToleranceFailsWithoutOutput) {
  const std::string data = dir_ / "data.npz";
  ASSERT_TRUE(importer::WriteNpz({Input("input", {4, 256})}, data).ok());
  inputs_ = {"data.npz"};
  ExpectFailure(Convert({kMlp, "-o", dir_ / "out.onnx", "--auto", "--data", data, "--rtol", "0", "--atol", "0"}), 1,
                "not met even with every low-precision node kept FP32");
}

// The range rules: --max-reduction-depth from the static shapes, --data-max on the --data samples, --init-max on the
// weights; the kept nodes in the summary, the report, and FP32 in the model; --data-max needs --data.
TEST_F(ConvertTest, RangeRulesKeepNodesFp32) {
  ProcessResult r =
      Convert({kMlp, "-o", dir_ / "depth.onnx", "--max-reduction-depth", "128", "--report", dir_ / "depth.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("range rules: 1 node kept FP32\n  fc1 (Gemm): --max-reduction-depth 128: sums 256 products per "
                       "output\n"),
            std::string::npos)
      << r.err;
  const Json rules = Json::parse(ReadWholeFile(dir_ / "depth.json"))["range_rules"];
  EXPECT_EQ(rules["max_reduction_depth"], 128);
  ASSERT_EQ(rules["kept"].size(), 1u);
  EXPECT_EQ(rules["kept"][0]["name"], "fc1");
  const ir::Model depth = Load(dir_ / "depth.onnx");
  EXPECT_EQ(depth.graph->FindValue("fc1.weight")->initializer()->dtype(), DType::kFloat32);
  EXPECT_EQ(depth.graph->FindValue("fc2.weight")->initializer()->dtype(), DType::kFloat16);

  ir::Tensor big = Input("input", {8, 256});
  for (float& x : big.mutable_values<float>()) x *= 1000.0f;
  const std::string data = dir_ / "big.npz";
  ASSERT_TRUE(importer::WriteNpz({big}, data).ok());
  r = Convert({kMlp, "-o", dir_ / "data.onnx", "--data-max", "512", "--data", data});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("  fc1 (Gemm): --data-max 512: input 'input' reaches |x| = "), std::string::npos) << r.err;
  EXPECT_EQ(Load(dir_ / "data.onnx").graph->FindValue("fc1.weight")->initializer()->dtype(), DType::kFloat32);

  r = Convert({kMlp, "-o", dir_ / "init.onnx", "--init-max", "1e-9"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("range rules: 2 nodes kept FP32"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("  fc2 (Gemm): --init-max 1e-09: constant 'fc2.weight' holds |x| = "), std::string::npos)
      << r.err;

  std::error_code ec;
  for (const char* f : {"depth.onnx", "depth.json", "big.npz", "data.onnx", "init.onnx"}) {
    std::filesystem::remove(dir_ / f, ec);
  }
  ExpectFailure(Convert({kMlp, "-o", dir_ / "out.onnx", "--data-max", "512"}), 2,
                "--data-max needs at least one --data FILE");
  ExpectFailure(Convert({kMlp, "-o", dir_ / "out.onnx", "--init-max", "-1"}), 2,
                "--init-max: '-1' must be a finite number > 0");
  ExpectFailure(Convert({kMlp, "-o", dir_ / "out.onnx", "--data-max", "nan", "--data", dir_ / "x.npz"}), 2,
                "--data-max: 'nan' must be a finite number > 0");
  ExpectFailure(Convert({kMlp, "-o", dir_ / "out.onnx", "--max-reduction-depth", "0"}), 2,
                "--max-reduction-depth: '0' must be a whole number >= 1");
}

TEST_F(ConvertTest, MissingModel) {
  ExpectFailure(Convert({dir_ / "nope.onnx", "-o", dir_ / "out.onnx"}), 1, "nope.onnx");
}

TEST_F(ConvertTest, CorruptModel) {
  WriteWholeFile(dir_ / "bad.onnx", "this is not a protobuf \x01\x02\x03");
  inputs_ = {"bad.onnx"};
  ExpectFailure(Convert({dir_ / "bad.onnx", "-o", dir_ / "out.onnx", "--report", dir_ / "r.json"}), 1, "bad.onnx");
}

TEST_F(ConvertTest, UnknownTarget) {
  ExpectFailure(Convert({kMlp, "-o", dir_ / "out.onnx", "--target", "fp8"}), 2, "--target");
}

TEST_F(ConvertTest, BadRegex) {
  ExpectFailure(Convert({kMlp, "-o", dir_ / "out.onnx", "--keep-node", "fc[1"}), 2, "fc[1");
}

TEST_F(ConvertTest, AutoWithoutData) { ExpectFailure(Convert({kMlp, "-o", dir_ / "out.onnx", "--auto"}), 2, "--data"); }

TEST_F(ConvertTest, DataWithoutAuto) {
  ExpectFailure(Convert({kMlp, "-o", dir_ / "out.onnx", "--data", "x.npz"}), 2, "--auto");
}

// Options that would change nothing or contradict each other are usage errors; an op type that no node has is a
// warning (a misspelt one would otherwise change nothing without a word).
TEST_F(ConvertTest, ContradictoryAndIdleOptions) {
  ExpectFailure(Convert({kMlp, "-o", dir_ / "out.onnx", "--rtol", "0.1"}), 2,
                "--rtol and --atol are the tolerances of --auto");
  ExpectFailure(Convert({kMlp, "-o", dir_ / "out.onnx", "--atol", "0.1"}), 2,
                "--rtol and --atol are the tolerances of --auto");
  ExpectFailure(Convert({kMlp, "-o", dir_ / "out.onnx", "--auto", "--data", "x.npz", "--rtol", "nan"}), 2,
                "--rtol: 'nan' must be a finite number >= 0");
  ExpectFailure(Convert({kMlp, "-o", dir_ / "out.onnx", "--keep-op", "Gemm", "--force-low-op", "Gemm"}), 2,
                "--keep-op Gemm and --force-low-op Gemm contradict each other");
  ExpectFailure(Convert({kMlp, "-o", dir_ / "out.onnx", "--keep-node", "fc1", "--force-low-node", "fc1"}), 2,
                "--keep-node fc1 and --force-low-node fc1 contradict each other");
  ProcessResult r = Convert({kMlp, "-o", dir_ / "out.onnx", "--keep-op", "gemm", "--force-low-op", "Relu"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("convert: warning: --keep-op gemm: no node of the model has this op type (op types are "
                       "case-sensitive)"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("--force-low-op Relu"), std::string::npos) << r.err;  // the MLP has Relu nodes
}

TEST_F(ConvertTest, MissingOutput) { ExpectFailure(Convert({kMlp}), 2, "--output"); }

TEST_F(ConvertTest, DataWithWrongInputName) {
  const std::string data = dir_ / "data.npz";
  ASSERT_TRUE(importer::WriteNpz({Input("pixels", {4, 256})}, data).ok());
  inputs_ = {"data.npz"};
  ProcessResult r = Convert({kMlp, "-o", dir_ / "out.onnx", "--auto", "--data", data});
  ExpectFailure(r, 1, "data.npz");
  EXPECT_NE(r.err.find("'pixels' is not an input of the model (inputs: input)"), std::string::npos) << r.err;
}

TEST_F(ConvertTest, DataWithWrongShape) {
  const std::string data = dir_ / "data.npz";
  ASSERT_TRUE(importer::WriteNpz({Input("input", {4, 255})}, data).ok());
  inputs_ = {"data.npz"};
  ProcessResult r = Convert({kMlp, "-o", dir_ / "out.onnx", "--auto", "--data", data});
  ExpectFailure(r, 1, "input");
  EXPECT_NE(r.err.find("255"), std::string::npos) << r.err;
}

TEST_F(ConvertTest, MissingDataFile) {
  ExpectFailure(Convert({kMlp, "-o", dir_ / "out.onnx", "--auto", "--data", dir_ / "none.npz"}), 1, "none.npz");
}

TEST_F(ConvertTest, BadPolicyFile) {
  WriteWholeFile(dir_ / "policy.json", R"({"keep": ["Softmax"], "colour": "blue"})");
  inputs_ = {"policy.json"};
  ExpectFailure(Convert({kMlp, "-o", dir_ / "out.onnx", "--policy", dir_ / "policy.json"}), 1, "policy.json");
}

}  // namespace
}  // namespace onnxamp::tools_test
