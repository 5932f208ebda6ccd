// Helpers shared by the reduction, normalisation, softmax, top-k and loss kernel tests: float-type parameters with
// readable names, tensors built from doubles (rounded to the element type, so a double reference sees exactly the
// values the kernel sees), seeded random data, and one-line error checks.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/ops/common/dtype_dispatch.h"
#include "tests/runtime/op_tester.h"
#include "tests/runtime/ops/tolerance.h"

namespace onnxamp::testing {

using op_test::DTypeParamName;
using op_test::ExpectCreateError;
using op_test::ExpectRunError;
using op_test::FloatTypes;
using op_test::Op;
using op_test::TensorOf;

inline ir::Tensor Int64Tensor(std::vector<int64_t> dims, const std::vector<int64_t>& values) {
  ir::Tensor t(DType::kInt64, std::move(dims));
  auto out = t.mutable_values<int64_t>();
  for (size_t i = 0; i < out.size() && i < values.size(); ++i) out[i] = values[i];
  return t;
}

// `n` uniform values in [lo, hi) from a fixed seed.
inline std::vector<double> RandomValues(size_t n, uint32_t seed, double lo = -2.0, double hi = 2.0) {
  return op_test::RandomValues(n, seed, lo, hi);
}

// `values` as the element type would hold them (what the kernel reads).
inline std::vector<double> Rounded(DType dtype, const std::vector<double>& values) {
  return AsDoubles(TensorOf(dtype, {static_cast<int64_t>(values.size())}, values));
}

// Runs the tester and returns its outputs, failing the test (with the status) when the run fails.
inline std::vector<ir::Tensor> RunOk(const OpTester& t) {
  StatusOr<std::vector<ir::Tensor>> out = t.Run();
  EXPECT_TRUE(out.ok()) << out.status().message();
  if (!out.ok()) return {};
  return *std::move(out);
}

}  // namespace onnxamp::testing
