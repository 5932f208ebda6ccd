// Shared helpers for the linalg kernel tests (MatMul, Gemm, Conv, ConvTranspose, pooling, Einsum): choosing the
// implementation, random inputs rounded to the element type, and a comparison whose tolerance grows with the
// magnitude of the summed terms (the standard error bound of a dot product).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "runtime/ops/common/gemm.h"
#include "runtime/ops/common/gemm_util.h"
#include "tests/runtime/op_tester.h"
#include "tests/runtime/ops/tolerance.h"
#include "tests/runtime/session_options_util.h"

namespace onnxamp::testing {

// The problem `f` (a float reference problem) on other operands: same shape, layout, alpha and beta.
template <typename T>
ops::GemmArgs<T, float> WithOperands(const ops::GemmArgs<float, float>& f, const T* a, const T* b, float* c) {
  ops::GemmArgs<T, float> g;
  g.batch = f.batch;
  g.m = f.m;
  g.n = f.n;
  g.k = f.k;
  g.trans_a = f.trans_a;
  g.trans_b = f.trans_b;
  g.a = a;
  g.lda = f.lda;
  g.batch_stride_a = f.batch_stride_a;
  g.b = b;
  g.ldb = f.ldb;
  g.batch_stride_b = f.batch_stride_b;
  g.c = c;
  g.ldc = f.ldc;
  g.batch_stride_c = f.batch_stride_c;
  g.alpha = f.alpha;
  g.beta = f.beta;
  return g;
}

// An OpTester for `op` at `opset` (the default options: CPU, one thread).
inline OpTester MakeTester(std::string op, int64_t opset) {
  OpTester t;
  t.op_type = std::move(op);
  t.opset = opset;
  return t;
}

// Sets how oneDNN uses the session's threads in its scope, and restores the previous mode after.
class ScopedOneDnnThreading {
 public:
  explicit ScopedOneDnnThreading(ops::OneDnnThreading mode) : saved_(ops::GetOneDnnThreading()) {
    ops::SetOneDnnThreading(mode);
  }
  ~ScopedOneDnnThreading() { ops::SetOneDnnThreading(saved_); }
  ScopedOneDnnThreading(const ScopedOneDnnThreading&) = delete;
  ScopedOneDnnThreading& operator=(const ScopedOneDnnThreading&) = delete;

 private:
  ops::OneDnnThreading saved_;
};

inline const char* ThreadingName(ops::OneDnnThreading mode) {
  return mode == ops::OneDnnThreading::kShared ? "shared" : "split";
}

// Every implementation in this build: reference, portable, and oneDNN when built with it.
inline std::vector<ops::LinalgImpl> AvailableImpls() {
  std::vector<ops::LinalgImpl> impls = {ops::LinalgImpl::kReference, ops::LinalgImpl::kPortable};
  if (ops::OneDnnAvailable()) impls.push_back(ops::LinalgImpl::kOneDnn);
  return impls;
}

// `v` as stored in `dtype` (rounded to nearest even for fp16/bf16, truncated for integers).
inline double RoundTo(DType dtype, double v) {
  switch (dtype) {
    case DType::kFloat32:
      return static_cast<float>(v);
    case DType::kFloat16:
      return static_cast<float>(Float16(static_cast<float>(v)));
    case DType::kBFloat16:
      return static_cast<float>(BFloat16(static_cast<float>(v)));
    case DType::kFloat64:
      return v;
    default:
      return std::trunc(v);
  }
}

// n values uniform in [lo, hi), rounded to `dtype`, from a fixed seed.
inline std::vector<double> RandomValues(DType dtype, int64_t n, uint32_t seed, double lo = -1, double hi = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = RoundTo(dtype, dist(rng));
  return v;
}

// A tensor of `dtype` holding `values` (exactly representable: see RoundTo).
using op_test::TensorOf;

// Expects |got - want| <= rtol * (|want| + magnitude) + atol elementwise, where magnitude[i] is the sum of the
// absolute values of the terms summed into element i (empty: zero). Integers must match exactly.
inline void ExpectNear(const ir::Tensor& got, const std::vector<double>& want, const std::vector<double>& magnitude,
                       const std::string& what) {
  const Tolerance tol = ToleranceFor(got.dtype());
  const std::vector<double> values = AsDoubles(got);
  ASSERT_EQ(values.size(), want.size()) << what;
  int failures = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    if (std::isnan(want[i]) && std::isnan(values[i])) continue;
    const double mag = magnitude.empty() ? 0 : magnitude[i];
    const double allowed = tol.rtol * (std::abs(want[i]) + mag) + tol.atol;
    if (!(std::abs(values[i] - want[i]) <= allowed) && failures++ < 5) {
      ADD_FAILURE() << what << " (" << DTypeName(got.dtype()) << "): element " << i << " is " << values[i]
                    << ", expected " << want[i] << " (allowed error " << allowed << ")";
    }
  }
}

// Runs `t` with kernels created under `impl`; fails the test (and returns no outputs) on an error.
inline std::vector<ir::Tensor> RunWith(const OpTester& t, ops::LinalgImpl impl) {
  OpTester with = t;
  with.options.kernels.linalg = impl;
  auto r = with.Run();
  EXPECT_TRUE(r.ok()) << ops::LinalgImplName(impl) << ": " << r.status().ToString();
  return r.ok() ? std::move(r).value() : std::vector<ir::Tensor>{};
}

// Test-name suffix for a dtype.
inline std::string DTypeParamName(const ::testing::TestParamInfo<DType>& info) {
  return std::string(DTypeName(info.param));
}

}  // namespace onnxamp::testing
