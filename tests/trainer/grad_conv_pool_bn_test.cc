// Finite-difference checks of the Conv, pooling and batch normalization gradient builders (and so of the ConvGrad,
// MaxPoolGrad, AveragePoolGrad and BatchNormalizationGrad kernels they emit): Conv over 1-D/2-D/3-D, strides,
// dilations, groups (depthwise too), asymmetric pads, auto_pad and bias; MaxPool and AveragePool over their
// attributes; the global pools; BatchNormTraining and BatchNormalization in inference mode at each opset signature.
// Also what the builders emit (unneeded ConvGrad/BatchNormalizationGrad outputs left unrequested) and what they
// refuse, by name.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <numeric>
#include <optional>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/session.h"
#include "runtime/ops/gradient_ops.h"
#include "tests/runtime/op_tester.h"
#include "tests/trainer/grad_check.h"
#include "trainer/autodiff/autodiff.h"

namespace onnxamp::testing {
namespace {

using Dims = std::vector<int64_t>;

int64_t Count(const Dims& d) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  return n;
}

ir::Tensor Doubles(const Dims& dims, uint32_t seed, double lo = -1.5, double hi = 1.5) {
  ir::Tensor t(DType::kFloat64, dims);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  for (double& v : t.mutable_values<double>()) v = u(gen);
  return t;
}

// Pairwise distinct values 0.05 apart in shuffled order: no ties for the max pools, whatever the window.
ir::Tensor Distinct(const Dims& dims, uint32_t seed) {
  ir::Tensor t(DType::kFloat64, dims);
  std::vector<int64_t> order(static_cast<size_t>(Count(dims)));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(seed));
  auto out = t.mutable_values<double>();
  for (size_t i = 0; i < order.size(); ++i) out[i] = 0.05 * static_cast<double>(order[i] - Count(dims) / 2);
  return t;
}

// The one-node model of `t` with loss = ReduceSum(out0) and the backward pass for inputs `wrt`: the built model (for
// checks of what the builders emitted) or the error BuildGradients gave.
StatusOr<ir::Model> BuildWithLoss(const OpTester& t, const std::vector<int>& wrt,
                                  std::vector<std::string>* gradients = nullptr) {
  ir::Model model = t.BuildModel();
  if (!t.domain.empty()) model.SetOpsetVersion("", 17);
  ir::Graph& g = *model.graph;
  ir::Value* loss = g.CreateValue("loss");
  loss->set_type(ir::ValueType::Tensor(DType::kFloat64, ir::Shape{}));
  g.AddNode("ReduceSum", {g.FindValue("out0")}, {loss}, "sum")->SetAttribute(ir::Attribute::Int("keepdims", 0));
  g.AddOutput(loss);
  trainer::GradientRequest request;
  request.loss = "loss";
  for (int i : wrt) request.wrt.push_back("in" + std::to_string(i));
  ONNXAMP_ASSIGN_OR_RETURN(trainer::GradientResult result, trainer::BuildGradients(model, request));
  if (gradients) *gradients = result.gradients;
  return model;
}

// The first node of `op` (com.onnxamp) in the model.
const ir::Node* FindInternal(const ir::Model& model, const std::string& op) {
  for (const ir::Node* n : model.graph->nodes()) {
    if (n->op_type() == op && n->domain() == exec::kInternalDomain) return n;
  }
  return nullptr;
}

void ExpectRefused(const OpTester& t, const std::vector<int>& wrt, const std::string& fragment) {
  StatusOr<ir::Model> built = BuildWithLoss(t, wrt);
  ASSERT_FALSE(built.ok()) << "expected an error containing: " << fragment;
  EXPECT_NE(built.status().message().find(fragment), std::string::npos) << built.status().message();
}

// ---- Conv

struct ConvCase {
  std::string name;
  Dims x, w;
  Dims strides = {}, pads = {}, dilations = {};
  std::string auto_pad = {};
  int64_t group = 1;
  bool bias = true;
  bool kernel_shape = false;  // state kernel_shape as an attribute too
};

OpTester ConvTester(const ConvCase& c) {
  OpTester t;
  t.op_type = "Conv";
  t.opset = 17;
  if (!c.strides.empty()) t.Attr(ir::Attribute::Ints("strides", c.strides));
  if (!c.pads.empty()) t.Attr(ir::Attribute::Ints("pads", c.pads));
  if (!c.dilations.empty()) t.Attr(ir::Attribute::Ints("dilations", c.dilations));
  if (!c.auto_pad.empty()) t.Attr(ir::Attribute::String("auto_pad", c.auto_pad));
  if (c.group != 1) t.Attr(ir::Attribute::Int("group", c.group));
  if (c.kernel_shape) t.Attr(ir::Attribute::Ints("kernel_shape", Dims(c.w.begin() + 2, c.w.end())));
  t.Input(Doubles(c.x, 1)).Input(Doubles(c.w, 2));
  if (c.bias) t.Input(Doubles({c.w[0]}, 3));
  return t;
}

void PrintTo(const ConvCase& c, std::ostream* os) { *os << c.name; }

class ConvGradTest : public ::testing::TestWithParam<ConvCase> {};

TEST_P(ConvGradTest, MatchesFiniteDifferences) {
  ExpectGradientsMatchFiniteDifferences(ConvTester(GetParam()), GetParam().name);
}

const std::vector<ConvCase>& ConvCases() {
  static const std::vector<ConvCase> cases = {
      ConvCase{"Conv1d", {2, 3, 7}, {4, 3, 3}},
      ConvCase{"Conv1dStride2AsymmetricPads", {2, 2, 8}, {3, 2, 3}, {2}, {1, 0}, {}, {}, 1, false},
      // Stride 2 on an even input: the case where ConvTranspose would give 5 instead of 6.
      ConvCase{"Conv2dStride2EvenInput", {2, 3, 6, 6}, {4, 3, 3, 3}, {2, 2}, {1, 1, 1, 1}},
      ConvCase{"Conv2dDilation", {1, 2, 7, 6}, {3, 2, 2, 3}, {}, {1, 0, 0, 2}, {2, 1}, {}, 1, false},
      ConvCase{"Conv2dGroup2", {2, 4, 5, 5}, {6, 2, 3, 3}, {}, {}, {}, {}, 2},
      ConvCase{"Conv2dDepthwise", {2, 3, 5, 6}, {6, 1, 3, 3}, {2, 1}, {1, 1, 1, 1}, {}, {}, 3},
      ConvCase{"Conv2dSameUpperStride2", {1, 2, 6, 7}, {3, 2, 3, 2}, {2, 2}, {}, {}, "SAME_UPPER", 1, false},
      ConvCase{"Conv2dSameLower", {1, 2, 5, 6}, {2, 2, 2, 3}, {1, 2}, {}, {}, "SAME_LOWER"},
      ConvCase{"Conv2dValid", {2, 2, 7, 5}, {3, 2, 3, 2}, {2, 1}, {}, {}, "VALID", 1, false},
      ConvCase{"Conv3dStridePads", {1, 2, 5, 4, 3}, {2, 2, 3, 2, 2}, {2, 1, 1}, {1, 0, 1, 0, 1, 0}},
      ConvCase{"Conv3dGroupDilation", {1, 4, 5, 5, 4}, {2, 2, 2, 2, 2}, {}, {}, {2, 1, 2}, {}, 2, false},
      ConvCase{"Conv1x1KernelShapeAttribute", {2, 3, 4, 5}, {2, 3, 1, 1}, {}, {}, {}, {}, 1, true, true}};
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Variants, ConvGradTest, ::testing::ValuesIn(ConvCases()),
                         [](const auto& info) { return info.param.name; });

// ConvGrad's own builder (second derivatives, a gradient penalty through a convolution): dY of the convolution's
// output shape, the node's outputs (dX, dW and, with a bias, dB) all in the loss, every input differentiated.
class ConvGradGradientTest : public ::testing::TestWithParam<ConvCase> {};

TEST_P(ConvGradGradientTest, MatchesFiniteDifferences) {
  const ConvCase& c = GetParam();
  const OpTester conv = ConvTester(c);
  StatusOr<std::vector<ir::Tensor>> y = conv.Run();
  ASSERT_TRUE(y.ok()) << y.status().message();
  OpTester t = InternalOp(ops::kConvGradOp);
  t.attributes = conv.attributes;
  t.Input(Doubles((*y)[0].dims(), 4)).Input(Doubles(c.x, 1)).Input(Doubles(c.w, 2));
  t.num_outputs = c.bias ? 3 : 2;
  ExpectGradientsMatchFiniteDifferences(t, c.name + " ConvGrad");
}

INSTANTIATE_TEST_SUITE_P(Variants, ConvGradGradientTest, ::testing::ValuesIn(ConvCases()),
                         [](const auto& info) { return info.param.name; });

TEST(ConvGrad, RequestsOnlyTheOutputsNeeded) {
  const ConvCase c{"", {2, 3, 5, 5}, {4, 3, 3, 3}, {2, 2}, {1, 1, 1, 1}};
  // Only W: dX is left unrequested and dB not emitted.
  StatusOr<ir::Model> built = BuildWithLoss(ConvTester(c), {1});
  ASSERT_TRUE(built.ok()) << built.status().message();
  const ir::Node* grad = FindInternal(*built, ops::kConvGradOp);
  ASSERT_NE(grad, nullptr);
  ASSERT_EQ(grad->outputs().size(), 2u);
  EXPECT_EQ(grad->output(0), nullptr);
  EXPECT_NE(grad->output(1), nullptr);
  // Only X: one output.
  built = BuildWithLoss(ConvTester(c), {0});
  ASSERT_TRUE(built.ok()) << built.status().message();
  grad = FindInternal(*built, ops::kConvGradOp);
  ASSERT_NE(grad, nullptr);
  EXPECT_EQ(grad->outputs().size(), 1u);

  GradCheckOptions only_w;
  only_w.wrt = {1};
  ExpectGradientsMatchFiniteDifferences(ConvTester(c), "Conv dW only", only_w);
  GradCheckOptions b_and_w;
  b_and_w.wrt = {2, 1};
  ExpectGradientsMatchFiniteDifferences(ConvTester(c), "Conv dB and dW", b_and_w);
}

// ---- MaxPool and AveragePool

struct PoolCase {
  std::string name;
  Dims x, kernel;
  Dims strides = {}, pads = {}, dilations = {};
  std::string auto_pad = {};
  bool ceil_mode = false;
  bool count_include_pad = false;
  int64_t opset = 12;
};

OpTester PoolTester(const std::string& op, const PoolCase& c) {
  OpTester t;
  t.op_type = op;
  t.opset = c.opset;
  t.Attr(ir::Attribute::Ints("kernel_shape", c.kernel));
  if (!c.strides.empty()) t.Attr(ir::Attribute::Ints("strides", c.strides));
  if (!c.pads.empty()) t.Attr(ir::Attribute::Ints("pads", c.pads));
  if (!c.dilations.empty()) t.Attr(ir::Attribute::Ints("dilations", c.dilations));
  if (!c.auto_pad.empty()) t.Attr(ir::Attribute::String("auto_pad", c.auto_pad));
  if (c.ceil_mode) t.Attr(ir::Attribute::Int("ceil_mode", 1));
  if (c.count_include_pad) t.Attr(ir::Attribute::Int("count_include_pad", 1));
  t.Input(op == "MaxPool" ? Distinct(c.x, 5) : Doubles(c.x, 5));
  return t;
}

auto PoolCaseName = [](const auto& info) { return info.param.name; };

void PrintTo(const PoolCase& c, std::ostream* os) { *os << c.name; }

class MaxPoolGradTest : public ::testing::TestWithParam<PoolCase> {};

TEST_P(MaxPoolGradTest, MatchesFiniteDifferences) {
  ExpectGradientsMatchFiniteDifferences(PoolTester("MaxPool", GetParam()), GetParam().name);
}

const std::vector<PoolCase>& MaxPoolCases() {
  static const std::vector<PoolCase> cases = {
      PoolCase{"MaxPool1d", {2, 3, 9}, {3}, {2}},
      PoolCase{"MaxPool2dPads", {2, 2, 5, 6}, {3, 3}, {2, 2}, {1, 1, 1, 0}},
      PoolCase{"MaxPool2dOverlapping", {1, 2, 5, 5}, {3, 3}, {1, 1}},
      PoolCase{"MaxPool2dDilationCeil", {1, 2, 7, 7}, {2, 2}, {2, 2}, {}, {2, 1}, {}, true},
      PoolCase{"MaxPool2dSameUpper", {1, 2, 5, 6}, {3, 2}, {2, 2}, {}, {}, "SAME_UPPER"},
      PoolCase{"MaxPool2dSameLower", {1, 2, 5, 6}, {2, 3}, {1, 2}, {}, {}, "SAME_LOWER"},
      PoolCase{"MaxPool3d", {1, 2, 4, 5, 3}, {2, 3, 2}, {2, 1, 1}, {0, 1, 0, 1, 1, 0}},
      PoolCase{"MaxPool2dOpset8", {1, 3, 5, 4}, {2, 2}, {2, 1}, {}, {}, {}, false, false, 8}};
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Variants, MaxPoolGradTest, ::testing::ValuesIn(MaxPoolCases()), PoolCaseName);

TEST(MaxPoolGrad, ReusesIndicesTheModelRequests) {
  OpTester t = PoolTester("MaxPool", {"", {2, 2, 5, 5}, {2, 2}, {2, 2}, {0, 0, 1, 1}});
  t.num_outputs = 2;
  GradCheckOptions options;
  options.skip_outputs = {1};
  ExpectGradientsMatchFiniteDifferences(t, "MaxPool with Indices", options);
  StatusOr<ir::Model> built = BuildWithLoss(t, {0});
  ASSERT_TRUE(built.ok()) << built.status().message();
  const ir::Node* grad = FindInternal(*built, ops::kMaxPoolGradOp);
  ASSERT_NE(grad, nullptr);
  EXPECT_EQ(grad->input(1)->name(), "out1");
}

TEST(MaxPoolGrad, Refusals) {
  OpTester column_major = PoolTester("MaxPool", {"", {1, 1, 4, 4}, {2, 2}});
  column_major.Attr(ir::Attribute::Int("storage_order", 1));
  ExpectRefused(column_major, {0}, "'storage_order' = 1 has no gradient");
  ExpectRefused(PoolTester("MaxPool", {"", {1, 1, 4, 4}, {2, 2}, {}, {}, {}, {}, false, false, 7}), {0},
                "MaxPool before opset 8 has no Indices output");
}

class AveragePoolGradTest : public ::testing::TestWithParam<PoolCase> {};

TEST_P(AveragePoolGradTest, MatchesFiniteDifferences) {
  ExpectGradientsMatchFiniteDifferences(PoolTester("AveragePool", GetParam()), GetParam().name);
}

const std::vector<PoolCase>& AveragePoolCases() {
  static const std::vector<PoolCase> cases = {
      PoolCase{"AveragePool1dExcludePad", {2, 3, 8}, {3}, {2}, {1, 1}},
      PoolCase{"AveragePool1dIncludePad", {2, 3, 8}, {3}, {2}, {1, 1}, {}, {}, false, true},
      PoolCase{"AveragePool2dCeilIncludePad", {1, 2, 6, 7}, {3, 3}, {2, 2}, {1, 0, 0, 1}, {}, {}, true, true},
      PoolCase{"AveragePool2dCeilExcludePad", {1, 2, 6, 7}, {3, 3}, {2, 2}, {1, 0, 0, 1}, {}, {}, true, false},
      PoolCase{
          "AveragePool2dDilationOpset19", {1, 2, 7, 6}, {2, 2}, {1, 2}, {1, 1, 1, 1}, {2, 2}, {}, false, false, 19},
      PoolCase{"AveragePool2dSameLowerIncludePad", {1, 2, 5, 6}, {3, 3}, {2, 2}, {}, {}, "SAME_LOWER", false, true},
      PoolCase{"AveragePool2dSameUpper", {1, 2, 5, 6}, {2, 3}, {2, 1}, {}, {}, "SAME_UPPER"},
      PoolCase{"AveragePool2dValid", {2, 2, 5, 7}, {2, 3}, {1, 2}, {}, {}, "VALID"},
      PoolCase{"AveragePool3d", {1, 2, 4, 5, 3}, {2, 2, 2}, {1, 2, 1}, {1, 0, 1, 0, 1, 0}},
      PoolCase{"AveragePool2dOpset8", {1, 2, 5, 5}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {}, {}, false, true, 8}};
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Variants, AveragePoolGradTest, ::testing::ValuesIn(AveragePoolCases()), PoolCaseName);

// The pooling backward ops' own builders (second derivatives): MaxPoolGrad's dY at the forward's Indices (the forward
// run for them), AveragePoolGrad's dY, over every case of the forward builders' checks.
TEST(PoolGradGradient, MatchesFiniteDifferences) {
  GradCheckOptions only_dy;
  only_dy.wrt = {0};
  for (const PoolCase& c : MaxPoolCases()) {
    OpTester fwd = PoolTester("MaxPool", c);
    fwd.num_outputs = 2;
    StatusOr<std::vector<ir::Tensor>> y = fwd.Run();
    ASSERT_TRUE(y.ok()) << c.name << ": " << y.status().message();
    OpTester t = InternalOp(ops::kMaxPoolGradOp);
    t.Input(Doubles((*y)[0].dims(), 6))
        .Input((*y)[1])
        .Input(MakeTensor<int64_t>({static_cast<int64_t>(c.x.size())}, c.x));
    ExpectGradientsMatchFiniteDifferences(t, c.name + " MaxPoolGrad", only_dy);
  }
  for (const PoolCase& c : AveragePoolCases()) {
    const OpTester fwd = PoolTester("AveragePool", c);
    StatusOr<std::vector<ir::Tensor>> y = fwd.Run();
    ASSERT_TRUE(y.ok()) << c.name << ": " << y.status().message();
    OpTester t = InternalOp(ops::kAveragePoolGradOp);
    t.attributes = fwd.attributes;
    t.Input(Doubles((*y)[0].dims(), 6)).Input(MakeTensor<int64_t>({static_cast<int64_t>(c.x.size())}, c.x));
    ExpectGradientsMatchFiniteDifferences(t, c.name + " AveragePoolGrad", only_dy);
  }
}

// ---- GlobalAveragePool and GlobalMaxPool

struct GlobalCase {
  std::string op;
  Dims x;
  int64_t opset;
};

void PrintTo(const GlobalCase& c, std::ostream* os) { *os << c.op << " rank " << c.x.size() << " opset " << c.opset; }

class GlobalPoolGradTest : public ::testing::TestWithParam<GlobalCase> {};

TEST_P(GlobalPoolGradTest, MatchesFiniteDifferences) {
  const GlobalCase& c = GetParam();
  OpTester t;
  t.op_type = c.op;
  t.opset = c.opset;
  t.Input(c.op == "GlobalMaxPool" ? Distinct(c.x, 9) : Doubles(c.x, 9));
  ExpectGradientsMatchFiniteDifferences(t, c.op);
}

INSTANTIATE_TEST_SUITE_P(
    Variants, GlobalPoolGradTest,
    ::testing::Values(GlobalCase{"GlobalAveragePool", {2, 3, 5}, 8}, GlobalCase{"GlobalAveragePool", {2, 3, 3, 5}, 17},
                      GlobalCase{"GlobalAveragePool", {1, 2, 2, 3, 3}, 17}, GlobalCase{"GlobalMaxPool", {2, 3, 5}, 11},
                      GlobalCase{"GlobalMaxPool", {2, 3, 3, 5}, 17}, GlobalCase{"GlobalMaxPool", {1, 2, 2, 3, 3}, 17}),
    [](const auto& info) {
      return info.param.op + std::to_string(info.param.x.size() - 2) + "dOpset" + std::to_string(info.param.opset);
    });

// The gradients of `t`'s inputs `wrt` under loss = ReduceSum(out0).
std::vector<ir::Tensor> SumGradients(const OpTester& t, const std::vector<int>& wrt) {
  std::vector<std::string> names;
  StatusOr<ir::Model> built = BuildWithLoss(t, wrt, &names);
  EXPECT_TRUE(built.ok()) << built.status().message();
  if (!built.ok()) return {};
  auto session = exec::Session::Create(std::move(*built), t.options);
  EXPECT_TRUE(session.ok()) << session.status().message();
  if (!session.ok()) return {};
  exec::RunOptions fetch;
  fetch.fetch = names;
  StatusOr<std::vector<ir::Tensor>> out = (*session)->Run(t.Feeds(), fetch);
  EXPECT_TRUE(out.ok()) << out.status().message();
  return out.ok() ? *out : std::vector<ir::Tensor>{};
}

TEST(GlobalMaxPoolGrad, SplitsTiesEvenly) {
  OpTester t;
  t.op_type = "GlobalMaxPool";
  t.opset = 17;
  t.Input(MakeTensor<double>({1, 2, 4}, {1, 3, 3, 2, 5, 0, 5, 5}));
  const std::vector<ir::Tensor> g = SumGradients(t, {0});
  ASSERT_EQ(g.size(), 1u);
  const std::vector<double> want = {0, 0.5, 0.5, 0, 1.0 / 3, 0, 1.0 / 3, 1.0 / 3};
  const auto got = g[0].values<double>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-15) << "element " << i;
}

// ---- BatchNormTraining

OpTester BatchNormTrainingTester(const Dims& x, float epsilon, float momentum) {
  OpTester t = InternalOp(ops::kBatchNormTrainingOp);
  t.num_outputs = 5;
  t.Attr(ir::Attribute::Float("epsilon", epsilon)).Attr(ir::Attribute::Float("momentum", momentum));
  const Dims c = {x[1]};
  t.Input(Doubles(x, 31, -1.0, 2.0))
      .Input(Doubles(c, 32, 0.5, 1.5))
      .Input(Doubles(c, 33))
      .Input(Doubles(c, 34))
      .Input(Doubles(c, 35, 0.5, 2.0));
  return t;
}

class BatchNormTrainingGradTest : public ::testing::TestWithParam<Dims> {};

TEST_P(BatchNormTrainingGradTest, MatchesFiniteDifferences) {
  GradCheckOptions options;
  options.wrt = {0, 1, 2};
  options.skip_outputs = {1, 2};  // the running statistics (the saved ones are float32, never in the loss)
  ExpectGradientsMatchFiniteDifferences(BatchNormTrainingTester(GetParam(), 1e-3f, 0.8f), "BatchNormTraining", options);
}

INSTANTIATE_TEST_SUITE_P(Shapes, BatchNormTrainingGradTest,
                         ::testing::Values(Dims{4, 3}, Dims{3, 2, 5}, Dims{2, 3, 2, 3}, Dims{2, 2, 2, 1, 3}),
                         [](const auto& info) { return "Rank" + std::to_string(info.param.size()); });

TEST(BatchNormTrainingGrad, ParametersOnly) {
  // A first layer: X needs no gradient, so BatchNormalizationGrad's dX is left unrequested.
  const OpTester t = BatchNormTrainingTester({3, 2, 4}, 1e-5f, 0.9f);
  StatusOr<ir::Model> built = BuildWithLoss(t, {1, 2});
  ASSERT_TRUE(built.ok()) << built.status().message();
  const ir::Node* grad = FindInternal(*built, ops::kBatchNormalizationGradOp);
  ASSERT_NE(grad, nullptr);
  ASSERT_EQ(grad->outputs().size(), 3u);
  EXPECT_EQ(grad->output(0), nullptr);
  GradCheckOptions options;
  options.wrt = {1, 2};
  options.skip_outputs = {1, 2};
  ExpectGradientsMatchFiniteDifferences(t, "BatchNormTraining dScale dB", options);
}

TEST(BatchNormTrainingGrad, RefusesRunningStatistics) {
  ExpectRefused(BatchNormTrainingTester({3, 2, 4}, 1e-5f, 0.9f), {0, 3}, "running statistics, not parameters");
}

// ---- BatchNormalization in inference mode

struct InferenceCase {
  int64_t opset;
  Dims x;
  DType stats = DType::kFloat64;  // opset 15+: input_mean/input_var may have their own type
};

void PrintTo(const InferenceCase& c, std::ostream* os) {
  *os << "opset " << c.opset << " rank " << c.x.size() << " statistics " << DTypeName(c.stats);
}

class BatchNormInferenceGradTest : public ::testing::TestWithParam<InferenceCase> {};

OpTester BatchNormInferenceTester(const InferenceCase& c) {
  OpTester t;
  t.op_type = "BatchNormalization";
  t.opset = c.opset;
  t.Attr(ir::Attribute::Float("epsilon", 1e-2f));
  const Dims ch = {c.x[1]};
  t.Input(Doubles(c.x, 41)).Input(Doubles(ch, 42, 0.5, 1.5)).Input(Doubles(ch, 43));
  if (c.stats == DType::kFloat64) {
    t.Input(Doubles(ch, 44)).Input(Doubles(ch, 45, 0.5, 2.0));
  } else {
    std::vector<float> mean, var;
    const ir::Tensor mean64 = Doubles(ch, 44), var64 = Doubles(ch, 45, 0.5, 2.0);  // alive while read
    for (double v : mean64.values<double>()) mean.push_back(static_cast<float>(v));
    for (double v : var64.values<double>()) var.push_back(static_cast<float>(v));
    t.Input(MakeTensor<float>(ch, mean)).Input(MakeTensor<float>(ch, var));
  }
  return t;
}

TEST_P(BatchNormInferenceGradTest, MatchesFiniteDifferences) {
  GradCheckOptions options;
  options.wrt = {0, 1, 2};
  ExpectGradientsMatchFiniteDifferences(BatchNormInferenceTester(GetParam()), "BatchNormalization inference", options);
}

INSTANTIATE_TEST_SUITE_P(Opsets, BatchNormInferenceGradTest,
                         ::testing::Values(InferenceCase{8, {2, 3, 4}}, InferenceCase{9, {3, 2, 3, 2}},
                                           InferenceCase{14, {2, 3, 5}}, InferenceCase{15, {2, 3}},
                                           InferenceCase{15, {2, 2, 3, 2}, DType::kFloat32}),
                         [](const auto& info) {
                           return "Opset" + std::to_string(info.param.opset) + "Rank" +
                                  std::to_string(info.param.x.size()) +
                                  (info.param.stats == DType::kFloat32 ? "Float32Stats" : "");
                         });

TEST(BatchNormInferenceGrad, Refusals) {
  OpTester training = BatchNormInferenceTester({14, {2, 3, 4}});
  training.Attr(ir::Attribute::Int("training_mode", 1));
  ExpectRefused(training, {0}, "rewrites it into com.onnxamp BatchNormTraining");
  OpTester spatial = BatchNormInferenceTester({8, {2, 3, 4}});
  spatial.Attr(ir::Attribute::Int("spatial", 0));
  ExpectRefused(spatial, {0}, "'spatial' = 0");
  ExpectRefused(BatchNormInferenceTester({14, {2, 3, 4}}), {0, 4}, "running statistics, not parameters");
}

}  // namespace
}  // namespace onnxamp::testing
