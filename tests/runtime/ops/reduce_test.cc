// Reduce* kernel tests: the reduction engine against its reference on random layouts (one and several threads),
// every op against a double-precision reference per float type, hand-computed cases, opset variants of the axes,
// integer and bool types, empty sets, and error messages.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "runtime/executor/thread_pool.h"
#include "runtime/ops/common/reduce.h"
#include "tests/runtime/ops/reduce_test_util.h"

namespace onnxamp::testing {
namespace {

using ir::Attribute;

// --- The engine, directly -------------------------------------------------------------------------------------

struct TestSumOp {
  using Acc = float;
  float Init() const { return 0; }
  float Map(float v, int64_t) const { return v; }
  float Combine(float a, float b) const { return a + b; }
};

struct TestMaxIndexOp {  // folds max(x + out_index) to check that Map sees the right output
  using Acc = float;
  float Init() const { return -std::numeric_limits<float>::infinity(); }
  float Map(float v, int64_t o) const { return v + static_cast<float>(o); }
  float Combine(float a, float b) const { return a > b ? a : b; }
};

// Integer-valued inputs make every summation order exact, so the engine must equal the reference bit for bit.
template <typename Op>
void CheckEngine(const std::vector<int64_t>& dims, const std::vector<bool>& mask, exec::ThreadPool& pool) {
  int64_t total = 1;
  for (int64_t d : dims) total *= d;
  std::vector<float> x(static_cast<size_t>(total));
  for (int64_t i = 0; i < total; ++i) x[i] = static_cast<float>((i * 7919) % 13) - 6.0f;
  const ops::reduce::ReducePlan plan = ops::reduce::MakeReducePlan(dims, mask);
  std::vector<float> got(static_cast<size_t>(plan.out_count)), want(got.size());
  Op op;
  ops::reduce::RunReduce(x.data(), plan, op, got.data(), &pool);
  ops::reduce::RunReduceReference(x.data(), dims, mask, op, want.data());
  std::string what = "dims";
  for (int64_t d : dims) what += " " + std::to_string(d);
  what += " mask";
  for (bool m : mask) what += m ? " 1" : " 0";
  EXPECT_EQ(got, want) << what;
}

TEST(ReduceEngineTest, MatchesReferenceOnRandomLayouts) {
  exec::ThreadPool one(1);
  std::mt19937 gen(17);
  for (int trial = 0; trial < 300; ++trial) {
    const int rank = 1 + static_cast<int>(gen() % 5);
    std::vector<int64_t> dims(rank);
    std::vector<bool> mask(rank);
    for (int d = 0; d < rank; ++d) {
      dims[d] = static_cast<int64_t>(gen() % 5);  // includes 0 and 1
      if (dims[d] == 0 && gen() % 4 != 0) dims[d] = 3;
      mask[d] = gen() % 2 == 0;
    }
    CheckEngine<TestSumOp>(dims, mask, one);
    CheckEngine<TestMaxIndexOp>(dims, mask, one);
  }
}

TEST(ReduceEngineTest, ParallelSplitsMatchReference) {
  exec::ThreadPool pool(4);
  const std::vector<std::pair<std::vector<int64_t>, std::vector<bool>>> cases = {
      {{200000}, {true}},                            // full reduction: split into partials
      {{3, 70000}, {false, true}},                   // few outputs, long contiguous runs
      {{70000, 3}, {true, false}},                   // few outputs, strided
      {{512, 300}, {false, true}},                   // many outputs, contiguous
      {{300, 512}, {true, false}},                   // many outputs, strided
      {{8, 60, 9, 11}, {true, false, true, false}},  // alternating
      {{7, 40, 3, 50, 2}, {false, true, false, true, false}},
      {{40000, 2}, {false, false}},  // nothing reduced
  };
  for (const auto& [dims, mask] : cases) {
    CheckEngine<TestSumOp>(dims, mask, pool);
    CheckEngine<TestMaxIndexOp>(dims, mask, pool);
  }
}

std::vector<int64_t> Offsets(const ops::reduce::OffsetList& list) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < list.size(); ++i) v.push_back(list[i]);
  return v;
}

TEST(ReduceEngineTest, PlanMergesAndDropsUnitDims) {
  const ops::reduce::ReducePlan p = ops::reduce::MakeReducePlan({2, 1, 3, 4, 5}, {false, true, false, true, true});
  EXPECT_TRUE(p.inner_reduced);
  EXPECT_EQ(p.inner, 20);
  EXPECT_EQ(Offsets(p.outer), (std::vector<int64_t>{0, 20, 40, 60, 80, 100}));
  EXPECT_EQ(Offsets(p.red), (std::vector<int64_t>{0}));
  EXPECT_EQ(p.out_count, 6);
  EXPECT_EQ(p.reduce_count, 20);
  const ops::reduce::ReducePlan q = ops::reduce::MakeReducePlan({4, 3, 2}, {true, false, false});
  EXPECT_FALSE(q.inner_reduced);
  EXPECT_EQ(q.inner, 6);
  EXPECT_EQ(Offsets(q.red), (std::vector<int64_t>{0, 6, 12, 18}));
  // Two kept groups need a table: [2, 3(r), 4, 5(r)] keeps offsets of (i, k) = i * 60 + k * 5.
  const ops::reduce::ReducePlan t = ops::reduce::MakeReducePlan({2, 3, 4, 5}, {false, true, false, true});
  EXPECT_TRUE(t.inner_reduced);
  EXPECT_EQ(Offsets(t.outer), (std::vector<int64_t>{0, 5, 10, 15, 60, 65, 70, 75}));
  EXPECT_EQ(Offsets(t.red), (std::vector<int64_t>{0, 20, 40}));
}

TEST(ReduceEngineTest, BranchlessHalfConversionMatchesEveryBitPattern) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const float want = HalfBitsToFloat(static_cast<uint16_t>(b));
    const float got = ops::reduce::HalfBitsToFloatBranchless(static_cast<uint16_t>(b));
    ASSERT_EQ(FloatBits(got), FloatBits(want)) << "fp16 bits " << b;
  }
}

TEST(ReduceEngineTest, BranchlessFloatToHalfMatchesRoundToNearestEven) {
  // Every 4099th float bit pattern (all exponents, signs, NaNs and infinities are hit), plus the edges of each
  // rounding regime. The whole 2^32 range was compared once offline.
  std::vector<uint32_t> patterns = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00001u, 0x477fefffu,
                                    0x477ff000u, 0x38800000u, 0x387fffffu, 0x33000000u, 0x33000001u, 0x337fffffu};
  for (uint64_t b = 0; b <= 0xffffffffull; b += 4099) patterns.push_back(static_cast<uint32_t>(b));
  for (uint32_t b : patterns) {
    const float f = BitsToFloat(b);
    ASSERT_EQ(ops::reduce::FloatToHalfBitsBranchless(f), FloatToHalfBits(f)) << "float bits " << b;
  }
}

// --- Ops against a double reference ---------------------------------------------------------------------------

const std::vector<std::string> kReduceOps = {"ReduceSum",    "ReduceMean",     "ReduceMax", "ReduceMin",
                                             "ReduceProd",   "ReduceL1",       "ReduceL2",  "ReduceSumSquare",
                                             "ReduceLogSum", "ReduceLogSumExp"};

double ApplyReduce(const std::string& op, const std::vector<double>& v) {
  double acc = 0;
  if (op == "ReduceMax" || op == "ReduceMin") {
    const bool mx = op == "ReduceMax";
    acc = mx ? -INFINITY : INFINITY;
    for (double x : v) acc = mx ? std::max(acc, x) : std::min(acc, x);
    return acc;
  }
  if (op == "ReduceProd") {
    acc = 1;
    for (double x : v) acc *= x;
    return acc;
  }
  if (op == "ReduceLogSumExp") {
    double m = -INFINITY;
    for (double x : v) m = std::max(m, x);
    for (double x : v) acc += std::exp(x - m);
    return std::log(acc) + m;
  }
  for (double x : v) {
    if (op == "ReduceL1") {
      acc += std::abs(x);
    } else if (op == "ReduceL2" || op == "ReduceSumSquare") {
      acc += x * x;
    } else {
      acc += x;
    }
  }
  if (op == "ReduceMean") return acc / static_cast<double>(v.size());
  if (op == "ReduceL2") return std::sqrt(acc);
  if (op == "ReduceLogSum") return std::log(acc);
  return acc;
}

std::vector<double> ReferenceReduce(const std::string& op, const std::vector<double>& x,
                                    const std::vector<int64_t>& dims, const std::vector<bool>& mask) {
  int64_t outs = 1;
  for (size_t d = 0; d < dims.size(); ++d) outs *= mask[d] ? 1 : dims[d];
  std::vector<std::vector<double>> groups(static_cast<size_t>(outs));
  std::vector<int64_t> index(dims.size(), 0);
  for (size_t e = 0; e < x.size(); ++e) {
    int64_t rem = static_cast<int64_t>(e), o = 0;
    for (int64_t d = static_cast<int64_t>(dims.size()) - 1; d >= 0; --d) {
      index[d] = rem % dims[d];
      rem /= dims[d];
    }
    for (size_t d = 0; d < dims.size(); ++d) {
      if (!mask[d]) o = o * dims[d] + index[d];
    }
    groups[o].push_back(x[e]);
  }
  std::vector<double> out;
  for (const auto& g : groups) out.push_back(ApplyReduce(op, g));
  return out;
}

// Rounding of the float-type accumulation over `count` values of magnitude up to `mag`, added to the table's atol.
Tolerance ReduceTolerance(DType dtype, int64_t count, double mag) {
  Tolerance tol = ToleranceFor(dtype);
  const double eps = dtype == DType::kFloat64 ? 1.2e-16 : 6e-8;
  tol.atol = std::max(tol.atol, 4 * eps * static_cast<double>(count) * mag);
  return tol;
}

class ReduceFloatTest : public ::testing::TestWithParam<DType> {};

TEST_P(ReduceFloatTest, EveryOpMatchesDoubleReference) {
  const DType dtype = GetParam();
  const std::vector<int64_t> dims = {3, 4, 5};
  const std::vector<std::vector<int64_t>> axes_sets = {{}, {0}, {1}, {2}, {0, 2}, {-1, -2}, {0, 1, 2}};
  for (const std::string& op : kReduceOps) {
    const bool positive = op == "ReduceLogSum" || op == "ReduceProd";
    const std::vector<double> x = Rounded(dtype, RandomValues(60, 5, positive ? 0.5 : -2.0, positive ? 1.5 : 2.0));
    for (const auto& axes : axes_sets) {
      for (int keepdims = 0; keepdims <= 1; ++keepdims) {
        for (int64_t opset : {17, 18}) {
          OpTester t = Op(op, opset);
          t.Input(TensorOf(dtype, dims, x)).Attr(Attribute::Int("keepdims", keepdims));
          const bool axes_input = opset >= 18 || op == "ReduceSum";
          if (axes_input && !axes.empty()) t.Input(Int64Tensor({static_cast<int64_t>(axes.size())}, axes));
          if (!axes_input && !axes.empty()) t.Attr(Attribute::Ints("axes", axes));
          std::vector<bool> mask(3, axes.empty());
          for (int64_t a : axes) mask[(a + 3) % 3] = true;
          std::vector<int64_t> want_dims;
          for (size_t d = 0; d < 3; ++d) {
            if (!mask[d]) want_dims.push_back(dims[d]);
            if (mask[d] && keepdims) want_dims.push_back(1);
          }
          const std::string what = op + " opset " + std::to_string(opset) + " keepdims " + std::to_string(keepdims) +
                                   " axes " + ::testing::PrintToString(axes);
          std::vector<ir::Tensor> out = RunOk(t);
          ASSERT_EQ(out.size(), 1u) << what;
          EXPECT_EQ(out[0].dims(), want_dims) << what;
          EXPECT_EQ(out[0].dtype(), dtype) << what;
          ExpectClose(out[0], ReferenceReduce(op, x, dims, mask), what, ReduceTolerance(dtype, 60, 4.0));
        }
      }
    }
  }
}

TEST_P(ReduceFloatTest, MultiThreadedLargeInputsMatchReference) {
  const DType dtype = GetParam();
  const std::vector<int64_t> dims = {96, 37, 29};
  const std::vector<double> x = Rounded(dtype, RandomValues(96 * 37 * 29, 11));
  for (const std::string& op : {std::string("ReduceSum"), std::string("ReduceMax"), std::string("ReduceLogSumExp")}) {
    for (const std::vector<int64_t>& axes : std::vector<std::vector<int64_t>>{{0}, {2}, {0, 2}, {0, 1, 2}}) {
      OpTester t = Op(op, 18);
      t.options.num_threads = 4;
      t.Input(TensorOf(dtype, dims, x)).Input(Int64Tensor({static_cast<int64_t>(axes.size())}, axes));
      std::vector<bool> mask(3, false);
      for (int64_t a : axes) mask[a] = true;
      int64_t count = 1;
      for (int64_t a : axes) count *= dims[a];
      std::vector<ir::Tensor> out = RunOk(t);
      ASSERT_EQ(out.size(), 1u);
      ExpectClose(out[0], ReferenceReduce(op, x, dims, mask), op + " " + ::testing::PrintToString(axes),
                  ReduceTolerance(dtype, count, 2.0));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, ReduceFloatTest, ::testing::ValuesIn(FloatTypes()), DTypeParamName());

// --- Hand-computed cases and opset variants -------------------------------------------------------------------

ir::Tensor F32(std::vector<int64_t> dims, std::vector<double> v) { return TensorOf(DType::kFloat32, dims, v); }

TEST(ReduceTest, HandComputedValues) {
  const ir::Tensor x = F32({2, 2}, {1, 2, 3, 4});
  auto run = [&](const std::string& op, std::vector<int64_t> axes, int keepdims, ir::Tensor in) {
    OpTester t = Op(op, 11);
    t.Input(std::move(in)).Attr(Attribute::Int("keepdims", keepdims));
    if (!axes.empty()) t.Attr(Attribute::Ints("axes", axes));
    std::vector<ir::Tensor> out = RunOk(t);
    return out.empty() ? ir::Tensor() : out[0];
  };
  ir::Tensor y = run("ReduceSum", {1}, 1, x);
  EXPECT_EQ(y.dims(), (std::vector<int64_t>{2, 1}));
  ExpectClose(y, {3, 7});
  y = run("ReduceMean", {}, 1, x);
  EXPECT_EQ(y.dims(), (std::vector<int64_t>{1, 1}));
  ExpectClose(y, {2.5});
  y = run("ReduceMax", {0}, 0, x);
  EXPECT_EQ(y.dims(), (std::vector<int64_t>{2}));
  ExpectClose(y, {3, 4});
  ExpectClose(run("ReduceMin", {-1}, 0, x), {1, 3});
  ExpectClose(run("ReduceProd", {}, 0, x), {24});
  const ir::Tensor v = F32({3}, {-1, 2, -3});
  ExpectClose(run("ReduceL1", {}, 0, v), {6});
  ExpectClose(run("ReduceL2", {}, 0, v), {std::sqrt(14.0)});
  ExpectClose(run("ReduceSumSquare", {}, 0, v), {14});
  ExpectClose(run("ReduceLogSum", {}, 0, F32({3}, {1, 2, 3})), {std::log(6.0)});
  // Stable: exp(1000) overflows float, the shifted sum does not.
  ExpectClose(run("ReduceLogSumExp", {}, 0, F32({2}, {1000, 1000})), {1000 + std::log(2.0)});
  ExpectClose(run("ReduceLogSumExp", {}, 0, F32({2}, {-INFINITY, -INFINITY})), {-INFINITY});
  ExpectClose(run("ReduceLogSumExp", {}, 0, F32({2}, {INFINITY, 1})), {INFINITY});
  ExpectClose(run("ReduceMax", {}, 0, F32({3}, {1, NAN, 3})), {NAN});
}

TEST(ReduceTest, AxesAsInputAndNoop) {
  const ir::Tensor x = F32({2, 2}, {1, -2, 3, 4});
  // ReduceSum takes axes as an input from opset 13, the others from 18.
  for (auto [op, opset] : {std::pair<std::string, int64_t>{"ReduceSum", 13}, {"ReduceMean", 18}}) {
    OpTester t = Op(op, opset);
    t.Input(x).Input(Int64Tensor({1}, {0})).Attr(Attribute::Int("keepdims", 0));
    std::vector<ir::Tensor> out = RunOk(t);
    ASSERT_EQ(out.size(), 1u);
    ExpectClose(out[0], op == "ReduceSum" ? std::vector<double>{4, 2} : std::vector<double>{2, 1}, op);
  }
  {  // Omitted or empty axes reduce everything.
    OpTester t = Op("ReduceSum", 13);
    t.Input(x).Input(Int64Tensor({0}, {}));
    ExpectClose(RunOk(t)[0], {6});
    OpTester u = Op("ReduceMax", 18);
    u.Input(x).OmittedInput().Attr(Attribute::Int("keepdims", 0));
    std::vector<ir::Tensor> out = RunOk(u);
    EXPECT_EQ(out[0].dims(), std::vector<int64_t>{});
    ExpectClose(out[0], {4});
  }
  {  // noop_with_empty_axes: no reduction; the element map still applies (x*x for ReduceSumSquare).
    OpTester t = Op("ReduceSumSquare", 18);
    t.Input(x).Input(Int64Tensor({0}, {})).Attr(Attribute::Int("noop_with_empty_axes", 1));
    std::vector<ir::Tensor> out = RunOk(t);
    EXPECT_EQ(out[0].dims(), (std::vector<int64_t>{2, 2}));
    ExpectClose(out[0], {1, 4, 9, 16});
    OpTester u = Op("ReduceSum", 13);
    u.Input(x).Attr(Attribute::Int("noop_with_empty_axes", 1));
    ExpectClose(RunOk(u)[0], {1, -2, 3, 4});
  }
}

TEST(ReduceTest, EmptySets) {
  const ir::Tensor x = F32({2, 0}, {});
  auto run = [&](const std::string& op) {
    OpTester t = Op(op, 12);
    t.Input(x).Attr(Attribute::Ints("axes", {1})).Attr(Attribute::Int("keepdims", 0));
    return RunOk(t)[0];
  };
  ExpectClose(run("ReduceSum"), {0, 0});
  ExpectClose(run("ReduceProd"), {1, 1});
  ExpectClose(run("ReduceMax"), {-INFINITY, -INFINITY});
  ExpectClose(run("ReduceMin"), {INFINITY, INFINITY});
  ExpectClose(run("ReduceMean"), {NAN, NAN});
  ExpectClose(run("ReduceLogSumExp"), {-INFINITY, -INFINITY});
  // Reducing the non-empty axis leaves an empty output.
  OpTester t = Op("ReduceSum", 11);
  t.Input(x).Attr(Attribute::Ints("axes", {0}));
  EXPECT_EQ(RunOk(t)[0].dims(), (std::vector<int64_t>{1, 0}));
}

TEST(ReduceTest, IntegerAndBoolTypes) {
  {
    OpTester t = Op("ReduceSum", 11);
    t.Input(TensorOf(DType::kInt32, {2, 3}, {1, 2, 3, 4, 5, 6})).Attr(Attribute::Ints("axes", {1}));
    std::vector<ir::Tensor> out = RunOk(t);
    EXPECT_EQ(out[0].dtype(), DType::kInt32);
    EXPECT_EQ(AsDoubles(out[0]), (std::vector<double>{6, 15}));
  }
  {
    OpTester t = Op("ReduceMean", 11);  // integer mean truncates
    t.Input(TensorOf(DType::kInt64, {4}, {1, 2, 3, 5})).Attr(Attribute::Int("keepdims", 0));
    EXPECT_EQ(AsDoubles(RunOk(t)[0]), (std::vector<double>{2}));
  }
  {
    OpTester t = Op("ReduceProd", 11);
    t.Input(TensorOf(DType::kInt64, {3}, {-2, 3, 7})).Attr(Attribute::Int("keepdims", 0));
    EXPECT_EQ(AsDoubles(RunOk(t)[0]), (std::vector<double>{-42}));
  }
  {  // Integer overflow wraps around as in the storage type.
    OpTester t = Op("ReduceProd", 11);
    t.Input(TensorOf(DType::kInt32, {3}, {65536, 65536, 3})).Attr(Attribute::Int("keepdims", 0));
    EXPECT_EQ(AsDoubles(RunOk(t)[0]), (std::vector<double>{0}));
    OpTester u = Op("ReduceSum", 11);
    u.Input(Int64Tensor({2}, {std::numeric_limits<int64_t>::max(), 1})).Attr(Attribute::Int("keepdims", 0));
    std::vector<ir::Tensor> out = RunOk(u);
    EXPECT_EQ(out[0].values<int64_t>()[0], std::numeric_limits<int64_t>::min());
  }
  {
    OpTester t = Op("ReduceMin", 18);
    t.Input(TensorOf(DType::kInt8, {2, 2}, {5, -7, 3, 9})).Input(Int64Tensor({1}, {1}));
    EXPECT_EQ(AsDoubles(RunOk(t)[0]), (std::vector<double>{-7, 3}));
  }
  {
    OpTester t = Op("ReduceL1", 18);
    t.Input(TensorOf(DType::kUint32, {3}, {4, 5, 6})).Attr(Attribute::Int("keepdims", 0));
    EXPECT_EQ(AsDoubles(RunOk(t)[0]), (std::vector<double>{15}));
  }
  {
    OpTester t = Op("ReduceMax", 20);
    t.Input(TensorOf(DType::kBool, {2, 2}, {0, 1, 0, 0})).Input(Int64Tensor({1}, {1}));
    std::vector<ir::Tensor> out = RunOk(t);
    EXPECT_EQ(out[0].dtype(), DType::kBool);
    EXPECT_EQ(AsDoubles(out[0]), (std::vector<double>{1, 0}));
  }
}

TEST(ReduceTest, Errors) {
  const ir::Tensor x = F32({2, 3}, {1, 2, 3, 4, 5, 6});
  {
    OpTester t = Op("ReduceMean", 13);
    t.Input(x).Attr(Attribute::Ints("axes", {2}));
    ExpectCreateError(t, "attribute 'axes': axes value 2 is out of range for rank 2");
  }
  {
    OpTester t = Op("ReduceMax", 18);
    t.Input(x).Attr(Attribute::Ints("axes", {0}));
    ExpectCreateError(t, "attribute 'axes' is not allowed at opset 18");
  }
  {
    OpTester t = Op("ReduceSum", 13);
    t.Input(x).Input(Int64Tensor({2}, {1, -1}));
    ExpectRunError(t, "input 1 (axes): axes value -1 names dimension 1 twice");
  }
  {
    OpTester t = Op("ReduceSum", 13);
    t.Input(x).Input(TensorOf(DType::kInt32, {1}, {0}));
    ExpectRunError(t, "input 1 (axes): expected int64, got int32");
  }
  {
    OpTester t = Op("ReduceL2", 18);
    t.Input(x).Input(Int64Tensor({1}, {5}));
    ExpectRunError(t, "node ReduceL2 'node': input 1 (axes): axes value 5 is out of range for rank 2");
  }
  {
    OpTester t = Op("ReduceSum", 13);
    t.Input(TensorOf(DType::kBool, {2}, {1, 0}));
    ExpectRunError(t, "does not support input 0 of type bool");
  }
}

}  // namespace
}  // namespace onnxamp::testing
