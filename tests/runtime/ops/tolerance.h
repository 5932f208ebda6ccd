// One tolerance table per element type for kernel tests, a comparison helper that reports the worst element, and
// the helpers the elementwise and reduction test utilities share (namespace op_test: tensors from doubles, seeded
// random values, one-line error checks).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "runtime/ir/tensor.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "tests/runtime/op_tester.h"

namespace onnxamp::testing {

struct Tolerance {
  double rtol;
  double atol;
};

// fp16/bf16 results are computed in float and rounded once on store: allow two units in the last place.
inline Tolerance ToleranceFor(DType t) {
  switch (t) {
    case DType::kFloat64:
      return {1e-12, 1e-14};
    case DType::kFloat32:
      return {1e-5, 1e-6};
    case DType::kFloat16:
      return {2e-3, 1e-4};
    case DType::kBFloat16:
      return {1.6e-2, 1e-3};
    default:
      return {0, 0};  // integers and bool: exact
  }
}

// Every element of `t` as double (float types via their compute type, integers and bool exactly).
inline std::vector<double> AsDoubles(const ir::Tensor& t) {
  std::vector<double> out;
  Status st = ops::DispatchNumericOrBool(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    for (T v : t.values<T>()) out.push_back(static_cast<double>(ops::Load<T>(v)));
    return Status::Ok();
  });
  EXPECT_TRUE(st.ok()) << st.message();
  return out;
}

// Expects |got - want| <= atol + rtol * |want| elementwise with the tolerance of got's dtype (NaN matches NaN).
inline void ExpectClose(const ir::Tensor& got, const std::vector<double>& want, const std::string& what = "",
                        Tolerance tol = {-1, -1}) {
  if (tol.rtol < 0) tol = ToleranceFor(got.dtype());
  std::vector<double> values = AsDoubles(got);
  ASSERT_EQ(values.size(), want.size()) << what;
  size_t worst = 0;
  double worst_excess = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    if (std::isnan(want[i]) && std::isnan(values[i])) continue;
    if (std::isinf(want[i]) && values[i] == want[i]) continue;
    const double excess = std::abs(values[i] - want[i]) - (tol.atol + tol.rtol * std::abs(want[i]));
    if (!(excess <= 0) && (worst_excess == 0 || !(excess <= worst_excess))) {
      worst = i;
      worst_excess = std::isnan(excess) ? INFINITY : excess;
    }
  }
  EXPECT_EQ(worst_excess, 0) << what << " (" << DTypeName(got.dtype()) << "): element " << worst << " is "
                             << values[worst] << ", expected " << want[worst] << " (rtol " << tol.rtol << ", atol "
                             << tol.atol << ")";
}

// Shared by elementwise_test_util.h and reduce_test_util.h, which bring these names into their namespaces. Kept in
// a namespace of their own so that they do not clash with the same names in the other test utilities (linalg,
// tensor ops), which some tests include next to this header.
namespace op_test {

// The floating-point element types kernels are tested on.
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

// A tester for one node of `op` at `opset` (default domain, one output, one thread).
inline OpTester Op(std::string op, int64_t opset) {
  OpTester t;
  t.op_type = std::move(op);
  t.opset = opset;
  return t;
}

// A tensor of `dtype` (any numeric type or bool) holding `values` converted to it: floats rounded to nearest even,
// integers by static_cast, so that a double reference sees exactly the values the kernel sees.
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

// `n` uniform values in [lo, hi) from a fixed seed.
inline std::vector<double> RandomValues(size_t n, uint32_t seed, double lo, double hi) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(n);
  for (double& x : v) x = dist(gen);
  return v;
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

}  // namespace op_test
}  // namespace onnxamp::testing
