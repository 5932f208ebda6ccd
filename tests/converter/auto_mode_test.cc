// Auto mode: on small hand-built models where exactly one node must stay FP32 (an fp16 overflow, a precision loss
// in fp16 and bf16, outputs far below atol, weights flushed to zero) the search keeps that node; where nothing needs
// keeping it keeps nothing; the final model is within tolerance when run again; bad samples and unreachable
// tolerances are reported.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "converter/auto_mode.h"
#include "converter/convert.h"
#include "runtime/common/half.h"
#include "runtime/executor/session.h"
#include "runtime/ir/graph.h"
#include "runtime/ir/model.h"
#include "runtime/ir/verify.h"

namespace onnxamp::converter {
namespace {

// Deterministic values uniform in [lo, hi).
ir::Tensor Uniform(const std::string& name, std::vector<int64_t> dims, double lo, double hi, uint64_t seed) {
  ir::Tensor t(DType::kFloat32, std::move(dims));
  t.set_name(name);
  uint64_t state = seed * 0x9e3779b97f4a7c15ULL + 1;
  for (float& x : t.mutable_values<float>()) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    x = static_cast<float>(lo + (hi - lo) * static_cast<double>(state >> 11) / static_cast<double>(1ULL << 53));
  }
  return t;
}

// A tiny model builder: one float input [4, kWidth], Gemm layers (transB=1) and other ops, one output.
constexpr int64_t kWidth = 16;
constexpr int64_t kBatch = 4;

class ModelBuilder {
 public:
  ModelBuilder() {
    model_.ir_version = 8;
    model_.opset_imports = {{"", 17}};
    model_.graph = std::make_unique<ir::Graph>("auto_test");
    input_ = model_.graph->CreateValue("x");
    input_->set_type(ir::ValueType::Tensor(DType::kFloat32, ir::Shape{ir::Dim::Value(kBatch), ir::Dim::Value(kWidth)}));
    model_.graph->AddInput(input_);
  }
  ir::Value* input() { return input_; }

  ir::Value* Init(const std::string& name, ir::Tensor t) {
    ir::Value* v = model_.graph->CreateValue(name);
    model_.graph->SetInitializer(v, std::move(t));
    return v;
  }
  // y = x W^T + b, W [kWidth, kWidth] uniform in [w_lo, w_hi), b uniform in [-0.1, 0.1).
  ir::Value* Gemm(const std::string& name, ir::Value* x, double w_lo, double w_hi, double b_lo = -0.1,
                  double b_hi = 0.1) {
    ir::Value* w = Init(name + ".weight", Uniform(name + ".weight", {kWidth, kWidth}, w_lo, w_hi, seed_++));
    ir::Value* b = Init(name + ".bias", Uniform(name + ".bias", {kWidth}, b_lo, b_hi, seed_++));
    return Op("Gemm", name, {x, w, b}, {ir::Attribute::Int("transB", 1)});
  }
  ir::Value* Op(const std::string& op, const std::string& name, std::vector<ir::Value*> inputs,
                std::vector<ir::Attribute> attrs = {}) {
    ir::Value* y = model_.graph->CreateValue(name + ".out");
    ir::Node* n = model_.graph->AddNode(op, std::move(inputs), {y}, name);
    for (ir::Attribute& a : attrs) n->SetAttribute(std::move(a));
    return y;
  }
  ir::Model Finish(ir::Value* y) {
    y->set_type(ir::ValueType::Tensor(DType::kFloat32));
    model_.graph->AddOutput(y);
    return std::move(model_);
  }

 private:
  ir::Model model_;
  ir::Value* input_;
  uint64_t seed_ = 1;
};

std::vector<std::vector<ir::Tensor>> Samples(double lo, double hi, int sets = 2) {
  std::vector<std::vector<ir::Tensor>> out;
  for (int s = 0; s < sets; ++s) out.push_back({Uniform("x", {kBatch, kWidth}, lo, hi, 100 + s)});
  return out;
}

// x -> Gemm 'small' -> Gemm 'big' (weights 4000..8000: outputs ~1.5e5, beyond fp16's 65504) -> LayerNorm -> y.
// In fp16 'big' overflows to inf and the LayerNorm gives NaN; with 'big' in FP32 the LayerNorm (FP32 by policy)
// brings the values back to O(1).
ir::Model OverflowModel() {
  ModelBuilder b;
  ir::Value* h = b.Gemm("small", b.input(), 0.0, 0.2);
  h = b.Gemm("big", h, 4000, 8000);
  ir::Value* scale = b.Init("ln.weight", Uniform("ln.weight", {kWidth}, 0.8, 1.2, 7));
  ir::Value* bias = b.Init("ln.bias", Uniform("ln.bias", {kWidth}, -0.1, 0.1, 8));
  return b.Finish(b.Op("LayerNormalization", "ln", {h, scale, bias}, {ir::Attribute::Int("axis", -1)}));
}

// x (values 1000..1001, FP32 at the boundary) -> Gemm 'offset' (W = identity, b = -1000: y = x - 1000, a
// cancellation that rounding x to fp16/bf16 ruins) -> Relu -> Gemm 'head' -> y.
ir::Model CancellationModel() {
  ModelBuilder b;
  ir::Tensor eye(DType::kFloat32, {kWidth, kWidth});
  for (int64_t i = 0; i < kWidth; ++i) eye.mutable_values<float>()[i * kWidth + i] = 1.0f;
  ir::Tensor minus(DType::kFloat32, {kWidth});
  for (float& v : minus.mutable_values<float>()) v = -1000.0f;
  ir::Value* w = b.Init("offset.weight", std::move(eye));
  ir::Value* c = b.Init("offset.bias", std::move(minus));
  ir::Value* h = b.Op("Gemm", "offset", {b.input(), w, c}, {ir::Attribute::Int("transB", 1)});
  h = b.Op("Relu", "relu", {h});
  return b.Finish(b.Gemm("head", h, -0.5, 0.5));
}

// A plain MLP with moderate values: nothing needs keeping.
ir::Model BenignModel() {
  ModelBuilder b;
  ir::Value* h = b.Op("Relu", "relu1", {b.Gemm("fc1", b.input(), -0.25, 0.25)});
  h = b.Op("Relu", "relu2", {b.Gemm("fc2", h, -0.25, 0.25)});
  return b.Finish(b.Gemm("fc3", h, -0.25, 0.25));
}

// x -> Gemm 'fc1' -> Relu -> MatMul 'tiny' (weights of magnitude ~1e-9) -> y, so y is ~1e-9: far below atol, and
// all zeros in fp16, where the weights flush to zero. atol alone would accept that (|error| ~1e-9 < 1e-3).
ir::Model TinyOutputModel() {
  ModelBuilder b;
  ir::Value* h = b.Op("Relu", "relu", {b.Gemm("fc1", b.input(), -0.25, 0.25)});
  ir::Value* w = b.Init("tiny.weight", Uniform("tiny.weight", {kWidth, kWidth}, -2e-9, 2e-9, 11));
  return b.Finish(b.Op("MatMul", "tiny", {h, w}));
}

// x (30000..60000) -> MatMul 'matmul' (weights 1e-8..2e-8, which fp16 flushes to zero) -> y ~1e-2: above atol, but
// all zeros in fp16.
ir::Model FlushedWeightsModel() {
  ModelBuilder b;
  ir::Value* w = b.Init("matmul.weight", Uniform("matmul.weight", {kWidth, kWidth}, 1e-8, 2e-8, 12));
  return b.Finish(b.Op("MatMul", "matmul", {b.input(), w}));
}

// max |y| of the FP32 model over `samples`.
double MaxAbsOutput(const ir::Model& fp32, const std::vector<std::vector<ir::Tensor>>& samples) {
  ir::Model c;
  c.ir_version = fp32.ir_version;
  c.opset_imports = fp32.opset_imports;
  c.graph = fp32.graph->Clone();
  auto session = exec::Session::Create(std::move(c));
  EXPECT_TRUE(session.ok());
  if (!session.ok()) return 0;
  double m = 0;
  for (const auto& sample : samples) {
    auto out = (*session)->Run(sample);
    EXPECT_TRUE(out.ok());
    if (!out.ok()) return 0;
    for (float v : (*out)[0].values<float>()) m = std::max(m, std::fabs(double{v}));
  }
  return m;
}

std::vector<std::string> KeptNames(const AutoResult& r) {
  std::vector<std::string> names;
  for (const KeptNode& k : r.kept) names.push_back(k.name);
  return names;
}

const ir::Node* FindNode(const ir::Model& m, const std::string& name) {
  for (const ir::Node* n : m.graph->nodes()) {
    if (n->name() == name) return n;
  }
  return nullptr;
}

// Runs the converted `model` on `samples` (cast to its input types) and checks it against the FP32 `reference`.
void ExpectWithinTolerance(const ir::Model& reference, const ir::Model& model,
                           const std::vector<std::vector<ir::Tensor>>& samples, double rtol, double atol) {
  auto clone = [](const ir::Model& m) {
    ir::Model c;
    c.ir_version = m.ir_version;
    c.opset_imports = m.opset_imports;
    c.graph = m.graph->Clone();
    return c;
  };
  auto ref = exec::Session::Create(clone(reference));
  auto got = exec::Session::Create(clone(model));
  ASSERT_TRUE(ref.ok()) << ref.status().message();
  ASSERT_TRUE(got.ok()) << got.status().message();
  const DType in_type = (*got)->inputs()[0].type.elem_type();
  for (const auto& sample : samples) {
    auto r = (*ref)->Run(sample);
    ASSERT_TRUE(r.ok()) << r.status().message();
    ir::Tensor x = sample[0];
    if (in_type != DType::kFloat32) {
      ir::Tensor cast(in_type, x.dims());
      cast.set_name(x.name());
      for (size_t i = 0; i < x.values<float>().size(); ++i) {
        const float v = x.values<float>()[i];
        cast.mutable_values<uint16_t>()[i] = in_type == DType::kFloat16 ? FloatToHalfBits(v) : FloatToBFloat16Bits(v);
      }
      x = cast;
    }
    auto g = (*got)->Run({x});
    ASSERT_TRUE(g.ok()) << g.status().message();
    const ir::Tensor& a = (*r)[0];
    const ir::Tensor& b = (*g)[0];
    ASSERT_EQ(a.num_elements(), b.num_elements());
    for (int64_t i = 0; i < a.num_elements(); ++i) {
      const double want = a.values<float>()[i];
      const double have = b.dtype() == DType::kFloat32   ? b.values<float>()[i]
                          : b.dtype() == DType::kFloat16 ? HalfBitsToFloat(b.values<uint16_t>()[i])
                                                         : BFloat16BitsToFloat(b.values<uint16_t>()[i]);
      ASSERT_TRUE(std::isfinite(have)) << "element " << i;
      EXPECT_LE(std::fabs(have - want), atol + rtol * std::fabs(want)) << "element " << i;
    }
  }
}

TEST(AutoModeTest, KeepsExactlyTheOverflowingGemm) {
  const ir::Model fp32 = OverflowModel();
  ASSERT_TRUE(ir::Verify(fp32).ok());
  ir::Model model = OverflowModel();
  ConvertOptions options;
  AutoOptions auto_options;
  auto_options.rtol = 1e-2;
  auto_options.atol = 5e-2;
  AutoResult result;
  ConvertReport report;
  const auto samples = Samples(0, 1);
  Status s = AutoConvert(model, samples, options, auto_options, &result, &report);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(result.within_tolerance);
  EXPECT_EQ(KeptNames(result), std::vector<std::string>{"big"});
  ASSERT_EQ(result.kept.size(), 1u);
  EXPECT_EQ(result.kept[0].op_type, "Gemm");
  EXPECT_EQ(result.kept[0].reason.rfind("auto: ", 0), 0u) << result.kept[0].reason;
  EXPECT_NE(result.kept[0].reason.find("NaN/inf"), std::string::npos) << result.kept[0].reason;
  ASSERT_TRUE(ir::Verify(model).ok());

  // The policy gained the name; the model has 'big' in FP32 and 'small' in fp16.
  const ir::Node* big = FindNode(model, "big");
  const ir::Node* small = FindNode(model, "small");
  ASSERT_TRUE(big && small);
  EXPECT_EQ(options.policy.Decide(*big).precision, Precision::kKeep);
  EXPECT_EQ(big->input(1)->initializer()->dtype(), DType::kFloat32);
  EXPECT_EQ(small->input(1)->initializer()->dtype(), DType::kFloat16);
  bool reported = false;
  for (const KeptNode& k : report.kept_fp32)
    reported = reported || (k.name == "big" && k.reason.rfind("auto: ", 0) == 0);
  EXPECT_TRUE(reported) << "the conversion report lists 'big' with the auto reason";

  ASSERT_EQ(result.errors.size(), 1u);
  EXPECT_FALSE(result.errors[0].nonfinite);
  EXPECT_LE(result.errors[0].worst_excess, 0);
  EXPECT_GT(result.candidate_runs, 2);
  ExpectWithinTolerance(fp32, model, samples, auto_options.rtol, auto_options.atol);
}

class AutoModeCancellationTest : public ::testing::TestWithParam<DType> {};

TEST_P(AutoModeCancellationTest, KeepsExactlyTheCancellingGemm) {
  const ir::Model fp32 = CancellationModel();
  ir::Model model = CancellationModel();
  ConvertOptions options;
  options.target = GetParam();
  options.keep_io_types = true;
  AutoOptions auto_options;
  auto_options.rtol = 5e-2;
  auto_options.atol = 5e-2;
  AutoResult result;
  const auto samples = Samples(1000, 1001);
  Status s = AutoConvert(model, samples, options, auto_options, &result);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(result.within_tolerance);
  EXPECT_EQ(KeptNames(result), std::vector<std::string>{"offset"});
  const ir::Node* head = FindNode(model, "head");
  ASSERT_TRUE(head);
  EXPECT_EQ(head->input(1)->initializer()->dtype(), GetParam());
  ExpectWithinTolerance(fp32, model, samples, auto_options.rtol, auto_options.atol);
}

INSTANTIATE_TEST_SUITE_P(Targets, AutoModeCancellationTest, ::testing::Values(DType::kFloat16, DType::kBFloat16),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return info.param == DType::kFloat16 ? std::string("fp16") : std::string("bf16");
                         });

TEST(AutoModeTest, KeepsNothingWhenThePolicyConversionIsWithinTolerance) {
  const ir::Model fp32 = BenignModel();
  ir::Model model = BenignModel();
  ConvertOptions options;
  AutoOptions auto_options;
  AutoResult result;
  ConvertReport report;
  const auto samples = Samples(-1, 1);
  Status s = AutoConvert(model, samples, options, auto_options, &result, &report);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(result.within_tolerance);
  EXPECT_TRUE(result.kept.empty());
  EXPECT_EQ(result.candidate_runs, 2);  // the FP32 reference and the policy's conversion
  EXPECT_EQ(report.nodes_low, report.nodes_total);
  EXPECT_EQ(model.graph->inputs()[0]->type().elem_type(), DType::kFloat16);
  ASSERT_EQ(result.errors.size(), 1u);
  EXPECT_EQ(result.errors[0].name, "fc3.out");
  EXPECT_GT(result.errors[0].max_abs, 0);  // fp16 does change the values
  EXPECT_LE(result.errors[0].worst_excess, 0);
  // Outputs of ordinary magnitude are judged by atol as given, without a warning.
  EXPECT_FALSE(result.errors[0].below_atol);
  EXPECT_FALSE(result.errors[0].all_zero);
  EXPECT_EQ(result.errors[0].atol_used, auto_options.atol);
  EXPECT_TRUE(result.warnings.empty());
  ExpectWithinTolerance(fp32, model, samples, auto_options.rtol, auto_options.atol);
}

TEST(AutoModeTest, OutputsFarBelowAtolAreJudgedAtTheirOwnScale) {
  const ir::Model fp32 = TinyOutputModel();
  const auto samples = Samples(-1, 1);
  const double scale = MaxAbsOutput(fp32, samples);
  ASSERT_GT(scale, 1e-10);
  ASSERT_LT(scale, 1e-8);
  ir::Model model = TinyOutputModel();
  ConvertOptions options;
  options.keep_io_types = true;  // an fp16 output cannot hold ~1e-9 at all (see the next test)
  AutoOptions auto_options;      // rtol 1e-2, atol 1e-3
  AutoResult result;
  Status s = AutoConvert(model, samples, options, auto_options, &result);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(result.within_tolerance);

  // The warning says why the output was not judged by atol.
  ASSERT_EQ(result.warnings.size(), 1u);
  EXPECT_NE(result.warnings[0].find("output 'tiny.out'"), std::string::npos) << result.warnings[0];
  EXPECT_NE(result.warnings[0].find("below atol"), std::string::npos) << result.warnings[0];
  ASSERT_EQ(result.errors.size(), 1u);
  EXPECT_TRUE(result.errors[0].below_atol);
  EXPECT_FALSE(result.errors[0].all_zero);
  EXPECT_DOUBLE_EQ(result.errors[0].scale, scale);
  EXPECT_DOUBLE_EQ(result.errors[0].atol_used, auto_options.atol * scale);

  // The MatMul that flushes everything to zero in fp16 stays FP32, and the probe said why it ranks first.
  ASSERT_FALSE(result.kept.empty());
  EXPECT_EQ(result.kept[0].name, "tiny");
  EXPECT_NE(result.kept[0].reason.find("below fp16's smallest normal"), std::string::npos) << result.kept[0].reason;
  const ir::Node* tiny = FindNode(model, "tiny");
  ASSERT_TRUE(tiny);
  EXPECT_EQ(tiny->input(1)->initializer()->dtype(), DType::kFloat32);
  // The outputs are right relative to their scale (an all-zero output would fail this).
  ExpectWithinTolerance(fp32, model, samples, auto_options.rtol, auto_options.atol * scale);
}

TEST(AutoModeTest, Fp16OutputsFarBelowFp16RangeAreReportedNotPassed) {
  // The same model with fp16 graph outputs: ~1e-9 rounds to zero in the output itself, whatever is kept FP32. That
  // used to pass (|0 - y| < atol); now it is reported as out of tolerance, the output all zero.
  ir::Model model = TinyOutputModel();
  ConvertOptions options;
  AutoOptions auto_options;
  AutoResult result;
  Status s = AutoConvert(model, Samples(-1, 1), options, auto_options, &result);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_FALSE(result.within_tolerance);
  ASSERT_EQ(result.errors.size(), 1u);
  EXPECT_TRUE(result.errors[0].all_zero);
  EXPECT_TRUE(result.errors[0].below_atol);
  EXPECT_EQ(result.warnings.size(), 1u);
}

TEST(AutoModeTest, AllZeroOutputFailsWhateverTheTolerance) {
  const ir::Model fp32 = FlushedWeightsModel();
  const auto samples = Samples(30000, 60000);
  ASSERT_GT(MaxAbsOutput(fp32, samples), 1e-3);  // above atol: the scale rule does not apply
  ir::Model model = FlushedWeightsModel();
  ConvertOptions options;
  AutoOptions auto_options;
  auto_options.rtol = 1;  // |0 - y| <= atol + rtol * |y| for every y: only the all-zero rule catches it
  AutoResult result;
  Status s = AutoConvert(model, samples, options, auto_options, &result);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(result.within_tolerance);
  EXPECT_TRUE(result.warnings.empty());
  EXPECT_EQ(KeptNames(result), std::vector<std::string>{"matmul"});
  ASSERT_EQ(result.kept.size(), 1u);
  EXPECT_NE(result.kept[0].reason.find("is all zero where FP32 is not"), std::string::npos) << result.kept[0].reason;
  ASSERT_EQ(result.errors.size(), 1u);
  EXPECT_FALSE(result.errors[0].all_zero);
  EXPECT_FALSE(result.errors[0].below_atol);
  ExpectWithinTolerance(fp32, model, samples, 1e-2, 1e-3);
}

TEST(AutoModeTest, UnreachableToleranceIsReportedNotHidden) {
  // Zero tolerance with fp16 inputs: even every node in FP32 differs (the inputs are rounded).
  ir::Model model = BenignModel();
  ConvertOptions options;
  AutoOptions auto_options;
  auto_options.rtol = 0;
  auto_options.atol = 0;
  AutoResult result;
  Status s = AutoConvert(model, Samples(-1, 1), options, auto_options, &result);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_FALSE(result.within_tolerance);
  ASSERT_EQ(result.errors.size(), 1u);
  EXPECT_GT(result.errors[0].worst_excess, 0);
}

TEST(AutoModeTest, RejectsBadSamplesAndOptions) {
  ConvertOptions options;
  AutoOptions auto_options;
  AutoResult result;
  {
    ir::Model model = BenignModel();
    Status s = AutoConvert(model, {}, options, auto_options, &result);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  }
  {
    ir::Model model = BenignModel();
    std::vector<std::vector<ir::Tensor>> samples = {{Uniform("not_x", {kBatch, kWidth}, 0, 1, 1)}};
    Status s = AutoConvert(model, samples, options, auto_options, &result);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("not_x"), std::string::npos) << s.message();
    // The model is left as it was.
    EXPECT_EQ(model.graph->inputs()[0]->type().elem_type(), DType::kFloat32);
  }
  {
    ir::Model model = BenignModel();
    AutoOptions bad = auto_options;
    bad.rtol = -1;
    EXPECT_EQ(AutoConvert(model, Samples(0, 1), options, bad, &result).code(), StatusCode::kInvalidArgument);
  }
  {
    // NaN samples: the FP32 output is NaN everywhere, which no conversion can be held to.
    ir::Model model = BenignModel();
    std::vector<std::vector<ir::Tensor>> samples = Samples(0, 1);
    for (std::vector<ir::Tensor>& set : samples) {
      for (float& v : set[0].mutable_values<float>()) v = std::nanf("");
    }
    Status s = AutoConvert(model, samples, options, auto_options, &result);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("has no finite value on the 2 sample sets"), std::string::npos) << s.message();
    // One finite sample set is enough to compare on.
    samples[1] = Samples(0, 1)[1];
    EXPECT_TRUE(AutoConvert(model, samples, options, auto_options, &result).ok());
  }
}

TEST(AutoModeTest, NamesUnnamedNodesItKeeps) {
  ir::Model model = OverflowModel();
  for (ir::Node* n : model.graph->nodes()) n->set_name("");
  ConvertOptions options;
  AutoOptions auto_options;
  auto_options.atol = 5e-2;
  AutoResult result;
  Status s = AutoConvert(model, Samples(0, 1), options, auto_options, &result);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(result.within_tolerance);
  ASSERT_EQ(result.kept.size(), 1u);
  const ir::Node* kept = FindNode(model, result.kept[0].name);
  ASSERT_TRUE(kept) << result.kept[0].name;
  EXPECT_EQ(kept->op_type(), "Gemm");
  EXPECT_EQ(kept->input(1)->initializer()->dtype(), DType::kFloat32);
  EXPECT_GT(kept->input(1)->initializer()->values<float>()[0], 1000.0f);  // the big weights
}

}  // namespace
}  // namespace onnxamp::converter
