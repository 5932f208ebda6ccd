// CUDA device discovery through the runtime API, turning every failure (no driver, no device) into a Status.
#include "runtime/cuda/device.h"

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdio>

#include "runtime/cuda/cuda_check.h"

namespace onnxamp::cuda {
namespace {

// cudaGetDeviceCount's result: the count, or the error that explains why there is none.
struct DeviceCount {
  int count = 0;
  cudaError_t error = cudaSuccess;
};

// Set before the first CUDA runtime call: every path into the runtime (discovery, CudaContext::Create) starts here.
std::atomic<bool> g_runtime_used{false};

DeviceCount QueryDeviceCount() {
  g_runtime_used.store(true);
  DeviceCount result;
  result.error = cudaGetDeviceCount(&result.count);
  if (result.error != cudaSuccess) {
    (void)cudaGetLastError();  // "no device" is an answer, not an error to report later
    result.count = 0;
  }
  return result;
}

std::string VersionString(int version) { return StrCat(version / 1000, ".", (version % 1000) / 10); }

}  // namespace

bool CudaRuntimeUsed() { return g_runtime_used.load(); }

int CudaDeviceCount() { return QueryDeviceCount().count; }

StatusOr<CudaDeviceInfo> GetCudaDeviceInfo(int device) {
  const DeviceCount devices = QueryDeviceCount();
  if (devices.error != cudaSuccess) {
    return CudaErrorToStatus(devices.error, "cudaGetDeviceCount", StrCat("CUDA device ", device));
  }
  if (device < 0 || device >= devices.count) {
    return NotFound("CUDA device ", device, " does not exist (", devices.count, " device",
                    devices.count == 1 ? "" : "s", " visible)");
  }
  cudaDeviceProp prop;
  ONNXAMP_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, device), "CUDA device ", device);
  CudaDeviceInfo info;
  info.index = device;
  info.name = prop.name;
  info.compute_major = prop.major;
  info.compute_minor = prop.minor;
  info.total_memory_bytes = prop.totalGlobalMem;
  info.multiprocessor_count = prop.multiProcessorCount;
  info.l2_cache_bytes = prop.l2CacheSize;
  info.shared_memory_per_block_optin = prop.sharedMemPerBlockOptin;
  ONNXAMP_CUDA_RETURN_IF_ERROR(cudaDriverGetVersion(&info.driver_version), "CUDA device ", device);
  ONNXAMP_CUDA_RETURN_IF_ERROR(cudaRuntimeGetVersion(&info.runtime_version), "CUDA device ", device);
  return info;
}

std::string DescribeCudaDevice(const CudaDeviceInfo& info) {
  char memory[32];
  std::snprintf(memory, sizeof(memory), "%.1f GiB", static_cast<double>(info.total_memory_bytes) / (1 << 30));
  return StrCat("cuda:", info.index, " ", info.name, " (sm_", info.compute_major, info.compute_minor, ", ",
                info.multiprocessor_count, " SMs, ", memory, ", driver ", VersionString(info.driver_version),
                ", runtime ", VersionString(info.runtime_version), ")");
}

std::string DescribeCudaDevices() {
  const DeviceCount devices = QueryDeviceCount();
  if (devices.count == 0) {
    return devices.error != cudaSuccess ? StrCat("no CUDA device (", cudaGetErrorString(devices.error), ")")
                                        : std::string("no CUDA device");
  }
  std::string line = StrCat(devices.count, " CUDA device", devices.count == 1 ? "" : "s", ": ");
  for (int i = 0; i < devices.count; ++i) {
    if (i > 0) line += "; ";
    StatusOr<CudaDeviceInfo> info = GetCudaDeviceInfo(i);
    line += info.ok() ? DescribeCudaDevice(*info) : StrCat("cuda:", i, " unavailable: ", info.status().message());
  }
  return line;
}

}  // namespace onnxamp::cuda
