// CUDA device queries and error conversion: these run (and must pass) on machines without a GPU or driver.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/device.h"

namespace onnxamp::cuda {
namespace {

TEST(CudaDevice, CountNeverAborts) {
  const int count = CudaDeviceCount();
  EXPECT_GE(count, 0);
  EXPECT_EQ(CudaDeviceCount(), count);  // stable across calls
}

TEST(CudaDevice, MissingDevicesAreStatusesNotAborts) {
  const int count = CudaDeviceCount();
  for (int device : {-1, count, count + 7}) {
    StatusOr<CudaDeviceInfo> info = GetCudaDeviceInfo(device);
    ASSERT_FALSE(info.ok()) << device;
    EXPECT_NE(info.status().message().find("CUDA device " + std::to_string(device)), std::string::npos)
        << info.status().message();
  }
  if (count == 0) {
    StatusOr<CudaDeviceInfo> info = GetCudaDeviceInfo(0);
    ASSERT_FALSE(info.ok());
    EXPECT_TRUE(info.status().code() == StatusCode::kFailedPrecondition ||
                info.status().code() == StatusCode::kNotFound)
        << info.status().ToString();
    EXPECT_EQ(DescribeCudaDevices().rfind("no CUDA device", 0), 0u) << DescribeCudaDevices();
  }
  EXPECT_EQ(DescribeCudaDevices().find('\n'), std::string::npos);
}

TEST(CudaDevice, InfoOfEveryVisibleDevice) {
  const int count = CudaDeviceCount();
  if (count == 0) GTEST_SKIP() << "no CUDA device";
  for (int i = 0; i < count; ++i) {
    StatusOr<CudaDeviceInfo> info = GetCudaDeviceInfo(i);
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    EXPECT_EQ(info->index, i);
    EXPECT_FALSE(info->name.empty());
    EXPECT_GE(info->compute_major, 5);
    EXPECT_GT(info->total_memory_bytes, uint64_t{1} << 28);
    EXPECT_GT(info->multiprocessor_count, 0);
    EXPECT_GT(info->runtime_version, 0);
    const std::string line = DescribeCudaDevice(*info);
    EXPECT_NE(line.find(info->name), std::string::npos) << line;
    EXPECT_NE(line.find("sm_" + std::to_string(info->compute_major)), std::string::npos) << line;
    std::printf("%s\n", line.c_str());
  }
  EXPECT_EQ(DescribeCudaDevices().rfind(std::to_string(count) + " CUDA device", 0), 0u) << DescribeCudaDevices();
}

TEST(CudaCheck, ErrorsBecomeStatusesNamingTheCallAndContext) {
  Status oom = CudaErrorToStatus(cudaErrorMemoryAllocation, "cudaMalloc(&p, 64)", "weights of 'fc1'");
  EXPECT_EQ(oom.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(oom.message().rfind("weights of 'fc1': cudaMalloc(&p, 64) failed: ", 0), 0u) << oom.message();
  EXPECT_NE(oom.message().find("cudaErrorMemoryAllocation"), std::string::npos) << oom.message();

  Status none = CudaErrorToStatus(cudaErrorNoDevice, "cudaSetDevice(0)");
  EXPECT_EQ(none.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(none.message().rfind("cudaSetDevice(0) failed: ", 0), 0u) << none.message();

  EXPECT_EQ(CudaErrorToStatus(cudaErrorInvalidValue, "f()").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CudaErrorToStatus(cudaErrorLaunchFailure, "f()").code(), StatusCode::kInternal);
}

Status FailingCall(int* calls) {
  ++*calls;
  ONNXAMP_CUDA_RETURN_IF_ERROR(cudaErrorInvalidValue, "copying tensor '", "x", "'");
  ++*calls;
  return Status::Ok();
}

Status SucceedingCall(int* calls) {
  ONNXAMP_CUDA_RETURN_IF_ERROR(cudaSuccess);
  ++*calls;
  return Status::Ok();
}

TEST(CudaCheck, ReturnIfErrorMacro) {
  int calls = 0;
  Status st = FailingCall(&calls);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message().rfind("copying tensor 'x': cudaErrorInvalidValue failed: ", 0), 0u) << st.message();
  EXPECT_TRUE(SucceedingCall(&calls).ok());
  EXPECT_EQ(calls, 2);
}

}  // namespace
}  // namespace onnxamp::cuda
