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

inline const std::vector<DType>& FloatDTypes() {
  static const std::vector<DType> v = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64};
  return v;
}

// A tensor of `dtype` holding `values` converted to it (floats rounded to nearest even, integers by static_cast).
inline ir::Tensor Make(DType dtype, std::vector<int64_t> dims, const std::vector<double>& values) {
  ir::Tensor t(dtype, std::move(dims));
  EXPECT_EQ(static_cast<size_t>(t.num_elements()), values.size()) << "test data size";
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

inline ir::Tensor MakeBool(std::vector<int64_t> dims, const std::vector<bool>& values) {
  ir::Tensor t(DType::kBool, std::move(dims));
  auto out = t.mutable_values<bool>();
  for (size_t i = 0; i < out.size() && i < values.size(); ++i) out[i] = values[i];
  return t;
}

// `n` uniform values in [lo, hi) from a fixed seed.
inline std::vector<double> Random(size_t n, uint32_t seed, double lo = -3.0, double hi = 3.0) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(n);
  for (double& x : v) x = dist(gen);
  return v;
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
inline OpTester Tester(std::string op, int64_t opset) {
  OpTester t;
  t.op_type = std::move(op);
  t.opset = opset;
  return t;
}

// Runs the tester and returns its only output (failing the test on an error).
inline ir::Tensor RunOne(const OpTester& t) {
  auto r = t.Run();
  EXPECT_TRUE(r.ok()) << r.status().message();
  if (!r.ok() || r->empty()) return ir::Tensor();
  return (*r)[0];
}

// Expects Session::Create to refuse the node, with `needle` in the message.
inline void ExpectCreateError(const OpTester& t, const std::string& needle) {
  auto s = exec::Session::Create(t.BuildModel(), t.options);
  ASSERT_FALSE(s.ok()) << "session creation should fail with: " << needle;
  EXPECT_NE(s.status().message().find(needle), std::string::npos) << s.status().message();
}

// Expects the session to be created and Run to fail, with `needle` in the message.
inline void ExpectRunError(const OpTester& t, const std::string& needle) {
  auto s = exec::Session::Create(t.BuildModel(), t.options);
  ASSERT_TRUE(s.ok()) << s.status().message();
  auto r = t.Run();
  ASSERT_FALSE(r.ok()) << "run should fail with: " << needle;
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
}

struct DTypeParamName {
  std::string operator()(const ::testing::TestParamInfo<DType>& info) const {
    return std::string(onnxamp::DTypeName(info.param));
  }
};

}  // namespace onnxamp::testing::ew
