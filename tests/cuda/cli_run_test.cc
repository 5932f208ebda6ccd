// `onnxamp run --device cuda` as a subprocess on the reference models of models/ (FP32, and FP16 written by
// `onnxamp convert --keep-io-types`): outputs compared with `--device cpu` on the same inputs, and the summary a
// device run prints. Skips without a CUDA device.
//
// On a GPU machine that got a bundle (scripts/gpu_run.sh) the paths differ from the build tree: ONNXAMP_CLI names
// the onnxamp binary (default: `onnxamp` beside this test binary, else <build>/tools/onnxamp) and
// ONNXAMP_MODELS_DIR the folder of the reference models (default: <source>/models).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "importer/tensor_file.h"
#include "runtime/common/half.h"
#include "tests/cuda/cuda_op_test_util.h"
#include "tests/tools/process_util.h"

namespace onnxamp::testing {
namespace {

namespace fs = std::filesystem;
using tools_test::ProcessResult;
using tools_test::RunProcess;
using tools_test::TempDir;

std::string FromEnv(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : std::string();
}

// The onnxamp binary: $ONNXAMP_CLI, else `onnxamp` in this test binary's folder (a bundle), else the build tree's.
std::string CliBinary() {
  if (std::string env = FromEnv("ONNXAMP_CLI"); !env.empty()) return env;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec && fs::exists(self.parent_path() / "onnxamp", ec)) return (self.parent_path() / "onnxamp").string();
  return tools_test::BinaryDir() + "/tools/onnxamp";
}

std::string ModelsDir() {
  if (std::string env = FromEnv("ONNXAMP_MODELS_DIR"); !env.empty()) return env;
  return std::string(ONNXAMP_SOURCE_DIR) + "/models";
}

ProcessResult RunCli(std::vector<std::string> args) {
  args.insert(args.begin(), CliBinary());
  return RunProcess(args);
}

// Deterministic input data: floats uniform in [-1, 1), int64 token ids in [0, int_high).
ir::Tensor MakeInput(const std::string& name, DType dtype, const std::vector<int64_t>& dims, uint64_t seed,
                     int64_t int_high = 128) {
  ir::Tensor t(dtype, dims);
  t.set_name(name);
  uint64_t state = seed;
  const int64_t n = t.num_elements();
  for (int64_t i = 0; i < n; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const uint64_t r = state >> 11;
    if (dtype == DType::kInt64) {
      t.mutable_values<int64_t>()[i] = static_cast<int64_t>(r % static_cast<uint64_t>(int_high));
    } else {
      t.mutable_values<float>()[i] =
          static_cast<float>(static_cast<double>(r) / static_cast<double>(1ull << 53) * 2 - 1);
    }
  }
  return t;
}

std::vector<double> AsDoubles(const ir::Tensor& t) {
  std::vector<double> out(static_cast<size_t>(t.num_elements()));
  for (size_t i = 0; i < out.size(); ++i) {
    switch (t.dtype()) {
      case DType::kFloat32:
        out[i] = t.values<float>()[i];
        break;
      case DType::kFloat16:
        out[i] = HalfBitsToFloat(t.values<uint16_t>()[i]);
        break;
      case DType::kBFloat16:
        out[i] = BFloat16BitsToFloat(t.values<uint16_t>()[i]);
        break;
      case DType::kInt64:
        out[i] = static_cast<double>(t.values<int64_t>()[i]);
        break;
      default:
        ADD_FAILURE() << "unexpected output dtype " << DTypeName(t.dtype());
        return {};
    }
  }
  return out;
}

struct ModelCase {
  const char* model;  // file stem in models/
  const char* input;  // graph input name
  DType dtype;
  std::vector<int64_t> dims;
  bool fp16;  // run the `onnxamp convert --keep-io-types` output instead of the FP32 model
};

std::string CaseName(const ::testing::TestParamInfo<ModelCase>& info) {
  return std::string(info.param.model) + (info.param.fp16 ? "_fp16" : "_fp32");
}

class CliRunCudaTest : public ::testing::TestWithParam<ModelCase> {};

TEST_P(CliRunCudaTest, MatchesCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const ModelCase& c = GetParam();
  TempDir dir;
  std::string model = ModelsDir() + "/" + c.model + ".onnx";
  ASSERT_TRUE(fs::exists(model)) << model << " not found (set ONNXAMP_MODELS_DIR)";
  if (c.fp16) {
    const std::string converted = dir / "model.fp16.onnx";
    ProcessResult conv = RunCli({"convert", model, "-o", converted, "--keep-io-types"});
    ASSERT_EQ(conv.exit_code, 0) << conv.err;
    model = converted;
  }
  const std::string input_file = dir / "input.npy";
  ASSERT_TRUE(importer::WriteTensorFile(MakeInput(c.input, c.dtype, c.dims, 7), input_file).ok());

  std::vector<double> outputs[2];
  for (int d = 0; d < 2; ++d) {
    const std::string device = d == 0 ? "cpu" : "cuda";
    const fs::path out_dir = dir.path() / device;
    fs::create_directories(out_dir);
    ProcessResult r = RunCli({"run", model, "--input", std::string(c.input) + "=" + input_file, "--device", device,
                              "--output-dir", out_dir.string()});
    ASSERT_EQ(r.exit_code, 0) << device << ": " << r.err;
    if (device == "cuda") {
      EXPECT_NE(r.err.find("  device cuda:"), std::string::npos) << r.err;
      EXPECT_NE(r.err.find("device time "), std::string::npos) << r.err;
      EXPECT_NE(r.err.find("peak device memory "), std::string::npos) << r.err;
      // The reference models use only ops the CUDA backend implements: nothing should fall back to the CPU (the
      // placement line says "0 of N nodes on the CPU"; a line of its own lists the nodes when there are any).
      EXPECT_NE(r.err.find("; 0 of "), std::string::npos) << r.err;
      EXPECT_EQ(r.err.find("\n  nodes on the CPU ("), std::string::npos) << r.err;
    }
    StatusOr<ir::Tensor> y = importer::ReadTensorFile((out_dir / "output_0.pb").string());
    ASSERT_TRUE(y.ok()) << device << ": " << y.status().message();
    EXPECT_EQ(y->dtype(), DType::kFloat32) << device;
    outputs[d] = AsDoubles(*y);
  }
  const std::vector<double>& want = outputs[0];
  const std::vector<double>& got = outputs[1];
  ASSERT_EQ(got.size(), want.size());
  ASSERT_FALSE(want.empty());
  // Relative to the largest output: the two devices sum in different orders, and an FP16 model rounds every
  // intermediate value to 11 bits, so single elements may differ by a few units of the output's scale.
  double scale = 0;
  for (double w : want) scale = std::max(scale, std::fabs(w));
  const double tol = (c.fp16 ? 2e-2 : 1e-4) * std::max(scale, 1.0);
  int bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!(std::fabs(got[i] - want[i]) <= tol)) {  // NaN fails
      if (++bad <= 10)
        ADD_FAILURE() << "element " << i << ": cuda " << got[i] << ", cpu " << want[i] << " (tol " << tol << ")";
    }
  }
  EXPECT_EQ(bad, 0) << "of " << want.size() << " elements";
}

INSTANTIATE_TEST_SUITE_P(Models, CliRunCudaTest,
                         ::testing::Values(ModelCase{"mlp", "input", DType::kFloat32, {4, 256}, false},
                                           ModelCase{"mlp", "input", DType::kFloat32, {4, 256}, true},
                                           ModelCase{"cnn", "input", DType::kFloat32, {3, 3, 32, 32}, false},
                                           ModelCase{"cnn", "input", DType::kFloat32, {3, 3, 32, 32}, true},
                                           ModelCase{"transformer", "input_ids", DType::kInt64, {2, 32}, false},
                                           ModelCase{"transformer", "input_ids", DType::kInt64, {2, 32}, true}),
                         CaseName);

// A device index that does not exist is one error line naming it, exit 1.
TEST(CliRunCudaErrors, DeviceIndexOutOfRange) {
  ONNXAMP_REQUIRE_CUDA();
  TempDir dir;
  const std::string input_file = dir / "input.npy";
  ASSERT_TRUE(importer::WriteTensorFile(MakeInput("input", DType::kFloat32, {1, 256}, 3), input_file).ok());
  ProcessResult r = RunCli({"run", ModelsDir() + "/mlp.onnx", "--input", "input=" + input_file, "--device", "cuda",
                            "--device-index", "4096", "--output-dir", dir.path().string()});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(tools_test::Lines(r.err).size(), 1u) << r.err;
  EXPECT_NE(r.err.find("4096"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir.path() / "output_0.pb"));
}

}  // namespace
}  // namespace onnxamp::testing
