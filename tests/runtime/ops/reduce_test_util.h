// Helpers shared by the reduction, normalisation, softmax, top-k and loss kernel tests: float-type parameters with
// readable names, tensors built from doubles (rounded to the element type, so a double reference sees exactly the
// values the kernel sees), seeded random data, and one-line error checks.
#pragma once

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "runtime/ops/common/dtype_dispatch.h"
#include "tests/runtime/op_tester.h"
#include "tests/runtime/ops/tolerance.h"

namespace onnxamp::testing {

inline const std::vector<DType>& FloatTypes() {
  static const std::vector<DType> types = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64};
  return types;
}

// Test-name suffix for a dtype parameter ("float16").
struct DTypeParamName {
  std::string operator()(const ::testing::TestParamInfo<DType>& info) const {
    return std::string(DTypeName(info.param));
  }
};

// A tester for `op` at `opset` (default domain).
inline OpTester Op(std::string op, int64_t opset) {
  OpTester t;
  t.op_type = std::move(op);
  t.opset = opset;
  return t;
}

// A tensor of `dtype` (any numeric type) holding `values` rounded to that type.
inline ir::Tensor TensorOf(DType dtype, std::vector<int64_t> dims, const std::vector<double>& values) {
  ir::Tensor t(dtype, std::move(dims));
  Status st = ops::DispatchNumericOrBool(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto out = t.mutable_values<T>();
    for (size_t i = 0; i < out.size() && i < values.size(); ++i) {
      out[i] = ops::Store<T>(static_cast<ops::ComputeType<T>>(values[i]));
    }
    return Status::Ok();
  });
  EXPECT_TRUE(st.ok()) << st.message();
  return t;
}

inline ir::Tensor Int64Tensor(std::vector<int64_t> dims, const std::vector<int64_t>& values) {
  ir::Tensor t(DType::kInt64, std::move(dims));
  auto out = t.mutable_values<int64_t>();
  for (size_t i = 0; i < out.size() && i < values.size(); ++i) out[i] = values[i];
  return t;
}

// `n` uniform values in [lo, hi) from a fixed seed.
inline std::vector<double> RandomValues(size_t n, uint32_t seed, double lo = -2.0, double hi = 2.0) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(n);
  for (double& x : v) x = dist(gen);
  return v;
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

// Expects Session::Create to refuse the node with a message containing `fragment`.
inline void ExpectCreateError(const OpTester& t, const std::string& fragment) {
  auto session = exec::Session::Create(t.BuildModel(), t.options);
  ASSERT_FALSE(session.ok()) << "expected a creation error containing: " << fragment;
  EXPECT_NE(session.status().message().find(fragment), std::string::npos) << session.status().message();
}

// Expects the session to be created and the run to fail with a message containing `fragment`.
inline void ExpectRunError(const OpTester& t, const std::string& fragment) {
  auto session = exec::Session::Create(t.BuildModel(), t.options);
  ASSERT_TRUE(session.ok()) << session.status().message();
  StatusOr<std::vector<ir::Tensor>> out = t.Run();
  ASSERT_FALSE(out.ok()) << "expected a run error containing: " << fragment;
  EXPECT_NE(out.status().message().find(fragment), std::string::npos) << out.status().message();
}

}  // namespace onnxamp::testing
