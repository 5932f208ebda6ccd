// CUDA device discovery: how many devices there are and what each one is. Safe without a driver or a GPU.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/common/status.h"

namespace onnxamp::cuda {

struct CudaDeviceInfo {
  int index = 0;
  std::string name;       // "NVIDIA H100 80GB HBM3"
  int compute_major = 0;  // compute capability, 9.0 for Hopper
  int compute_minor = 0;
  uint64_t total_memory_bytes = 0;
  int multiprocessor_count = 0;
  int l2_cache_bytes = 0;
  uint64_t shared_memory_per_block_optin = 0;  // the most shared memory one block may opt into
  int driver_version = 0;                      // CUDA driver API version, 12080 for 12.8
  int runtime_version = 0;                     // CUDA runtime version this binary carries
};

// Number of CUDA devices visible to this process. 0 when there is no driver, no device, or the driver is too old
// for this runtime; never aborts.
int CudaDeviceCount();

// Whether this process has called the CUDA runtime through the backend: device discovery (CudaDeviceCount,
// GetCudaDeviceInfo, DescribeCudaDevices, RegisterCudaBackend) or a CudaContext, each of which asks for the device
// count first. For checks that a process meant to fork CUDA users, or to start CUDA worker processes, never initialised
// CUDA itself. Does not call CUDA.
bool CudaRuntimeUsed();

// Properties of device `device` (0-based). A non-OK Status, never an abort, when the index is out of range or
// there is no usable driver or device.
StatusOr<CudaDeviceInfo> GetCudaDeviceInfo(int device);

// One line for one device: "cuda:0 NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, 79.1 GiB, driver 12.8, runtime 13.0)".
std::string DescribeCudaDevice(const CudaDeviceInfo& info);

// One line for every device, as tools print it: "2 CUDA devices: cuda:0 ...; cuda:1 ..." or "no CUDA device
// (<reason>)".
std::string DescribeCudaDevices();

}  // namespace onnxamp::cuda
