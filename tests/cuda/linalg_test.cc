// CUDA MatMul, Gemm, Einsum and FusedMatMul against the CPU reference: every registered element type, shapes with
// odd sizes, size 0 and 1 dims, batch broadcasting, 1-D operands, every Gemm attribute and C shape, the Einsum
// equations of the CPU tests, the fused epilogues against the unfused graph, one large product, and the error paths.
//
// Tolerance: both sides accumulate in FP32 (FP64 for double) and round once; what differs is the order of the K-term
// sums. Inputs are uniform in [-1, 1), so partial sums grow like sqrt(K) and two orders differ by about K roundings
// of 2^-24 at that size: the per-dtype table plus an absolute K * sqrt(K) * 2^-24 (0.016 at K = 4096, against
// results of size ~20), which matters only for long K.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "runtime/cuda/graph_rewrite.h"
#include "runtime/executor/graph_optimizer.h"
#include "runtime/ops/common/broadcast.h"
#include "tests/cuda/cuda_op_test_util.h"

namespace onnxamp::testing {
namespace {

using Dims = std::vector<int64_t>;
using op_test::RandomValues;
using op_test::TensorOf;

bool IsFloat(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16 || t == DType::kFloat64;
}

bool IsUnsigned(DType t) {
  return t == DType::kUint8 || t == DType::kUint16 || t == DType::kUint32 || t == DType::kUint64;
}

// Random values of `dtype`: floats uniform in [-1, 1), integers small whole numbers (non-negative when unsigned).
ir::Tensor Random(DType dtype, const Dims& dims, uint32_t seed) {
  std::vector<double> v = RandomValues(static_cast<size_t>(Count(dims)), seed, -1.0, 1.0);
  if (!IsFloat(dtype)) {
    for (double& x : v) x = IsUnsigned(dtype) ? std::floor((x + 1) * 4.5) : std::round(x * 5);
  }
  return TensorOf(dtype, dims, v);
}

Tolerance ToleranceForK(DType dtype, int64_t k) {
  Tolerance t = CudaToleranceFor(dtype);
  if (IsFloat(dtype)) t.atol += static_cast<double>(k) * std::sqrt(static_cast<double>(k)) * std::ldexp(1.0, -24);
  return t;
}

std::string Describe(const Dims& a, const Dims& b) { return ops::ShapeToString(a) + " x " + ops::ShapeToString(b); }

const std::vector<DType>& LinalgTypes() {
  static const std::vector<DType> types = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64,
                                           DType::kInt32,   DType::kInt64,   DType::kUint32,   DType::kUint64};
  return types;
}

std::string TypeName(const ::testing::TestParamInfo<DType>& info) { return std::string(DTypeName(info.param)); }

// ---- MatMul -----------------------------------------------------------------------------------------------------

class CudaMatMulTest : public ::testing::TestWithParam<DType> {};

TEST_P(CudaMatMulTest, ShapesAgainstCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dtype = GetParam();
  const std::vector<std::pair<Dims, Dims>> cases = {
      // 2-D: odd sizes, M or N or K of 1
      {{2, 3}, {3, 4}},
      {{1, 1}, {1, 1}},
      {{7, 33}, {33, 129}},
      {{129, 7}, {7, 1}},
      {{1, 129}, {129, 33}},
      {{33, 1}, {1, 7}},
      // 3-D / 4-D, batches that match, one side single (folded into M, or stride 0), general broadcasting
      {{2, 7, 33}, {2, 33, 5}},
      {{3, 4, 5}, {5, 6}},
      {{5, 6}, {3, 6, 4}},
      {{3, 1, 4, 5}, {2, 5, 6}},
      {{2, 3, 4, 5}, {1, 3, 5, 2}},
      {{4, 1, 3, 2}, {1, 5, 2, 3}},
      {{2, 3, 4, 5}, {2, 3, 5, 6}},
      {{1, 3, 4, 5}, {2, 1, 5, 6}},
      {{2, 1, 1, 7}, {1, 3, 7, 1}},
      // 1-D operands: promoted and dropped as numpy does
      {{5}, {5}},
      {{5}, {3, 5, 4}},
      {{2, 3, 5}, {5}},
      {{7}, {7, 9}},
      // empty: K = 0 (zeros), M = 0, N = 0, a batch of 0
      {{3, 0}, {0, 4}},
      {{2, 3, 0}, {0, 1}},
      {{0, 3}, {3, 4}},
      {{3, 4}, {4, 0}},
      {{0, 2, 3}, {3, 4}},
  };
  uint32_t seed = 1;
  for (const auto& [a, b] : cases) {
    OpTester t;
    t.op_type = "MatMul";
    t.opset = 13;
    t.Input(Random(dtype, a, seed++));
    t.Input(Random(dtype, b, seed++));
    const int64_t k = a.back();
    ExpectCudaMatchesCpu(t, Describe(a, b), ToleranceForK(dtype, k));
  }
}

TEST_P(CudaMatMulTest, EveryOpsetThatTakesTheType) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dtype = GetParam();
  for (int64_t opset : {1, 9, 13, 23}) {
    if (opset < 9 && !IsFloat(dtype)) continue;
    if (opset < 13 && dtype == DType::kBFloat16) continue;
    OpTester t;
    t.op_type = "MatMul";
    t.opset = opset;
    t.Input(Random(dtype, {4, 6}, 3)).Input(Random(dtype, {6, 5}, 4));
    ExpectCudaMatchesCpu(t, "opset " + std::to_string(opset));
  }
}

INSTANTIATE_TEST_SUITE_P(Types, CudaMatMulTest, ::testing::ValuesIn(LinalgTypes()), TypeName);

TEST(CudaMatMul, IntegersWrapAsOnTheCpu) {
  ONNXAMP_REQUIRE_CUDA();
  for (DType dtype : {DType::kInt32, DType::kUint32, DType::kInt64}) {
    std::vector<double> big = RandomValues(6 * 40, 9, 1e5, 4e5);
    for (double& x : big) x = std::round(x);
    OpTester t;
    t.op_type = "MatMul";
    t.opset = 13;
    t.Input(TensorOf(dtype, {6, 40}, big))
        .Input(TensorOf(dtype, {40, 3}, std::vector<double>(big.begin(), big.begin() + 120)));
    ExpectCudaMatchesCpu(t, std::string("overflowing ") + std::string(DTypeName(dtype)));
  }
}

TEST(CudaMatMul, LargeHalfProduct) {
  ONNXAMP_REQUIRE_CUDA();
  OpTester t;
  t.op_type = "MatMul";
  t.opset = 13;
  t.Input(Random(DType::kFloat16, {512, 4096}, 11)).Input(Random(DType::kFloat16, {4096, 4096}, 12));
  ExpectCudaMatchesCpu(t, "512x4096x4096 fp16", ToleranceForK(DType::kFloat16, 4096));
}

TEST(CudaMatMul, LargeFloatBatchedWithBroadcast) {
  ONNXAMP_REQUIRE_CUDA();
  OpTester t;
  t.op_type = "MatMul";
  t.opset = 13;
  t.Input(Random(DType::kFloat32, {4, 1, 128, 256}, 13)).Input(Random(DType::kFloat32, {3, 256, 96}, 14));
  ExpectCudaMatchesCpu(t, "[4,1,128,256] x [3,256,96]", ToleranceForK(DType::kFloat32, 256));
}

TEST(CudaMatMul, MismatchedInnerDimsRefusedAsOnTheCpu) {
  ONNXAMP_REQUIRE_CUDA();
  OpTester t;
  t.op_type = "MatMul";
  t.opset = 13;
  t.Input(Random(DType::kFloat32, {3, 4}, 1)).Input(Random(DType::kFloat32, {5, 2}, 2));
  ExpectCudaRunError(t, "input A [3,4] has 4 columns but input B [5,2] has 5 rows");
  OpTester u = t;
  u.inputs = {Random(DType::kFloat32, {2, 3, 4}, 1), Random(DType::kFloat32, {3, 4, 2}, 2)};
  ExpectCudaRunError(u, "cannot be broadcast");
}

// ---- Gemm -------------------------------------------------------------------------------------------------------

class CudaGemmTest : public ::testing::TestWithParam<DType> {};

TEST_P(CudaGemmTest, AttributesAndCShapes) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dtype = GetParam();
  const int64_t m = 5, k = 7, n = 3;
  const std::vector<Dims> c_shapes = {{}, {n}, {1, n}, {m, 1}, {m, n}, {1}, {1, 1}};
  const std::vector<float> alphas = IsFloat(dtype) ? std::vector<float>{1.0f, 0.5f} : std::vector<float>{1.0f, -2.0f};
  const std::vector<float> betas =
      IsFloat(dtype) ? std::vector<float>{1.0f, 0.0f, 2.5f} : std::vector<float>{1.0f, 0.0f, 3.0f};
  uint32_t seed = 100;
  for (int ta = 0; ta < 2; ++ta) {
    for (int tb = 0; tb < 2; ++tb) {
      for (float alpha : alphas) {
        for (float beta : betas) {
          for (int c = -1; c < static_cast<int>(c_shapes.size()); ++c) {
            OpTester t;
            t.op_type = "Gemm";
            t.opset = 13;
            t.Input(Random(dtype, ta ? Dims{k, m} : Dims{m, k}, seed++));
            t.Input(Random(dtype, tb ? Dims{n, k} : Dims{k, n}, seed++));
            if (c >= 0) t.Input(Random(dtype, c_shapes[static_cast<size_t>(c)], seed++));
            t.Attr(ir::Attribute::Int("transA", ta)).Attr(ir::Attribute::Int("transB", tb));
            t.Attr(ir::Attribute::Float("alpha", alpha)).Attr(ir::Attribute::Float("beta", beta));
            const std::string what =
                "transA " + std::to_string(ta) + " transB " + std::to_string(tb) + " alpha " + std::to_string(alpha) +
                " beta " + std::to_string(beta) + " C " +
                (c < 0 ? std::string("none") : ops::ShapeToString(c_shapes[static_cast<size_t>(c)]));
            ExpectCudaMatchesCpu(t, what);
          }
        }
      }
    }
  }
}

TEST_P(CudaGemmTest, SizesAndOpsets) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dtype = GetParam();
  const std::vector<std::array<int64_t, 3>> sizes = {{1, 1, 1}, {1, 129, 33}, {129, 7, 1}, {33, 65, 129},
                                                     {4, 0, 3}, {0, 3, 4},    {3, 4, 0}};
  uint32_t seed = 7;
  for (const auto& [m, k, n] : sizes) {
    for (int64_t opset : {7, 11, 13}) {
      if (opset < 9 && !IsFloat(dtype)) continue;
      if (opset < 13 && dtype == DType::kBFloat16) continue;
      OpTester t;
      t.op_type = "Gemm";
      t.opset = opset;
      t.Input(Random(dtype, {m, k}, seed++));
      t.Input(Random(dtype, {k, n}, seed++));
      t.Input(Random(dtype, {n}, seed++));
      ExpectCudaMatchesCpu(t,
                           "M " + std::to_string(m) + " K " + std::to_string(k) + " N " + std::to_string(n) +
                               " opset " + std::to_string(opset),
                           ToleranceForK(dtype, k));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, CudaGemmTest, ::testing::ValuesIn(LinalgTypes()), TypeName);

TEST(CudaGemm, LegacyBroadcastAttribute) {
  ONNXAMP_REQUIRE_CUDA();
  OpTester t;
  t.op_type = "Gemm";
  t.opset = 6;
  t.Input(Random(DType::kFloat32, {4, 3}, 1)).Input(Random(DType::kFloat32, {3, 5}, 2));
  t.Input(Random(DType::kFloat32, {5}, 3));
  t.Attr(ir::Attribute::Int("broadcast", 1));
  ExpectCudaMatchesCpu(t, "opset 6 broadcast 1");
  OpTester u = t;
  u.attributes.clear();
  ExpectCudaRunError(u, "input C has shape [5], expected [4,5] (attribute 'broadcast' is 0)");
}

TEST(CudaGemm, ErrorsAsOnTheCpu) {
  ONNXAMP_REQUIRE_CUDA();
  OpTester t;
  t.op_type = "Gemm";
  t.opset = 13;
  t.options.device = exec::Device::kCuda;
  t.Input(Random(DType::kFloat32, {4, 3}, 1)).Input(Random(DType::kFloat32, {3, 5}, 2));
  OpTester bad = t;
  bad.Attr(ir::Attribute::Int("transA", 2));
  op_test::ExpectCreateError(bad, "attributes 'transA' and 'transB' must be 0 or 1, got 2 and 0");
  OpTester old = t;
  old.opset = 9;
  ExpectCudaRunError(old, "input C is required before opset 11 (this node is at opset 9)");
  OpTester k = t;
  k.inputs[1] = Random(DType::kFloat32, {4, 5}, 2);
  ExpectCudaRunError(k, "input A [4,3] has K = 3 but input B [4,5] has K = 4");
  OpTester ints;
  ints.op_type = "Gemm";
  ints.opset = 13;
  ints.Input(Random(DType::kInt32, {2, 2}, 1)).Input(Random(DType::kInt32, {2, 2}, 2));
  ints.Attr(ir::Attribute::Float("alpha", 0.5f));
  ExpectCudaRunError(ints, "must be whole numbers for element type int32");
}

// ---- Einsum -----------------------------------------------------------------------------------------------------

struct EinsumCase {
  std::string equation;
  std::vector<Dims> shapes;
};

const std::vector<EinsumCase>& EinsumCases() {
  static const std::vector<EinsumCase> cases = {
      // two operands as one batched GEMM: as they lie, transposed, or permuted first / after
      {"ij,jk->ik", {{3, 4}, {4, 5}}},
      {"ij,jk", {{7, 33}, {33, 1}}},
      {"bij,bjk->bik", {{2, 3, 4}, {2, 4, 5}}},
      {"bhqd,bhkd->bhqk", {{2, 3, 5, 4}, {2, 3, 6, 4}}},
      {"bhqk,bhkd->bqhd", {{2, 3, 5, 6}, {2, 3, 6, 4}}},
      {"ik,jk->ij", {{3, 4}, {5, 4}}},
      {"ki,kj->ij", {{4, 3}, {4, 5}}},
      {"abc,cd->abd", {{2, 3, 4}, {4, 5}}},
      {"aBc,cBd->ad", {{2, 3, 4}, {4, 3, 5}}},
      {"Ab,bC->AC", {{3, 4}, {4, 2}}},
      {"ij,ij->i", {{3, 4}, {3, 4}}},
      {"ij,ij->ij", {{3, 4}, {3, 4}}},
      {"i,i", {{5}, {5}}},
      {"i,j->ij", {{3}, {4}}},
      {"ij,jk->ik", {{3, 0}, {0, 5}}},
      {"...ij,...jk->...ik", {{2, 3, 4}, {2, 4, 5}}},
      {" ...ij , jk -> ...ik ", {{2, 3, 4}, {4, 5}}},
      // the general kernel: one or three inputs, diagonals, sums within one operand, size-1 broadcasting
      {"i,j,k->ijk", {{2}, {3}, {4}}},
      {"ij,jk,kl->il", {{2, 3}, {3, 4}, {4, 5}}},
      {"bn,anm,bm->ba", {{2, 3}, {4, 3, 5}, {2, 5}}},
      {"ii->i", {{4, 4}}},
      {"iij->ij", {{3, 3, 4}}},
      {"iij,j->i", {{3, 3, 4}, {4}}},
      {"iik,kj->ij", {{3, 3, 4}, {4, 5}}},
      {"ij->", {{3, 4}}},
      {"ij->j", {{3, 4}}},
      {"ij->ji", {{3, 4}}},
      {"ijk->i", {{2, 3, 4}}},
      {"ijk->j", {{2, 3, 4}}},
      {"ijk->kji", {{2, 3, 4}}},
      {"i...j->i", {{2, 3, 4}}},
      {"...j,j->...", {{2, 3, 4}, {4}}},
      {"...ij,...jk", {{2, 1, 3, 4}, {5, 4, 6}}},
      {"ij,jk->ik", {{3, 1}, {4, 5}}},
      {"ij,ij->j", {{3, 4}, {1, 4}}},
  };
  return cases;
}

// The list above is replayed on CUDA against the CPU, so every case must be one the CPU accepts (needs no device).
TEST(CudaEinsumCases, TheCpuRunsEveryCase) {
  uint32_t seed = 40;
  for (const EinsumCase& c : EinsumCases()) {
    OpTester t;
    t.op_type = "Einsum";
    t.opset = 12;
    t.Attr(ir::Attribute::String("equation", c.equation));
    for (const Dims& d : c.shapes) t.Input(Random(DType::kFloat32, d, seed++));
    StatusOr<std::vector<ir::Tensor>> out = t.Run();
    EXPECT_TRUE(out.ok()) << "'" << c.equation << "': " << out.status().message();
  }
}

class CudaEinsumTest : public ::testing::TestWithParam<DType> {};

TEST_P(CudaEinsumTest, EquationsOfTheCpuTests) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dtype = GetParam();
  uint32_t seed = 40;
  for (const EinsumCase& c : EinsumCases()) {
    OpTester t;
    t.op_type = "Einsum";
    t.opset = 12;
    t.Attr(ir::Attribute::String("equation", c.equation));
    for (const Dims& d : c.shapes) t.Input(Random(dtype, d, seed++));
    ExpectCudaMatchesCpu(t, "'" + c.equation + "'");
  }
}

INSTANTIATE_TEST_SUITE_P(Types, CudaEinsumTest,
                         ::testing::Values(DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64,
                                           DType::kInt32, DType::kInt64, DType::kInt8, DType::kUint16),
                         TypeName);

TEST(CudaEinsum, LargeTransposeAndLongSums) {
  ONNXAMP_REQUIRE_CUDA();
  OpTester t;  // more than 65535 * 256 elements: the grid-stride loop
  t.op_type = "Einsum";
  t.opset = 12;
  t.Attr(ir::Attribute::String("equation", "ij->ji"));
  t.Input(Random(DType::kFloat16, {4100, 4100}, 1));
  ExpectCudaMatchesCpu(t, "ij->ji 4100x4100");
  OpTester s;  // few outputs, long sums: a block per output (tree order against the CPU's sequential order)
  s.op_type = "Einsum";
  s.opset = 12;
  s.Attr(ir::Attribute::String("equation", "ij->i"));
  s.Input(Random(DType::kFloat32, {64, 5000}, 2));
  ExpectCudaMatchesCpu(s, "ij->i 64x5000", Tolerance{1e-4, 2e-3});
  OpTester big;  // a batched contraction
  big.op_type = "Einsum";
  big.opset = 12;
  big.Attr(ir::Attribute::String("equation", "bqd,bkd->bqk"));
  big.Input(Random(DType::kBFloat16, {8, 64, 128}, 3)).Input(Random(DType::kBFloat16, {8, 96, 128}, 4));
  ExpectCudaMatchesCpu(big, "bqd,bkd->bqk", ToleranceForK(DType::kBFloat16, 128));
}

TEST(CudaEinsum, ErrorsAsOnTheCpu) {
  ONNXAMP_REQUIRE_CUDA();
  OpTester t;
  t.op_type = "Einsum";
  t.opset = 12;
  t.options.device = exec::Device::kCuda;
  t.Input(Random(DType::kFloat32, {3, 4}, 1));
  OpTester twice = t;
  twice.Attr(ir::Attribute::String("equation", "ij->ii"));
  op_test::ExpectCreateError(twice, "output label 'i' appears twice");
  OpTester missing = t;
  missing.Attr(ir::Attribute::String("equation", "ij->ik"));
  ExpectCudaRunError(missing, "output label 'k' does not appear in any input");
  OpTester rank = t;
  rank.Attr(ir::Attribute::String("equation", "ijk->i"));
  ExpectCudaRunError(rank, "input 0 has shape [3,4] (rank 2) but its term has 3 labels");
}

TEST(CudaEinsum, BeyondTheGeneralKernelRunsOnTheCpu) {
  ONNXAMP_REQUIRE_CUDA();
  // Nine inputs, and 17 output labels: more than the CUDA kernel's fixed argument sizes. The device factory declines
  // at Create, so the node runs on the CPU and the session still gives the CPU's results.
  OpTester nine;
  nine.op_type = "Einsum";
  nine.opset = 12;
  nine.Attr(ir::Attribute::String("equation", "a,a,a,a,a,a,a,a,a->a"));
  for (uint32_t i = 0; i < 9; ++i) nine.Input(Random(DType::kFloat32, {5}, 60 + i));
  ExpectCudaMatchesCpu(nine, "nine inputs", std::nullopt, /*allow_cpu_nodes=*/true);
  nine.options.device = exec::Device::kCuda;
  auto session = exec::Session::Create(nine.BuildModel(), nine.options);
  ASSERT_TRUE(session.ok()) << session.status().message();
  EXPECT_EQ((*session)->placement().on_cpu.size(), 1u) << (*session)->DescribePlacement();
  OpTester wide;
  wide.op_type = "Einsum";
  wide.opset = 12;
  wide.Attr(ir::Attribute::String("equation", "abcdefghijklmnopq->qponmlkjihgfedcba"));
  wide.Input(Random(DType::kFloat32, Dims(17, 1), 70));
  ExpectCudaMatchesCpu(wide, "17 output labels", std::nullopt, /*allow_cpu_nodes=*/true);
}

// ---- FusedMatMul against the unfused graph ----------------------------------------------------------------------

enum class Act { kNone, kRelu, kErfPattern, kGeluOp, kGeluTanhOp };

const char* ActName(Act a) {
  switch (a) {
    case Act::kRelu:
      return "Relu";
    case Act::kErfPattern:
      return "erf pattern";
    case Act::kGeluOp:
      return "Gelu";
    case Act::kGeluTanhOp:
      return "Gelu tanh";
    default:
      return "none";
  }
}

// X [x_dims] x W [K, N] (initializer) + B [N] (initializer) -> activation -> Y, at opset 20 (for Gelu).
ir::Model FusableModel(DType dtype, const Dims& x_dims, int64_t n, Act act, bool gemm) {
  ir::Model model;
  model.opset_imports = {{"", 20}};
  ir::Graph& g = *model.graph;
  const int64_t k = x_dims.back();
  auto value = [&](const std::string& name, const Dims& dims) {
    ir::Value* v = g.CreateValue(name);
    ir::Shape shape;
    for (int64_t d : dims) shape.push_back(ir::Dim::Value(d));
    v->set_type(ir::ValueType::Tensor(dtype, shape));
    return v;
  };
  ir::Value* x = value("X", x_dims);
  g.AddInput(x);
  ir::Value* w = value("W", gemm ? Dims{n, k} : Dims{k, n});
  g.SetInitializer(w, Random(dtype, gemm ? Dims{n, k} : Dims{k, n}, 77));
  ir::Value* b = value("B", {n});
  g.SetInitializer(b, Random(dtype, {n}, 78));
  ir::Value* cur = g.CreateValue("mm");
  if (gemm) {
    ir::Node* node = g.AddNode("Gemm", {x, w, b}, {cur}, "gemm");
    node->SetAttribute(ir::Attribute::Int("transB", 1));
    node->SetAttribute(ir::Attribute::Float("alpha", 0.75f));
  } else {
    g.AddNode("MatMul", {x, w}, {cur}, "mm");
    ir::Value* add = g.CreateValue("add");
    g.AddNode("Add", {cur, b}, {add}, "add");
    cur = add;
  }
  auto scalar = [&](const std::string& name, double v) {
    ir::Value* c = g.CreateValue(name);
    g.AddNode("Constant", {}, {c}, name)->SetAttribute(ir::Attribute::TensorValue("value", TensorOf(dtype, {}, {v})));
    return c;
  };
  auto op = [&](const std::string& type, std::vector<ir::Value*> in, const std::string& out) {
    ir::Value* v = g.CreateValue(out);
    g.AddNode(type, std::move(in), {v}, out);
    return v;
  };
  switch (act) {
    case Act::kRelu:
      cur = op("Relu", {cur}, "relu");
      break;
    case Act::kErfPattern: {
      ir::Value* e = op("Erf", {op("Div", {cur, scalar("sqrt2", std::sqrt(2.0))}, "div")}, "erf");
      ir::Value* m = op("Mul", {cur, op("Add", {e, scalar("one", 1.0)}, "plus1")}, "mul");
      cur = op("Mul", {m, scalar("half", 0.5)}, "gelu");
      break;
    }
    case Act::kGeluOp:
    case Act::kGeluTanhOp: {
      cur = op("Gelu", {cur}, "gelu");
      cur->producer()->SetAttribute(ir::Attribute::String("approximate", act == Act::kGeluOp ? "none" : "tanh"));
      break;
    }
    default:
      break;
  }
  g.AddOutput(cur);
  return model;
}

// The fused result differs from the unfused CPU graph by the roundings the unfused graph makes between its nodes
// (the product, the sum, each op of the erf pattern: up to ~6 units in fp16/bf16), and by the device's erf/exp/tanh.
// cuBLASLt's GELU epilogue is the tanh approximation (PyTorch decomposes its cuBLASLt GELU epilogue, aten::
// _addmm_activation, into gelu(approximate="tanh") on CUDA), computed in float, so a double GeluTanh gets a float
// tolerance in case cuBLASLt takes that epilogue for double.
Tolerance FusedTolerance(DType dtype, Act act) {
  switch (dtype) {
    case DType::kFloat16:
      return {1e-2, 1e-2};
    case DType::kBFloat16:
      return {6e-2, 6e-2};
    case DType::kFloat64:
      return act == Act::kGeluTanhOp ? Tolerance{2e-4, 1e-4} : Tolerance{1e-9, 1e-10};
    default:
      return {2e-4, 1e-4};
  }
}

void ExpectFusedMatchesUnfused(DType dtype, const Dims& x_dims, int64_t n, Act act, bool gemm) {
  const std::string what = std::string(DTypeName(dtype)) + " " + ops::ShapeToString(x_dims) + " N " +
                           std::to_string(n) + (gemm ? " Gemm + " : " MatMul + bias + ") + ActName(act);
  ir::Tensor x = Random(dtype, x_dims, 79);
  x.set_name("X");
  exec::SessionOptions cpu_options;
  cpu_options.num_threads = 1;
  auto cpu = exec::Session::Create(FusableModel(dtype, x_dims, n, act, gemm), cpu_options);
  ASSERT_TRUE(cpu.ok()) << what << ": " << cpu.status().message();
  auto want = (*cpu)->Run({x});
  ASSERT_TRUE(want.ok()) << what << ": " << want.status().message();
  exec::SessionOptions cuda_options;
  cuda_options.device = exec::Device::kCuda;
  auto cuda = exec::Session::Create(FusableModel(dtype, x_dims, n, act, gemm), cuda_options);
  ASSERT_TRUE(cuda.ok()) << what << ": " << cuda.status().message();
  int fused = 0;
  for (const ir::Node* node : (*cuda)->model().graph->nodes()) fused += node->op_type() == cuda::kFusedMatMulOp;
  // Gemm adds its row-vector C itself: with nothing after it there is nothing to fuse.
  EXPECT_EQ(fused, gemm && act == Act::kNone ? 0 : 1) << what << ": " << (*cuda)->DescribePlacement();
  EXPECT_TRUE((*cuda)->placement().on_cpu.empty()) << what << ": " << (*cuda)->DescribePlacement();
  for (int run = 0; run < 2; ++run) {  // the second run uses the cached cuBLASLt plan
    auto got = (*cuda)->Run({x});
    ASSERT_TRUE(got.ok()) << what << ": " << got.status().message();
    ASSERT_EQ(got->size(), 1u);
    ASSERT_EQ((*got)[0].dims(), (*want)[0].dims()) << what;
    ExpectClose((*got)[0], AsDoubles((*want)[0]), what + " run " + std::to_string(run), FusedTolerance(dtype, act));
  }
}

class CudaFusedMatMulTest : public ::testing::TestWithParam<DType> {};

TEST_P(CudaFusedMatMulTest, AgainstTheUnfusedGraph) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dtype = GetParam();
  for (Act act : {Act::kNone, Act::kRelu, Act::kErfPattern, Act::kGeluOp, Act::kGeluTanhOp}) {
    ExpectFusedMatchesUnfused(dtype, {2, 7, 33}, 65, act, false);
    ExpectFusedMatchesUnfused(dtype, {1, 16}, 1, act, false);
    ExpectFusedMatchesUnfused(dtype, {5, 0}, 3, act, false);  // K = 0: the bias and activation alone
    ExpectFusedMatchesUnfused(dtype, {9, 24}, 40, act, true);
  }
}

INSTANTIATE_TEST_SUITE_P(Types, CudaFusedMatMulTest,
                         ::testing::Values(DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64),
                         TypeName);

TEST(CudaFusedMatMul, LargeOutputRunsTheEpilogueKernelOverAGridStride) {
  ONNXAMP_REQUIRE_CUDA();
  // 4100 x 4100 > 65535 * 256 outputs; the erf GELU runs in the separate epilogue kernel.
  ExpectFusedMatchesUnfused(DType::kFloat16, {4100, 8}, 4100, Act::kErfPattern, false);
}

// A NaN in X reaches the fused ReLU's output as on the CPU (whose Relu keeps NaN, as PyTorch's does). cuBLASLt's RELU
// epilogues turn NaN into 0, so the ReLU runs in our epilogue kernel after cuBLASLt's bias (cublaslt_gemm.cc,
// EpilogueFor). An AMP step whose forward overflows to NaN before a ReLU must still see the NaN.
TEST(CudaFusedMatMul, ReluKeepsNaNAsTheCpu) {
  ONNXAMP_REQUIRE_CUDA();
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    for (bool gemm : {false, true}) {
      const std::string what = std::string(DTypeName(dtype)) + (gemm ? " Gemm + Relu" : " MatMul + bias + Relu");
      const Dims x_dims = {9, 24};
      std::vector<double> xv = AsDoubles(Random(dtype, x_dims, 81));
      xv[3 * 24 + 5] = std::nan("");  // row 3 of the product is NaN
      ir::Tensor x = TensorOf(dtype, x_dims, xv);
      x.set_name("X");
      std::vector<std::vector<double>> results;
      for (exec::Device device : {exec::Device::kCpu, exec::Device::kCuda}) {
        exec::SessionOptions options;
        options.device = device;
        options.num_threads = 1;
        auto s = exec::Session::Create(FusableModel(dtype, x_dims, 40, Act::kRelu, gemm), options);
        ASSERT_TRUE(s.ok()) << what << ": " << s.status().message();
        auto out = (*s)->Run({x});
        ASSERT_TRUE(out.ok()) << what << ": " << out.status().message();
        results.push_back(AsDoubles((*out)[0]));
      }
      ASSERT_EQ(results[0].size(), results[1].size()) << what;
      for (size_t i = 0; i < results[0].size(); ++i) {
        ASSERT_EQ(std::isnan(results[0][i]), i / 40 == 3) << what << ": CPU element " << i;
        EXPECT_EQ(std::isnan(results[1][i]), std::isnan(results[0][i]))
            << what << ": CUDA element " << i << " is " << results[1][i] << ", CPU " << results[0][i];
      }
    }
  }
}

TEST(CudaFusedMatMul, SessionWithGraphOptimizationOffKeepsTheNodes) {
  ONNXAMP_REQUIRE_CUDA();
  exec::SessionOptions options;
  options.device = exec::Device::kCuda;
  options.graph_optimization = exec::GraphOptimization::kNone;
  auto cuda = exec::Session::Create(FusableModel(DType::kFloat32, {3, 4}, 5, Act::kRelu, false), options);
  ASSERT_TRUE(cuda.ok()) << cuda.status().message();
  for (const ir::Node* node : (*cuda)->model().graph->nodes()) EXPECT_NE(node->op_type(), cuda::kFusedMatMulOp);
}

TEST(CudaFusedMatMul, BadActivationRefusedAtCreate) {
  ONNXAMP_REQUIRE_CUDA();
  OpTester t;
  t.op_type = cuda::kFusedMatMulOp;
  t.domain = cuda::kFusedMatMulDomain;
  t.opset = 1;
  t.options.device = exec::Device::kCuda;
  t.Input(Random(DType::kFloat32, {2, 3}, 1)).Input(Random(DType::kFloat32, {3, 4}, 2));
  t.Attr(ir::Attribute::String("activation", "Tanh"));
  op_test::ExpectCreateError(t,
                             "attribute 'activation' must be empty, \"Relu\", \"Gelu\" or \"GeluTanh\", got \"Tanh\"");
}

}  // namespace
}  // namespace onnxamp::testing
