// SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss kernel tests: hand-computed NLL values for every reduction,
// weights and ignore_index; random [N, C, D1, D2] inputs per float type against a double reference (with the
// log_prob output of SCE); int32 labels; errors.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "tests/runtime/ops/reduce_test_util.h"

namespace onnxamp::testing {
namespace {

using ir::Attribute;

// The loss of log-probabilities logp [n, c, d] (flattened) in double.
std::vector<double> ReferenceNll(const std::vector<double>& logp, const std::vector<int64_t>& labels, int64_t n,
                                 int64_t c, int64_t d, const std::vector<double>& weights,
                                 std::optional<int64_t> ignore, const std::string& reduction) {
  std::vector<double> loss(n * d);
  double total = 0, weight_total = 0;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < d; ++j) {
      const int64_t t = labels[i * d + j];
      if (ignore && t == *ignore) continue;
      const double w = weights.empty() ? 1.0 : weights[t];
      loss[i * d + j] = -w * logp[(i * c + t) * d + j];
      total += loss[i * d + j];
      weight_total += w;
    }
  }
  if (reduction == "sum") return {total};
  if (reduction == "mean") return {total / weight_total};
  return loss;
}

std::vector<double> LogSoftmaxAxis1(const std::vector<double>& x, int64_t n, int64_t c, int64_t d) {
  std::vector<double> y(x.size());
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < d; ++j) {
      double m = -INFINITY, s = 0;
      for (int64_t k = 0; k < c; ++k) m = std::max(m, x[(i * c + k) * d + j]);
      for (int64_t k = 0; k < c; ++k) s += std::exp(x[(i * c + k) * d + j] - m);
      for (int64_t k = 0; k < c; ++k) y[(i * c + k) * d + j] = x[(i * c + k) * d + j] - m - std::log(s);
    }
  }
  return y;
}

TEST(NllLossTest, HandComputed) {
  const ir::Tensor input = TensorOf(DType::kFloat32, {2, 3}, {-1, -2, -3, -0.5, -1, -2});
  const ir::Tensor target = Int64Tensor({2}, {0, 2});
  auto run = [&](const std::string& reduction, std::optional<std::vector<double>> weight,
                 std::optional<int64_t> ignore) {
    OpTester t = Op("NegativeLogLikelihoodLoss", 13);
    t.Input(input).Input(target).Attr(Attribute::String("reduction", reduction));
    if (weight) t.Input(TensorOf(DType::kFloat32, {3}, *weight));
    if (ignore) t.Attr(Attribute::Int("ignore_index", *ignore));
    std::vector<ir::Tensor> out = RunOk(t);
    return out.empty() ? ir::Tensor() : out[0];
  };
  ir::Tensor none = run("none", std::nullopt, std::nullopt);
  EXPECT_EQ(none.dims(), (std::vector<int64_t>{2}));
  ExpectClose(none, {1, 2});
  ir::Tensor mean = run("mean", std::nullopt, std::nullopt);
  EXPECT_EQ(mean.dims(), std::vector<int64_t>{});
  ExpectClose(mean, {1.5});
  ExpectClose(run("sum", std::nullopt, std::nullopt), {3});
  ExpectClose(run("mean", std::vector<double>{1, 2, 3}, std::nullopt), {(1.0 * 1 + 3.0 * 2) / 4});
  ExpectClose(run("mean", std::nullopt, 2), {1});  // the ignored position counts neither loss nor weight
  ExpectClose(run("none", std::vector<double>{1, 2, 3}, 0), {0, 6});
  ExpectClose(run("mean", std::nullopt, -100), {1.5});  // an ignore_index no label uses
}

class LossTest : public ::testing::TestWithParam<DType> {};

TEST_P(LossTest, RandomMatchesDoubleReference) {
  const DType dtype = GetParam();
  const int64_t n = 3, c = 5, d1 = 2, d2 = 4, d = d1 * d2;
  const std::vector<double> scores = Rounded(dtype, RandomValues(n * c * d, 25, -3, 3));
  std::vector<int64_t> labels(n * d);
  for (int64_t i = 0; i < n * d; ++i) labels[i] = (i * 7) % c;
  labels[3] = -1;  // ignored below
  const std::vector<double> weights = Rounded(dtype, RandomValues(c, 26, 0.5, 1.5));
  const std::vector<double> logp = LogSoftmaxAxis1(scores, n, c, d);
  for (const std::string reduction : {"none", "sum", "mean"}) {
    for (bool weighted : {false, true}) {
      const std::string what = reduction + (weighted ? " weighted" : "");
      const std::vector<double> no_weights;
      const std::vector<double>& w = weighted ? weights : no_weights;
      {
        OpTester t = Op("SoftmaxCrossEntropyLoss", 13);
        t.num_outputs = 2;
        t.Input(TensorOf(dtype, {n, c, d1, d2}, scores))
            .Input(Int64Tensor({n, d1, d2}, labels))
            .Attr(Attribute::String("reduction", reduction))
            .Attr(Attribute::Int("ignore_index", -1));
        if (weighted) t.Input(TensorOf(dtype, {c}, weights));
        std::vector<ir::Tensor> out = RunOk(t);
        ASSERT_EQ(out.size(), 2u) << what;
        EXPECT_EQ(out[0].dims(), reduction == "none" ? (std::vector<int64_t>{n, d1, d2}) : std::vector<int64_t>{});
        Tolerance tol = ToleranceFor(dtype);
        tol.atol = std::max(tol.atol, 4 * tol.rtol);  // a sum of 24 terms of magnitude ~3
        ExpectClose(out[0], ReferenceNll(logp, labels, n, c, d, w, -1, reduction), "SCE " + what, tol);
        ExpectClose(out[1], logp, "SCE log_prob " + what);
      }
      {
        OpTester t = Op("NegativeLogLikelihoodLoss", 12);
        t.Input(TensorOf(dtype, {n, c, d1, d2}, scores))
            .Input(Int64Tensor({n, d1, d2}, labels))
            .Attr(Attribute::String("reduction", reduction))
            .Attr(Attribute::Int("ignore_index", -1));
        if (weighted) t.Input(TensorOf(dtype, {c}, weights));
        Tolerance tol = ToleranceFor(dtype);
        tol.atol = std::max(tol.atol, 4 * tol.rtol);
        ExpectClose(RunOk(t)[0], ReferenceNll(scores, labels, n, c, d, w, -1, reduction), "NLL " + what, tol);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, LossTest, ::testing::ValuesIn(FloatTypes()), DTypeParamName());

TEST(LossHandTest, LargeOnSeveralThreads) {
  const int64_t n = 64, c = 10, d = 64;
  const std::vector<double> scores = Rounded(DType::kFloat32, RandomValues(n * c * d, 30, -4, 4));
  std::vector<int64_t> labels(n * d);
  for (int64_t i = 0; i < n * d; ++i) labels[i] = (i * 13) % c;
  OpTester t = Op("SoftmaxCrossEntropyLoss", 13);
  t.options.num_threads = 4;
  t.num_outputs = 2;
  t.Input(TensorOf(DType::kFloat32, {n, c, d}, scores))
      .Input(Int64Tensor({n, d}, labels))
      .Attr(Attribute::String("reduction", "none"));
  const std::vector<double> logp = LogSoftmaxAxis1(scores, n, c, d);
  std::vector<ir::Tensor> out = RunOk(t);
  ASSERT_EQ(out.size(), 2u);
  ExpectClose(out[0], ReferenceNll(logp, labels, n, c, d, {}, std::nullopt, "none"), "loss");
  ExpectClose(out[1], logp, "log_prob");
}

TEST(LossHandTest, Int32LabelsAndTwoDimensionalScores) {
  const std::vector<double> scores = {1, 2, 3, 1, 1, 1};
  OpTester t = Op("SoftmaxCrossEntropyLoss", 12);
  t.Input(TensorOf(DType::kFloat32, {2, 3}, scores)).Input(TensorOf(DType::kInt32, {2}, {2, 0}));
  const std::vector<double> logp = LogSoftmaxAxis1(scores, 2, 3, 1);
  ExpectClose(RunOk(t)[0], {-(logp[2] + logp[3]) / 2});
}

TEST(LossHandTest, Errors) {
  const ir::Tensor x = TensorOf(DType::kFloat32, {2, 3}, {});
  {
    OpTester t = Op("NegativeLogLikelihoodLoss", 13);
    t.Input(x).Input(Int64Tensor({2}, {0, 3}));
    ExpectRunError(t, "input 1 (target): value 3 at flat index 1 is outside [0, 3)");
  }
  {
    OpTester t = Op("SoftmaxCrossEntropyLoss", 13);
    t.Input(x).Input(Int64Tensor({3}, {0, 1, 2}));
    ExpectRunError(t, "input 1 (labels): expected shape [2] (input 0 (scores) without dimension 1), got [3]");
  }
  {
    OpTester t = Op("SoftmaxCrossEntropyLoss", 13);
    t.Input(x).Input(Int64Tensor({2}, {0, 1})).Attr(Attribute::String("reduction", "avg"));
    ExpectCreateError(t, "attribute 'reduction' must be 'none', 'sum' or 'mean', got 'avg'");
  }
  {
    OpTester t = Op("NegativeLogLikelihoodLoss", 13);
    t.Input(x).Input(Int64Tensor({2}, {0, 1})).Input(TensorOf(DType::kFloat32, {2}, {1, 1}));
    ExpectRunError(t, "input 2 (weight): expected 3 elements, got shape [2]");
  }
  {
    OpTester t = Op("NegativeLogLikelihoodLoss", 13);
    t.Input(x).Input(TensorOf(DType::kFloat32, {2}, {0, 1}));
    ExpectRunError(t, "input 1 (target): expected int32 or int64, got float");
  }
}

}  // namespace
}  // namespace onnxamp::testing
