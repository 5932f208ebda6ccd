// Softmax and LogSoftmax kernel tests: every axis at opset 13 (one axis) and opset 11 (coerced to 2-D) against a
// double reference per float type, default axes, large inputs (stability), several threads, and errors.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "runtime/ops/common/reduce.h"
#include "tests/runtime/ops/reduce_test_util.h"

namespace onnxamp::testing {
namespace {

using ir::Attribute;

// Softmax/LogSoftmax of x (dims) in double: over dims[axis:] flattened (coerce_2d) or along axis alone.
std::vector<double> ReferenceSoftmax(const std::vector<double>& x, const std::vector<int64_t>& dims, int64_t axis,
                                     bool coerce_2d, bool log) {
  int64_t outer = 1, n = 1, inner = 1;
  for (int64_t d = 0; d < static_cast<int64_t>(dims.size()); ++d) {
    if (d < axis) {
      outer *= dims[d];
    } else if (d == axis || coerce_2d) {
      n *= dims[d];
    } else {
      inner *= dims[d];
    }
  }
  std::vector<double> y(x.size());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t j) { return (o * n + j) * inner + i; };
      double m = -INFINITY, s = 0;
      for (int64_t j = 0; j < n; ++j) m = std::max(m, x[at(j)]);
      for (int64_t j = 0; j < n; ++j) s += std::exp(x[at(j)] - m);
      for (int64_t j = 0; j < n; ++j) y[at(j)] = log ? x[at(j)] - m - std::log(s) : std::exp(x[at(j)] - m) / s;
    }
  }
  return y;
}

class SoftmaxTest : public ::testing::TestWithParam<DType> {};

TEST_P(SoftmaxTest, EveryAxisMatchesDoubleReference) {
  const DType dtype = GetParam();
  const std::vector<int64_t> dims = {2, 3, 4};
  const std::vector<double> x = Rounded(dtype, RandomValues(24, 3, -4, 4));
  for (const std::string op : {"Softmax", "LogSoftmax"}) {
    for (int64_t opset : {11, 13}) {
      for (int64_t axis : {0, 1, 2, -1, -3}) {
        OpTester t = Op(op, opset);
        t.Input(TensorOf(dtype, dims, x)).Attr(Attribute::Int("axis", axis));
        std::vector<ir::Tensor> out = RunOk(t);
        ASSERT_EQ(out.size(), 1u);
        EXPECT_EQ(out[0].dims(), dims);
        const std::vector<double> want = ReferenceSoftmax(x, dims, (axis + 3) % 3, opset < 13, op == "LogSoftmax");
        ExpectClose(out[0], want, op + " opset " + std::to_string(opset) + " axis " + std::to_string(axis));
      }
    }
  }
}

TEST_P(SoftmaxTest, DefaultAxisDependsOnOpset) {
  const DType dtype = GetParam();
  const std::vector<int64_t> dims = {2, 3, 4};
  const std::vector<double> x = Rounded(dtype, RandomValues(24, 4));
  OpTester old = Op("Softmax", 12);  // default axis 1, coerced: normalised over 3 * 4 values
  old.Input(TensorOf(dtype, dims, x));
  ExpectClose(RunOk(old)[0], ReferenceSoftmax(x, dims, 1, true, false), "opset 12");
  OpTester cur = Op("LogSoftmax", 13);  // default axis -1
  cur.Input(TensorOf(dtype, dims, x));
  ExpectClose(RunOk(cur)[0], ReferenceSoftmax(x, dims, 2, false, true), "opset 13");
}

TEST_P(SoftmaxTest, LargeInputsOnSeveralThreads) {
  const DType dtype = GetParam();
  const std::vector<int64_t> dims = {64, 130, 37};
  const std::vector<double> x = Rounded(dtype, RandomValues(64 * 130 * 37, 9, -8, 8));
  for (int64_t axis : {1, 2}) {
    for (const std::string op : {"Softmax", "LogSoftmax"}) {
      OpTester t = Op(op, 13);
      t.options.num_threads = 4;
      t.Input(TensorOf(dtype, dims, x)).Attr(Attribute::Int("axis", axis));
      ExpectClose(RunOk(t)[0], ReferenceSoftmax(x, dims, axis, false, op == "LogSoftmax"),
                  op + " axis " + std::to_string(axis));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, SoftmaxTest, ::testing::ValuesIn(FloatTypes()), DTypeParamName());

TEST(SoftmaxHandTest, FastExpIsWithinTwoUlpOfExp) {
  // 400001 points spread over [-87, 88], and the neighbourhood of 0.
  double worst = 0;
  std::vector<float> xs;
  for (int i = 0; i <= 400000; ++i) xs.push_back(static_cast<float>(-87.0 + 175.0 * i / 400000));
  for (float x = -1e-3f; x <= 1e-3f; x += 1e-6f) xs.push_back(x);
  for (float x : xs) {
    const double want = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::abs(ops::reduce::FastExp(x) - want) / want);
  }
  EXPECT_LT(worst, 2.4e-7);
  EXPECT_EQ(ops::reduce::FastExp(0.0f), 1.0f);
  EXPECT_EQ(ops::reduce::FastExp(-INFINITY), 0.0f);
  EXPECT_EQ(ops::reduce::FastExp(-1000.0f), 0.0f);
  EXPECT_TRUE(std::isnan(ops::reduce::FastExp(NAN)));
}

TEST(SoftmaxHandTest, LargeNumbersAreStable) {
  OpTester t = Op("Softmax", 13);
  t.Input(TensorOf(DType::kFloat32, {2, 3}, {1000, 1001, 1002, -1e4, -1e4 + 1, -1e4 + 2}));
  const double e0 = 1 / (1 + std::exp(1.0) + std::exp(2.0));
  const std::vector<double> row = {e0, e0 * std::exp(1.0), e0 * std::exp(2.0)};
  ExpectClose(RunOk(t)[0], {row[0], row[1], row[2], row[0], row[1], row[2]});
  OpTester l = Op("LogSoftmax", 13);
  l.Input(TensorOf(DType::kFloat32, {3}, {1000, 1001, 1002}));
  ExpectClose(RunOk(l)[0], {std::log(row[0]), std::log(row[1]), std::log(row[2])});
}

TEST(SoftmaxHandTest, Errors) {
  OpTester t = Op("Softmax", 13);
  t.Input(TensorOf(DType::kFloat32, {2, 3}, {})).Attr(Attribute::Int("axis", 2));
  ExpectCreateError(t, "attribute 'axis': axis 2 is out of range for rank 2");
  OpTester i = Op("LogSoftmax", 13);
  i.Input(TensorOf(DType::kInt32, {2}, {1, 2}));
  ExpectRunError(i, "does not support input 0 of type int32");
}

}  // namespace
}  // namespace onnxamp::testing
