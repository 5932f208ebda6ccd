// ArgMax and ArgMin kernel tests: hand-computed cases (keepdims, negative axis, select_last_index, NaN), random
// inputs per type against a reference, strided and multi-threaded layouts, integer types, and errors.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tests/runtime/ops/reduce_test_util.h"

namespace onnxamp::testing {
namespace {

using ir::Attribute;

std::vector<double> RunArg(const std::string& op, ir::Tensor x, int64_t axis, int keepdims, int select_last,
                           std::vector<int64_t>* dims = nullptr, int threads = 1) {
  OpTester t = Op(op, 13);
  t.options.num_threads = threads;
  t.Input(std::move(x))
      .Attr(Attribute::Int("axis", axis))
      .Attr(Attribute::Int("keepdims", keepdims))
      .Attr(Attribute::Int("select_last_index", select_last));
  std::vector<ir::Tensor> out = RunOk(t);
  if (out.empty()) return {};
  EXPECT_EQ(out[0].dtype(), DType::kInt64);
  if (dims) *dims = out[0].dims();
  return AsDoubles(out[0]);
}

// Index of the first (or last) extreme value along `axis` of x (dims), in double.
std::vector<double> ReferenceArg(bool is_max, const std::vector<double>& x, const std::vector<int64_t>& dims,
                                 int64_t axis, bool last) {
  int64_t outer = 1, n = dims[axis], inner = 1;
  for (int64_t d = 0; d < static_cast<int64_t>(dims.size()); ++d) {
    if (d < axis) outer *= dims[d];
    if (d > axis) inner *= dims[d];
  }
  std::vector<double> out;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      int64_t best = 0;
      for (int64_t j = 1; j < n; ++j) {
        const double c = x[(o * n + j) * inner + i], b = x[(o * n + best) * inner + i];
        if ((is_max ? c > b : c < b) || (last && c == b)) best = j;
      }
      out.push_back(static_cast<double>(best));
    }
  }
  return out;
}

TEST(ArgMaxTest, HandComputed) {
  const ir::Tensor x = TensorOf(DType::kFloat32, {2, 2}, {2, 1, 3, 10});
  std::vector<int64_t> dims;
  EXPECT_EQ(RunArg("ArgMax", x, 0, 1, 0, &dims), (std::vector<double>{1, 1}));
  EXPECT_EQ(dims, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(RunArg("ArgMax", x, -1, 0, 0, &dims), (std::vector<double>{0, 1}));
  EXPECT_EQ(dims, (std::vector<int64_t>{2}));
  EXPECT_EQ(RunArg("ArgMin", x, 1, 1, 0, &dims), (std::vector<double>{1, 0}));
  EXPECT_EQ(dims, (std::vector<int64_t>{2, 1}));
  const ir::Tensor ties = TensorOf(DType::kFloat32, {2, 3}, {2, 2, 1, 3, 3, 3});
  EXPECT_EQ(RunArg("ArgMax", ties, 1, 0, 0), (std::vector<double>{0, 0}));
  EXPECT_EQ(RunArg("ArgMax", ties, 1, 0, 1), (std::vector<double>{1, 2}));
  EXPECT_EQ(RunArg("ArgMin", ties, 1, 0, 1), (std::vector<double>{2, 2}));
  // NaN is the extreme value for both, as in NumPy.
  const ir::Tensor nan = TensorOf(DType::kFloat32, {4}, {1, NAN, 3, NAN});
  EXPECT_EQ(RunArg("ArgMax", nan, 0, 0, 0), (std::vector<double>{1}));
  EXPECT_EQ(RunArg("ArgMin", nan, 0, 0, 1), (std::vector<double>{3}));
  // Opset 11 has no select_last_index: the first index wins.
  OpTester t = Op("ArgMax", 11);
  t.Input(ties).Attr(Attribute::Int("axis", 1));
  EXPECT_EQ(AsDoubles(RunOk(t)[0]), (std::vector<double>{0, 0}));
}

class ArgMaxTypedTest : public ::testing::TestWithParam<DType> {};

TEST_P(ArgMaxTypedTest, RandomMatchesReference) {
  const DType dtype = GetParam();
  const std::vector<int64_t> dims = {3, 5, 4};
  // Coarse values make ties common, so the tie rule is exercised.
  std::vector<double> x = RandomValues(60, 21, dtype == DType::kUint8 ? 0 : -5, 5);
  for (double& v : x) v = std::round(v);
  x = Rounded(dtype, x);
  for (const std::string op : {"ArgMax", "ArgMin"}) {
    for (int64_t axis : {0, 1, 2}) {
      for (int last = 0; last <= 1; ++last) {
        EXPECT_EQ(RunArg(op, TensorOf(dtype, dims, x), axis, 1, last),
                  ReferenceArg(op == "ArgMax", x, dims, axis, last))
            << op << " axis " << axis << " last " << last;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, ArgMaxTypedTest,
                         ::testing::Values(DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64,
                                           DType::kInt32, DType::kInt64, DType::kUint8, DType::kInt8),
                         DTypeParamName());

TEST(ArgMaxTest, LargeStridedOnSeveralThreads) {
  const std::vector<int64_t> dims = {50, 40, 300};
  const std::vector<double> x = Rounded(DType::kFloat32, RandomValues(50 * 40 * 300, 8));
  for (int64_t axis : {0, 1, 2}) {
    EXPECT_EQ(RunArg("ArgMax", TensorOf(DType::kFloat32, dims, x), axis, 0, 0, nullptr, 4),
              ReferenceArg(true, x, dims, axis, false))
        << "axis " << axis;
  }
}

TEST(ArgMaxTest, Errors) {
  OpTester t = Op("ArgMax", 13);
  t.Input(TensorOf(DType::kFloat32, {2, 3}, {})).Attr(Attribute::Int("axis", -3));
  ExpectCreateError(t, "attribute 'axis': axis -3 is out of range for rank 2");
  OpTester e = Op("ArgMin", 13);
  e.Input(TensorOf(DType::kFloat32, {2, 0}, {})).Attr(Attribute::Int("axis", 1));
  ExpectRunError(e, "input 0 (data): dimension 1 is empty, so it has no minimum");
}

}  // namespace
}  // namespace onnxamp::testing
