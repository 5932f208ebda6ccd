// TopK kernel tests: the ONNX example, ties in index order, smallest, NaN ordering, k as attribute (opset 1) and as
// input (10+), axes other than the last, random inputs per type against a stable-sort reference, and errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "tests/runtime/ops/reduce_test_util.h"

namespace onnxamp::testing {
namespace {

using ir::Attribute;

struct TopKResult {
  std::vector<int64_t> dims;
  std::vector<double> values;
  std::vector<double> indices;
};

TopKResult RunTopK(ir::Tensor x, int64_t k, int64_t axis, int largest, int64_t opset = 11, int threads = 1) {
  OpTester t = Op("TopK", opset);
  t.num_outputs = 2;
  t.options.num_threads = threads;
  t.Input(std::move(x)).Attr(Attribute::Int("axis", axis));
  if (opset >= 10) {
    t.Input(Int64Tensor({1}, {k}));
  } else {
    t.Attr(Attribute::Int("k", k));
  }
  if (opset >= 11) t.Attr(Attribute::Int("largest", largest));
  std::vector<ir::Tensor> out = RunOk(t);
  if (out.size() != 2) return {};
  EXPECT_EQ(out[1].dtype(), DType::kInt64);
  EXPECT_EQ(out[0].dims(), out[1].dims());
  return {out[0].dims(), AsDoubles(out[0]), AsDoubles(out[1])};
}

// Stable sort along `axis` (ties: smaller index first), first k.
TopKResult ReferenceTopK(const std::vector<double>& x, std::vector<int64_t> dims, int64_t k, int64_t axis,
                         bool largest) {
  int64_t outer = 1, n = dims[axis], inner = 1;
  for (int64_t d = 0; d < static_cast<int64_t>(dims.size()); ++d) {
    if (d < axis) outer *= dims[d];
    if (d > axis) inner *= dims[d];
  }
  dims[axis] = k;
  TopKResult r{dims, std::vector<double>(outer * k * inner), std::vector<double>(outer * k * inner)};
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      std::vector<int64_t> idx(n);
      std::iota(idx.begin(), idx.end(), 0);
      auto val = [&](int64_t j) { return x[(o * n + j) * inner + i]; };
      std::stable_sort(idx.begin(), idx.end(),
                       [&](int64_t a, int64_t b) { return largest ? val(a) > val(b) : val(a) < val(b); });
      for (int64_t j = 0; j < k; ++j) {
        r.values[(o * k + j) * inner + i] = val(idx[j]);
        r.indices[(o * k + j) * inner + i] = static_cast<double>(idx[j]);
      }
    }
  }
  return r;
}

TEST(TopKTest, OnnxExampleAndOpsetForms) {
  std::vector<double> x(12);
  std::iota(x.begin(), x.end(), 0.0);
  for (int64_t opset : {1, 10, 11}) {
    TopKResult r = RunTopK(TensorOf(DType::kFloat32, {3, 4}, x), 3, -1, 1, opset);
    EXPECT_EQ(r.dims, (std::vector<int64_t>{3, 3})) << opset;
    EXPECT_EQ(r.values, (std::vector<double>{3, 2, 1, 7, 6, 5, 11, 10, 9})) << opset;
    EXPECT_EQ(r.indices, (std::vector<double>{3, 2, 1, 3, 2, 1, 3, 2, 1})) << opset;
  }
  TopKResult r = RunTopK(TensorOf(DType::kFloat32, {3, 4}, x), 2, 0, 0);  // smallest along axis 0
  EXPECT_EQ(r.dims, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(r.values, (std::vector<double>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(r.indices, (std::vector<double>{0, 0, 0, 0, 1, 1, 1, 1}));
}

TEST(TopKTest, TiesKeepIndexOrderAndNanRanksHighest) {
  const ir::Tensor x = TensorOf(DType::kFloat32, {5}, {1, 3, 3, 2, 3});
  TopKResult big = RunTopK(x, 3, 0, 1);
  EXPECT_EQ(big.values, (std::vector<double>{3, 3, 3}));
  EXPECT_EQ(big.indices, (std::vector<double>{1, 2, 4}));
  TopKResult small = RunTopK(x, 4, 0, 0);
  EXPECT_EQ(small.values, (std::vector<double>{1, 2, 3, 3}));
  EXPECT_EQ(small.indices, (std::vector<double>{0, 3, 1, 2}));
  const ir::Tensor nan = TensorOf(DType::kFloat32, {4}, {1, NAN, 2, -INFINITY});
  TopKResult top = RunTopK(nan, 2, 0, 1);
  EXPECT_TRUE(std::isnan(top.values[0]));
  EXPECT_EQ(top.indices, (std::vector<double>{1, 2}));
  TopKResult bottom = RunTopK(nan, 4, 0, 0);
  EXPECT_EQ(bottom.indices, (std::vector<double>{3, 0, 2, 1}));
  TopKResult none = RunTopK(nan, 0, 0, 1);
  EXPECT_EQ(none.dims, (std::vector<int64_t>{0}));
}

class TopKTypedTest : public ::testing::TestWithParam<DType> {};

TEST_P(TopKTypedTest, RandomMatchesStableSortReference) {
  const DType dtype = GetParam();
  const std::vector<int64_t> dims = {3, 17, 4};
  std::vector<double> x = RandomValues(3 * 17 * 4, 33, dtype == DType::kUint8 ? 0 : -20, 20);
  for (double& v : x) v = std::round(v);  // ties are common
  x = Rounded(dtype, x);
  for (int64_t axis : {0, 1, 2}) {
    for (int largest = 0; largest <= 1; ++largest) {
      for (int64_t k : {int64_t{1}, dims[axis] / 2, dims[axis]}) {
        TopKResult got = RunTopK(TensorOf(dtype, dims, x), k, axis, largest);
        TopKResult want = ReferenceTopK(x, dims, k, axis, largest);
        const std::string what =
            "axis " + std::to_string(axis) + " k " + std::to_string(k) + " largest " + std::to_string(largest);
        EXPECT_EQ(got.dims, want.dims) << what;
        EXPECT_EQ(got.values, want.values) << what;
        EXPECT_EQ(got.indices, want.indices) << what;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, TopKTypedTest,
                         ::testing::Values(DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64,
                                           DType::kInt32, DType::kInt64, DType::kUint8),
                         DTypeParamName());

TEST(TopKTest, LargeOnSeveralThreadsBothSelectionPaths) {
  const std::vector<int64_t> dims = {300, 200};
  std::vector<double> x = RandomValues(300 * 200, 4, -50, 50);
  for (double& v : x) v = std::round(v);  // many ties
  x = Rounded(DType::kFloat32, x);
  for (int64_t k : {5, 40}) {  // insertion scan (k <= 16) and partial sort
    for (int largest = 0; largest <= 1; ++largest) {
      TopKResult got = RunTopK(TensorOf(DType::kFloat32, dims, x), k, 1, largest, 11, 4);
      TopKResult want = ReferenceTopK(x, dims, k, 1, largest);
      EXPECT_EQ(got.values, want.values) << "k " << k << " largest " << largest;
      EXPECT_EQ(got.indices, want.indices) << "k " << k << " largest " << largest;
    }
  }
}

TEST(TopKTest, Errors) {
  const ir::Tensor x = TensorOf(DType::kFloat32, {2, 4}, {});
  {
    OpTester t = Op("TopK", 11);
    t.num_outputs = 2;
    t.Input(x).Input(Int64Tensor({1}, {5}));
    ExpectRunError(t, "input 1 (K): k = 5 is outside 0..4 (dimension 1 of input 0)");
  }
  {
    OpTester t = Op("TopK", 11);
    t.num_outputs = 2;
    t.Input(x).Input(Int64Tensor({2}, {1, 2}));
    ExpectRunError(t, "input 1 (K): expected one int64 value, got int64 with 2 elements");
  }
  {
    OpTester t = Op("TopK", 9);
    t.num_outputs = 2;
    t.Input(x);
    ExpectCreateError(t, "attribute 'k' must be given");
  }
  {
    OpTester t = Op("TopK", 11);
    t.num_outputs = 2;
    t.Input(x).Input(Int64Tensor({1}, {1})).Attr(Attribute::Int("axis", 2));
    ExpectCreateError(t, "attribute 'axis': axis 2 is out of range for rank 2");
  }
}

}  // namespace
}  // namespace onnxamp::testing
