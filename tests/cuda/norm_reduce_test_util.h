// Helpers shared by the CUDA norm_reduce family tests (norm_reduce_test.cc, norm_loss_test.cc, grad_ops_test.cc):
// element counts, checks that the CPU and the CUDA kernels refuse the same node with the same message, and loss
// labels.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/cuda/cuda_op_test_util.h"
#include "tests/runtime/ops/reduce_test_util.h"

namespace onnxamp::testing {

// Both the CPU and the CUDA session refuse the node at creation with a message containing `fragment`.
inline void ExpectCreateErrorOnBoth(OpTester t, const std::string& fragment) {
  t.options.device = exec::Device::kCpu;
  auto cpu = exec::Session::Create(t.BuildModel(), t.options);
  t.options.device = exec::Device::kCuda;
  auto cuda = exec::Session::Create(t.BuildModel(), t.options);
  ASSERT_FALSE(cpu.ok()) << "cpu: expected an error containing: " << fragment;
  ASSERT_FALSE(cuda.ok()) << "cuda: expected an error containing: " << fragment;
  EXPECT_NE(cpu.status().message().find(fragment), std::string::npos) << cpu.status().message();
  EXPECT_NE(cuda.status().message().find(fragment), std::string::npos) << cuda.status().message();
}

// Both runs fail with a message containing `fragment`.
inline void ExpectRunErrorOnBoth(const OpTester& t, const std::string& fragment) {
  OpTester cpu = t;
  cpu.options.device = exec::Device::kCpu;
  StatusOr<std::vector<ir::Tensor>> out = cpu.Run();
  ASSERT_FALSE(out.ok()) << "cpu: expected a run error containing: " << fragment;
  EXPECT_NE(out.status().message().find(fragment), std::string::npos) << out.status().message();
  ExpectCudaRunError(t, fragment);
}

// Labels in [0, classes) with about one in five set to `ignore` when `use_ignore`.
inline ir::Tensor Labels(DType dtype, const std::vector<int64_t>& dims, int64_t classes, uint32_t seed, bool use_ignore,
                         int64_t ignore) {
  std::vector<double> v = RandomValues(Count(dims), seed, 0, static_cast<double>(classes));
  std::vector<double> r = RandomValues(v.size(), seed + 1, 0, 1);
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = std::floor(v[i]);
    if (use_ignore && r[i] < 0.2) v[i] = static_cast<double>(ignore);
  }
  return TensorOf(dtype, dims, v);
}

}  // namespace onnxamp::testing
