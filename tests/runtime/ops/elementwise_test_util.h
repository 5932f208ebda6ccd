// Helpers for the elementwise kernel tests: tensors from doubles rounded to the element type (so a double
// reference sees exactly what the kernel sees), seeded random values, and error checks on one message.
#pragma once

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "runtime/ops/common/broadcast.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "tests/runtime/op_tester.h"
#include "tests/runtime/ops/tolerance.h"

namespace onnxamp::testing::ew {

using op_test::DTypeParamName;
using op_test::ExpectCreateError;
using op_test::ExpectRunError;

inline const std::vector<DType>& FloatDTypes() { return op_test::FloatTypes(); }

// A tensor of `dtype` holding `values` converted to it (floats rounded to nearest even, integers by static_cast).
inline ir::Tensor Make(DType dtype, std::vector<int64_t> dims, const std::vector<double>& values) {
  ir::Tensor t = op_test::TensorOf(dtype, std::move(dims), values);
  EXPECT_EQ(static_cast<size_t>(t.num_elements()), values.size()) << "test data size";
  return t;
}

inline ir::Tensor MakeBool(std::vector<int64_t> dims, const std::vector<bool>& values) {
  ir::Tensor t(DType::kBool, std::move(dims));
  auto out = t.mutable_values<bool>();
  for (size_t i = 0; i < out.size() && i < values.size(); ++i) out[i] = values[i];
  return t;
}

// `n` uniform values in [lo, hi) from a fixed seed.
inline std::vector<double> Random(size_t n, uint32_t seed, double lo = -3.0, double hi = 3.0) {
  return op_test::RandomValues(n, seed, lo, hi);
}

// `n` uniform integers in [lo, hi] from a fixed seed, as doubles.
inline std::vector<double> RandomInts(size_t n, uint32_t seed, int64_t lo, int64_t hi) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int64_t> dist(lo, hi);
  std::vector<double> v(n);
  for (double& x : v) x = static_cast<double>(dist(gen));
  return v;
}

inline int64_t NumElements(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// A tester for one node of `op` at `opset` (default domain, one output, one thread).
inline OpTester Tester(std::string op, int64_t opset) { return op_test::Op(std::move(op), opset); }

// Runs the tester and returns its only output (failing the test on an error).
inline ir::Tensor RunOne(const OpTester& t) {
  auto r = t.Run();
  EXPECT_TRUE(r.ok()) << r.status().message();
  if (!r.ok() || r->empty()) return ir::Tensor();
  return (*r)[0];
}

}  // namespace onnxamp::testing::ew
