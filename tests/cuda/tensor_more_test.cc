// CUDA CumSum, Trilu, EyeLike, OneHot, DepthToSpace, SpaceToDepth, DepthToSpaceGrad, GatherND, ScatterND,
// ScatterElements, Scatter and GatherNDGrad against their CPU kernels, bit for bit (every one reproduces the CPU's
// order and arithmetic): every registered float type and integer types, odd sizes, empty tensors, every attribute
// variant, heavily repeated indices under every reduction, negative indices; the CPU's error messages at session
// creation and at run time; and what CUDA does with an index out of range (the CPU reports an error; see
// runtime/cuda/ops/tensor/scatter_cuda.cc). Skipped without a CUDA device.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/ops/gradient_ops.h"
#include "tests/cuda/tensor_test_util.h"

namespace onnxamp::testing::cuda_tensor {
namespace {

using ir::Attribute;
using ops::ShapeToString;

// The same indices as int32 or int64.
ir::Tensor IndicesOf(const std::vector<int64_t>& dims, const std::vector<int64_t>& v, bool int32) {
  return int32 ? I32(std::vector<int32_t>(v.begin(), v.end()), dims) : I64Of(dims, v);
}

// Both devices refuse the node when the session is created, with messages containing `fragment`.
void ExpectBothCreateError(OpTester t, const std::string& fragment) {
  t.options.device = exec::Device::kCpu;
  auto cpu = exec::Session::Create(t.BuildModel(), t.options);
  ASSERT_FALSE(cpu.ok()) << "cpu: expected a creation error containing: " << fragment;
  EXPECT_NE(cpu.status().message().find(fragment), std::string::npos) << cpu.status().message();
  ExpectCudaCreateError(t, fragment);
}

// The CPU run fails naming an index out of range; the CUDA run succeeds with `want` (exactly).
void ExpectCudaIgnoresBadIndex(const OpTester& t, const std::vector<double>& want, const std::string& what) {
  OpTester cpu = t;
  cpu.options.device = exec::Device::kCpu;
  StatusOr<std::vector<ir::Tensor>> refused = cpu.Run();
  ASSERT_FALSE(refused.ok()) << what << ": the cpu accepted it";
  EXPECT_NE(refused.status().message().find("out of range"), std::string::npos) << refused.status().message();
  StatusOr<std::vector<ir::Tensor>> got = RunOnCuda(t);
  ASSERT_TRUE(got.ok()) << what << ": " << got.status().message();
  ExpectClose((*got)[0], want, what, Tolerance{0, 0});
}

// Runs `t` twice on CUDA and expects the same bytes.
void ExpectSameBitsTwice(const OpTester& t, const std::string& what) {
  StatusOr<std::vector<ir::Tensor>> a = RunOnCuda(t);
  StatusOr<std::vector<ir::Tensor>> b = RunOnCuda(t);
  ASSERT_TRUE(a.ok()) << a.status().message();
  ASSERT_TRUE(b.ok()) << b.status().message();
  ASSERT_EQ((*a)[0].nbytes(), (*b)[0].nbytes());
  EXPECT_EQ(std::memcmp((*a)[0].data(), (*b)[0].data(), (*a)[0].nbytes()), 0) << what << ": two runs differ";
}

// ---- CumSum --------------------------------------------------------------------------------------------------------

class CudaCumSum : public ::testing::TestWithParam<DType> {};

// Values for CumSum of `dtype`: floats in [-2, 2), integers large enough that the sums wrap.
ir::Tensor CumSumInput(DType dtype, const std::vector<int64_t>& dims, uint32_t seed) {
  switch (dtype) {
    case DType::kInt32:
      return Random(dtype, dims, seed, -2.1e9, 2.1e9);
    case DType::kInt64:
      return Random(dtype, dims, seed, -9.2e18, 9.2e18);
    case DType::kUint32:
      return Random(dtype, dims, seed, 0, 4.2e9);
    case DType::kUint64:
      return Random(dtype, dims, seed, 0, 1.8e19);
    default:
      return Random(dtype, dims, seed);
  }
}

TEST_P(CudaCumSum, MatchesCpuBitForBit) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dt = GetParam();
  struct Case {
    std::vector<int64_t> dims;
    int64_t axis;
  };
  const std::vector<Case> cases = {{{7}, 0},         {{3, 5, 4}, 1}, {{3, 5, 4}, -1}, {{3, 5, 4}, -3},
                                   {{2, 3, 301}, 2}, {{513, 3}, 0},  {{1, 1000}, -1}, {{0, 4}, 1},
                                   {{4, 0}, 0},      {{}, 0},        {{}, -1},        {{2, 1, 3}, 1}};
  uint32_t seed = 1;
  for (const Case& c : cases) {
    for (int exclusive : {0, 1}) {
      for (int reverse : {0, 1}) {
        OpTester t = Node("CumSum", 14);
        t.Attr(Attribute::Int("exclusive", exclusive)).Attr(Attribute::Int("reverse", reverse));
        t.Input(CumSumInput(dt, c.dims, seed++)).Input(I64({c.axis}, /*scalar=*/true));
        ExpectExact(t, "CumSum " + ShapeToString(c.dims) + " axis " + std::to_string(c.axis) + " exclusive " +
                           std::to_string(exclusive) + " reverse " + std::to_string(reverse));
      }
    }
  }
  // The axis as an int32 one-element tensor, and at opset 11.
  ExpectExact(Node("CumSum", 14).Input(CumSumInput(dt, {4, 6}, 99)).Input(I32({1}, {1})), "CumSum int32 axis [1]");
  ExpectExact(Node("CumSum", 11).Input(CumSumInput(dt, {5, 3}, 98)).Input(I64({0}, true)), "CumSum opset 11");
}

INSTANTIATE_TEST_SUITE_P(Types, CudaCumSum,
                         ::testing::Values(DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64,
                                           DType::kInt32, DType::kInt64, DType::kUint32, DType::kUint64),
                         TypeName);

TEST(CudaCumSumErrors, SameMessagesAsCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const ir::Tensor x = Random(DType::kFloat32, {3, 4}, 5);
  ExpectBothRunError(Node("CumSum", 14).Input(x).Input(I64({2}, true)), "is 2, outside [-2, 1]");
  ExpectBothRunError(Node("CumSum", 14).Input(x).Input(I64({-3}, true)), "outside [-2, 1]");
  ExpectBothRunError(Node("CumSum", 14).Input(x).Input(I64({0, 1})), "must hold one value, got 2");
  ExpectBothCreateError(Node("CumSum", 14).Attr(Attribute::Float("exclusive", 1.0f)).Input(x).Input(I64({0}, true)),
                        "exclusive");
}

// ---- Trilu, EyeLike, OneHot, DepthToSpace/SpaceToDepth (byte moves: every element size) ---------------------------

class CudaTensorMore : public ::testing::TestWithParam<DType> {};

TEST_P(CudaTensorMore, Trilu) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dt = GetParam();
  const std::vector<std::vector<int64_t>> shapes = {{5, 7}, {2, 3, 6, 4}, {1, 1}, {3, 0, 4}, {9, 3}, {33, 65}};
  const std::vector<int64_t> ks = {0, 1, -2, 3, 100, -100, INT64_MAX, INT64_MIN};
  int64_t salt = 0;
  for (const std::vector<int64_t>& dims : shapes) {
    for (int upper : {0, 1}) {
      const std::string what = "Trilu " + ShapeToString(dims) + " upper " + std::to_string(upper);
      ExpectExact(Node("Trilu", 14).Attr(Attribute::Int("upper", upper)).Input(Distinct(dt, dims, salt++)),
                  what + " without k");
      for (int64_t k : ks) {
        ExpectExact(Node("Trilu", 14)
                        .Attr(Attribute::Int("upper", upper))
                        .Input(Distinct(dt, dims, salt++))
                        .Input(I64({k}, true)),
                    what + " k " + std::to_string(k));
      }
    }
  }
  ExpectExact(Node("Trilu", 14).Input(Distinct(dt, {4, 5})).Input(I64({-1})), "Trilu default upper, k as [1]");
}

TEST_P(CudaTensorMore, EyeLike) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dt = GetParam();
  // dtype codes: none (the input's), float, uint8, int8, int32, int64, bool, float16, double, uint32, uint64, bfloat16.
  const std::vector<int64_t> codes = {0, 1, 2, 3, 6, 7, 9, 10, 11, 12, 13, 16};
  const std::vector<std::vector<int64_t>> shapes = {{4, 6}, {5, 3}, {1, 1}, {0, 3}, {3, 0}, {37, 37}};
  for (int64_t code : codes) {
    for (const std::vector<int64_t>& dims : shapes) {
      for (int64_t k : {0, 2, -3, 5, -5, 1000000, -1000000}) {
        OpTester t = Node("EyeLike", 9);
        if (code != 0) t.Attr(Attribute::Int("dtype", code));
        t.Attr(Attribute::Int("k", k)).Input(Distinct(dt, dims));
        ExpectExact(t, "EyeLike " + ShapeToString(dims) + " dtype " + std::to_string(code) + " k " + std::to_string(k));
      }
    }
  }
  ExpectExact(Node("EyeLike", 22).Input(Distinct(dt, {3, 4})), "EyeLike opset 22, no attributes");
}

TEST_P(CudaTensorMore, OneHot) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dt = GetParam();
  const ir::Tensor values = Distinct(dt, {2}, 7);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // Indices of several types: in range, negative (from the end at opset 11, nothing at opset 9), past the depth.
  const std::vector<double> raw = {0, 3, -1, 4, -4, -5, 2, 1, 7, -2, 3, 0};
  std::vector<ir::Tensor> indices = {
      op_test::TensorOf(DType::kInt64, {12}, raw),
      op_test::TensorOf(DType::kInt32, {3, 4}, raw),
      op_test::TensorOf(DType::kInt8, {2, 3, 2}, raw),
      op_test::TensorOf(DType::kFloat32, {4, 3}, {0.9, 3.7, -1.2, -0.5, nan, 1e30, -4.9, 2, -1e30, 2.5, -3.99, 1}),
      op_test::TensorOf(DType::kFloat16, {12}, {0.9, 3.7, -1.2, -0.5, nan, 1e5, -4.9, 2, -7, 2.5, -3.99, 1}),
      op_test::TensorOf(DType::kUint64, {2, 2}, {0, 1, 3, 2}),
      op_test::TensorOf(DType::kInt64, {0, 3}, {}),
      op_test::TensorOf(DType::kInt64, {}, {-2}),
  };
  ir::Tensor big(DType::kUint64, {2});
  big.mutable_values<uint64_t>()[0] = UINT64_MAX;  // above INT64_MAX: addresses nothing
  big.mutable_values<uint64_t>()[1] = 2;
  indices.push_back(big);
  for (size_t n = 0; n < indices.size(); ++n) {
    const ir::Tensor& idx = indices[n];
    const int64_t rank = idx.rank() + 1;
    for (int64_t opset : {9, 11}) {
      for (int64_t axis = -rank; axis < rank; ++axis) {
        ExpectExact(
            Node("OneHot", opset).Attr(Attribute::Int("axis", axis)).Input(idx).Input(I64({4}, true)).Input(values),
            "OneHot indices " + std::string(DTypeName(idx.dtype())) + " " + ShapeToString(idx.dims()) + " opset " +
                std::to_string(opset) + " axis " + std::to_string(axis));
      }
    }
  }
  // Default axis (-1), a float depth (truncated), depth 1 and a long depth axis.
  ExpectExact(Node("OneHot", 11).Input(indices[1]).Input(op_test::TensorOf(DType::kFloat32, {1}, {5.9})).Input(values),
              "OneHot float depth 5.9");
  ExpectExact(Node("OneHot", 11).Input(indices[0]).Input(I64({1}, true)).Input(values), "OneHot depth 1");
  ExpectExact(Node("OneHot", 11)
                  .Attr(Attribute::Int("axis", 0))
                  .Input(I64Of({3}, {999, -1000, 0}))
                  .Input(I64({1000}, true))
                  .Input(values),
              "OneHot depth 1000");
}

TEST_P(CudaTensorMore, DepthToSpaceAndSpaceToDepth) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dt = GetParam();
  struct Case {
    const char* op;
    const char* mode;  // nullptr: the attribute left out
    int64_t blocksize;
    std::vector<int64_t> dims;
  };
  const std::vector<Case> cases = {
      {"DepthToSpace", nullptr, 2, {2, 12, 3, 5}}, {"DepthToSpace", "DCR", 3, {1, 18, 4, 3}},
      {"DepthToSpace", "CRD", 2, {2, 8, 3, 5}},    {"DepthToSpace", "CRD", 3, {1, 9, 1, 1}},
      {"DepthToSpace", "DCR", 1, {2, 3, 4, 5}},    {"DepthToSpace", "CRD", 2, {0, 4, 2, 2}},
      {"SpaceToDepth", nullptr, 2, {2, 3, 4, 6}},  {"SpaceToDepth", nullptr, 3, {1, 2, 9, 3}},
      {"SpaceToDepth", nullptr, 2, {1, 5, 0, 2}},  {"SpaceToDepth", nullptr, 4, {1, 1, 8, 16}},
  };
  int64_t salt = 0;
  for (const Case& c : cases) {
    OpTester t = Node(c.op, 13);
    t.Attr(Attribute::Int("blocksize", c.blocksize));
    if (c.mode) t.Attr(Attribute::String("mode", c.mode));
    t.Input(Distinct(dt, c.dims, salt++));
    ExpectExact(t, std::string(c.op) + " " + (c.mode ? c.mode : "default") + " blocksize " +
                       std::to_string(c.blocksize) + " " + ShapeToString(c.dims));
  }
  ExpectExact(Node("DepthToSpace", 1).Attr(Attribute::Int("blocksize", 2)).Input(Distinct(dt, {1, 8, 2, 3})),
              "DepthToSpace opset 1");
  // The backward op takes dY of DepthToSpace's output shape.
  for (const char* mode : {"DCR", "CRD"}) {
    for (const std::vector<int64_t>& dims :
         std::vector<std::vector<int64_t>>{{2, 3, 6, 10}, {1, 2, 9, 3}, {0, 1, 3, 3}}) {
      const int64_t b = dims[2] % 2 == 0 && dims[3] % 2 == 0 ? 2 : 3;
      OpTester t = InternalOp(ops::kDepthToSpaceGradOp);
      t.Attr(Attribute::Int("blocksize", b)).Attr(Attribute::String("mode", mode)).Input(Distinct(dt, dims, salt++));
      ExpectExact(t, std::string("DepthToSpaceGrad ") + mode + " " + ShapeToString(dims));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, CudaTensorMore, ::testing::ValuesIn(MoveTypes()), TypeName);

TEST(CudaTensorMoreErrors, SameMessagesAsCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const ir::Tensor m = Random(DType::kFloat32, {3, 4}, 3);
  // Trilu.
  ExpectBothCreateError(Node("Trilu", 14).Attr(Attribute::Int("upper", 2)).Input(m),
                        "attribute 'upper' must be 0 or 1");
  ExpectBothRunError(Node("Trilu", 14).Input(Random(DType::kFloat32, {5}, 1)), "has rank 1, expected at least 2");
  ExpectBothRunError(Node("Trilu", 14).Input(m).Input(I64({1, 2})), "must hold one value, got 2");
  // EyeLike.
  ExpectBothCreateError(Node("EyeLike", 9).Attr(Attribute::Int("dtype", 8)).Input(m), "is not a numeric or bool");
  ExpectBothRunError(Node("EyeLike", 9).Input(Random(DType::kFloat32, {2, 2, 2}, 1)), "must be 2-D");
  // OneHot.
  const ir::Tensor values = Random(DType::kFloat32, {2}, 4);
  const ir::Tensor idx = I64Of({3}, {0, 1, 2});
  ExpectBothRunError(Node("OneHot", 11).Input(idx).Input(I64({0}, true)).Input(values), "is 0, expected at least 1");
  ExpectBothRunError(Node("OneHot", 11).Input(idx).Input(I64({3, 4})).Input(values), "must hold one value, got 2");
  ExpectBothRunError(Node("OneHot", 11).Input(idx).Input(I64({3}, true)).Input(Random(DType::kFloat32, {3}, 1)),
                     "must hold two values (off, on), got 3");
  ExpectBothRunError(Node("OneHot", 11).Attr(Attribute::Int("axis", 2)).Input(idx).Input(I64({3}, true)).Input(values),
                     "attribute 'axis' is 2, outside [-2, 1]");
  ExpectBothRunError(
      Node("OneHot", 11).Input(op_test::TensorOf(DType::kBool, {2}, {1, 0})).Input(I64({3}, true)).Input(values),
      "(indices): ");
  // DepthToSpace, SpaceToDepth, DepthToSpaceGrad.
  const ir::Tensor x = Random(DType::kFloat32, {1, 8, 2, 3}, 2);
  ExpectBothCreateError(Node("DepthToSpace", 13).Input(x), "attribute 'blocksize' must be given and positive");
  ExpectBothCreateError(
      Node("DepthToSpace", 13).Attr(Attribute::Int("blocksize", 2)).Attr(Attribute::String("mode", "XYZ")).Input(x),
      "attribute 'mode' must be DCR or CRD, got 'XYZ'");
  ExpectBothRunError(
      Node("DepthToSpace", 13).Attr(Attribute::Int("blocksize", 2)).Input(Random(DType::kFloat32, {8, 2, 3}, 1)),
      "must be [N, C, H, W]");
  ExpectBothRunError(Node("DepthToSpace", 13).Attr(Attribute::Int("blocksize", 3)).Input(x),
                     "has 8 channels, not a multiple of blocksize^2 (3^2)");
  ExpectBothRunError(Node("SpaceToDepth", 13).Attr(Attribute::Int("blocksize", 2)).Input(x),
                     "has height 2 and width 3, not multiples of blocksize 2");
  ExpectBothRunError(InternalOp(ops::kDepthToSpaceGradOp)
                         .Attr(Attribute::Int("blocksize", 2))
                         .Attr(Attribute::String("mode", "CRD"))
                         .Input(x),
                     "not multiples of blocksize 2");
}

// ---- GatherND and GatherNDGrad -------------------------------------------------------------------------------------

struct NdCase {
  std::vector<int64_t> data_dims;
  std::vector<int64_t> idx_dims;
  std::vector<int64_t> idx;
  int64_t batch_dims = 0;
};

std::vector<NdCase> GatherNdCases() {
  std::vector<NdCase> cases = {
      {{4, 5, 3}, {2, 2}, {1, -1, 3, 0}},
      {{4, 5, 3}, {3, 1}, {2, -4, 0}},
      {{4, 5, 3}, {2, 3}, {1, 2, 0, -1, -5, -3}},
      {{4, 5, 3}, {2, 2, 1}, {3, 3, 0, 3}},
      {{2, 5, 3}, {2, 4, 1}, {4, 0, -1, 4, 2, 2, -5, 1}, 1},
      {{2, 3, 4, 5}, {2, 3, 2, 1}, {0, 3, -1, 2, 1, 1, 3, 0, -4, 2, 2, 2}, 2},
      {{4, 5, 3}, {0, 2}, {}},
      {{7}, {3, 1}, {6, -7, 3}},
      {{6, 64}, {5, 1}, {5, 0, -1, 2, 2}},  // 64-element slices: the 16-byte unit path
      {{3, 0}, {2, 1}, {2, -3}},            // empty slices
  };
  // Many tuples into few rows (repeats for the gradient's sums).
  cases.push_back({{5, 4, 3}, {300, 2}, {}});
  const std::vector<int64_t> rows = RandomIndices(300, -5, 5, 31), cols = RandomIndices(300, -4, 4, 32);
  for (size_t i = 0; i < 300; ++i) cases.back().idx.insert(cases.back().idx.end(), {rows[i], cols[i]});
  return cases;
}

TEST_P(CudaTensorMore, GatherND) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dt = GetParam();
  int64_t salt = 0;
  for (const NdCase& c : GatherNdCases()) {
    for (bool int32 : {false, true}) {
      OpTester t = Node("GatherND", 13);
      t.Attr(Attribute::Int("batch_dims", c.batch_dims));
      t.Input(Distinct(dt, c.data_dims, salt++)).Input(IndicesOf(c.idx_dims, c.idx, int32));
      ExpectExact(t, "GatherND data " + ShapeToString(c.data_dims) + " indices " + ShapeToString(c.idx_dims) +
                         (int32 ? " int32" : " int64") + " batch_dims " + std::to_string(c.batch_dims));
    }
  }
  ExpectExact(Node("GatherND", 11).Input(Distinct(dt, {3, 4})).Input(I64Of({2, 1}, {2, -3})), "GatherND opset 11");
}

class CudaGatherNDGrad : public ::testing::TestWithParam<DType> {};

TEST_P(CudaGatherNDGrad, MatchesCpuBitForBit) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dt = GetParam();
  uint32_t seed = 40;
  for (const NdCase& c : GatherNdCases()) {
    std::vector<int64_t> dy_dims(c.idx_dims.begin(), c.idx_dims.end() - 1);
    dy_dims.insert(dy_dims.end(), c.data_dims.begin() + c.batch_dims + c.idx_dims.back(), c.data_dims.end());
    for (bool int32 : {false, true}) {
      OpTester t = InternalOp(ops::kGatherNDGradOp);
      t.Attr(Attribute::Int("batch_dims", c.batch_dims));
      t.Input(Random(dt, dy_dims, seed++)).Input(IndicesOf(c.idx_dims, c.idx, int32)).Input(I64(c.data_dims));
      ExpectExact(t, "GatherNDGrad data " + ShapeToString(c.data_dims) + " indices " + ShapeToString(c.idx_dims) +
                         (int32 ? " int32" : " int64"));
    }
  }
}

// 20000 tuples into 4 rows: the CPU's sums, and the same bits on every run.
TEST_P(CudaGatherNDGrad, IsDeterministic) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dt = GetParam();
  OpTester t = InternalOp(ops::kGatherNDGradOp);
  t.Input(Random(dt, {20000, 33}, 7)).Input(I64Of({20000, 1}, RandomIndices(20000, -2, 2, 8))).Input(I64({16, 33}));
  ExpectExact(t, "GatherNDGrad 20000 tuples into 4 rows");
  ExpectSameBitsTwice(t, "GatherNDGrad 20000 tuples into 4 rows");
}

INSTANTIATE_TEST_SUITE_P(Types, CudaGatherNDGrad,
                         ::testing::Values(DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64),
                         TypeName);

// ---- ScatterND, ScatterElements, Scatter ---------------------------------------------------------------------------

struct ScatterCase {
  std::vector<int64_t> data_dims;
  std::vector<int64_t> idx_dims;
  std::vector<int64_t> idx;
  int64_t axis = 0;  // ScatterElements only
};

std::vector<ScatterCase> ScatterNdCases() {
  std::vector<ScatterCase> cases = {
      {{5, 3}, {8, 1}, {1, -4, 4, 1, 0, -1, 1, 2}},                 // repeated rows, negative indices
      {{4, 3, 2}, {6, 2}, {0, 1, -4, -2, 3, 2, 0, 1, 0, 1, 2, 0}},  // slices of 2, repeated
      {{3, 4}, {2, 3, 2}, {0, 0, 2, 3, 0, 0, -1, -1, 1, 2, 0, 0}},  // whole elements, repeated
      {{6}, {4, 1}, {5, 0, -1, 3}},
      {{5, 3}, {0, 1}, {}},  // no updates
      {{0, 3}, {0, 1}, {}},  // empty data
  };
  cases.push_back({{7, 65}, {400, 1}, RandomIndices(400, -7, 7, 51)});
  return cases;
}

std::vector<ScatterCase> ScatterElementsCases() {
  std::vector<ScatterCase> cases = {
      {{4, 5}, {3, 5}, {0, 1, 2, 3, -1, -4, 0, 0, 1, 1, 2, 2, 3, 3, 0}, 0},
      {{4, 5}, {4, 3}, {0, 4, -1, 1, 1, 1, -5, 0, 2, 3, 3, 3}, 1},
      {{3, 4, 5}, {2, 4, 3}, RandomIndices(24, -5, 5, 61), -1},
      {{3, 4, 5}, {3, 2, 5}, RandomIndices(30, -4, 4, 62), 1},
      {{6}, {9}, {5, 0, -1, 5, 5, 2, 0, -6, 1}, 0},
      {{4, 5}, {0, 5}, {}, 0},
  };
  cases.push_back({{6, 33}, {500, 33}, RandomIndices(500 * 33, -6, 6, 63), 0});
  return cases;
}

std::vector<int64_t> UpdateDims(const ScatterCase& c, bool nd) {
  if (!nd) return c.idx_dims;
  std::vector<int64_t> dims(c.idx_dims.begin(), c.idx_dims.end() - 1);
  dims.insert(dims.end(), c.data_dims.begin() + c.idx_dims.back(), c.data_dims.end());
  return dims;
}

// Values for a scatter of `dtype` with `reduction`: products stay finite for mul.
ir::Tensor ScatterValues(DType dtype, const std::vector<int64_t>& dims, const std::string& reduction, uint32_t seed) {
  if (dtype == DType::kBool || dtype == DType::kInt8 || dtype == DType::kUint8 || dtype == DType::kInt64 ||
      dtype == DType::kInt32) {
    return Distinct(dtype, dims, seed);  // int8 products wrap; bool covers OR/AND
  }
  return reduction == "mul" ? Random(dtype, dims, seed, 0.5, 1.6) : Random(dtype, dims, seed);
}

void ExpectScattersMatch(DType dt, const std::string& reduction, int64_t opset) {
  uint32_t seed = 70;
  for (bool nd : {true, false}) {
    const std::vector<ScatterCase> cases = nd ? ScatterNdCases() : ScatterElementsCases();
    for (const ScatterCase& c : cases) {
      for (bool int32 : {false, true}) {
        OpTester t = Node(nd ? "ScatterND" : "ScatterElements", opset);
        if (!nd) t.Attr(Attribute::Int("axis", c.axis));
        if (reduction != "none" || opset >= 16) t.Attr(Attribute::String("reduction", reduction));
        t.Input(ScatterValues(dt, c.data_dims, reduction, seed++)).Input(IndicesOf(c.idx_dims, c.idx, int32));
        t.Input(ScatterValues(dt, UpdateDims(c, nd), reduction, seed++));
        ExpectExact(t, std::string(nd ? "ScatterND" : "ScatterElements") + " reduction " + reduction + " opset " +
                           std::to_string(opset) + " data " + ShapeToString(c.data_dims) + " indices " +
                           ShapeToString(c.idx_dims) + (int32 ? " int32" : " int64"));
      }
    }
  }
}

class CudaScatter : public ::testing::TestWithParam<DType> {};

TEST_P(CudaScatter, WithoutReductionTheLastWriteWins) {
  ONNXAMP_REQUIRE_CUDA();
  ExpectScattersMatch(GetParam(), "none", 13);
  ExpectScattersMatch(GetParam(), "none", 18);
}

TEST_P(CudaScatter, ReductionsApplyUpdatesInIndexOrder) {
  ONNXAMP_REQUIRE_CUDA();
  for (const char* reduction : {"add", "mul", "max", "min"}) ExpectScattersMatch(GetParam(), reduction, 18);
  ExpectScattersMatch(GetParam(), "add", 16);
  ExpectScattersMatch(GetParam(), "mul", 16);
}

INSTANTIATE_TEST_SUITE_P(Types, CudaScatter,
                         ::testing::Values(DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64,
                                           DType::kInt32, DType::kInt64, DType::kInt8, DType::kUint8, DType::kBool),
                         TypeName);

// Scatter (opsets 9-10) is ScatterElements before its rename.
TEST(CudaScatterOps, DeprecatedScatter) {
  ONNXAMP_REQUIRE_CUDA();
  for (DType dt : MoveTypes()) {
    for (const ScatterCase& c : ScatterElementsCases()) {
      for (int64_t opset : {9, 10}) {
        OpTester t = Node("Scatter", opset);
        t.Attr(Attribute::Int("axis", c.axis));
        t.Input(Distinct(dt, c.data_dims, 1)).Input(I64Of(c.idx_dims, c.idx)).Input(Distinct(dt, c.idx_dims, 2));
        ExpectExact(t, "Scatter opset " + std::to_string(opset) + " " + std::string(DTypeName(dt)) + " data " +
                           ShapeToString(c.data_dims));
      }
    }
  }
}

// Heavily repeated destinations: the CPU's bits, and the same bits on every run.
TEST(CudaScatterOps, RepeatedDestinationsAreDeterministic) {
  ONNXAMP_REQUIRE_CUDA();
  for (const char* reduction : {"none", "add"}) {
    OpTester nd = Node("ScatterND", 18);
    nd.Attr(Attribute::String("reduction", reduction));
    nd.Input(Random(DType::kFloat32, {4, 48}, 1))
        .Input(I64Of({20000, 1}, RandomIndices(20000, -4, 4, 2)))
        .Input(Random(DType::kFloat32, {20000, 48}, 3));
    ExpectExact(nd, std::string("ScatterND 20000 into 4, ") + reduction);
    ExpectSameBitsTwice(nd, std::string("ScatterND 20000 into 4, ") + reduction);
    OpTester el = Node("ScatterElements", 18);
    el.Attr(Attribute::String("reduction", reduction));
    el.Input(Random(DType::kFloat16, {3, 64}, 4))
        .Input(I64Of({3000, 64}, RandomIndices(3000 * 64, -3, 3, 5)))
        .Input(Random(DType::kFloat16, {3000, 64}, 6));
    ExpectExact(el, std::string("ScatterElements 3000 rows into 3, ") + reduction);
    ExpectSameBitsTwice(el, std::string("ScatterElements 3000 rows into 3, ") + reduction);
  }
}

TEST(CudaScatterOps, ErrorsAndBadIndices) {
  ONNXAMP_REQUIRE_CUDA();
  const ir::Tensor data = op_test::TensorOf(DType::kFloat32, {3}, {1, 2, 3});
  const ir::Tensor two = op_test::TensorOf(DType::kFloat32, {2}, {10, 20});
  // Refused at creation: reductions the opset does not define.
  ExpectBothCreateError(Node("ScatterND", 16)
                            .Attr(Attribute::String("reduction", "max"))
                            .Input(data)
                            .Input(I64Of({2, 1}, {0, 1}))
                            .Input(two),
                        "attribute 'reduction' 'max' is not defined at opset 16");
  ExpectBothCreateError(
      Node("ScatterElements", 13).Attr(Attribute::String("reduction", "add")).Input(data).Input(I64({0, 1})).Input(two),
      "is not defined at opset 13");
  // Refused at run time.
  ExpectBothRunError(Node("ScatterND", 13)
                         .Input(data)
                         .Input(I64Of({2, 1}, {0, 1}))
                         .Input(op_test::TensorOf(DType::kFloat64, {2}, {1, 2})),
                     "has element type double, expected float (the type of data)");
  ExpectBothRunError(Node("ScatterND", 13)
                         .Input(data)
                         .Input(I64Of({2, 1}, {0, 1}))
                         .Input(op_test::TensorOf(DType::kFloat32, {3}, {1, 2, 3})),
                     "has shape [3], expected [2]");
  ExpectBothRunError(
      Node("ScatterND", 13).Input(data).Input(op_test::TensorOf(DType::kFloat32, {2, 1}, {0, 1})).Input(two),
      "must be int32 or int64");
  ExpectBothRunError(Node("ScatterND", 13).Input(data).Input(I64Of({2, 2}, {0, 1, 1, 0})).Input(two),
                     "must be in [1, 1]");
  ExpectBothRunError(Node("ScatterElements", 13)
                         .Input(data)
                         .Input(I64({0, 1}))
                         .Input(op_test::TensorOf(DType::kFloat32, {3}, {1, 2, 3})),
                     "has shape [3], expected [2]");
  ExpectBothRunError(
      Node("ScatterElements", 13).Input(data).Input(op_test::TensorOf(DType::kFloat32, {2}, {0, 1})).Input(two),
      "must be int32 or int64");
  ExpectBothRunError(
      Node("ScatterElements", 13).Attr(Attribute::Int("axis", 1)).Input(data).Input(I64({0, 1})).Input(two), "axis");
  ExpectBothRunError(
      Node("GatherND", 13).Attr(Attribute::Int("batch_dims", 1)).Input(data).Input(I64Of({2, 1}, {0, 1})),
      "attribute 'batch_dims' 1 must be in [0, 1)");
  ExpectBothRunError(Node("GatherND", 13).Input(data).Input(I64({0}, true)), "must have rank >= 1, got a scalar");
  OpTester grad = InternalOp(ops::kGatherNDGradOp);
  grad.Input(two).Input(I64Of({2, 1}, {0, 1})).Input(I64({-3}));
  ExpectBothRunError(grad, "has a negative dim: [-3]");
  OpTester grad_shape = InternalOp(ops::kGatherNDGradOp);
  grad_shape.Input(data).Input(I64Of({2, 1}, {0, 1})).Input(I64({3}));
  ExpectBothRunError(grad_shape, "has shape [3]; expected [2] (GatherND's output)");

  // Indices out of range: the CPU reports them; CUDA skips them (scatter_cuda.cc).
  ExpectCudaIgnoresBadIndex(Node("ScatterND", 13).Input(data).Input(I64Of({2, 1}, {5, 0})).Input(two), {20, 2, 3},
                            "ScatterND index 5 of 3");
  ExpectCudaIgnoresBadIndex(Node("ScatterND", 18)
                                .Attr(Attribute::String("reduction", "add"))
                                .Input(data)
                                .Input(I64Of({2, 1}, {-4, 2}))
                                .Input(two),
                            {1, 2, 23}, "ScatterND add index -4 of 3");
  ExpectCudaIgnoresBadIndex(Node("ScatterElements", 13).Input(data).Input(I64({1, 3})).Input(two), {1, 10, 3},
                            "ScatterElements index 3 of 3");
  ExpectCudaIgnoresBadIndex(Node("GatherND", 13).Input(data).Input(I64Of({3, 1}, {2, 3, -4})), {3, 0, 0},
                            "GatherND indices 3 and -4 of 3");
  OpTester bad_grad = InternalOp(ops::kGatherNDGradOp);
  bad_grad.Input(two).Input(I64Of({2, 1}, {1, 7})).Input(I64({3}));
  ExpectCudaIgnoresBadIndex(bad_grad, {0, 10, 0}, "GatherNDGrad index 7 of 3");
}

// ReverseSequence: both layouts, lengths 0 to T, rank 2 and inner blocks, every element size, empty tensors, and the
// CPU's errors (sequence_lens is read on the host).
TEST(CudaReverseSequence, BothLayoutsEveryLengthExactly) {
  ONNXAMP_REQUIRE_CUDA();
  uint32_t seed = 3;
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kInt64, DType::kBool, DType::kInt8, DType::kFloat64}) {
    for (int64_t time_axis : {0, 1}) {
      for (const std::vector<int64_t>& rest : std::vector<std::vector<int64_t>>{{}, {3}, {2, 5}}) {
        const int64_t steps = 6, batch = 4;
        std::vector<int64_t> dims =
            time_axis == 0 ? std::vector<int64_t>{steps, batch} : std::vector<int64_t>{batch, steps};
        dims.insert(dims.end(), rest.begin(), rest.end());
        OpTester r = Node("ReverseSequence", 10);
        r.Attr(Attribute::Int("time_axis", time_axis)).Attr(Attribute::Int("batch_axis", 1 - time_axis));
        r.Input(Random(t, dims, seed++)).Input(I64Of({batch}, {0, 6, 1, 4}));
        ExpectExact(r, "ReverseSequence " + std::string(DTypeName(t)) + " time_axis " + std::to_string(time_axis) +
                           " " + ShapeToString(dims));
      }
    }
  }
  OpTester empty = Node("ReverseSequence", 10);
  empty.Input(Random(DType::kFloat32, {0, 2, 3}, 1)).Input(I64Of({2}, {0, 0}));
  ExpectExact(empty, "ReverseSequence no time steps");
  OpTester bad = Node("ReverseSequence", 10);
  bad.Input(Random(DType::kFloat32, {3, 2}, 1)).Input(I64Of({2}, {1, 4}));
  ExpectBothRunError(bad, "element 1 is 4, outside [0, 3]");
  OpTester axes = Node("ReverseSequence", 10);
  axes.Attr(Attribute::Int("time_axis", 1)).Input(Random(DType::kFloat32, {3, 2}, 1)).Input(I64Of({2}, {1, 1}));
  ExpectCudaCreateError(axes, "must be 0 and 1 in some order");
}

}  // namespace
}  // namespace onnxamp::testing::cuda_tensor
