// Kernel tests of the com.onnxamp gradient ops of the norm/loss family: SoftmaxGrad, LogSoftmaxGrad,
// LayerNormalizationGrad, SoftmaxCrossEntropyLossGrad and NegativeLogLikelihoodLossGrad. Tiny hand-computed cases,
// random inputs per float type against a double reference (the reference reads the inputs as rounded to the type),
// float32 against float64, and errors naming the input. (The builders' finite-difference checks are in
// tests/trainer/grad_norm_loss_test.cc.)
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "runtime/ops/common/broadcast.h"
#include "runtime/ops/gradient_ops.h"
#include "tests/runtime/ops/reduce_test_util.h"

namespace onnxamp::testing {
namespace {

using ir::Attribute;
using ops::ShapeToString;

// Gradients subtract nearly equal terms: an absolute tolerance on the scale of the values (O(1) here).
Tolerance GradTolerance(DType t) {
  switch (t) {
    case DType::kFloat64:
      return {1e-12, 1e-12};
    case DType::kFloat32:
      return {1e-5, 1e-5};
    case DType::kFloat16:
      return {4e-3, 4e-3};
    default:
      return {3e-2, 3e-2};
  }
}

class NormLossGradTest : public ::testing::TestWithParam<DType> {};

// ---- SoftmaxGrad / LogSoftmaxGrad

// dX of Softmax (log: LogSoftmax) over [outer, n, inner] from dY and Y.
std::vector<double> ReferenceSoftmaxGrad(const std::vector<double>& dy, const std::vector<double>& y, int64_t outer,
                                         int64_t n, int64_t inner, bool log) {
  std::vector<double> dx(dy.size());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      double s = 0;
      for (int64_t j = 0; j < n; ++j) {
        const int64_t k = (o * n + j) * inner + i;
        s += log ? dy[k] : dy[k] * y[k];
      }
      for (int64_t j = 0; j < n; ++j) {
        const int64_t k = (o * n + j) * inner + i;
        dx[k] = log ? dy[k] - std::exp(y[k]) * s : y[k] * (dy[k] - s);
      }
    }
  }
  return dx;
}

OpTester SoftmaxGradOp(bool log, int64_t axis, int64_t legacy, const ir::Tensor& dy, const ir::Tensor& y) {
  OpTester t = InternalOp(log ? ops::kLogSoftmaxGradOp : ops::kSoftmaxGradOp);
  t.Attr(Attribute::Int("axis", axis)).Attr(Attribute::Int("legacy", legacy)).Input(dy).Input(y);
  return t;
}

TEST(SoftmaxGradKernelTest, HandComputed) {
  // Y = [0.2, 0.3, 0.5], dY = [1, 0, 0]: sum(dY * Y) = 0.2, dX = Y * (dY - 0.2).
  auto dx = RunOk(SoftmaxGradOp(false, -1, 0, TensorOf(DType::kFloat64, {1, 3}, {1, 0, 0}),
                                TensorOf(DType::kFloat64, {1, 3}, {0.2, 0.3, 0.5})));
  ASSERT_EQ(dx.size(), 1u);
  ExpectClose(dx[0], {0.16, -0.06, -0.1});
  // LogSoftmax: Y = log p with p = [0.2, 0.3, 0.5], dY = [1, 2, 3]: dX = dY - p * 6.
  auto dl = RunOk(SoftmaxGradOp(true, 1, 0, TensorOf(DType::kFloat64, {1, 3}, {1, 2, 3}),
                                TensorOf(DType::kFloat64, {1, 3}, {std::log(0.2), std::log(0.3), std::log(0.5)})));
  ASSERT_EQ(dl.size(), 1u);
  ExpectClose(dl[0], {-0.2, 0.2, 0.0});
}

TEST_P(NormLossGradTest, SoftmaxGradMatchesReference) {
  const DType dtype = GetParam();
  const std::vector<int64_t> dims = {2, 3, 5};
  const std::vector<double> dy_v = Rounded(dtype, RandomValues(30, 1)), y_v = Rounded(dtype, RandomValues(30, 2));
  // (axis, legacy) -> the [outer, n, inner] view.
  struct Case {
    int64_t axis, legacy, outer, n, inner;
  };
  for (const Case& c : {Case{-1, 0, 6, 5, 1}, Case{1, 0, 2, 3, 5}, Case{-3, 0, 1, 2, 15}, Case{1, 1, 2, 15, 1},
                        Case{0, 1, 1, 30, 1}, Case{2, 1, 6, 5, 1}}) {
    for (bool log : {false, true}) {
      const std::string what = std::string(log ? "LogSoftmaxGrad" : "SoftmaxGrad") + " axis " + std::to_string(c.axis) +
                               " legacy " + std::to_string(c.legacy);
      auto out = RunOk(SoftmaxGradOp(log, c.axis, c.legacy, TensorOf(dtype, dims, dy_v), TensorOf(dtype, dims, y_v)));
      ASSERT_EQ(out.size(), 1u) << what;
      EXPECT_EQ(out[0].dtype(), dtype);
      EXPECT_EQ(out[0].dims(), dims);
      ExpectClose(out[0], ReferenceSoftmaxGrad(dy_v, y_v, c.outer, c.n, c.inner, log), what, GradTolerance(dtype));
    }
  }
}

TEST(SoftmaxGradKernelTest, Float32MatchesFloat64) {
  const std::vector<int64_t> dims = {4, 7};
  const std::vector<double> dy = Rounded(DType::kFloat32, RandomValues(28, 3));
  const std::vector<double> y = Rounded(DType::kFloat32, RandomValues(28, 4, 0, 1));
  for (bool log : {false, true}) {
    auto f32 = RunOk(SoftmaxGradOp(log, 0, 0, TensorOf(DType::kFloat32, dims, dy), TensorOf(DType::kFloat32, dims, y)));
    auto f64 = RunOk(SoftmaxGradOp(log, 0, 0, TensorOf(DType::kFloat64, dims, dy), TensorOf(DType::kFloat64, dims, y)));
    ASSERT_EQ(f32.size(), 1u);
    ASSERT_EQ(f64.size(), 1u);
    ExpectClose(f32[0], AsDoubles(f64[0]), log ? "LogSoftmaxGrad" : "SoftmaxGrad", {1e-5, 1e-5});
  }
}

TEST(SoftmaxGradKernelTest, Errors) {
  const ir::Tensor a = TensorOf(DType::kFloat32, {2, 3}, {1, 2, 3, 4, 5, 6});
  ExpectRunError(SoftmaxGradOp(false, -1, 0, a, TensorOf(DType::kFloat32, {3, 2}, {1, 2, 3, 4, 5, 6})),
                 "expected dY's type and shape");
  ExpectCreateError(SoftmaxGradOp(false, -1, 2, a, a), "attribute 'legacy' must be 0 or 1");
  OpTester missing = InternalOp(ops::kSoftmaxGradOp);
  missing.Input(a).OmittedInput();
  ExpectRunError(missing, "input 1 (Y) is missing");
  ExpectCreateError(SoftmaxGradOp(true, 2, 0, a, a), "attribute 'axis': axis 2 is out of range");
}

// ---- LayerNormalizationGrad

struct LayerNormGradResult {
  std::vector<double> dx, dscale, dbias;
};

// LayerNormalization's backward in double over `rows` rows of `cols`, Scale given per normalised element (sidx maps
// a normalised position to its Scale element; dScale and dB have `scale_count` elements).
LayerNormGradResult ReferenceLayerNormGrad(const std::vector<double>& dy, const std::vector<double>& x,
                                           const std::vector<double>& scale, const std::vector<int64_t>& sidx,
                                           const std::vector<double>& mean, const std::vector<double>& inv,
                                           int64_t rows, int64_t cols) {
  LayerNormGradResult r;
  r.dx.resize(x.size());
  r.dscale.assign(scale.size(), 0);
  r.dbias.assign(scale.size(), 0);
  for (int64_t i = 0; i < rows; ++i) {
    double sg = 0, sgx = 0;
    for (int64_t j = 0; j < cols; ++j) {
      const int64_t k = i * cols + j;
      const double xhat = (x[k] - mean[i]) * inv[i], g = dy[k] * scale[sidx[j]];
      sg += g;
      sgx += g * xhat;
      r.dscale[sidx[j]] += dy[k] * xhat;
      r.dbias[sidx[j]] += dy[k];
    }
    for (int64_t j = 0; j < cols; ++j) {
      const int64_t k = i * cols + j;
      const double xhat = (x[k] - mean[i]) * inv[i], g = dy[k] * scale[sidx[j]];
      r.dx[k] = inv[i] * (g - sg / cols - xhat * sgx / cols);
    }
  }
  return r;
}

OpTester LayerNormGradOp(int64_t axis, const ir::Tensor& dy, const ir::Tensor& x, const ir::Tensor& scale,
                         const ir::Tensor& mean, const ir::Tensor& inv, int outputs = 3) {
  OpTester t = InternalOp(ops::kLayerNormalizationGradOp);
  t.num_outputs = outputs;
  t.Attr(Attribute::Int("axis", axis)).Input(dy).Input(x).Input(scale).Input(mean).Input(inv);
  return t;
}

TEST(LayerNormGradKernelTest, HandComputed) {
  // One row x = [-1, 0, 1] with mean 0 and inv_std 1 given, Scale [1, 2, 3], dY ones: g = [1, 2, 3], mean(g) = 2,
  // mean(g * xhat) = 2/3, dX = g - 2 - xhat * 2/3; dScale = dY * xhat; dB = dY.
  auto out =
      RunOk(LayerNormGradOp(-1, TensorOf(DType::kFloat64, {1, 3}, {1, 1, 1}),
                            TensorOf(DType::kFloat64, {1, 3}, {-1, 0, 1}), TensorOf(DType::kFloat64, {3}, {1, 2, 3}),
                            TensorOf(DType::kFloat32, {1, 1}, {0}), TensorOf(DType::kFloat32, {1, 1}, {1})));
  ASSERT_EQ(out.size(), 3u);
  ExpectClose(out[0], {-1.0 / 3, 0, 1.0 / 3});
  ExpectClose(out[1], {-1, 0, 1});
  ExpectClose(out[2], {1, 1, 1});
  EXPECT_EQ(out[1].dims(), (std::vector<int64_t>{3}));
}

TEST_P(NormLossGradTest, LayerNormGradMatchesReference) {
  const DType dtype = GetParam();
  const std::vector<int64_t> dims = {2, 3, 5};
  const std::vector<double> x = Rounded(dtype, RandomValues(30, 5)), dy = Rounded(dtype, RandomValues(30, 6));
  struct Case {
    int64_t axis;
    std::vector<int64_t> scale_dims;
  };
  for (const Case& c :
       {Case{-1, {5}}, Case{1, {3, 5}}, Case{1, {1, 5}}, Case{-2, {3, 1}}, Case{0, {2, 3, 5}}, Case{0, {1, 1, 5}}}) {
    const int64_t axis = c.axis < 0 ? c.axis + 3 : c.axis;
    int64_t rows = 1, cols = 1;
    for (int64_t d = 0; d < 3; ++d) (d < axis ? rows : cols) *= dims[d];
    int64_t scale_count = 1;
    for (int64_t d : c.scale_dims) scale_count *= d;
    const std::vector<double> scale = Rounded(dtype, RandomValues(scale_count, 7, 0.5, 1.5));
    // The Scale element of each normalised position (NumPy broadcasting aligned at the back).
    std::vector<int64_t> sidx(cols);
    for (int64_t j = 0; j < cols; ++j) {
      int64_t rem = j, off = 0, stride = 1;
      for (int64_t d = 2, s = static_cast<int64_t>(c.scale_dims.size()) - 1; d >= axis; --d, --s) {
        const int64_t pos = rem % dims[d];
        rem /= dims[d];
        if (s >= 0 && c.scale_dims[s] != 1) off += pos * stride;
        if (s >= 0) stride *= c.scale_dims[s];
      }
      sidx[j] = off;
    }
    std::vector<double> mean(rows), inv(rows);
    for (int64_t i = 0; i < rows; ++i) {
      double m = 0, v = 0;
      for (int64_t j = 0; j < cols; ++j) m += x[i * cols + j] / cols;
      for (int64_t j = 0; j < cols; ++j) v += (x[i * cols + j] - m) * (x[i * cols + j] - m) / cols;
      mean[i] = Rounded(DType::kFloat32, {m})[0];
      inv[i] = Rounded(DType::kFloat32, {1 / std::sqrt(v + 1e-5)})[0];
    }
    std::vector<int64_t> stat_dims = dims;
    for (int64_t d = axis; d < 3; ++d) stat_dims[d] = 1;
    const std::string what = "axis " + std::to_string(c.axis) + " scale " + ShapeToString(c.scale_dims);
    auto out = RunOk(LayerNormGradOp(c.axis, TensorOf(dtype, dims, dy), TensorOf(dtype, dims, x),
                                     TensorOf(dtype, c.scale_dims, scale), TensorOf(DType::kFloat32, stat_dims, mean),
                                     TensorOf(DType::kFloat32, stat_dims, inv)));
    ASSERT_EQ(out.size(), 3u) << what;
    const LayerNormGradResult want = ReferenceLayerNormGrad(dy, x, scale, sidx, mean, inv, rows, cols);
    ExpectClose(out[0], want.dx, what + " dX", GradTolerance(dtype));
    EXPECT_EQ(out[1].dims(), c.scale_dims) << what;
    Tolerance sum_tol = GradTolerance(dtype);
    sum_tol.atol *= rows;  // column sums of `rows` terms
    ExpectClose(out[1], want.dscale, what + " dScale", sum_tol);
    ExpectClose(out[2], want.dbias, what + " dB", sum_tol);
  }
}

TEST(LayerNormGradKernelTest, OptionalOutputsAndFloat32MatchesFloat64) {
  const std::vector<int64_t> dims = {3, 4};
  const std::vector<double> x = Rounded(DType::kFloat32, RandomValues(12, 8));
  const std::vector<double> dy = Rounded(DType::kFloat32, RandomValues(12, 9));
  const std::vector<double> scale = Rounded(DType::kFloat32, RandomValues(4, 10));
  const ir::Tensor mean = TensorOf(DType::kFloat32, {3, 1}, {0.1, -0.2, 0.3});
  const ir::Tensor inv = TensorOf(DType::kFloat32, {3, 1}, {1.5, 0.7, 1.1});
  auto f32 = RunOk(LayerNormGradOp(-1, TensorOf(DType::kFloat32, dims, dy), TensorOf(DType::kFloat32, dims, x),
                                   TensorOf(DType::kFloat32, {4}, scale), mean, inv));
  auto f64 = RunOk(LayerNormGradOp(-1, TensorOf(DType::kFloat64, dims, dy), TensorOf(DType::kFloat64, dims, x),
                                   TensorOf(DType::kFloat64, {4}, scale), mean, inv));
  ASSERT_EQ(f32.size(), 3u);
  ASSERT_EQ(f64.size(), 3u);
  for (size_t i = 0; i < 3; ++i) ExpectClose(f32[i], AsDoubles(f64[i]), "output " + std::to_string(i), {1e-5, 1e-5});
  // dX alone.
  auto dx_only = RunOk(LayerNormGradOp(-1, TensorOf(DType::kFloat64, dims, dy), TensorOf(DType::kFloat64, dims, x),
                                       TensorOf(DType::kFloat64, {4}, scale), mean, inv, 1));
  ASSERT_EQ(dx_only.size(), 1u);
  EXPECT_TRUE(dx_only[0].SameContents(f64[0]));
}

TEST(LayerNormGradKernelTest, Errors) {
  const ir::Tensor x = TensorOf(DType::kFloat32, {2, 3}, {1, 2, 3, 4, 5, 6});
  const ir::Tensor stat = TensorOf(DType::kFloat32, {2, 1}, {0, 0});
  const ir::Tensor scale = TensorOf(DType::kFloat32, {3}, {1, 1, 1});
  ExpectRunError(LayerNormGradOp(-1, x, x, scale, stat, TensorOf(DType::kFloat32, {3}, {1, 1, 1})),
                 "(InvStdDev): expected 2 elements");
  ExpectRunError(LayerNormGradOp(-1, x, x, TensorOf(DType::kFloat32, {2}, {1, 1}), stat, stat),
                 "does not broadcast to the normalised shape");
  ExpectRunError(LayerNormGradOp(-1, TensorOf(DType::kFloat32, {3, 2}, {1, 2, 3, 4, 5, 6}), x, scale, stat, stat),
                 "expected X's type and shape");
  ExpectRunError(LayerNormGradOp(-1, x, x, TensorOf(DType::kFloat64, {3}, {1, 1, 1}), stat, stat), "expected X's type");
  OpTester missing = InternalOp(ops::kLayerNormalizationGradOp);
  missing.Input(x).Input(x).Input(scale).Input(stat).OmittedInput();
  ExpectRunError(missing, "input 4 (InvStdDev) is missing");
}

// ---- SoftmaxCrossEntropyLossGrad / NegativeLogLikelihoodLossGrad

// d(loss)/d(input 0) in double: SCE from log_prob (softmax), NLL from the input (which only gives the shape).
std::vector<double> ReferenceLossGrad(bool softmax, const std::vector<double>& dloss, const std::vector<double>& x,
                                      const std::vector<int64_t>& labels, int64_t n, int64_t c, int64_t d,
                                      const std::vector<double>& weights, std::optional<int64_t> ignore,
                                      const std::string& reduction) {
  double weight_total = 0;
  for (int64_t t : labels) {
    if (!(ignore && t == *ignore)) weight_total += weights.empty() ? 1.0 : weights[t];
  }
  std::vector<double> dx(x.size(), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < d; ++j) {
      const int64_t p = i * d + j, t = labels[p];
      if (ignore && t == *ignore) continue;
      double f = (weights.empty() ? 1.0 : weights[t]) * (reduction == "none" ? dloss[p] : dloss[0]);
      if (reduction == "mean") f /= weight_total;
      for (int64_t k = 0; k < c; ++k) {
        const int64_t e = (i * c + k) * d + j;
        const double onehot = k == t ? 1.0 : 0.0;
        dx[e] = softmax ? f * (std::exp(x[e]) - onehot) : -f * onehot;
      }
    }
  }
  return dx;
}

OpTester LossGradOp(bool softmax, const std::string& reduction, std::optional<int64_t> ignore, const ir::Tensor& dloss,
                    const ir::Tensor& x, const ir::Tensor& labels, const std::optional<ir::Tensor>& weights) {
  OpTester t = InternalOp(softmax ? ops::kSoftmaxCrossEntropyLossGradOp : ops::kNegativeLogLikelihoodLossGradOp);
  t.Attr(Attribute::String("reduction", reduction));
  if (ignore) t.Attr(Attribute::Int("ignore_index", *ignore));
  t.Input(dloss).Input(x).Input(labels);
  if (weights) t.Input(*weights);
  return t;
}

TEST(LossGradKernelTest, HandComputed) {
  // SCE, one position, p = [0.25, 0.75], label 1, mean of one position, dLoss 2: 2 * (p - [0, 1]).
  const ir::Tensor lp = TensorOf(DType::kFloat64, {1, 2}, {std::log(0.25), std::log(0.75)});
  auto sce = RunOk(LossGradOp(true, "mean", std::nullopt, TensorOf(DType::kFloat64, {}, {2}), lp, Int64Tensor({1}, {1}),
                              std::nullopt));
  ASSERT_EQ(sce.size(), 1u);
  ExpectClose(sce[0], {0.5, -0.5});
  // NLL, two positions with labels 0 and 2 (2 ignored), weights [3, 1, 5], sum, dLoss 1: -3 at (0, 0), 0 elsewhere.
  auto nll = RunOk(LossGradOp(false, "sum", 2, TensorOf(DType::kFloat64, {}, {1}),
                              TensorOf(DType::kFloat64, {2, 3}, {0, 0, 0, 0, 0, 0}), Int64Tensor({2}, {0, 2}),
                              TensorOf(DType::kFloat64, {3}, {3, 1, 5})));
  ASSERT_EQ(nll.size(), 1u);
  ExpectClose(nll[0], {-3, 0, 0, 0, 0, 0});
  // The same with mean: the weight total is 3 (position 1 ignored), so -1.
  nll = RunOk(LossGradOp(false, "mean", 2, TensorOf(DType::kFloat64, {}, {1}),
                         TensorOf(DType::kFloat64, {2, 3}, {0, 0, 0, 0, 0, 0}), Int64Tensor({2}, {0, 2}),
                         TensorOf(DType::kFloat64, {3}, {3, 1, 5})));
  ASSERT_EQ(nll.size(), 1u);
  ExpectClose(nll[0], {-1, 0, 0, 0, 0, 0});
}

TEST_P(NormLossGradTest, LossGradMatchesReference) {
  const DType dtype = GetParam();
  // [N, C] and [N, C, D1, D2] layouts.
  for (const std::vector<int64_t>& dims : {std::vector<int64_t>{5, 4}, std::vector<int64_t>{3, 4, 2, 3}}) {
    const int64_t n = dims[0], c = dims[1], d = dims.size() > 2 ? dims[2] * dims[3] : 1;
    std::vector<int64_t> label_dims = dims;
    label_dims.erase(label_dims.begin() + 1);
    std::vector<int64_t> labels(n * d);
    for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<int64_t>((i * 7 + 3) % c);
    labels[1] = -1;  // ignored when ignore_index is -1
    // log_prob rows of a softmax (so that exp sums to 1), as the forward gives them.
    std::vector<double> scores = RandomValues(n * c * d, 11), lp(scores.size());
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < d; ++j) {
        double s = 0;
        for (int64_t k = 0; k < c; ++k) s += std::exp(scores[(i * c + k) * d + j]);
        for (int64_t k = 0; k < c; ++k) lp[(i * c + k) * d + j] = scores[(i * c + k) * d + j] - std::log(s);
      }
    }
    lp = Rounded(dtype, lp);
    const std::vector<double> weights = Rounded(dtype, RandomValues(c, 12, 0.5, 2));
    for (bool softmax : {true, false}) {
      for (const std::string reduction : {"none", "sum", "mean"}) {
        for (bool weighted : {false, true}) {
          const std::vector<int64_t> loss_dims = reduction == "none" ? label_dims : std::vector<int64_t>{};
          int64_t loss_count = 1;
          for (int64_t v : loss_dims) loss_count *= v;
          const std::vector<double> dloss = Rounded(dtype, RandomValues(loss_count, 13, 0.5, 1.5));
          const std::string what = std::string(softmax ? "SCE " : "NLL ") + reduction + (weighted ? " weighted" : "") +
                                   " " + ShapeToString(dims);
          auto out =
              RunOk(LossGradOp(softmax, reduction, -1, TensorOf(dtype, loss_dims, dloss), TensorOf(dtype, dims, lp),
                               Int64Tensor(label_dims, labels),
                               weighted ? std::optional<ir::Tensor>(TensorOf(dtype, {c}, weights)) : std::nullopt));
          ASSERT_EQ(out.size(), 1u) << what;
          EXPECT_EQ(out[0].dtype(), dtype) << what;
          EXPECT_EQ(out[0].dims(), dims) << what;
          ExpectClose(out[0],
                      ReferenceLossGrad(softmax, dloss, lp, labels, n, c, d, weighted ? weights : std::vector<double>{},
                                        -1, reduction),
                      what, GradTolerance(dtype));
        }
      }
    }
  }
}

TEST(LossGradKernelTest, Float32MatchesFloat64AndInt32Labels) {
  const std::vector<double> lp = Rounded(DType::kFloat32, RandomValues(12, 14, -3, -0.1));
  ir::Tensor labels32(DType::kInt32, {4});
  for (int i = 0; i < 4; ++i) labels32.mutable_values<int32_t>()[i] = (i * 2) % 3;
  for (bool softmax : {true, false}) {
    auto f32 = RunOk(LossGradOp(softmax, "mean", std::nullopt, TensorOf(DType::kFloat32, {}, {1.5}),
                                TensorOf(DType::kFloat32, {4, 3}, lp), labels32, std::nullopt));
    auto f64 = RunOk(LossGradOp(softmax, "mean", std::nullopt, TensorOf(DType::kFloat64, {}, {1.5}),
                                TensorOf(DType::kFloat64, {4, 3}, lp), Int64Tensor({4}, {0, 2, 1, 0}), std::nullopt));
    ASSERT_EQ(f32.size(), 1u);
    ASSERT_EQ(f64.size(), 1u);
    ExpectClose(f32[0], AsDoubles(f64[0]), softmax ? "SCE" : "NLL", {1e-5, 1e-6});
  }
}

TEST(LossGradKernelTest, Errors) {
  const ir::Tensor lp = TensorOf(DType::kFloat32, {2, 3}, {-1, -1, -1, -1, -1, -1});
  const ir::Tensor scalar = TensorOf(DType::kFloat32, {}, {1});
  ExpectRunError(LossGradOp(true, "mean", std::nullopt, scalar, lp, Int64Tensor({2}, {0, 3}), std::nullopt),
                 "(labels): value 3 at flat index 1 is outside [0, 3)");
  ExpectRunError(LossGradOp(true, "none", std::nullopt, scalar, lp, Int64Tensor({2}, {0, 1}), std::nullopt),
                 "(dLoss) is float []; expected float [2]");
  ExpectRunError(LossGradOp(false, "sum", std::nullopt, scalar, lp, Int64Tensor({3}, {0, 1, 2}), std::nullopt),
                 "(target), checked as the forward's");
  ExpectRunError(LossGradOp(true, "sum", std::nullopt, scalar, lp, Int64Tensor({2}, {0, 1}),
                            TensorOf(DType::kFloat32, {2}, {1, 1})),
                 "(weights): expected 3 elements");
  ExpectCreateError(LossGradOp(true, "avg", std::nullopt, scalar, lp, Int64Tensor({2}, {0, 1}), std::nullopt),
                    "attribute 'reduction'");
}

INSTANTIATE_TEST_SUITE_P(Types, NormLossGradTest, ::testing::ValuesIn(FloatTypes()), DTypeParamName());

}  // namespace
}  // namespace onnxamp::testing
