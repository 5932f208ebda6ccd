// CUDA Det and its com.onnxamp gradient DetGrad against the CPU kernel, bit for bit: both run
// runtime/ops/det/det_math.h in double, and the CUDA file is built without FMA contraction. Batches of small and
// larger matrices, 0 x 0 and 1 x 1, singular matrices of rank n - 1 (the cofactors minor by minor), pivoting, every
// float type, and the CPU's errors (a singular matrix above 32 x 32 in the gradient, read back from the device).
// Skipped without a CUDA device.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/ops/gradient_ops.h"
#include "tests/cuda/cuda_op_test_util.h"
#include "tests/cuda/elementwise_test_util.h"

namespace onnxamp::testing {
namespace {

using cuda_ew::ExpectSameRunError;
using op_test::Op;
using op_test::RandomValues;
using op_test::TensorOf;

// `batch` n x n matrices; with `singular`, every other one has its last row equal to its first (rank n - 1).
std::vector<double> Matrices(int64_t batch, int64_t n, bool singular, uint32_t seed) {
  std::vector<double> v = RandomValues(static_cast<size_t>(batch * n * n), seed, -2, 2);
  if (singular && n > 1) {
    for (int64_t b = 0; b < batch; b += 2) {
      for (int64_t j = 0; j < n; ++j)
        v[static_cast<size_t>((b * n + n - 1) * n + j)] = v[static_cast<size_t>(b * n * n + j)];
    }
  }
  return v;
}

OpTester Node(const std::vector<int64_t>& batch_dims, int64_t n, bool singular, bool grad, DType dtype, uint32_t seed) {
  OpTester t = grad ? InternalOp(ops::kDetGradOp) : Op("Det", 11);
  int64_t batch = 1;
  for (int64_t d : batch_dims) batch *= d;
  std::vector<int64_t> dims = batch_dims;
  dims.push_back(n);
  dims.push_back(n);
  if (grad) t.Input(TensorOf(dtype, batch_dims, RandomValues(static_cast<size_t>(batch), seed + 1, -1, 1)));
  t.Input(TensorOf(dtype, dims, Matrices(batch, n, singular, seed)));
  return t;
}

TEST(CudaDetTest, DetAndItsGradientAreTheCpusBits) {
  ONNXAMP_REQUIRE_CUDA();
  struct Shape {
    std::vector<int64_t> batch_dims;
    int64_t n;
    bool singular;
  };
  const std::vector<Shape> shapes = {{{7}, 2, false}, {{3, 4}, 3, true}, {{5}, 5, false}, {{6}, 4, true},
                                     {{2}, 1, false}, {{3}, 0, false},   {{0}, 3, false}, {{}, 40, false},
                                     {{2}, 12, true}, {{300}, 6, false}};
  uint32_t seed = 1;
  for (bool grad : {false, true}) {
    for (const Shape& s : shapes) {
      for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64}) {
        const std::string what = std::string(grad ? "DetGrad n " : "Det n ") + std::to_string(s.n) +
                                 (s.singular ? " singular " : " ") + std::string(DTypeName(t));
        ExpectCudaMatchesCpu(Node(s.batch_dims, s.n, s.singular, grad, t, seed += 3), what, Tolerance{0, 0});
      }
    }
  }
}

TEST(CudaDetTest, BadInputsAreTheCpuErrors) {
  ONNXAMP_REQUIRE_CUDA();
  OpTester ones = InternalOp(ops::kDetGradOp);  // singular above 32 x 32 (all ones): no cofactors
  ones.Input(TensorOf(DType::kFloat32, {2}, {1.0, -1.0}));
  ones.Input(TensorOf(DType::kFloat32, {2, 33, 33}, std::vector<double>(2 * 33 * 33, 1.0)));
  ExpectSameRunError(ones);
  OpTester rect = Op("Det", 11);
  rect.Input(TensorOf(DType::kFloat32, {2, 3, 4}, std::vector<double>(24, 1.0)));
  ExpectSameRunError(rect);
}

}  // namespace
}  // namespace onnxamp::testing
