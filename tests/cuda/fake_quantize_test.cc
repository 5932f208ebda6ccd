// com.onnxamp FakeQuantize and FakeQuantizeGrad on CUDA against the CPU kernels: the quantized values exactly (the
// same float arithmetic), dX exactly, dScale within the table's tolerance (its double sums are added in another order);
// per tensor and per axis, uint8 and int8 zero points, with and without dScale, and twice with the same bits.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/ops/gradient_ops.h"
#include "tests/cuda/cuda_op_test_util.h"
#include "tests/cuda/norm_reduce_test_util.h"
#include "tests/runtime/ops/reduce_test_util.h"

namespace onnxamp::testing {
namespace {

ir::Tensor Random(DType dtype, const std::vector<int64_t>& dims, uint32_t seed, double lo, double hi) {
  return TensorOf(dtype, dims, RandomValues(Count(dims), seed, lo, hi));
}

ir::Tensor ZeroPoint(DType type, const std::vector<int64_t>& dims, int64_t v) {
  ir::Tensor t(type, dims);
  for (int64_t k = 0; k < t.num_elements(); ++k) {
    if (type == DType::kUint8) {
      t.mutable_values<uint8_t>()[k] = static_cast<uint8_t>(v + k);
    } else {
      t.mutable_values<int8_t>()[k] = static_cast<int8_t>(v - k);
    }
  }
  return t;
}

struct Case {
  bool per_axis;
  DType zp_type;
};

OpTester FakeQuant(const std::string& op, DType dtype, const Case& c, int outputs) {
  const std::vector<int64_t> dims = {4, 3, 700};
  OpTester t = InternalOp(op);
  t.num_outputs = outputs;
  const bool uint = c.zp_type == DType::kUint8;
  if (op == ops::kFakeQuantizeGradOp) t.Input(Random(dtype, dims, 3, -1, 1));
  t.Input(Random(dtype, dims, 4, -6, 6));  // beyond the range at both ends for every scale below
  t.Input(c.per_axis ? TensorOf(dtype, {3}, {0.03, 0.02, 0.05}) : TensorOf(dtype, {}, {0.03}));
  t.Input(ZeroPoint(c.zp_type, c.per_axis ? std::vector<int64_t>{3} : std::vector<int64_t>{}, uint ? 120 : 5));
  t.Attr(ir::Attribute::Int("axis", 1));
  t.Attr(ir::Attribute::Int("qmin", uint ? 0 : -128)).Attr(ir::Attribute::Int("qmax", uint ? 255 : 127));
  return t;
}

class CudaFakeQuantizeTest : public ::testing::TestWithParam<DType> {};

TEST_P(CudaFakeQuantizeTest, MatchesCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dtype = GetParam();
  for (const Case& c : {Case{false, DType::kUint8}, Case{true, DType::kInt8}, Case{true, DType::kUint8}}) {
    const std::string what = std::string(c.per_axis ? "per axis " : "per tensor ") + std::string(DTypeName(c.zp_type));
    ExpectCudaMatchesCpu(FakeQuant(ops::kFakeQuantizeOp, dtype, c, 1), "FakeQuantize " + what, Tolerance{0, 0});
    ExpectCudaMatchesCpu(FakeQuant(ops::kFakeQuantizeGradOp, dtype, c, 1), "FakeQuantizeGrad dX " + what,
                         Tolerance{0, 0});
    ExpectCudaMatchesCpu(FakeQuant(ops::kFakeQuantizeGradOp, dtype, c, 2), "FakeQuantizeGrad dX, dScale " + what);
  }
}

TEST_P(CudaFakeQuantizeTest, StepSizeSumsAreDeterministic) {
  ONNXAMP_REQUIRE_CUDA();
  for (const Case& c : {Case{false, DType::kUint8}, Case{true, DType::kInt8}}) {
    OpTester t = FakeQuant(ops::kFakeQuantizeGradOp, GetParam(), c, 2);
    StatusOr<std::vector<ir::Tensor>> first = RunOnCuda(t);
    ASSERT_TRUE(first.ok()) << first.status().message();
    StatusOr<std::vector<ir::Tensor>> second = RunOnCuda(t);
    ASSERT_TRUE(second.ok()) << second.status().message();
    EXPECT_EQ(std::memcmp((*first)[1].data(), (*second)[1].data(), (*first)[1].nbytes()), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Types, CudaFakeQuantizeTest, ::testing::ValuesIn(FloatTypes()), DTypeParamName());

TEST(CudaFakeQuantizeErrorsTest, RefusedAsOnTheCpu) {
  ONNXAMP_REQUIRE_CUDA();
  OpTester t = FakeQuant(ops::kFakeQuantizeOp, DType::kFloat32, Case{false, DType::kUint8}, 1);
  t.Attr(ir::Attribute::Int("qmin", 9)).Attr(ir::Attribute::Int("qmax", 3));
  ExpectCreateErrorOnBoth(t, "attributes qmin 9 and qmax 3 do not make an integer range");
}

}  // namespace
}  // namespace onnxamp::testing
