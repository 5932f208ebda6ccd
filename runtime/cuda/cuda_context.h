// The CUDA backend's per-session state: one stream, cuBLASLt and cuDNN handles created once, a stream-ordered
// caching allocator, a reusable library workspace, and event timing. CUDA kernels reach it via GetCudaContext(ctx).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/cuda/device.h"
#include "runtime/executor/device_context.h"
#include "runtime/executor/kernel.h"

namespace onnxamp::cuda {

class CachingAllocator;     // runtime/cuda/caching_allocator.h
class PinnedHostAllocator;  // runtime/cuda/pinned_allocator.h

class CudaContext : public exec::DeviceContext {
 public:
  // Selects device `device_index`, creates a non-blocking stream, cuBLASLt and cuDNN handles bound to that stream,
  // and an allocator. FailedPrecondition when there is no such device.
  static StatusOr<std::unique_ptr<CudaContext>> Create(int device_index);
  ~CudaContext() override;

  // exec::DeviceContext
  exec::Device device() const override { return exec::Device::kCuda; }
  std::string Describe() const override;
  Status Activate() override;
  StatusOr<std::shared_ptr<ir::Buffer>> Allocate(size_t bytes) override;
  Status CopyHostToDevice(const void* src, void* dst, size_t bytes) override;
  Status CopyDeviceToDevice(const void* src, void* dst, size_t bytes) override;
  Status CopyDeviceToHost(const void* src, void* dst, size_t bytes) override;
  Status Synchronize() override;
  Status BeginTiming() override;
  StatusOr<double> EndTiming() override;
  Status BeginProfile(size_t marks) override;
  Status Mark(size_t i) override;
  StatusOr<std::vector<double>> EndProfile() override;
  // Page-locked host memory from the context's cache.
  StatusOr<std::shared_ptr<ir::Buffer>> AllocateHost(size_t bytes) override;
  exec::DeviceMemoryStats memory_stats() const override;
  void ResetPeak() override;
  uint64_t total_memory_bytes() const override { return info_.total_memory_bytes; }

  int device_index() const { return info_.index; }
  const CudaDeviceInfo& info() const { return info_; }
  cudaStream_t stream() const { return stream_; }
  cublasLtHandle_t cublaslt() const { return cublaslt_; }
  cudnnHandle_t cudnn() const { return cudnn_; }

  // A scratch area of at least `bytes` for cuBLASLt / cuDNN workspaces and kernels' temporaries, valid until the
  // next Workspace call on this context (work on the one stream is ordered, so the next kernel may reuse it). Grows
  // by reallocating; null for bytes == 0.
  StatusOr<void*> Workspace(size_t bytes);

  // CUDA Graph capture (trainer/cuda/cuda_training.cc). While retaining, every block Allocate and Workspace hand out
  // (and a workspace replaced by a larger one) is also kept here until TakeRetained hands the list over, so that memory
  // a captured graph reads or writes is never lent to other work while the graph exists.
  void RetainAllocations(bool on) { retaining_ = on; }
  std::vector<std::shared_ptr<ir::Buffer>> TakeRetained() { return std::move(retained_); }
  // The device-resident RNG step: when set, Dropout and DropoutGrad kernels mix the uint64 at this device address
  // into their seed when they run (SeedForStep on the device), so that a replayed graph draws the masks of the step
  // written there; the runs' own RunOptions::rng_step must then be 0. Null (the default): the host's rng_step.
  void set_device_rng_step(const uint64_t* step) { device_rng_step_ = step; }
  const uint64_t* device_rng_step() const { return device_rng_step_; }

 private:
  CudaContext() = default;

  CudaDeviceInfo info_;
  cudaStream_t stream_ = nullptr;
  cublasLtHandle_t cublaslt_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  cudaEvent_t timing_start_ = nullptr;
  cudaEvent_t timing_end_ = nullptr;
  std::shared_ptr<CachingAllocator> allocator_;
  std::shared_ptr<ir::Buffer> workspace_;
  std::shared_ptr<PinnedHostAllocator> pinned_;
  // Pinned blocks that uploads of pageable memory were staged through, kept until the stream has read them.
  std::vector<std::shared_ptr<ir::Buffer>> staging_;
  size_t staging_bytes_ = 0;
  std::vector<cudaEvent_t> profile_events_;  // BeginProfile / Mark / EndProfile
  std::vector<bool> profile_marked_;
  bool retaining_ = false;
  std::vector<std::shared_ptr<ir::Buffer>> retained_;
  const uint64_t* device_rng_step_ = nullptr;
};

// The CUDA context of the session running a CUDA kernel. ONNXAMP_CHECKs that the kernel runs on a CUDA session.
CudaContext& GetCudaContext(const exec::KernelContext& ctx);

// Scratch from the session's CUDA workspace (CudaContext::Workspace), for the launchers that take a scratch function.
std::function<StatusOr<void*>(size_t bytes)> WorkspaceOf(const exec::KernelContext& ctx);

// The device-resident RNG step a random kernel (Dropout, DropoutGrad, the Random ops, Bernoulli) mixes into its seed on
// the device (null: none, the run's own rng_step is in the seed); FailedPrecondition naming the node when the run
// also gives a host rng_step.
StatusOr<const uint64_t*> DeviceRngStep(const exec::KernelContext& ctx);

// Registers the CUDA backend (kernels, context factory, graph rewrites) with the executor when at least one CUDA
// device is usable; returns false (and registers nothing) otherwise. Safe to call more than once.
bool RegisterCudaBackend();

// The registry of every CUDA kernel (runtime/cuda/ops/cuda_kernels.cc), built once.
const exec::KernelRegistry& CudaKernelRegistry();

}  // namespace onnxamp::cuda
