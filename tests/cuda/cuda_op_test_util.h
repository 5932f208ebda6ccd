// CUDA kernel tests: run one node on the CPU reference and on CUDA with the same inputs and compare, with a
// per-dtype tolerance table. Every test using these skips (GTEST_SKIP) on machines without a CUDA device.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "runtime/cuda/cuda_context.h"
#include "runtime/cuda/device.h"
#include "runtime/executor/session.h"
#include "tests/runtime/op_tester.h"
#include "tests/runtime/ops/tolerance.h"

namespace onnxamp::testing {

// True when a CUDA device is usable; registers the CUDA backend once.
inline bool CudaAvailable() {
  static const bool available = cuda::RegisterCudaBackend();
  return available;
}

#define ONNXAMP_REQUIRE_CUDA()                                                       \
  do {                                                                               \
    if (!::onnxamp::testing::CudaAvailable()) GTEST_SKIP() << "no CUDA device here"; \
  } while (0)

// Number of elements of a tensor of shape `dims`.
inline int64_t Count(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// How far a CUDA result may be from the CPU reference of the same op. Both round once on store; what differs is
// the order of summation (reductions, GEMM, conv) and the device's exp/log/erf, so a few units in the last place.
inline Tolerance CudaToleranceFor(DType t) {
  switch (t) {
    case DType::kFloat64:
      return {1e-10, 1e-12};
    case DType::kFloat32:
      return {1e-4, 1e-5};
    case DType::kFloat16:
      return {4e-3, 1e-3};
    case DType::kBFloat16:
      return {3e-2, 1e-2};
    default:
      return {0, 0};  // integers and bool: exact
  }
}

// Runs `t` with options.device = cuda. The session must place every node on the device (no CPU fallback) unless
// `allow_cpu_nodes`.
inline StatusOr<std::vector<ir::Tensor>> RunOnCuda(OpTester t, bool allow_cpu_nodes = false) {
  t.options.device = exec::Device::kCuda;
  ONNXAMP_ASSIGN_OR_RETURN(auto session, exec::Session::Create(t.BuildModel(), t.options));
  if (!allow_cpu_nodes && !session->placement().on_cpu.empty()) {
    return Internal("expected every node on cuda: ", session->DescribePlacement());
  }
  return session->Run(t.Feeds());
}

// Runs `t` on the CPU and on CUDA and expects equal output dtypes and dims and values within `tol` (default: the
// table above for each output's dtype). `what` names the case in failure messages.
inline void ExpectCudaMatchesCpu(const OpTester& t, const std::string& what = "",
                                 std::optional<Tolerance> tol = std::nullopt, bool allow_cpu_nodes = false) {
  OpTester cpu = t;
  cpu.options.device = exec::Device::kCpu;
  StatusOr<std::vector<ir::Tensor>> want = cpu.Run();
  ASSERT_TRUE(want.ok()) << what << ": cpu: " << want.status().message();
  StatusOr<std::vector<ir::Tensor>> got = RunOnCuda(t, allow_cpu_nodes);
  ASSERT_TRUE(got.ok()) << what << ": cuda: " << got.status().message();
  ASSERT_EQ(got->size(), want->size()) << what;
  for (size_t i = 0; i < got->size(); ++i) {
    const ir::Tensor& g = (*got)[i];
    const ir::Tensor& w = (*want)[i];
    ASSERT_TRUE(g.on_host()) << what << ": output " << i << " was not copied to the host";
    ASSERT_EQ(g.dtype(), w.dtype()) << what << ": output " << i;
    ASSERT_EQ(g.dims(), w.dims()) << what << ": output " << i;
    const Tolerance t_out = tol.value_or(CudaToleranceFor(g.dtype()));
    ExpectClose(g, AsDoubles(w), what + " output " + std::to_string(i), t_out);
    // Exact integers are compared as stored: 64-bit values above 2^53 differ in bits a double does not hold (4-bit
    // types are left out: the pad nibble of an odd count is no value).
    if (IsInteger(g.dtype()) && DTypeBits(g.dtype()) >= 8 && t_out.atol == 0 && t_out.rtol == 0 && g.nbytes() > 0) {
      ASSERT_EQ(g.nbytes(), w.nbytes()) << what << ": output " << i;
      EXPECT_EQ(std::memcmp(g.data(), w.data(), g.nbytes()), 0) << what << ": output " << i << " differs in its bits";
    }
  }
}

// Expects the CUDA session to be created and the run to fail with a message containing `fragment`.
inline void ExpectCudaRunError(const OpTester& t, const std::string& fragment) {
  StatusOr<std::vector<ir::Tensor>> out = RunOnCuda(t, /*allow_cpu_nodes=*/true);
  ASSERT_FALSE(out.ok()) << "expected a run error containing: " << fragment;
  EXPECT_NE(out.status().message().find(fragment), std::string::npos) << out.status().message();
}

}  // namespace onnxamp::testing
