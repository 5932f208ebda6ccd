// The CUDA FusedMatMul's training forms against its CPU reference kernel: a float output of fp16/bf16 operands, and
// the bias gradient of either operand (cuBLASLt's BGRADA/BGRADB epilogue where it has an algorithm for the problem,
// the separate sum kernel where it has not), for every transpose, aligned and odd shapes, K = 0 and empty products.
// Skips without a CUDA device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
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

// The CUDA kernel of `t` against the CPU's (the type's tolerance, relative to the largest output), once with
// cuBLASLt's epilogue where it takes the problem and once with `variable` = 0, which keeps it out.
void ExpectWithAndWithoutEpilogue(const OpTester& t, DType dtype, const std::string& what, const char* variable) {
  StatusOr<std::vector<ir::Tensor>> want = t.Run();
  ASSERT_TRUE(want.ok()) << what << ": cpu: " << want.status().message();
  double max_abs = 0;
  for (double v : AsDoubles((*want)[0])) max_abs = std::max(max_abs, std::abs(v));
  Tolerance tol = CudaToleranceFor(dtype);
  tol.atol += tol.rtol * max_abs;
  ExpectCudaMatchesCpu(t, what, tol);
  ASSERT_EQ(setenv(variable, "0", 1), 0);
  ExpectCudaMatchesCpu(t, what + " without the epilogue", tol);
  ASSERT_EQ(unsetenv(variable), 0);
}

// ReLU masks (runtime/ops/matmul/fused_matmul.h). Forward (relu_mask): Y as the CPU's, and the mask exactly the bits
// of the device's own Y > 0 (a value near zero may round to the other side on the two devices). Backward
// (activation_grad, cuBLASLt's DRELU epilogue or the separate masking kernel): the product masked by a mask given to
// both as input, against the CPU's; widths that fill 128-bit rows, that do not, and that do not fill a byte.
TEST(CudaFusedMatMulGrad, ReluMasksMatchTheCpuReference) {
  ONNXAMP_REQUIRE_CUDA();
  const Case cases[] = {
      {64, 128, 256, false, true},  // aligned: the epilogue's shape
      {37, 131, 40, false, false},  // two 128-bit words per row, the second partly used
      {9, 5, 13, false, true},      // less than a byte per row
      {12, 20, 0, false, false},    // K = 0
  };
  for (const DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64}) {
    for (const Case& c : cases) {
      const std::string what = std::string(DTypeName(dtype)) + " m " + std::to_string(c.m) + " n " +
                               std::to_string(c.n) + " k " + std::to_string(c.k);
      const Dims b_dims = c.trans_b ? Dims{c.n, c.k} : Dims{c.k, c.n};
      const ir::Tensor a = Random(dtype, {c.m, c.k}, 21), b = Random(dtype, b_dims, 22);
      const ir::Tensor bias = Random(dtype, {c.n}, 23);
      OpTester fwd = InternalOp(cuda::kFusedMatMulOp);
      fwd.Input(a).Input(b).Input(bias);
      if (c.trans_b) fwd.Attr(ir::Attribute::Int("transB", 1));
      fwd.Attr(ir::Attribute::String("activation", "Relu")).Attr(ir::Attribute::Int("relu_mask", 1));
      fwd.num_outputs = 2;
      StatusOr<std::vector<ir::Tensor>> cpu = fwd.Run();
      StatusOr<std::vector<ir::Tensor>> dev = RunOnCuda(fwd);
      ASSERT_TRUE(cpu.ok()) << what << ": cpu: " << cpu.status().message();
      ASSERT_TRUE(dev.ok()) << what << ": cuda: " << dev.status().message();
      ASSERT_EQ(dev->size(), 2u) << what;
      const std::vector<double> y_cpu = AsDoubles((*cpu)[0]), y_dev = AsDoubles((*dev)[0]);
      ASSERT_EQ(y_cpu.size(), y_dev.size()) << what;
      double max_abs = 0;
      for (double v : y_cpu) max_abs = std::max(max_abs, std::abs(v));
      const Tolerance tol = CudaToleranceFor(dtype);
      for (size_t i = 0; i < y_cpu.size(); ++i) {
        ASSERT_LE(std::abs(y_cpu[i] - y_dev[i]), tol.atol + tol.rtol * max_abs) << what << ": Y[" << i << "]";
      }
      const ir::Tensor& mask = (*dev)[1];
      ASSERT_EQ(mask.dtype(), DType::kUint8) << what;
      const int64_t row_bytes = (c.n + 127) / 128 * 16;
      ASSERT_EQ(mask.dims(), (Dims{c.m, row_bytes})) << what;
      const auto bits = mask.values<uint8_t>();
      for (int64_t r = 0; r < c.m; ++r) {
        for (int64_t j = 0; j < row_bytes * 8; ++j) {
          const bool bit = (bits[r * row_bytes + j / 8] >> (j % 8)) & 1;
          ASSERT_EQ(bit, j < c.n && y_dev[r * c.n + j] > 0) << what << ": mask row " << r << " bit " << j;
        }
      }
      // Backward: G [m, k2] x V [k2, n] (V given as [n, k2] with transB), masked by the device's mask.
      const int64_t k2 = c.k == 0 ? 0 : 48;
      OpTester bwd = InternalOp(cuda::kFusedMatMulOp);
      bwd.Input(Random(dtype, {c.m, k2}, 24)).Input(Random(dtype, c.trans_b ? Dims{c.n, k2} : Dims{k2, c.n}, 25));
      bwd.OmittedInput().Input(mask);
      if (c.trans_b) bwd.Attr(ir::Attribute::Int("transB", 1));
      bwd.Attr(ir::Attribute::String("activation_grad", "Relu"));
      // cuBLASLt's DRELU epilogue where it takes the problem, then the masking kernel after a plain GEMM.
      ExpectWithAndWithoutEpilogue(bwd, dtype, what + " masked product", "ONNXAMP_CUBLASLT_DRELU");
    }
  }
}

// activation_grad "GeluTanh": the product times the tanh GELU's derivative at input 3, against the CPU's; cuBLASLt's
// DGELU epilogue (n a multiple of 8) and the separate kernel (n = 131, and with ONNXAMP_CUBLASLT_DGELU=0).
TEST(CudaFusedMatMulGrad, GeluTanhGradientMatchesTheCpuReference) {
  ONNXAMP_REQUIRE_CUDA();
  const Case cases[] = {
      {64, 128, 256, false, true},  // aligned: the epilogue's shape
      {37, 131, 40, false, false},  // n not a multiple of 8: the separate kernel
      {12, 24, 0, false, false},    // K = 0
  };
  for (const DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64}) {
    for (const Case& c : cases) {
      const std::string what = std::string(DTypeName(dtype)) + " m " + std::to_string(c.m) + " n " +
                               std::to_string(c.n) + " k " + std::to_string(c.k);
      std::vector<double> x = AsDoubles(Random(dtype, {c.m, c.n}, 33));
      for (double& v : x) v *= 4;
      OpTester t = InternalOp(cuda::kFusedMatMulOp);
      t.Input(Random(dtype, {c.m, c.k}, 31)).Input(Random(dtype, c.trans_b ? Dims{c.n, c.k} : Dims{c.k, c.n}, 32));
      t.OmittedInput().Input(op_test::TensorOf(dtype, {c.m, c.n}, x));
      if (c.trans_b) t.Attr(ir::Attribute::Int("transB", 1));
      t.Attr(ir::Attribute::String("activation_grad", "GeluTanh"));
      ExpectWithAndWithoutEpilogue(t, dtype, what, "ONNXAMP_CUBLASLT_DGELU");
    }
  }
}

}  // namespace
}  // namespace onnxamp::testing
