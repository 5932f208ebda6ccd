// Converts every model of models/ and of the ONNX backend test suite (opset <= 17, ops our CPU runtime runs):
// the result must pass the ONNX 1.12 checker with strict shape inference, convert to itself again, and run
// on the CPU runtime close to the FP32 model. Prints the measured error per model.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "converter/convert.h"
#include "converter/passes/conversion_state.h"
#include "importer/model_io.h"
#include "importer/tensor_file.h"
#include "tests/converter/converter_test_util.h"

namespace onnxamp::converter {
namespace {

namespace fs = std::filesystem;

struct Comparison {
  double max_abs = 0;
  double max_ref = 0;       // max |ref|
  double max_rel = 0;       // over elements with |ref| > atol
  double worst_excess = 0;  // max of |d| - (atol + rtol*|ref|)
  bool new_nonfinite = false;
  bool comparable = true;
};

Comparison Compare(const std::vector<ir::Tensor>& ref, const std::vector<ir::Tensor>& got, double rtol, double atol) {
  Comparison c;
  c.worst_excess = -1e300;
  if (ref.size() != got.size()) {
    c.comparable = false;
    return c;
  }
  for (size_t k = 0; k < ref.size(); ++k) {
    std::vector<double> r = testing::AsDoubles(ref[k]), g = testing::AsDoubles(got[k]);
    if (r.size() != g.size() || (r.empty() && ref[k].num_elements() > 0)) {
      c.comparable = false;
      return c;
    }
    for (size_t i = 0; i < r.size(); ++i) {
      if (!std::isfinite(r[i])) continue;
      if (!std::isfinite(g[i])) {
        c.new_nonfinite = true;
        continue;
      }
      const double d = std::fabs(r[i] - g[i]);
      c.max_ref = std::max(c.max_ref, std::fabs(r[i]));
      c.max_abs = std::max(c.max_abs, d);
      if (std::fabs(r[i]) > atol) c.max_rel = std::max(c.max_rel, d / std::fabs(r[i]));
      c.worst_excess = std::max(c.worst_excess, d - (atol + rtol * std::fabs(r[i])));
    }
  }
  return c;
}

// Random inputs for a model's graph inputs (symbolic dims: 2); integer inputs get small non-negative values.
std::vector<ir::Tensor> RandomInputs(const ir::Model& m, uint32_t seed) {
  std::vector<ir::Tensor> out;
  for (const ir::Value* v : m.graph->inputs()) {
    if (v->initializer()) continue;
    std::vector<int64_t> dims;
    for (const ir::Dim& d : v->type().shape().value_or(ir::Shape{})) dims.push_back(d.is_value() ? d.value : 2);
    ir::Tensor t;
    if (v->type().elem_type() == DType::kInt64) {
      t = ir::Tensor(DType::kInt64, dims);
      int64_t k = seed;
      for (int64_t& x : t.mutable_values<int64_t>()) x = (k = (k * 1103515245 + 12345) & 0x7fffffff) % 10;
    } else {
      t = testing::RandomTensor(dims, seed++);
    }
    t.set_name(v->name());
    out.push_back(std::move(t));
  }
  return out;
}

class ModelsTest : public ::testing::TestWithParam<std::tuple<std::string, DType>> {};

TEST_P(ModelsTest, ConvertsChecksRunsAndIsIdempotent) {
  const auto& [name, target] = GetParam();
  const std::string path = std::string(ONNXAMP_SOURCE_DIR) + "/models/" + name + ".onnx";
  auto loaded = importer::LoadModel(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  ir::Model fp32 = std::move(loaded).value();
  ir::Model m = std::move(importer::LoadModel(path)).value();
  ConvertOptions options;
  options.target = target;
  {
    // The passes one by one, ir::Verify after each.
    ir::Model stepwise = std::move(importer::LoadModel(path)).value();
    ConvertReport unused;
    testing::RunPassesVerified(stepwise, options, &unused);
  }
  ConvertReport report;
  Status st = ConvertModel(m, options, &report);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(testing::OnnxCheck(m), "");
  EXPECT_GT(report.nodes_low, 0);
  if (::testing::Test::HasFailure() || std::getenv("ONNXAMP_VERBOSE")) std::printf("%s", report.Summary().c_str());
  // bf16: ONNX's Conv has no bfloat16 before opset 22, so a CNN keeps its convolutions (and weights) in float.
  if (target == DType::kFloat16) {
    EXPECT_LT(report.bytes_after, report.bytes_before * 6 / 10);
  }
  EXPECT_LE(report.bytes_after, report.bytes_before);
  EXPECT_TRUE(IsConverted(m, options));

  const std::vector<ir::Tensor> inputs = RandomInputs(fp32, 7);
  auto ref = testing::RunModel(fp32, inputs);
  ASSERT_TRUE(ref.ok()) << ref.status().message();
  auto got = testing::RunModel(m, inputs);
  ASSERT_TRUE(got.ok()) << got.status().message();
  // Logits of small classifiers: fp16 within 1e-2 relative / 1e-3 absolute; bf16 has 3 fewer mantissa bits.
  // The transformer's logits (|y| up to ~2) move by up to ~2e-3 in fp16, mostly from rounding the MatMul
  // inputs (docs/converter.md), so it gets a wider absolute tolerance (measured numbers are printed below).
  const double rtol = target == DType::kFloat16 ? 1e-2 : 8e-2;
  const double atol = (target == DType::kFloat16 ? 1e-3 : 8e-3) * (name == "transformer" ? 4 : 1);
  Comparison c = Compare(*ref, *got, rtol, atol);
  std::printf("[ models ] %-12s %-8s max|y| %.3g max_abs %.3g max_rel %.3g (nodes %lld/%lld low, casts %lld)\n",
              name.c_str(), std::string(DTypeName(target)).c_str(), c.max_ref, c.max_abs, c.max_rel,
              static_cast<long long>(report.nodes_low), static_cast<long long>(report.nodes_total),
              static_cast<long long>(report.casts_final));
  ASSERT_TRUE(c.comparable);
  EXPECT_FALSE(c.new_nonfinite);
  EXPECT_LE(c.worst_excess, 0.0) << "max_abs " << c.max_abs << " max_rel " << c.max_rel;
}

INSTANTIATE_TEST_SUITE_P(Models, ModelsTest,
                         ::testing::Combine(::testing::Values("mlp", "digits_mlp", "cnn", "transformer"),
                                            ::testing::Values(DType::kFloat16, DType::kBFloat16)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" + ShortName(std::get<1>(info.param));
                         });

struct SweepCounts {
  int models = 0, skipped_load = 0, skipped_opset = 0, skipped_checker = 0, skipped_no_kernel = 0;
  int converted = 0, unchanged = 0, no_low_kernel = 0, compared = 0, within_tolerance = 0, refused = 0;
  std::vector<std::string> failures;       // checker, idempotence or conversion errors: the test fails
  std::vector<std::string> new_nonfinite;  // NaN/inf where FP32 has none
  std::vector<std::string> over_tolerance;
};

std::vector<ir::Tensor> ReadInputs(const fs::path& dir, const ir::Model& m) {
  std::vector<std::string> names;
  for (const ir::Value* v : m.graph->inputs())
    if (!v->initializer()) names.push_back(v->name());
  std::vector<ir::Tensor> out;
  for (size_t i = 0; i < names.size(); ++i) {
    const fs::path p = dir / "test_data_set_0" / ("input_" + std::to_string(i) + ".pb");
    auto t = importer::ReadTensorFile(p.string());
    if (!t.ok()) return {};
    t->set_name(names[i]);
    out.push_back(std::move(t).value());
  }
  return out;
}

// One backend-suite model through conversion to `target`.
void SweepOne(const fs::path& dir, DType target, SweepCounts& c) {
  const std::string label = dir.parent_path().filename().string() + "/" + dir.filename().string();
  auto loaded = importer::LoadModel((dir / "model.onnx").string());
  if (!loaded.ok()) {
    ++c.skipped_load;
    return;
  }
  ir::Model fp32 = std::move(loaded).value();
  ++c.models;
  if (fp32.OpsetVersion("") > 17 || fp32.OpsetVersion("") == 0) {
    ++c.skipped_opset;
    return;
  }
  if (!testing::OnnxCheck(fp32).empty()) {
    ++c.skipped_checker;
    return;
  }
  ir::Model m = std::move(importer::LoadModel((dir / "model.onnx").string())).value();
  ConvertOptions options;
  options.target = target;
  ConvertReport report;
  Status st = ConvertModel(m, options, &report);
  if (!st.ok()) {
    if (st.code() == StatusCode::kUnimplemented) {
      ++c.refused;  // opset < 6, or bf16 where the opset cannot be raised to 13 safely: refused with a message
    } else {
      c.failures.push_back(label + ": convert: " + st.message());
    }
    return;
  }
  ++c.converted;
  if (std::string err = testing::OnnxCheck(m); !err.empty()) {
    c.failures.push_back(label + ": checker: " + err);
    return;
  }
  if (!IsConverted(m, options)) c.failures.push_back(label + ": a second conversion changes the model");
  // Numerics only where our CPU runtime runs the FP32 model (conversion and checks above apply to all).
  const std::vector<ir::Tensor> inputs = ReadInputs(dir, fp32);
  auto ref = testing::RunModel(fp32, inputs);
  if (!ref.ok()) {
    ++c.skipped_no_kernel;  // our runtime lacks a kernel (or refuses an attribute) for the FP32 model
    return;
  }
  if (report.nodes_low == 0 && report.casts_inserted == 0 && report.initializers_converted == 0) {
    ++c.unchanged;  // integer-only or float64 models: nothing to compare
    return;
  }
  // Numerics: with --keep-io-types, so that the comparison measures the conversion and not the rounding of the
  // test inputs to fp16 (softmax_large_number feeds 10000.0) or of FP32-kept outputs (reduce_prod gives 4.8e8).
  ir::Model k = std::move(importer::LoadModel((dir / "model.onnx").string())).value();
  options.keep_io_types = true;
  st = ConvertModel(k, options);
  if (!st.ok()) {
    c.failures.push_back(label + ": convert --keep-io-types: " + st.message());
    return;
  }
  if (std::string err = testing::OnnxCheck(k); !err.empty()) {
    c.failures.push_back(label + ": checker (--keep-io-types): " + err);
    return;
  }
  if (!IsConverted(k, options)) c.failures.push_back(label + ": a second --keep-io-types conversion changes it");
  auto got = testing::RunModel(k, inputs);
  if (!got.ok()) {
    ++c.no_low_kernel;
    return;
  }
  const double rtol = target == DType::kFloat16 ? 1e-2 : 8e-2;
  const double atol = target == DType::kFloat16 ? 1e-3 : 8e-3;
  Comparison cmp = Compare(*ref, *got, rtol, atol);
  if (!cmp.comparable) return;
  ++c.compared;
  std::printf("[ suite ] %-60s %-8s max|y| %-9.3g max_abs %-9.3g max_rel %-9.3g%s\n", label.c_str(),
              std::string(DTypeName(target)).c_str(), cmp.max_ref, cmp.max_abs, cmp.max_rel,
              cmp.new_nonfinite ? " NON-FINITE" : (cmp.worst_excess > 0 ? " over tolerance" : ""));
  if (cmp.new_nonfinite) c.new_nonfinite.push_back(label);
  if (cmp.worst_excess > 0) {
    c.over_tolerance.push_back(label);
  } else {
    ++c.within_tolerance;
  }
}

void Sweep(DType target) {
  const fs::path root = "/usr/share/libonnx-testdata/data";
  if (!fs::exists(root)) GTEST_SKIP() << root << " is not installed (libonnx-testdata)";
  std::vector<fs::path> dirs;
  for (const char* suite : {"node", "pytorch-converted", "pytorch-operator", "simple"}) {
    if (!fs::exists(root / suite)) continue;
    for (const auto& e : fs::directory_iterator(root / suite))
      if (fs::exists(e.path() / "model.onnx")) dirs.push_back(e.path());
  }
  std::sort(dirs.begin(), dirs.end());
  SweepCounts c;
  for (const fs::path& d : dirs) SweepOne(d, target, c);
  std::printf(
      "[ suite ] %s: %d models; skipped: %d unreadable, %d opset > 17, %d failing the checker before conversion, "
      "converted %d (%d refused); not compared: %d without a CPU kernel for the FP32 model, %d unchanged, %d "
      "without a low-precision kernel; "
      "compared %d: %d within tolerance, %zu over, %zu with new NaN/inf\n",
      std::string(DTypeName(target)).c_str(), c.models, c.skipped_load, c.skipped_opset, c.skipped_checker, c.converted,
      c.refused, c.skipped_no_kernel, c.unchanged, c.no_low_kernel, c.compared, c.within_tolerance,
      c.over_tolerance.size(), c.new_nonfinite.size());
  for (const std::string& f : c.failures) ADD_FAILURE() << f;
  EXPECT_GT(c.converted, 100);
}

TEST(BackendSuiteTest, Float16) { Sweep(DType::kFloat16); }
TEST(BackendSuiteTest, BFloat16) { Sweep(DType::kBFloat16); }

}  // namespace
}  // namespace onnxamp::converter
