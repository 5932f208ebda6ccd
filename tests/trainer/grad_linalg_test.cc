// Finite-difference checks of the Gemm and MatMul gradient builders: Gemm over transA/transB/alpha/beta and every
// shape C may take (absent, scalar, [N], [1, N], [M, 1], [M, N]) at opsets 9 (products as Transpose + MatMul) and 13
// (Gemm); MatMul over 2-D, batched with broadcast batch dims, and 1-D operands on either side; MatMul with
// undeclared operand ranks (the Einsum path) against the declared one.
#include <gtest/gtest.h>

#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "runtime/executor/session.h"
#include "tests/runtime/op_tester.h"
#include "tests/trainer/grad_check.h"
#include "trainer/autodiff/autodiff.h"

namespace onnxamp::testing {
namespace {

using Dims = std::vector<int64_t>;

ir::Tensor Doubles(const Dims& dims, uint32_t seed) {
  ir::Tensor t(DType::kFloat64, dims);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(-1.5, 1.5);
  for (double& v : t.mutable_values<double>()) v = u(gen);
  return t;
}

std::string DimsName(const Dims& d) {
  if (d.empty()) return "scalar";
  std::string s;
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "x" : "") + std::to_string(d[i]);
  return s;
}

// ---- Gemm

enum class CKind { kAbsent, kScalar, kRow, kRow2D, kColumn, kFull };

struct GemmCase {
  bool trans_a = false, trans_b = false;
  float alpha = 1.0f, beta = 1.0f;
  CKind c = CKind::kFull;
  int64_t opset = 13;
};

std::string GemmCaseName(const ::testing::TestParamInfo<GemmCase>& info) {
  const GemmCase& c = info.param;
  static const char* kC[] = {"NoC", "CScalar", "CN", "C1xN", "CMx1", "CMxN"};
  std::string name = std::string(c.trans_a ? "At" : "A") + (c.trans_b ? "Bt" : "B") + "_" + kC[static_cast<int>(c.c)];
  if (c.alpha != 1.0f) name += "_alpha";
  if (c.beta != 1.0f) name += "_beta";
  return name + "_opset" + std::to_string(c.opset);
}

void PrintTo(const GemmCase& c, std::ostream* os) { *os << GemmCaseName({c, 0}); }

class GemmGradTest : public ::testing::TestWithParam<GemmCase> {};

TEST_P(GemmGradTest, MatchesFiniteDifferences) {
  const GemmCase& c = GetParam();
  const int64_t m = 3, k = 4, n = 5;
  OpTester t;
  t.op_type = "Gemm";
  t.opset = c.opset;
  if (c.trans_a) t.Attr(ir::Attribute::Int("transA", 1));
  if (c.trans_b) t.Attr(ir::Attribute::Int("transB", 1));
  if (c.alpha != 1.0f) t.Attr(ir::Attribute::Float("alpha", c.alpha));
  if (c.beta != 1.0f) t.Attr(ir::Attribute::Float("beta", c.beta));
  t.Input(Doubles(c.trans_a ? Dims{k, m} : Dims{m, k}, 1)).Input(Doubles(c.trans_b ? Dims{n, k} : Dims{k, n}, 2));
  switch (c.c) {
    case CKind::kAbsent:
      break;
    case CKind::kScalar:
      t.Input(Doubles({}, 3));
      break;
    case CKind::kRow:
      t.Input(Doubles({n}, 3));
      break;
    case CKind::kRow2D:
      t.Input(Doubles({1, n}, 3));
      break;
    case CKind::kColumn:
      t.Input(Doubles({m, 1}, 3));
      break;
    case CKind::kFull:
      t.Input(Doubles({m, n}, 3));
      break;
  }
  ExpectGradientsMatchFiniteDifferences(t, GemmCaseName({c, 0}));
}

std::vector<GemmCase> GemmCases() {
  std::vector<GemmCase> cases;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      cases.push_back({ta, tb, 1.0f, 1.0f, CKind::kFull, 13});
      cases.push_back({ta, tb, 0.75f, -1.5f, CKind::kRow, 13});
      cases.push_back({ta, tb, -2.0f, 0.5f, CKind::kAbsent, 13});
      cases.push_back({ta, tb, 1.25f, 2.0f, CKind::kColumn, 9});  // Transpose + MatMul products before opset 11
    }
  }
  for (CKind ck : {CKind::kScalar, CKind::kRow2D, CKind::kColumn, CKind::kFull}) {
    cases.push_back({false, true, 1.0f, 0.5f, ck, 13});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Variants, GemmGradTest, ::testing::ValuesIn(GemmCases()), GemmCaseName);

// ---- MatMul

struct MatMulCase {
  Dims a, b;
};

std::string MatMulCaseName(const ::testing::TestParamInfo<MatMulCase>& info) {
  return DimsName(info.param.a) + "_by_" + DimsName(info.param.b);
}

void PrintTo(const MatMulCase& c, std::ostream* os) { *os << MatMulCaseName({c, 0}); }

class MatMulGradTest : public ::testing::TestWithParam<MatMulCase> {};

TEST_P(MatMulGradTest, MatchesFiniteDifferences) {
  const MatMulCase& c = GetParam();
  for (int64_t opset : {9, 13}) {
    OpTester t;
    t.op_type = "MatMul";
    t.opset = opset;
    t.Input(Doubles(c.a, 11)).Input(Doubles(c.b, 12));
    ExpectGradientsMatchFiniteDifferences(t, MatMulCaseName({c, 0}) + " opset " + std::to_string(opset));
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, MatMulGradTest,
                         ::testing::Values(MatMulCase{{3, 4}, {4, 5}}, MatMulCase{{2, 3, 4}, {4, 5}},
                                           MatMulCase{{3, 4}, {2, 4, 5}}, MatMulCase{{2, 3, 4}, {2, 4, 5}},
                                           MatMulCase{{2, 1, 3, 4}, {3, 4, 5}}, MatMulCase{{1, 3, 4}, {2, 4, 5}},
                                           MatMulCase{{3, 2, 3, 4}, {1, 4, 5}}, MatMulCase{{4}, {4, 5}},
                                           MatMulCase{{4}, {2, 4, 5}}, MatMulCase{{3, 4}, {4}},
                                           MatMulCase{{2, 3, 4}, {4}}, MatMulCase{{4}, {4}}),
                         MatMulCaseName);

// The gradients of in0 and in1 of a one-node MatMul model under loss = sum(Y * R), the inputs' declared shapes kept
// or reduced to their element type.
std::vector<ir::Tensor> MatMulGradients(const OpTester& t, bool declare_shapes) {
  ir::Model model = t.BuildModel();
  ir::Graph& g = *model.graph;
  if (!declare_shapes) {
    // Operands of rank >= 2 lose their declared shape (a 1-D one must be declared: it changes the product).
    for (ir::Value* v : g.inputs()) {
      if (v->type().shape()->size() >= 2) v->set_type(ir::ValueType::Tensor(DType::kFloat64));
    }
  }
  const StatusOr<std::vector<ir::Tensor>> y = t.Run();
  EXPECT_TRUE(y.ok()) << y.status().message();
  if (!y.ok()) return {};
  ir::Value* r = g.CreateValue("R");
  r->set_type(ir::ValueType::Tensor(DType::kFloat64));
  g.SetInitializer(r, Doubles((*y)[0].dims(), 99));
  ir::Value* p = g.CreateValue("P");
  g.AddNode("Mul", {g.FindValue("out0"), r}, {p}, "project");
  ir::Value* loss = g.CreateValue("loss");
  loss->set_type(ir::ValueType::Tensor(DType::kFloat64, ir::Shape{}));
  g.AddNode("ReduceSum", {p}, {loss}, "sum")->SetAttribute(ir::Attribute::Int("keepdims", 0));
  g.AddOutput(loss);
  trainer::GradientRequest request;
  request.loss = "loss";
  request.wrt = {"in0", "in1"};
  StatusOr<trainer::GradientResult> grads = trainer::BuildGradients(model, request);
  EXPECT_TRUE(grads.ok()) << grads.status().message();
  if (!grads.ok()) return {};
  auto session = exec::Session::Create(std::move(model), t.options);
  EXPECT_TRUE(session.ok()) << session.status().message();
  if (!session.ok()) return {};
  exec::RunOptions fetch;
  fetch.fetch = grads->gradients;
  StatusOr<std::vector<ir::Tensor>> out = (*session)->Run(t.Feeds(), fetch);
  EXPECT_TRUE(out.ok()) << out.status().message();
  return out.ok() ? *out : std::vector<ir::Tensor>{};
}

TEST(MatMulGrad, UndeclaredRanksUseEinsum) {
  for (const MatMulCase& c : {MatMulCase{{2, 3, 4}, {4, 5}}, MatMulCase{{2, 1, 3, 4}, {3, 4, 5}},
                              MatMulCase{{4}, {2, 4, 5}}, MatMulCase{{2, 3, 4}, {4}}}) {
    OpTester t;
    t.op_type = "MatMul";
    t.opset = 13;
    t.Input(Doubles(c.a, 21)).Input(Doubles(c.b, 22));
    const std::vector<ir::Tensor> declared = MatMulGradients(t, true);
    const std::vector<ir::Tensor> undeclared = MatMulGradients(t, false);
    ASSERT_EQ(declared.size(), 2u);
    ASSERT_EQ(undeclared.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      ASSERT_EQ(undeclared[i].dims(), declared[i].dims()) << MatMulCaseName({c, 0}) << " input " << i;
      const auto want = declared[i].values<double>();
      const auto got = undeclared[i].values<double>();
      for (size_t j = 0; j < want.size(); ++j) {
        EXPECT_NEAR(got[j], want[j], 1e-12) << MatMulCaseName({c, 0}) << " input " << i << " element " << j;
      }
    }
  }
}

TEST(MatMulGrad, UndeclaredOneDimensionalOperandFailsAtRun) {
  // Taken as >= 2-D, a 1-D A of undeclared rank makes dB's Einsum transpose fail when it runs: an error, not a
  // wrong gradient.
  OpTester t;
  t.op_type = "MatMul";
  t.opset = 13;
  t.Input(Doubles({4}, 1)).Input(Doubles({4, 5}, 2));
  ir::Model model = t.BuildModel();
  ir::Graph& g = *model.graph;
  g.inputs()[0]->set_type(ir::ValueType::Tensor(DType::kFloat64));
  ir::Value* loss = g.CreateValue("loss");
  g.AddNode("ReduceSum", {g.FindValue("out0")}, {loss}, "sum")->SetAttribute(ir::Attribute::Int("keepdims", 0));
  loss->set_type(ir::ValueType::Tensor(DType::kFloat64, ir::Shape{}));
  g.AddOutput(loss);
  trainer::GradientRequest request;
  request.loss = "loss";
  request.wrt = {"in1"};
  StatusOr<trainer::GradientResult> grads = trainer::BuildGradients(model, request);
  ASSERT_TRUE(grads.ok()) << grads.status().message();
  auto session = exec::Session::Create(std::move(model), t.options);
  ASSERT_TRUE(session.ok()) << session.status().message();
  exec::RunOptions fetch;
  fetch.fetch = grads->gradients;
  StatusOr<std::vector<ir::Tensor>> out = (*session)->Run(t.Feeds(), fetch);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("Einsum"), std::string::npos) << out.status().message();
}

TEST(MatMulGrad, UndeclaredRanksNeedOpset12) {
  OpTester t;
  t.op_type = "MatMul";
  t.opset = 11;
  t.Input(Doubles({2, 3}, 1)).Input(Doubles({3, 2}, 2));
  ir::Model model = t.BuildModel();
  ir::Graph& g = *model.graph;
  for (ir::Value* v : g.inputs()) v->set_type(ir::ValueType::Tensor(DType::kFloat64));
  ir::Value* loss = g.CreateValue("loss");
  g.AddNode("ReduceSum", {g.FindValue("out0")}, {loss}, "sum")->SetAttribute(ir::Attribute::Int("keepdims", 0));
  loss->set_type(ir::ValueType::Tensor(DType::kFloat64, ir::Shape{}));
  g.AddOutput(loss);
  trainer::GradientRequest request;
  request.loss = "loss";
  request.wrt = {"in0"};
  StatusOr<trainer::GradientResult> grads = trainer::BuildGradients(model, request);
  ASSERT_FALSE(grads.ok());
  EXPECT_NE(grads.status().message().find("ranks of MatMul's inputs are not declared"), std::string::npos)
      << grads.status().message();
}

}  // namespace
}  // namespace onnxamp::testing
