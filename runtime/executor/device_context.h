// Devices other than the CPU as the executor sees them: a backend (registered explicitly by the program that wants
// it, e.g. `cuda::RegisterCudaBackend()`), and a per-session context holding the device's stream, library handles
// and memory. The runtime library itself links no device library; onnxamp_cuda implements these interfaces.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/executor/kernel.h"
#include "runtime/ir/model.h"
#include "runtime/ir/tensor.h"

namespace onnxamp::exec {

struct SessionOptions;

struct DeviceMemoryStats {
  uint64_t in_use_bytes = 0;        // handed out by Allocate and not yet released
  uint64_t peak_bytes = 0;          // most in use at once since the last ResetPeak
  uint64_t reserved_bytes = 0;      // held from the device (in use + cached for reuse)
  uint64_t device_allocations = 0;  // calls into the device's own allocator (cudaMalloc) since the context began
};

// One session's view of its device. All work a context starts (kernels, copies) is ordered on one stream, so
// memory released by one kernel may be handed to the next without synchronisation.
class DeviceContext {
 public:
  virtual ~DeviceContext() = default;

  virtual Device device() const = 0;
  // Makes this context's device the current one of the calling thread (CUDA: cudaSetDevice). The executor calls it
  // at the start of Create's uploads and of every run, so sessions on different devices may share a thread.
  virtual Status Activate() { return Status::Ok(); }
  // "cuda:0 NVIDIA H100 80GB HBM3 (sm_90, ...)"
  virtual std::string Describe() const = 0;

  // `bytes` of device memory (uninitialised), returned to the context's cache when the last reference to the Buffer
  // goes. The Buffer's kind() is the device's MemoryKind. ResourceExhausted naming the size when the device is full.
  virtual StatusOr<std::shared_ptr<ir::Buffer>> Allocate(size_t bytes) = 0;

  // Copies ordered on the context's stream. HostToDevice may return before the copy is done (the source must stay
  // alive and unchanged until the next Synchronize); DeviceToHost returns when the bytes are on the host.
  virtual Status CopyHostToDevice(const void* src, void* dst, size_t bytes) = 0;
  virtual Status CopyDeviceToDevice(const void* src, void* dst, size_t bytes) = 0;
  virtual Status CopyDeviceToHost(const void* src, void* dst, size_t bytes) = 0;
  // Waits for everything started on the stream; reports an error a kernel raised while running.
  virtual Status Synchronize() = 0;

  // Device time between BeginTiming and EndTiming (events on the stream), in seconds; EndTiming synchronises.
  virtual Status BeginTiming() = 0;
  virtual StatusOr<double> EndTiming() = 0;

  // Per-node profiling (RunOptions::profile): BeginProfile(n) prepares n marks, Mark(i) records mark i on the stream
  // (after the work queued so far), EndProfile waits for the device and returns the seconds between consecutive marks
  // (n - 1 values; a mark never recorded gives 0 for both of its intervals).
  virtual Status BeginProfile(size_t marks) = 0;
  virtual Status Mark(size_t i) = 0;
  virtual StatusOr<std::vector<double>> EndProfile() = 0;

  // `bytes` of host memory that copies to and from the device run fastest with (CUDA: page-locked memory from a
  // cache, so that a download needs no staging and touches no fresh pages). The executor puts outputs it copies to
  // the host there. The default is ordinary host memory.
  virtual StatusOr<std::shared_ptr<ir::Buffer>> AllocateHost(size_t bytes) {
    return std::make_shared<ir::Buffer>(bytes, ir::Buffer::Init::kUninitialized);
  }

  virtual DeviceMemoryStats memory_stats() const = 0;
  virtual void ResetPeak() = 0;
  // The device's memory in bytes, the session's default limit for device memory (0: unknown, no limit checked).
  virtual uint64_t total_memory_bytes() const { return 0; }
};

// What a device backend gives the executor.
struct DeviceBackend {
  Device device = Device::kCuda;
  // Kernels of this device (the CPU registry serves nodes the device has no kernel for).
  const KernelRegistry* kernels = nullptr;
  // A context for one session (device index, stream, handles); called by Session::Create.
  StatusOr<std::unique_ptr<DeviceContext>> (*create_context)(const SessionOptions& options) = nullptr;
  // Optional device-specific graph rewrites on the session's copy of the model, run after the generic inference
  // optimizer (fusions into ops only this device's kernels implement). Null: none.
  Status (*optimize_graph)(ir::Model& model, const SessionOptions& options) = nullptr;
};

// Registers `backend` for its device (a later registration for the same device replaces it). Thread-safe; call it
// before creating sessions on that device.
void RegisterDeviceBackend(const DeviceBackend& backend);
// Removes the backend registered for `device`, if any (tests that register a stand-in backend restore the table
// with it). Sessions created before keep working: they hold their own context and kernels.
void UnregisterDeviceBackend(Device device);
// The backend registered for `device`, or null. The pointer stays valid until that device's entry is replaced or
// removed.
const DeviceBackend* FindDeviceBackend(Device device);

}  // namespace onnxamp::exec
