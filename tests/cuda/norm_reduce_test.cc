// CUDA kernels of the norm_reduce family (Reduce*, ArgMax/ArgMin, Softmax/LogSoftmax, TopK) against the CPU
// reference: every registered element type, axes variants (first, last, middle, several, negative, all, empty with
// noop), keepdims, row lengths around the warp size and long rows, empty dims, NaN handling, tensors large enough
// for the grid-stride loops, and the errors the CPU kernels give. Normalisations and losses are in
// norm_loss_test.cc. Skipped without a CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "runtime/ops/common/reduce_norm.h"
#include "tests/cuda/cuda_op_test_util.h"
#include "tests/cuda/norm_reduce_test_util.h"
#include "tests/runtime/ops/reduce_test_util.h"

namespace onnxamp::testing {
namespace {

using ir::Attribute;
using ops::reduce::DimsToString;

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

bool IsFloatType(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16 || t == DType::kFloat64;
}
bool IsUnsignedType(DType t) {
  return t == DType::kUint8 || t == DType::kUint16 || t == DType::kUint32 || t == DType::kUint64;
}

// Random values of `dtype`: floats uniform in [lo, hi); integers whole numbers in about the same range (shifted
// non-negative for unsigned types), so that integer data has ties.
std::vector<double> DataFor(DType dtype, size_t n, uint32_t seed, double lo, double hi) {
  std::vector<double> v = RandomValues(n, seed, lo, hi);
  if (IsFloatType(dtype)) return v;
  for (double& x : v) {
    x = std::round(x);
    if (IsUnsignedType(dtype)) x = std::abs(x);
  }
  return v;
}

// Whole numbers in [lo, hi] of any numeric dtype (non-negative for unsigned types): few distinct values, so rows
// hold ties.
std::vector<double> WholeNumbers(DType dtype, size_t n, uint32_t seed, double lo, double hi) {
  std::vector<double> v = RandomValues(n, seed, lo, hi);
  for (double& x : v) {
    x = std::round(x);
    if (IsUnsignedType(dtype)) x = std::abs(x);
  }
  return v;
}

// ---- Reduce* ------------------------------------------------------------------------------------------------------

const std::vector<std::string>& ReduceOps() {
  static const std::vector<std::string> ops = {"ReduceSum",    "ReduceMean",     "ReduceMax", "ReduceMin",
                                               "ReduceProd",   "ReduceL1",       "ReduceL2",  "ReduceSumSquare",
                                               "ReduceLogSum", "ReduceLogSumExp"};
  return ops;
}

// Data for `op`: positive for sums and logs (no cancellation, so the order of summation barely matters), near 1
// for products, signed for extremes and LogSumExp.
std::vector<double> ReduceData(const std::string& op, DType dtype, size_t n, uint32_t seed) {
  if (op == "ReduceMax" || op == "ReduceMin" || op == "ReduceLogSumExp") return DataFor(dtype, n, seed, -20, 20);
  if (op == "ReduceProd") return IsFloatType(dtype) ? RandomValues(n, seed, 0.9, 1.1) : DataFor(dtype, n, seed, -3, 3);
  if (IsFloatType(dtype)) return RandomValues(n, seed, 0.25, 1.25);
  return DataFor(dtype, n, seed, 0, 40);
}

// The per-dtype tolerance, looser for long products (every factor rounds once, in a different order).
Tolerance ReduceTolerance(const std::string& op, DType dtype) {
  Tolerance t = CudaToleranceFor(dtype);
  if (op == "ReduceProd" && dtype == DType::kFloat32) t.rtol = 1e-3;
  if (op == "ReduceProd" && dtype == DType::kFloat64) t.rtol = 1e-9;
  return t;
}

struct AxesCase {
  std::vector<int64_t> dims;
  std::vector<int64_t> axes;  // empty: all axes (or none with noop)
  bool noop = false;          // noop_with_empty_axes = 1 (axes-input form only)
};

const std::vector<AxesCase>& AxesCases() {
  static const std::vector<AxesCase> cases = {
      {{3, 5, 7}, {0}},        // first axis (inner kept: column kernel)
      {{3, 5, 7}, {2}},        // last axis (row kernel)
      {{3, 5, 7}, {1}},        // middle axis
      {{3, 5, 7}, {0, 2}},     // several, not adjacent (row kernel with a reduced outer run)
      {{3, 5, 7}, {-1}},       // negative
      {{3, 5, 7}, {-3, -2}},   // several negative, adjacent (merged)
      {{3, 5, 7}, {}},         // all
      {{3, 5, 7}, {}, true},   // none: noop_with_empty_axes
      {{2, 3, 4, 5}, {1, 3}},  // alternating: two reduced groups, two kept groups
      {{2, 3, 4, 5}, {0, 2}},  // alternating, inner kept
      {{6, 1, 7}, {1}},        // a size-1 reduced dim (identity map)
      {{2, 1}, {0}},           // rows of length 1
      {{1}, {0}},              // one element
      {{}, {}},                // a scalar
      {{4, 31}, {1}},          // row lengths around the warp
      {{4, 32}, {1}},          //
      {{4, 33}, {1}},          //
      {{3, 1000}, {1}},        //
      {{3, 5000}, {-1}},       // a whole block per row
      {{2, 40000}, {1}},       // few long rows: split into chunks, partials combined
      {{5000, 3}, {0}},        // few columns, long: split into chunks
      {{3000, 2, 7}, {0, 2}},  // split with an outer reduced run
      {{0, 4}, {1}},           // no outputs
      {{4, 0}, {1}},           // empty reductions (the op's identity)
      {{4, 0, 3}, {1}},        // empty reductions, inner kept
  };
  return cases;
}

class CudaReduceTest : public ::testing::TestWithParam<DType> {};

TEST_P(CudaReduceTest, EveryOpAndAxesVariantMatchesCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dtype = GetParam();
  uint32_t seed = 1;
  for (const std::string& op : ReduceOps()) {
    for (size_t c = 0; c < AxesCases().size(); ++c) {
      const AxesCase& ac = AxesCases()[c];
      const ir::Tensor x = TensorOf(dtype, ac.dims, ReduceData(op, dtype, Count(ac.dims), seed++));
      const int64_t keepdims = static_cast<int64_t>(c % 2);
      const std::string base = op + " " + DimsToString(ac.dims) + " axes " + DimsToString(ac.axes) +
                               (ac.noop ? " noop" : "") + " keepdims " + std::to_string(keepdims);
      // Axes as input 1 (opset 18).
      OpTester in = Op(op, 18);
      in.Input(x).Attr(Attribute::Int("keepdims", keepdims));
      if (ac.noop) in.Attr(Attribute::Int("noop_with_empty_axes", 1));
      if (!ac.axes.empty()) in.Input(Int64Tensor({static_cast<int64_t>(ac.axes.size())}, ac.axes));
      ExpectCudaMatchesCpu(in, base + " (axes input)", ReduceTolerance(op, dtype));
      if (ac.noop) continue;
      // Axes as the attribute (opset 13; 11 for ReduceSum, whose axes became an input at 13).
      OpTester attr = Op(op, op == "ReduceSum" ? 11 : 13);
      attr.Input(x).Attr(Attribute::Int("keepdims", keepdims));
      if (!ac.axes.empty()) attr.Attr(Attribute::Ints("axes", ac.axes));
      ExpectCudaMatchesCpu(attr, base + " (axes attribute)", ReduceTolerance(op, dtype));
    }
  }
}

TEST_P(CudaReduceTest, SpecialFloatValuesMatchCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dtype = GetParam();
  if (!IsFloatType(dtype)) GTEST_SKIP() << "float types only";
  // Rows: NaN first / middle / last, all -inf, +inf and -inf together, ordinary values.
  const std::vector<double> v = {kNan,  1,     2,     3,     1,    kNan,  2, 3, 1,  2,   3,    kNan,
                                 -kInf, -kInf, -kInf, -kInf, kInf, -kInf, 1, 2, -1, 0.5, -0.5, 0};
  const ir::Tensor x = TensorOf(dtype, {6, 4}, v);
  for (const std::string& op : ReduceOps()) {
    for (int64_t axis : {0, 1}) {
      OpTester t = Op(op, 18);
      t.Input(x).Input(Int64Tensor({1}, {axis})).Attr(Attribute::Int("keepdims", 0));
      ExpectCudaMatchesCpu(t, op + " special values axis " + std::to_string(axis));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, CudaReduceTest,
                         ::testing::Values(DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64,
                                           DType::kInt32, DType::kInt64, DType::kUint32, DType::kUint64),
                         DTypeParamName());

TEST(CudaReduceExtraTypesTest, MaxMinOnEightBitIntegersAndBool) {
  ONNXAMP_REQUIRE_CUDA();
  for (DType dtype : {DType::kInt8, DType::kUint8, DType::kBool}) {
    for (const std::string& op : {std::string("ReduceMax"), std::string("ReduceMin")}) {
      for (const AxesCase& ac : {AxesCase{{3, 5, 7}, {1}}, AxesCase{{4, 33}, {1}}, AxesCase{{5000, 3}, {0}},
                                 AxesCase{{3, 5, 7}, {}}, AxesCase{{4, 0}, {1}}}) {
        std::vector<double> values = DataFor(dtype, Count(ac.dims), 11, -100, 100);
        if (dtype == DType::kBool) {
          for (double& b : values) b = b > 60 ? 1 : 0;  // mostly false, a few true
        }
        OpTester t = Op(op, 20);
        t.Input(TensorOf(dtype, ac.dims, values));
        if (!ac.axes.empty()) t.Input(Int64Tensor({static_cast<int64_t>(ac.axes.size())}, ac.axes));
        ExpectCudaMatchesCpu(t, op + " " + std::string(DTypeName(dtype)) + " " + DimsToString(ac.dims));
      }
    }
  }
}

TEST(CudaReduceLargeTest, GridStrideLoopsAndSplitReductions) {
  ONNXAMP_REQUIRE_CUDA();
  // More than 65535 * 256 elements in one row, and as many outputs of a column reduction.
  const int64_t n = 17'000'000;
  const ir::Tensor row = TensorOf(DType::kFloat32, {n}, RandomValues(n, 5, 0.25, 1.25));
  for (const std::string& op : {std::string("ReduceSum"), std::string("ReduceMax"), std::string("ReduceLogSumExp")}) {
    OpTester t = Op(op, 18);
    t.Input(row).Attr(Attribute::Int("keepdims", 0));
    ExpectCudaMatchesCpu(t, op + " of 17M values", Tolerance{1e-4, 1e-3});
  }
  const ir::Tensor cols = TensorOf(DType::kFloat32, {2, n}, RandomValues(2 * n, 6, -1, 1));
  OpTester sum = Op("ReduceSum", 18);
  sum.Input(cols).Input(Int64Tensor({1}, {0}));
  ExpectCudaMatchesCpu(sum, "ReduceSum over axis 0 of [2, 17M]");
  OpTester prod = Op("ReduceMean", 18);
  prod.Input(TensorOf(DType::kFloat16, {n + 5, 1}, RandomValues(n + 5, 7, -1, 1))).Input(Int64Tensor({1}, {1}));
  ExpectCudaMatchesCpu(prod, "ReduceMean of 17M rows of 1 (fp16)");
}

TEST(CudaReduceErrorsTest, RefusedAsOnTheCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const ir::Tensor x = TensorOf(DType::kFloat32, {2, 3}, RandomValues(6, 1, -1, 1));
  OpTester attr18 = Op("ReduceMean", 18);
  attr18.Input(x).Attr(Attribute::Ints("axes", {0}));
  ExpectCreateErrorOnBoth(attr18, "attribute 'axes' is not allowed at opset 18: from opset 18 the axes are input 1");
  OpTester noop = Op("ReduceSum", 13);
  noop.Input(x).Attr(Attribute::Int("noop_with_empty_axes", 2));
  ExpectCreateErrorOnBoth(noop, "attribute 'noop_with_empty_axes' must be 0 or 1, got 2");
  OpTester range = Op("ReduceMax", 13);
  range.Input(x).Attr(Attribute::Ints("axes", {2}));
  ExpectCreateErrorOnBoth(range, "axes value 2 is out of range for rank 2");
  OpTester twice = Op("ReduceMin", 13);
  twice.Input(x).Attr(Attribute::Ints("axes", {1, -1}));
  ExpectCreateErrorOnBoth(twice, "names dimension 1 twice");
  OpTester input_range = Op("ReduceL2", 18);
  input_range.Input(x).Input(Int64Tensor({1}, {-3}));
  ExpectRunErrorOnBoth(input_range, "input 1 (axes): axes value -3 is out of range for rank 2");
  OpTester input_type = Op("ReduceL1", 18);
  input_type.Input(x).Input(TensorOf(DType::kInt32, {1}, {0}));
  ExpectRunErrorOnBoth(input_type, "input 1 (axes): expected int64, got int32");
}

// ---- ArgMax / ArgMin ------------------------------------------------------------------------------------------

const std::vector<DType>& ArgTypes() {
  static const std::vector<DType> types = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64,
                                           DType::kInt8,    DType::kUint8,   DType::kInt16,    DType::kUint16,
                                           DType::kInt32,   DType::kUint32,  DType::kInt64,    DType::kUint64};
  return types;
}

class CudaArgExtremeTest : public ::testing::TestWithParam<DType> {};

TEST_P(CudaArgExtremeTest, AxesKeepdimsAndTiesMatchCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dtype = GetParam();
  struct Case {
    std::vector<int64_t> dims;
    int64_t axis;
  };
  const std::vector<Case> cases = {{{3, 5, 7}, 0}, {{3, 5, 7}, 1}, {{3, 5, 7}, 2}, {{3, 5, 7}, -1}, {{4, 1}, 1},
                                   {{4, 31}, 1},   {{4, 32}, 1},   {{4, 33}, -1},  {{3, 1000}, 1},  {{2, 5000}, 1},
                                   {{5000, 3}, 0}, {{0, 4}, 1},    {{7}, 0}};
  uint32_t seed = 100;
  for (const std::string& op : {std::string("ArgMax"), std::string("ArgMin")}) {
    for (const Case& c : cases) {
      // Few distinct values, so every row has ties.
      const ir::Tensor x = TensorOf(dtype, c.dims, WholeNumbers(dtype, Count(c.dims), seed++, -4, 4));
      for (int64_t keepdims : {0, 1}) {
        for (int64_t last : {0, 1}) {
          OpTester t = Op(op, 13);
          t.Input(x)
              .Attr(Attribute::Int("axis", c.axis))
              .Attr(Attribute::Int("keepdims", keepdims))
              .Attr(Attribute::Int("select_last_index", last));
          ExpectCudaMatchesCpu(t, op + " " + DimsToString(c.dims) + " axis " + std::to_string(c.axis) + " keepdims " +
                                      std::to_string(keepdims) + " select_last " + std::to_string(last));
        }
      }
    }
  }
}

TEST_P(CudaArgExtremeTest, NanIsTheExtremeAsOnCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dtype = GetParam();
  if (!IsFloatType(dtype)) GTEST_SKIP() << "float types only";
  const ir::Tensor x = TensorOf(dtype, {4, 5}, {1,     kNan,  3,     kNan,  0,     kInf, 2,    -kInf, 2,    1,
                                                -kInf, -kInf, -kInf, -kInf, -kInf, 0,    -0.0, 0,     kNan, -1});
  for (const std::string& op : {std::string("ArgMax"), std::string("ArgMin")}) {
    for (int64_t axis : {0, 1}) {
      for (int64_t last : {0, 1}) {
        OpTester t = Op(op, 13);
        t.Input(x).Attr(Attribute::Int("axis", axis)).Attr(Attribute::Int("select_last_index", last));
        ExpectCudaMatchesCpu(t, op + " NaN axis " + std::to_string(axis) + " last " + std::to_string(last));
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, CudaArgExtremeTest, ::testing::ValuesIn(ArgTypes()), DTypeParamName());

TEST(CudaArgExtremeLargeTest, GridStrideAndErrors) {
  ONNXAMP_REQUIRE_CUDA();
  const int64_t n = 8'500'001;
  OpTester t = Op("ArgMax", 13);
  t.Input(TensorOf(DType::kFloat32, {2, n}, DataFor(DType::kFloat32, 2 * n, 9, -1000, 1000)))
      .Attr(Attribute::Int("axis", 0));
  ExpectCudaMatchesCpu(t, "ArgMax over axis 0 of [2, 8.5M]");
  OpTester rows = Op("ArgMin", 13);
  rows.Input(TensorOf(DType::kFloat16, {17'000'000, 1}, RandomValues(17'000'000, 10, -1, 1)))
      .Attr(Attribute::Int("axis", 1));
  ExpectCudaMatchesCpu(rows, "ArgMin of 17M rows of 1");

  OpTester empty = Op("ArgMax", 13);
  empty.Input(TensorOf(DType::kFloat32, {2, 0}, {})).Attr(Attribute::Int("axis", 1));
  ExpectRunErrorOnBoth(empty, "input 0 (data): dimension 1 is empty, so it has no maximum");
  OpTester axis = Op("ArgMin", 13);
  axis.Input(TensorOf(DType::kFloat32, {2, 3}, {})).Attr(Attribute::Int("axis", -3));
  ExpectCreateErrorOnBoth(axis, "attribute 'axis': axis -3 is out of range for rank 2");
}

// ---- Softmax / LogSoftmax ------------------------------------------------------------------------------------------

class CudaSoftmaxTest : public ::testing::TestWithParam<DType> {};

TEST_P(CudaSoftmaxTest, AxesRowLengthsAndOpsetsMatchCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dtype = GetParam();
  struct Case {
    std::vector<int64_t> dims;
    int64_t axis;
  };
  const std::vector<Case> cases = {{{3, 1}, -1},   {{5, 31}, -1},  {{5, 32}, 1},    {{5, 33}, -1},
                                   {{4, 64}, 1},   {{4, 65}, 1},   {{3, 1000}, -1}, {{3, 5000}, 1},
                                   {{2, 3, 4}, 0}, {{2, 3, 4}, 1}, {{2, 3, 4}, -2}, {{2, 300, 5}, 1},
                                   {{7}, 0},       {{0, 5}, 1},    {{5, 0}, 1},     {{2, 2049}, -1}};
  uint32_t seed = 200;
  for (const std::string& op : {std::string("Softmax"), std::string("LogSoftmax")}) {
    for (const Case& c : cases) {
      const ir::Tensor x = TensorOf(dtype, c.dims, RandomValues(Count(c.dims), seed++, -8, 8));
      for (int64_t opset : {11, 13}) {
        OpTester t = Op(op, opset);
        t.Input(x).Attr(Attribute::Int("axis", c.axis));
        ExpectCudaMatchesCpu(
            t, op + " opset " + std::to_string(opset) + " " + DimsToString(c.dims) + " axis " + std::to_string(c.axis));
      }
    }
    // Default axes: 1 (coerced to 2-D) before opset 13, -1 from 13.
    for (int64_t opset : {1, 13}) {
      OpTester t = Op(op, opset);
      t.Input(TensorOf(dtype, {2, 3, 4}, RandomValues(24, seed++, -3, 3)));
      ExpectCudaMatchesCpu(t, op + " default axis, opset " + std::to_string(opset));
    }
  }
}

TEST_P(CudaSoftmaxTest, LargeOffsetsInfinitiesAndNanMatchCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dtype = GetParam();
  // Rows: large offset (stability), -inf entries, all -inf (NaN out), NaN (NaN out), one huge value.
  const ir::Tensor x = TensorOf(dtype, {5, 4}, {1000,  1001,  999, 1000.5, -kInf, 0, 1,     -kInf, -kInf,  -kInf,
                                                -kInf, -kInf, 1,   kNan,   2,     3, 60000, 0,     -60000, 1});
  for (const std::string& op : {std::string("Softmax"), std::string("LogSoftmax")}) {
    for (int64_t axis : {0, 1}) {
      OpTester t = Op(op, 13);
      t.Input(x).Attr(Attribute::Int("axis", axis));
      ExpectCudaMatchesCpu(t, op + " special values axis " + std::to_string(axis));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, CudaSoftmaxTest, ::testing::ValuesIn(FloatTypes()), DTypeParamName());

TEST(CudaSoftmaxLargeTest, GridStrideLoopsAndErrors) {
  ONNXAMP_REQUIRE_CUDA();
  // 2.2M rows of 8: more row groups than 65535 blocks hold; 17M columns of 2 along axis 0.
  OpTester rows = Op("Softmax", 13);
  rows.Input(TensorOf(DType::kFloat32, {2'200'000, 8}, RandomValues(17'600'000, 21, -4, 4)));
  ExpectCudaMatchesCpu(rows, "Softmax of 2.2M rows of 8");
  OpTester cols = Op("LogSoftmax", 13);
  cols.Input(TensorOf(DType::kBFloat16, {2, 17'000'000}, RandomValues(34'000'000, 22, -4, 4)))
      .Attr(Attribute::Int("axis", 0));
  ExpectCudaMatchesCpu(cols, "LogSoftmax over axis 0 of [2, 17M]");

  OpTester axis = Op("Softmax", 13);
  axis.Input(TensorOf(DType::kFloat32, {2, 3}, {})).Attr(Attribute::Int("axis", 2));
  ExpectCreateErrorOnBoth(axis, "attribute 'axis': axis 2 is out of range for rank 2");
  OpTester old_axis = Op("LogSoftmax", 11);
  old_axis.Input(TensorOf(DType::kFloat32, {2, 3}, {})).Attr(Attribute::Int("axis", 3));
  ExpectCreateErrorOnBoth(old_axis, "attribute 'axis': axis 3 is out of range for rank 2");
}

// ---- TopK ------------------------------------------------------------------------------------------------------

class CudaTopKTest : public ::testing::TestWithParam<DType> {};

TEST_P(CudaTopKTest, ShapesLargestAndTiesMatchCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dtype = GetParam();
  struct Case {
    std::vector<int64_t> dims;
    int64_t axis;
    int64_t k;
  };
  const std::vector<Case> cases = {{{5, 10}, -1, 3},  {{5, 10}, 1, 10},  {{4, 7, 3}, 0, 2},    {{4, 7, 3}, 1, 7},
                                   {{1, 1}, 1, 1},    {{3, 33}, 1, 5},   {{3, 1000}, 1, 17},   {{2, 2048}, 1, 2048},
                                   {{2, 2049}, 1, 5}, {{2, 5000}, 1, 1}, {{2, 5000}, 1, 5000}, {{3, 2500, 2}, 1, 9},
                                   {{6, 5}, 1, 0},    {{0, 5}, 1, 2},    {{5000, 2}, 0, 100}};
  uint32_t seed = 300;
  for (const Case& c : cases) {
    // Few distinct values relative to the lengths: many ties, which must keep index order.
    const ir::Tensor x = TensorOf(dtype, c.dims, WholeNumbers(dtype, Count(c.dims), seed++, -30, 30));
    for (int64_t largest : {1, 0}) {
      OpTester t = Op("TopK", 11);
      t.Input(x).Input(Int64Tensor({1}, {c.k})).Attr(Attribute::Int("axis", c.axis));
      t.Attr(Attribute::Int("largest", largest)).Attr(Attribute::Int("sorted", 1));
      t.num_outputs = 2;
      ExpectCudaMatchesCpu(t,
                           "TopK " + DimsToString(c.dims) + " axis " + std::to_string(c.axis) + " k " +
                               std::to_string(c.k) + " largest " + std::to_string(largest),
                           Tolerance{0, 0});
    }
  }
  // k as the attribute (opset 1), and only the indices output requested.
  OpTester old = Op("TopK", 1);
  old.Input(TensorOf(dtype, {4, 9}, WholeNumbers(dtype, 36, seed++, -5, 5))).Attr(Attribute::Int("k", 4));
  old.num_outputs = 2;
  ExpectCudaMatchesCpu(old, "TopK opset 1", Tolerance{0, 0});
  OpTester indices_only = Op("TopK", 11);
  indices_only.Input(TensorOf(dtype, {3, 3000}, WholeNumbers(dtype, 9000, seed++, -50, 50)))
      .Input(Int64Tensor({1}, {6}));
  indices_only.num_outputs = 2;
  indices_only.omit_outputs = {true, false};
  ExpectCudaMatchesCpu(indices_only, "TopK indices only", Tolerance{0, 0});
}

TEST_P(CudaTopKTest, NanSignedZerosAndInfinitiesOrderAsOnCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dtype = GetParam();
  if (!IsFloatType(dtype)) GTEST_SKIP() << "float types only";
  std::vector<double> row = {0, -0.0, kNan, 1, -kInf, kInf, kNan, -0.0, 0, -1, 1, kInf};
  std::vector<double> values;
  for (int r = 0; r < 3; ++r) values.insert(values.end(), row.begin(), row.end());
  // The same row short (bitonic path) and repeated past 2048 values (segmented sort path).
  std::vector<double> long_row;
  while (long_row.size() < 2100) long_row.insert(long_row.end(), row.begin(), row.end());
  for (const auto& [dims, data] :
       {std::pair{std::vector<int64_t>{3, 12}, values},
        std::pair{std::vector<int64_t>{1, static_cast<int64_t>(long_row.size())}, long_row}}) {
    for (int64_t largest : {1, 0}) {
      OpTester t = Op("TopK", 11);
      t.Input(TensorOf(dtype, dims, data)).Input(Int64Tensor({1}, {dims[1]}));
      t.Attr(Attribute::Int("largest", largest));
      t.num_outputs = 2;
      ExpectCudaMatchesCpu(t, "TopK special values " + DimsToString(dims) + " largest " + std::to_string(largest),
                           Tolerance{0, 0});
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, CudaTopKTest, ::testing::ValuesIn(ArgTypes()), DTypeParamName());

TEST(CudaTopKErrorsTest, RefusedAsOnTheCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const ir::Tensor x = TensorOf(DType::kFloat32, {2, 3}, RandomValues(6, 1, -1, 1));
  OpTester big = Op("TopK", 11);
  big.Input(x).Input(Int64Tensor({1}, {4}));
  big.num_outputs = 2;
  ExpectRunErrorOnBoth(big, "input 1 (K): k = 4 is outside 0..3 (dimension 1 of input 0)");
  OpTester no_k = Op("TopK", 1);
  no_k.Input(x);
  no_k.num_outputs = 2;
  ExpectCreateErrorOnBoth(no_k, "attribute 'k' must be given and non-negative before opset 10, got -1");
  OpTester axis = Op("TopK", 11);
  axis.Input(x).Input(Int64Tensor({1}, {1})).Attr(Attribute::Int("axis", 2));
  axis.num_outputs = 2;
  ExpectCreateErrorOnBoth(axis, "attribute 'axis': axis 2 is out of range for rank 2");
}

}  // namespace
}  // namespace onnxamp::testing
