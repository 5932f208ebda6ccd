// The vectorized fast paths of the transformer ops against their references: Add/Sub/Mul/Div on plans of at most two
// merged dims (same shapes, scalar, row and column broadcasts; every element bit-equal to the per-element
// reference, fp16/bf16 rounded once), Softmax/LogSoftmax rows with masked (-1e9) entries (exact zeros, the rest
// against a double reference), and LayerNormalization's row path against a double reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "runtime/ops/common/broadcast.h"
#include "runtime/ops/common/elementwise_math.h"
#include "tests/runtime/ops/tolerance.h"

namespace onnxamp::testing {
namespace {

using op_test::DTypeParamName;
using op_test::Op;
using op_test::RandomValues;
using op_test::TensorOf;

struct BinaryCase {
  std::vector<int64_t> a, b;
};

// The float computation of one element, as the reference kernel does it.
float Apply(const std::string& op, float x, float y) {
  if (op == "Add") return x + y;
  if (op == "Sub") return x - y;
  if (op == "Mul") return x * y;
  return x / y;
}

class ArithFastPathTest : public ::testing::TestWithParam<DType> {};

TEST_P(ArithFastPathTest, EveryElementEqualsTheReference) {
  const DType dtype = GetParam();
  const std::vector<BinaryCase> cases = {{{7, 33}, {7, 33}},      // same shapes
                                         {{7, 33}, {}},           // scalar
                                         {{}, {9, 17}},           // scalar first
                                         {{5, 300}, {300}},       // row broadcast
                                         {{17}, {9, 17}},         // row first
                                         {{5, 300}, {5, 1}},      // column broadcast
                                         {{3, 4, 257}, {257}},    // rows merged
                                         {{70000}, {70000}},      // parallel over columns
                                         {{3000, 40}, {1, 40}},   // parallel over rows
                                         {{1, 1, 33}, {1, 33}}};  // unit dims
  int seed = 0;
  for (const std::string op : {"Add", "Sub", "Mul", "Div"}) {
    for (const BinaryCase& c : cases) {
      int64_t na = 1, nb = 1;
      for (int64_t d : c.a) na *= d;
      for (int64_t d : c.b) nb *= d;
      // B away from 0 so that Div stays finite.
      std::vector<double> va = RandomValues(na, ++seed, -4, 4), vb = RandomValues(nb, ++seed, 0.25, 3);
      ir::Tensor ta = TensorOf(dtype, c.a, va), tb = TensorOf(dtype, c.b, vb);
      OpTester t = Op(op, 14);
      t.options.num_threads = 2;
      t.Input(ta).Input(tb);
      auto out = t.Run();
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      auto plan = ops::BroadcastPlan::Make({c.a, c.b});
      ASSERT_TRUE(plan.ok());
      const std::vector<int64_t>& dims = plan->output_dims();
      ASSERT_EQ((*out)[0].dims(), dims);
      const std::vector<double> a_stored = AsDoubles(ta), b_stored = AsDoubles(tb), got = AsDoubles((*out)[0]);
      for (int64_t i = 0; i < plan->num_elements(); ++i) {
        const float x = static_cast<float>(a_stored[ops::BroadcastInputOffset(c.a, dims, i)]);
        const float y = static_cast<float>(b_stored[ops::BroadcastInputOffset(c.b, dims, i)]);
        // The float result rounded once to the storage type.
        const double want = AsDoubles(TensorOf(dtype, {}, {Apply(op, x, y)}))[0];
        ASSERT_EQ(got[i], want) << op << " " << ops::ShapeToString(c.a) << " " << ops::ShapeToString(c.b) << " element "
                                << i;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, ArithFastPathTest,
                         ::testing::Values(DType::kFloat32, DType::kFloat16, DType::kBFloat16), DTypeParamName());

class MaskedSoftmaxTest : public ::testing::TestWithParam<DType> {};

// A causal mask (-1e9 above the diagonal) added to scores: the masked probabilities are exactly 0 and the others
// match a double-precision softmax; LogSoftmax keeps the masked entries finite.
TEST_P(MaskedSoftmaxTest, MaskedEntriesAreExactZeros) {
  const DType dtype = GetParam();
  for (int64_t n : {5, 32, 77}) {
    const int64_t rows = 2 * n;
    std::vector<double> x = RandomValues(rows * n, static_cast<uint32_t>(n), -3, 3);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = (r % n) + 1; j < n; ++j) x[r * n + j] = -1e9;
    const ir::Tensor in = TensorOf(dtype, {2, n, n}, x);
    const std::vector<double> xs = AsDoubles(in);
    std::vector<double> soft(xs.size()), log_soft(xs.size());
    for (int64_t r = 0; r < rows; ++r) {
      double m = -INFINITY, s = 0;
      for (int64_t j = 0; j < n; ++j) m = std::max(m, xs[r * n + j]);
      for (int64_t j = 0; j < n; ++j) s += std::exp(xs[r * n + j] - m);
      for (int64_t j = 0; j < n; ++j) {
        soft[r * n + j] = std::exp(xs[r * n + j] - m) / s;
        log_soft[r * n + j] = xs[r * n + j] - m - std::log(s);
      }
    }
    for (bool log : {false, true}) {
      OpTester t = Op(log ? "LogSoftmax" : "Softmax", 13);
      t.Input(in);
      auto out = t.Run();
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      ExpectClose((*out)[0], log ? log_soft : soft, log ? "LogSoftmax" : "Softmax");
      if (!log) {
        const std::vector<double> got = AsDoubles((*out)[0]);
        for (size_t i = 0; i < got.size(); ++i) {
          if (xs[i] < -1e8) {
            ASSERT_EQ(got[i], 0.0) << "masked element " << i;
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, MaskedSoftmaxTest,
                         ::testing::Values(DType::kFloat32, DType::kFloat16, DType::kBFloat16), DTypeParamName());

TEST(SoftmaxExpArray, FlushesBelowTheFloorAndSumsTheRest) {
  const std::vector<float> x = {0.0f, -1.0f, -86.0f, -87.5f, -1e9f, 2.0f, -INFINITY};
  std::vector<float> e(x.size());
  const float sum = ops::SoftmaxExpArray(x.data(), 2.0f, e.data(), static_cast<int64_t>(x.size()));
  double want_sum = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double d = static_cast<double>(x[i]) - 2.0;
    const double want = d < ops::kSoftmaxExpFloor ? 0.0 : std::exp(d);
    want_sum += want;
    EXPECT_NEAR(e[i], want, 4e-7 * want) << i;
    if (d < ops::kSoftmaxExpFloor) {
      EXPECT_EQ(e[i], 0.0f) << i;
    }
  }
  EXPECT_NEAR(sum, want_sum, 1e-6 * want_sum);
  EXPECT_TRUE(std::isnan(ops::MaxArray(std::vector<float>{1, NAN, 3}.data(), 3)));
  EXPECT_EQ(ops::MaxArray(x.data(), static_cast<int64_t>(x.size())), 2.0f);
}

// SoftmaxExpArray (vectorized for the CPU's widest ISA) against the scalar SoftmaxExp, bit for bit, and its sum
// against the documented order (16 lanes, the tail into lanes 0.., folded in halves): lengths around the vector
// widths, differences across the whole range (flushed, overflowing, -inf, NaN).
TEST(SoftmaxExpArray, MatchesScalarBitForBit) {
  auto bits = [](float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
  };
  std::vector<float> values;
  for (int i = 0; i < 97; ++i) values.push_back(-110.0f + 1.37f * static_cast<float>(i) + 0.001f * (i % 7));
  values.insert(values.end(), {-INFINITY, NAN, 88.7f, 88.8f, 89.0f, 200.0f, -87.0f, -86.99f, -0.0f, 1e-8f});
  for (int64_t n = 0; n <= 45; ++n) {
    for (int shift = 0; shift < 3; ++shift) {
      std::vector<float> x(static_cast<size_t>(n)), e(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) x[i] = values[(i * 13 + shift * 29) % values.size()];
      if (shift == 0) {
        for (float& v : x) v = std::isnan(v) ? 1.0f : v;  // no NaN: finite sums, compared bit for bit
      }
      const float max = 2.5f;
      const float sum = ops::SoftmaxExpArray(x.data(), max, e.data(), n);
      float lanes[16] = {};
      int64_t i = 0;
      for (; i + 16 <= n; i += 16)
        for (int l = 0; l < 16; ++l) lanes[l] += ops::SoftmaxExp(x[i + l] - max);
      for (int l = 0; i < n; ++i, ++l) lanes[l] += ops::SoftmaxExp(x[i] - max);
      for (int w = 8; w >= 1; w /= 2)
        for (int l = 0; l < w; ++l) lanes[l] += lanes[l + w];
      for (int64_t j = 0; j < n; ++j) {
        const float want = ops::SoftmaxExp(x[j] - max);
        if (std::isnan(want)) {
          EXPECT_TRUE(std::isnan(e[j])) << "n " << n << " element " << j;
        } else {
          EXPECT_EQ(bits(e[j]), bits(want)) << "n " << n << " element " << j << ": " << e[j] << ", expected " << want;
        }
      }
      if (std::isnan(lanes[0])) {
        EXPECT_TRUE(std::isnan(sum)) << "n " << n;
      } else {
        EXPECT_EQ(bits(sum), bits(lanes[0])) << "n " << n << ": " << sum << ", expected " << lanes[0];
      }
    }
  }
}

// MaxArray (vectorized for the CPU's widest ISA) against a plain loop: lengths around the vector widths, the
// maximum at every position, a NaN at every position, and all -inf.
TEST(MaxArray, MatchesPlainLoop) {
  for (int64_t n = 0; n <= 41; ++n) {
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>((i * 37) % 11) - 20.0f;
    for (int64_t at = 0; at < n; ++at) {
      std::vector<float> y = x;
      y[at] = 5.0f + static_cast<float>(at);
      EXPECT_EQ(ops::MaxArray(y.data(), n), y[at]) << "n " << n << " maximum at " << at;
      y[at] = NAN;
      EXPECT_TRUE(std::isnan(ops::MaxArray(y.data(), n))) << "n " << n << " NaN at " << at;
    }
    std::vector<float> inf(static_cast<size_t>(n), -INFINITY);
    EXPECT_EQ(ops::MaxArray(inf.data(), n), -INFINITY) << "n " << n;
  }
}

// LayerNormRow (vectorized for the CPU's widest ISA) against its documented order, bit for bit: the mean and the
// squared deviations each summed in 16 lanes (the tail into lanes 0..) folded in halves, for lengths around the
// vector widths and rows with negative values.
TEST(LayerNormRow, MatchesTheDocumentedOrderBitForBit) {
  auto lane_sum = [](const std::vector<float>& v) {
    float lanes[16] = {};
    size_t i = 0;
    for (; i + 16 <= v.size(); i += 16)
      for (int l = 0; l < 16; ++l) lanes[l] += v[i + l];
    for (int l = 0; i < v.size(); ++i, ++l) lanes[l] += v[i];
    for (int w = 8; w >= 1; w /= 2)
      for (int l = 0; l < w; ++l) lanes[l] += lanes[l + w];
    return lanes[0];
  };
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-3, 5);
  for (int64_t n = 1; n <= 70; ++n) {
    std::vector<float> x(static_cast<size_t>(n)), scale(x.size()), bias(x.size()), y(x.size());
    for (size_t j = 0; j < x.size(); ++j) {
      x[j] = u(rng);
      scale[j] = u(rng);
      bias[j] = u(rng);
    }
    float mean = 0, inv = 0;
    ops::LayerNormRow(x.data(), n, scale.data(), bias.data(), 1e-5f, y.data(), &mean, &inv);
    const float want_mean = lane_sum(x) / static_cast<float>(n);
    std::vector<float> squares;
    for (float v : x) squares.push_back((v - want_mean) * (v - want_mean));
    const float want_inv = 1.0f / std::sqrt(lane_sum(squares) / static_cast<float>(n) + 1e-5f);
    ASSERT_EQ(mean, want_mean) << "n " << n;
    ASSERT_EQ(inv, want_inv) << "n " << n;
    for (size_t j = 0; j < x.size(); ++j) {
      ASSERT_EQ(y[j], (x[j] - want_mean) * want_inv * scale[j] + bias[j]) << "n " << n << " element " << j;
    }
  }
}

class LayerNormRowsTest : public ::testing::TestWithParam<DType> {};

// The row path (Scale and B with one value per normalised element) against a double-precision reference, over
// row lengths around the vector width, with and without B, on one and two threads.
TEST_P(LayerNormRowsTest, MatchesDoubleReference) {
  const DType dtype = GetParam();
  for (int64_t cols : {1, 15, 16, 17, 64, 300}) {
    for (bool with_bias : {false, true}) {
      const int64_t rows = 37;
      const ir::Tensor x = TensorOf(dtype, {rows, cols}, RandomValues(rows * cols, 3, -2, 5));
      const ir::Tensor scale = TensorOf(dtype, {cols}, RandomValues(cols, 4, 0.5, 1.5));
      const ir::Tensor bias = TensorOf(dtype, {1, cols}, RandomValues(cols, 5, -1, 1));
      const std::vector<double> xs = AsDoubles(x), ss = AsDoubles(scale), bs = AsDoubles(bias);
      std::vector<double> want(xs.size());
      for (int64_t r = 0; r < rows; ++r) {
        double mean = 0, var = 0;
        for (int64_t j = 0; j < cols; ++j) mean += xs[r * cols + j];
        mean /= static_cast<double>(cols);
        for (int64_t j = 0; j < cols; ++j) var += (xs[r * cols + j] - mean) * (xs[r * cols + j] - mean);
        const double inv = 1.0 / std::sqrt(var / static_cast<double>(cols) + 1e-5);
        for (int64_t j = 0; j < cols; ++j)
          want[r * cols + j] = (xs[r * cols + j] - mean) * inv * ss[j] + (with_bias ? bs[j] : 0.0);
      }
      for (int threads : {1, 2}) {
        OpTester t = Op("LayerNormalization", 17);
        t.options.num_threads = threads;
        t.Input(x).Input(scale);
        if (with_bias) t.Input(bias);
        auto out = t.Run();
        ASSERT_TRUE(out.ok()) << out.status().ToString();
        Tolerance tol = ToleranceFor(dtype);
        if (dtype == DType::kFloat32) tol = {1e-5, 1e-5};  // float statistics: a few ulp of the normalised value
        ExpectClose((*out)[0], want, "cols " + std::to_string(cols), tol);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, LayerNormRowsTest,
                         ::testing::Values(DType::kFloat32, DType::kFloat16, DType::kBFloat16), DTypeParamName());

}  // namespace
}  // namespace onnxamp::testing
