// `onnxamp run`, run as a subprocess on models/mlp.onnx: outputs checked against a plain C++ forward pass over
// the model's weights, every input format, --labels accuracy, and the error contract (exit codes, one "error: " line
// naming the input, expected and got; nothing written on failure).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "importer/model_io.h"
#include "importer/tensor_file.h"
#include "runtime/ir/model.h"
#include "tests/tools/process_util.h"

namespace onnxamp::tools_test {
namespace {

const std::string kMlp = ModelsDir() + "/mlp.onnx";

// A float tensor named `name` with deterministic values in [-1, 1).
ir::Tensor Input(std::vector<int64_t> dims, const std::string& name = "input", DType dtype = DType::kFloat32) {
  ir::Tensor t(dtype, dims);
  t.set_name(name);
  uint64_t state = 12345;
  const int64_t n = t.num_elements();
  for (int64_t i = 0; i < n; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const double v = static_cast<double>(state >> 11) / static_cast<double>(1ull << 53) * 2 - 1;
    if (dtype == DType::kFloat64) {
      t.mutable_values<double>()[i] = v;
    } else {
      t.mutable_values<float>()[i] = static_cast<float>(v);
    }
  }
  return t;
}

const ir::Tensor& Initializer(const ir::Model& m, const std::string& name) {
  const ir::Value* v = m.graph->FindValue(name);
  EXPECT_TRUE(v && v->initializer()) << name;
  return *v->initializer();
}

// logits = fc2(relu(fc1(x))) with Gemm transB=1 (y = x W^T + b), accumulated in double.
std::vector<double> PlainMlpForward(const ir::Tensor& x) {
  StatusOr<ir::Model> model = importer::LoadModel(kMlp);
  EXPECT_TRUE(model.ok()) << model.status().message();
  auto linear = [&](const std::vector<double>& in, int64_t batch, const std::string& layer, bool relu) {
    const ir::Tensor& w = Initializer(*model, layer + ".weight");
    const ir::Tensor& b = Initializer(*model, layer + ".bias");
    const int64_t out_f = w.dims()[0], in_f = w.dims()[1];
    std::vector<double> out(batch * out_f);
    for (int64_t r = 0; r < batch; ++r) {
      for (int64_t o = 0; o < out_f; ++o) {
        double acc = b.values<float>()[o];
        for (int64_t k = 0; k < in_f; ++k) acc += in[r * in_f + k] * w.values<float>()[o * in_f + k];
        out[r * out_f + o] = relu ? std::max(acc, 0.0) : acc;
      }
    }
    return out;
  };
  std::vector<double> in(x.values<float>().begin(), x.values<float>().end());
  return linear(linear(in, x.dims()[0], "fc1", true), x.dims()[0], "fc2", false);
}

class RunTest : public ::testing::Test {
 protected:
  std::string Write(const ir::Tensor& t, const std::string& file) {
    const std::string path = dir_ / file;
    Status st = importer::WriteTensorFile(t, path);
    EXPECT_TRUE(st.ok()) << st.message();
    return path;
  }
  // Runs `onnxamp run kMlp <args> --output-dir out/` and returns the result.
  ProcessResult Run(std::vector<std::string> args) {
    std::filesystem::create_directories(out_.path());
    std::vector<std::string> argv = {"run", kMlp};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back("--output-dir");
    argv.push_back(out_.path().string());
    return RunOnnxamp(argv);
  }
  // The failure contract: exit 1, one "error: " line containing each of `parts`, no output file.
  void ExpectError(const ProcessResult& r, const std::vector<std::string>& parts) {
    EXPECT_EQ(r.exit_code, 1) << r.err;
    const std::vector<std::string> lines = Lines(r.err);
    ASSERT_EQ(lines.size(), 1u) << r.err;
    EXPECT_EQ(lines[0].rfind("error: ", 0), 0u) << lines[0];
    for (const std::string& p : parts)
      EXPECT_NE(lines[0].find(p), std::string::npos) << "missing '" << p << "' in " << lines[0];
    EXPECT_TRUE(out_.List().empty());
  }
  void ExpectMatchesPlainForward(const ir::Tensor& x) {
    ASSERT_EQ(out_.List(), std::vector<std::string>{"output_0.pb"});
    StatusOr<ir::Tensor> y = importer::ReadTensorFile(out_ / "output_0.pb");
    ASSERT_TRUE(y.ok()) << y.status().message();
    EXPECT_EQ(y->name(), "logits");
    EXPECT_EQ(y->dtype(), DType::kFloat32);
    EXPECT_EQ(y->dims(), (std::vector<int64_t>{x.dims()[0], 10}));
    const std::vector<double> want = PlainMlpForward(x);
    ASSERT_EQ(y->values<float>().size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_NEAR(y->values<float>()[i], want[i], 1e-5 + 1e-5 * std::fabs(want[i])) << "element " << i;
    }
  }

  TempDir dir_;
  TempDir out_;
};

TEST_F(RunTest, NpyInputMatchesPlainForward) {
  const ir::Tensor x = Input({3, 256});
  ProcessResult r = Run({"--input", "input=" + Write(x, "x.npy"), "--threads", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_NE(r.err.find("input  'input' float [3,256]"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("output 'logits' float [3,10]"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("peak memory"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(" ms"), std::string::npos) << r.err;
  ExpectMatchesPlainForward(x);
}

TEST_F(RunTest, PbInputAndOtherBatchSize) {
  const ir::Tensor x = Input({1, 256});
  ProcessResult r = Run({"--input", "input=" + Write(x, "x.pb")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ExpectMatchesPlainForward(x);
}

TEST_F(RunTest, NpzBindsArraysByName) {
  const ir::Tensor x = Input({2, 256});
  const std::string npz = dir_ / "inputs.npz";
  ASSERT_TRUE(importer::WriteNpz({x}, npz).ok());
  ProcessResult r = Run({"--input", npz});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ExpectMatchesPlainForward(x);
}

TEST_F(RunTest, NpzWithSeveralArraysNeedsTheRightName) {
  const std::string npz = dir_ / "two.npz";
  ASSERT_TRUE(importer::WriteNpz({Input({2, 256}, "a"), Input({2, 256}, "b")}, npz).ok());
  ExpectError(Run({"--input", "input=" + npz}), {"two.npz", "2 arrays (a, b)", "none named 'input'"});
}

TEST_F(RunTest, OverwritesAnEarlierOutput) {
  ASSERT_EQ(Run({"--input", "input=" + Write(Input({4, 256}), "x.npy")}).exit_code, 0);
  const ir::Tensor x = Input({2, 256});
  ProcessResult r = Run({"--input", "input=" + Write(x, "x2.npy")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ExpectMatchesPlainForward(x);
}

TEST_F(RunTest, MissingInput) { ExpectError(Run({}), {"mlp.onnx", "missing input 'input'", "float"}); }

TEST_F(RunTest, WrongDtype) {
  ExpectError(Run({"--input", "input=" + Write(Input({3, 256}, "input", DType::kFloat64), "x.npy")}),
              {"input 'input'", "expected dtype float", "got double"});
}

TEST_F(RunTest, WrongRank) {
  ExpectError(Run({"--input", "input=" + Write(Input({256}), "x.npy")}), {"input 'input'", "expected rank 2"});
}

TEST_F(RunTest, DimThatContradictsTheModel) {
  ExpectError(Run({"--input", "input=" + Write(Input({3, 255}), "x.npy")}), {"input 'input'", "256", "255"});
}

TEST_F(RunTest, UnknownInputName) {
  ExpectError(Run({"--input", "bogus=" + Write(Input({3, 256}), "x.npy")}),
              {"'bogus' is not an input of the model", "input"});
}

TEST_F(RunTest, InputGivenTwice) {
  const std::string x = Write(Input({3, 256}), "x.npy");
  ExpectError(Run({"--input", "input=" + x, "--input", "input=" + x}), {"input 'input'", "more than once"});
}

TEST_F(RunTest, BadInputFile) {
  const std::string bad = dir_ / "bad.npy";
  WriteWholeFile(bad, "this is not a numpy file");
  ExpectError(Run({"--input", "input=" + bad}), {"bad.npy"});
  ExpectError(Run({"--input", "input=" + (dir_ / "absent.npy")}), {"absent.npy"});
  ExpectError(Run({"--input", "=" + bad}), {"input name", "empty"});
}

// ONNX's Gradient operator: models/mlp.onnx with a Gradient node giving d(sum of logits)/d(input), checked against
// central differences of the plain forward pass; a malformed Gradient node is one error line naming the model and it.
TEST_F(RunTest, GradientOperator) {
  StatusOr<ir::Model> model = importer::LoadModel(kMlp);
  ASSERT_TRUE(model.ok()) << model.status().message();
  ir::Graph& g = *model->graph;
  model->SetOpsetVersion("ai.onnx.preview.training", 1);
  ir::Value* grad = g.CreateValue("dlogits_dinput");
  ir::Node* n = g.AddNode("Gradient", {g.FindValue("input")}, {grad}, "input_gradient", "ai.onnx.preview.training");
  n->SetAttribute(ir::Attribute::Strings("xs", {"input"}));
  n->SetAttribute(ir::Attribute::String("y", "logits"));
  g.AddOutput(grad);
  const std::string path = dir_ / "mlp_gradient.onnx";
  ASSERT_TRUE(importer::SaveModel(*model, path).ok());
  const ir::Tensor x = Input({2, 256});
  std::filesystem::create_directories(out_.path());
  ProcessResult r =
      RunOnnxamp({"run", path, "--input", "input=" + Write(x, "x.npy"), "--output-dir", out_.path().string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  StatusOr<ir::Tensor> d = importer::ReadTensorFile(out_ / "output_1.pb");
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->name(), "dlogits_dinput");
  ASSERT_EQ(d->dims(), x.dims());
  auto sum_logits = [&](const ir::Tensor& in) {
    double s = 0;
    for (double v : PlainMlpForward(in)) s += v;
    return s;
  };
  for (int64_t i : {0, 7, 255, 300, 511}) {
    ir::Tensor lo = x, hi = x;
    lo.mutable_values<float>()[i] -= 1e-2f;
    hi.mutable_values<float>()[i] += 1e-2f;
    const double want =
        (sum_logits(hi) - sum_logits(lo)) / static_cast<double>(hi.values<float>()[i] - lo.values<float>()[i]);
    EXPECT_NEAR(d->values<float>()[i], want, 1e-3 + 1e-3 * std::fabs(want)) << "element " << i;
  }

  n->SetAttribute(ir::Attribute::String("y", "no_such_value"));
  const std::string bad = dir_ / "bad_gradient.onnx";
  ASSERT_TRUE(importer::SaveModel(*model, bad).ok());
  std::filesystem::remove_all(out_.path());
  std::filesystem::create_directories(out_.path());
  ExpectError(RunOnnxamp({"run", bad, "--input", "input=" + Write(x, "x.npy"), "--output-dir", out_.path().string()}),
              {"bad_gradient.onnx", "Gradient 'input_gradient'", "'no_such_value' is not a value of the graph"});
}

TEST_F(RunTest, BadModelFile) {
  const std::string bad = dir_ / "bad.onnx";
  WriteWholeFile(bad, "not a model");
  ProcessResult r = RunOnnxamp({"run", bad, "--output-dir", out_.path().string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("bad.onnx"), std::string::npos) << r.err;
}

TEST_F(RunTest, OutputDirMissing) {
  const std::string missing = dir_ / "no_such_folder";
  ProcessResult r =
      RunOnnxamp({"run", kMlp, "--input", "input=" + Write(Input({3, 256}), "x.npy"), "--output-dir", missing});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(Lines(r.err).size(), 1u) << r.err;
  EXPECT_NE(r.err.find("no_such_folder: no such folder"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(missing));
}

// On a machine without a CUDA device (or with a build without the CUDA backend) `--device cuda` is one error line
// saying why, before any input is read. `onnxamp version` tells which case this is; with a device present the
// gpu-labelled tests (tests/cuda/cli_run_test.cc) cover --device cuda instead.
TEST_F(RunTest, CudaWithoutDeviceIsOneLineError) {
  const ProcessResult version = RunOnnxamp({"version"});
  ASSERT_EQ(version.exit_code, 0) << version.err;
  const bool compiled_in = version.out.find("CUDA backend: compiled in") != std::string::npos;
  for (const std::string& line : Lines(version.out)) {
    if (line.find(" CUDA device") != std::string::npos && line.back() == ':') {
      GTEST_SKIP() << "a CUDA device is present (" << line << ")";
    }
  }
  ExpectError(
      Run({"--input", "input=" + Write(Input({3, 256}), "x.npy"), "--device", "cuda"}),
      {compiled_in ? "error: --device cuda: no CUDA device" : "error: --device cuda: this build has no CUDA backend"});
  // The device is checked first: a missing input file is not what the error is about.
  ExpectError(Run({"--input", "input=" + (dir_ / "absent.npy"), "--device", "cuda", "--device-index", "1"}),
              {"--device cuda: "});
}

// --labels: the top-1 accuracy of output 0 against class indices, from an .npy or an .npz array.
TEST_F(RunTest, LabelsPrintAccuracy) {
  const ir::Tensor x = Input({4, 256});
  const std::vector<double> logits = PlainMlpForward(x);
  ir::Tensor y(DType::kInt64, {4});
  y.set_name("label");
  for (int64_t r = 0; r < 4; ++r) {
    int64_t best = 0;
    for (int64_t c = 1; c < 10; ++c) best = logits[r * 10 + c] > logits[r * 10 + best] ? c : best;
    y.mutable_values<int64_t>()[r] = r == 3 ? (best + 1) % 10 : best;  // row 3 wrong
  }
  ProcessResult r = Run({"--input", "input=" + Write(x, "x.npy"), "--labels", Write(y, "y.npy")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("accuracy 75% (3 of 4): argmax of output 0 over dim 1 against 'y'"), std::string::npos) << r.err;
  ExpectMatchesPlainForward(x);

  const std::string npz = dir_ / "val.npz";
  ASSERT_TRUE(importer::WriteNpz({x, y}, npz).ok());
  r = Run({"--input", "input=" + npz, "--labels", "label=" + npz});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("accuracy 75% (3 of 4): argmax of output 0 over dim 1 against 'label' from " + npz),
            std::string::npos)
      << r.err;
}

// Labels of shape [N, 1] score as [N]; --ignore-index leaves its positions out; a label outside the classes is an
// error naming the file, the row and the classes (it would otherwise count as a wrong prediction).
TEST_F(RunTest, LabelsOfAnotherShapeIgnoredAndOutOfRange) {
  const ir::Tensor x = Input({4, 256});
  const std::vector<double> logits = PlainMlpForward(x);
  ir::Tensor y(DType::kInt32, {4, 1});
  y.set_name("label");
  for (int64_t r = 0; r < 4; ++r) {
    int64_t best = 0;
    for (int64_t c = 1; c < 10; ++c) best = logits[r * 10 + c] > logits[r * 10 + best] ? c : best;
    y.mutable_values<int32_t>()[r] = static_cast<int32_t>(r == 3 ? (best + 1) % 10 : best);  // row 3 wrong
  }
  const std::string in = "input=" + Write(x, "x.npy");
  ProcessResult r = Run({"--input", in, "--labels", Write(y, "y.npy")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("accuracy 75% (3 of 4)"), std::string::npos) << r.err;
  y.mutable_values<int32_t>()[1] = -100;
  r = Run({"--input", in, "--labels", Write(y, "y.npy"), "--ignore-index", "-100"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("accuracy 66.6667% (2 of 3, 1 ignored)"), std::string::npos) << r.err;
  std::filesystem::remove(out_.path() / "output_0.pb");  // errors write nothing
  ExpectError(Run({"--input", in, "--labels", Write(y, "y.npy")}),
              {"--labels", "y.npy", "'y' has -100 at row 1, outside the 10 classes [0, 10) of output 0 'logits'"});
  y.mutable_values<int32_t>()[1] = 10;
  ExpectError(Run({"--input", in, "--labels", Write(y, "y.npy"), "--ignore-index", "-100"}),
              {"'y' has 10 at row 1, outside the 10 classes [0, 10) of output 0 'logits' and not the --ignore-index "
               "-100"});
  EXPECT_EQ(RunOnnxamp({"run", kMlp, "--input", in, "--ignore-index", "-100"}).exit_code, 2);
}

TEST_F(RunTest, LabelsErrors) {
  const std::string x = "input=" + Write(Input({4, 256}), "x.npy");
  ir::Tensor three(DType::kInt64, {3});
  three.set_name("y");
  ExpectError(Run({"--input", x, "--labels", Write(three, "three.npy")}),
              {"--labels", "three.npy", "shape [3]", "output 0 'logits' of shape [4,10] needs [4]"});
  ExpectError(Run({"--input", x, "--labels", Write(Input({4}, "f"), "f.npy")}),
              {"--labels", "f.npy", "dtype float", "integer class indices"});
  const std::string npz = dir_ / "two.npz";
  ASSERT_TRUE(importer::WriteNpz({Input({4}, "a"), Input({4}, "b")}, npz).ok());
  ExpectError(Run({"--input", x, "--labels", npz}), {"--labels", "2 arrays", "--labels ARRAY=FILE"});
  ExpectError(Run({"--input", x, "--labels", "c=" + npz}), {"two.npz", "none named 'c'"});
}

TEST_F(RunTest, UsageErrors) {
  EXPECT_EQ(RunOnnxamp({"run"}).exit_code, 2);
  EXPECT_EQ(RunOnnxamp({"run", kMlp, "--device", "tpu"}).exit_code, 2);
  EXPECT_EQ(RunOnnxamp({"run", kMlp, "--threads", "-1"}).exit_code, 2);
  EXPECT_EQ(RunOnnxamp({"run", kMlp, "--device", "cuda", "--device-index", "-1"}).exit_code, 2);
}

}  // namespace
}  // namespace onnxamp::tools_test
