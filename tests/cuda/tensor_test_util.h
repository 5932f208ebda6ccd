// Helpers of the CUDA shape and data-movement kernel tests: tensors of distinct values for every element type, int64
// builders, and CPU-vs-CUDA checks that demand bit-exact results (data movement never changes a value).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "runtime/ops/common/broadcast.h"
#include "tests/cuda/cuda_op_test_util.h"

namespace onnxamp::testing::cuda_tensor {

// The element types the data-movement kernels are tested on: every element size, float and integer, and bool.
inline std::vector<DType> MoveTypes() {
  return {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kInt64, DType::kBool, DType::kInt8};
}

inline std::string TypeName(const ::testing::TestParamInfo<DType>& info) { return std::string(DTypeName(info.param)); }

// A tensor whose elements are distinct within the type's exact integer range (a scrambled index, so that no dim's
// period lines up with the pattern): a permutation, gather or copy bug changes values.
inline ir::Tensor Distinct(DType dtype, std::vector<int64_t> dims, int64_t salt = 0) {
  int64_t modulus = int64_t{1} << 24;
  bool is_signed = true;
  switch (dtype) {
    case DType::kFloat16:
      modulus = 2048;
      break;
    case DType::kBFloat16:
      modulus = 256;
      break;
    case DType::kInt8:
      modulus = 255;
      break;
    case DType::kUint8:
      modulus = 256;
      is_signed = false;
      break;
    case DType::kBool:
      modulus = 2;
      is_signed = false;
      break;
    default:
      break;
  }
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  std::vector<double> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t code = (i * 7919 + salt * 104729 + (i >> 3)) % modulus;
    values[i] = static_cast<double>(is_signed ? code - modulus / 2 : code);
  }
  return op_test::TensorOf(dtype, std::move(dims), values);
}

// A tester for one node of `op` at `opset` with `outputs` outputs.
inline OpTester Node(std::string op, int64_t opset, int outputs = 1) {
  OpTester t;
  t.op_type = std::move(op);
  t.opset = opset;
  t.num_outputs = outputs;
  return t;
}

// An int64 tensor of rank 1, or a scalar.
inline ir::Tensor I64(const std::vector<int64_t>& v, bool scalar = false) {
  ir::Tensor t(DType::kInt64, scalar ? std::vector<int64_t>{} : std::vector<int64_t>{static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.mutable_values<int64_t>()[i] = v[i];
  return t;
}

// An int32 tensor of shape `dims` (rank 1 of v's length when dims is empty and v has more than one value).
inline ir::Tensor I32(const std::vector<int32_t>& v, std::vector<int64_t> dims = {}) {
  if (dims.empty() && v.size() != 1) dims = {static_cast<int64_t>(v.size())};
  ir::Tensor t(DType::kInt32, dims);
  for (size_t i = 0; i < v.size(); ++i) t.mutable_values<int32_t>()[i] = v[i];
  return t;
}

// An int64 tensor of shape `dims`.
inline ir::Tensor I64Of(const std::vector<int64_t>& dims, const std::vector<int64_t>& v) {
  ir::Tensor t(DType::kInt64, dims);
  for (size_t i = 0; i < v.size(); ++i) t.mutable_values<int64_t>()[i] = v[i];
  return t;
}

// Values of `dtype` uniform in [lo, hi) from a fixed seed (truncated for integer types).
inline ir::Tensor Random(DType dtype, const std::vector<int64_t>& dims, uint32_t seed, double lo = -2, double hi = 2) {
  return op_test::TensorOf(dtype, dims, op_test::RandomValues(static_cast<size_t>(Count(dims)), seed, lo, hi));
}

// `n` indices in [lo, hi) from a fixed seed.
inline std::vector<int64_t> RandomIndices(int64_t n, int64_t lo, int64_t hi, uint32_t seed) {
  const std::vector<double> u = op_test::RandomValues(static_cast<size_t>(n), seed, 0, 1);
  std::vector<int64_t> v(u.size());
  for (size_t i = 0; i < u.size(); ++i) v[i] = std::min(hi - 1, lo + static_cast<int64_t>(u[i] * (hi - lo)));
  return v;
}

// CUDA must reproduce the CPU result bit for bit.
inline void ExpectExact(const OpTester& t, const std::string& what) { ExpectCudaMatchesCpu(t, what, Tolerance{0, 0}); }

// Session::Create on CUDA refuses the node with a message containing `fragment` (the CPU's message).
inline void ExpectCudaCreateError(OpTester t, const std::string& fragment) {
  t.options.device = exec::Device::kCuda;
  auto session = exec::Session::Create(t.BuildModel(), t.options);
  ASSERT_FALSE(session.ok()) << "expected a creation error containing: " << fragment;
  EXPECT_NE(session.status().message().find(fragment), std::string::npos) << session.status().message();
}

// The CPU and the CUDA run both fail with a message containing `fragment`.
inline void ExpectBothRunError(const OpTester& t, const std::string& fragment) {
  OpTester cpu = t;
  cpu.options.device = exec::Device::kCpu;
  StatusOr<std::vector<ir::Tensor>> out = cpu.Run();
  ASSERT_FALSE(out.ok()) << "cpu: expected a run error containing: " << fragment;
  EXPECT_NE(out.status().message().find(fragment), std::string::npos) << out.status().message();
  ExpectCudaRunError(t, fragment);
}

}  // namespace onnxamp::testing::cuda_tensor
