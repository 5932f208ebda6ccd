// Helpers shared by the CUDA norm_reduce family tests (norm_reduce_test.cc, norm_loss_test.cc): element counts and
// checks that the CPU and the CUDA kernels refuse the same node with the same message.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tests/cuda/cuda_op_test_util.h"

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

}  // namespace onnxamp::testing
