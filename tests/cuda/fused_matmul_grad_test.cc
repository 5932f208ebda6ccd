// The CUDA FusedMatMul's training forms against its CPU reference kernel: a float output of fp16/bf16 operands, and
// the bias gradient of either operand (cuBLASLt's BGRADA/BGRADB epilogue where it has an algorithm for the problem,
// the separate sum kernel where it has not), for every transpose, aligned and odd shapes, K = 0 and empty products.
// Skips without a CUDA device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "runtime/cuda/graph_rewrite.h"
#include "tests/cuda/cuda_op_test_util.h"

namespace onnxamp::testing {
namespace {

using Dims = std::vector<int64_t>;

ir::Tensor Random(DType dtype, const Dims& dims, uint32_t seed) {
  std::vector<double> v(static_cast<size_t>(Count(dims)));
  uint32_t s = seed * 2654435761u + 1;
  for (double& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<double>(s >> 8) / static_cast<double>(1u << 24) * 2 - 1;
  }
  return op_test::TensorOf(dtype, dims, v);
}

struct Case {
  int64_t m, n, k;
  bool trans_a, trans_b;
};

void ExpectFormMatches(DType dtype, DType out, const Case& c, const char* grad) {
  const Dims a_dims = c.trans_a ? Dims{c.k, c.m} : Dims{c.m, c.k};
  const Dims b_dims = c.trans_b ? Dims{c.n, c.k} : Dims{c.k, c.n};
  OpTester t = InternalOp(cuda::kFusedMatMulOp);
  t.Input(Random(dtype, a_dims, 1)).Input(Random(dtype, b_dims, 2));
  if (c.trans_a) t.Attr(ir::Attribute::Int("transA", 1));
  if (c.trans_b) t.Attr(ir::Attribute::Int("transB", 1));
  if (out != dtype) t.Attr(ir::Attribute::Int("output_type", static_cast<int64_t>(out)));
  if (*grad) {
    t.Attr(ir::Attribute::String("bias_grad", grad));
    t.num_outputs = 2;
  }
  const std::string what = std::string(DTypeName(dtype)) + " -> " + std::string(DTypeName(out)) + " m " +
                           std::to_string(c.m) + " n " + std::to_string(c.n) + " k " + std::to_string(c.k) +
                           (c.trans_a ? " transA" : "") + (c.trans_b ? " transB" : "") + " bias_grad " + grad;
  // Both sides accumulate in FP32 and round once into the output type; the order differs, and the tensor cores' FP32
  // accumulation need not round to nearest: the error scales with the sums, not with a result cancellation made small.
  StatusOr<std::vector<ir::Tensor>> cpu = t.Run();
  ASSERT_TRUE(cpu.ok()) << what << ": cpu: " << cpu.status().message();
  double max_abs = 0;
  for (const ir::Tensor& o : *cpu) {
    for (double v : AsDoubles(o)) max_abs = std::max(max_abs, std::abs(v));
  }
  Tolerance tol = CudaToleranceFor(out == DType::kFloat32 ? DType::kFloat32 : dtype);
  tol.atol += tol.rtol * max_abs;
  ExpectCudaMatchesCpu(t, what, tol);
}

TEST(CudaFusedMatMulGrad, FloatOutputAndBiasGradientsMatchTheCpuReference) {
  ONNXAMP_REQUIRE_CUDA();
  const Case cases[] = {
      {64, 128, 256, true, false},  // dW = dY^T X, aligned: the cuBLASLt epilogue's shape
      {24, 40, 37, true, false},    // odd K
      {7, 9, 13, false, false},     // odd everything
      {16, 8, 32, false, true},     //
      {12, 20, 0, true, false},     // K = 0: zero products and zero sums
  };
  for (const DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    for (const Case& c : cases) {
      for (const char* grad : {"", "A", "B"}) {
        ExpectFormMatches(dtype, DType::kFloat32, c, grad);
        ExpectFormMatches(dtype, dtype, c, grad);
      }
    }
  }
  for (const Case& c : cases) {
    for (const char* grad : {"A", "B"}) ExpectFormMatches(DType::kFloat32, DType::kFloat32, c, grad);
  }
}

TEST(CudaFusedMatMulGrad, EmptyProductsStillSumTheOtherOperand) {
  ONNXAMP_REQUIRE_CUDA();
  // n = 0 with A's bias gradient: no GEMM runs, A's sums of [m] still do.
  ExpectFormMatches(DType::kFloat16, DType::kFloat32, {5, 0, 6, true, false}, "A");
  ExpectFormMatches(DType::kFloat16, DType::kFloat32, {0, 5, 6, false, false}, "B");
}

TEST(CudaFusedMatMulGrad, BatchedFloatOutput) {
  ONNXAMP_REQUIRE_CUDA();
  OpTester t = InternalOp(cuda::kFusedMatMulOp);
  t.Input(Random(DType::kFloat16, {3, 2, 9, 17}, 3)).Input(Random(DType::kFloat16, {17, 6}, 4));
  t.Attr(ir::Attribute::Int("output_type", static_cast<int64_t>(DType::kFloat32)));
  ExpectCudaMatchesCpu(t, "batched fp16 -> float", CudaToleranceFor(DType::kFloat32));
  OpTester u = InternalOp(cuda::kFusedMatMulOp);
  u.Input(Random(DType::kBFloat16, {4, 5, 8}, 5)).Input(Random(DType::kBFloat16, {1, 8, 3}, 6));
  u.Attr(ir::Attribute::Int("output_type", static_cast<int64_t>(DType::kFloat32)));
  ExpectCudaMatchesCpu(u, "batched bf16 -> float, broadcast B", CudaToleranceFor(DType::kFloat32));
}

}  // namespace
}  // namespace onnxamp::testing
