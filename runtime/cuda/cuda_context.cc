// CudaContext: the stream, library handles, allocator, workspace and timing events of one CUDA session.
#include "runtime/cuda/cuda_context.h"

#include <cstring>
#include <utility>

#include "runtime/cuda/caching_allocator.h"
#include "runtime/cuda/cublaslt_loader.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/pinned_allocator.h"

namespace onnxamp::cuda {

StatusOr<std::unique_ptr<CudaContext>> CudaContext::Create(int device_index) {
  const int count = CudaDeviceCount();
  if (count == 0) return FailedPrecondition("cannot use cuda:", device_index, ": ", DescribeCudaDevices());
  if (device_index < 0 || device_index >= count) {
    return FailedPrecondition("cuda:", device_index, " does not exist (", count, " CUDA device", count == 1 ? "" : "s",
                              " visible)");
  }
  ONNXAMP_ASSIGN_OR_RETURN(CudaDeviceInfo info, GetCudaDeviceInfo(device_index));
  // Built piece by piece; the destructor releases whatever was created when a later step fails.
  std::unique_ptr<CudaContext> ctx(new CudaContext());
  ctx->info_ = std::move(info);
  const std::string where = StrCat("creating the CUDA context on cuda:", device_index);
  ONNXAMP_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_index), where);
  ONNXAMP_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&ctx->stream_, cudaStreamNonBlocking), where);
  ONNXAMP_RETURN_IF_ERROR(LoadCublasLt().WithContext(where));
  ONNXAMP_CUBLAS_RETURN_IF_ERROR(cublasLtCreate(&ctx->cublaslt_), where);
  ONNXAMP_CUDNN_RETURN_IF_ERROR(cudnnCreate(&ctx->cudnn_), where);
  ONNXAMP_CUDNN_RETURN_IF_ERROR(cudnnSetStream(ctx->cudnn_, ctx->stream_), where);
  ONNXAMP_CUDA_RETURN_IF_ERROR(cudaEventCreate(&ctx->timing_start_), where);
  ONNXAMP_CUDA_RETURN_IF_ERROR(cudaEventCreate(&ctx->timing_end_), where);
  ctx->allocator_ = CachingAllocator::Create(device_index);
  ctx->pinned_ = PinnedHostAllocator::Create();
  return ctx;
}

CudaContext::~CudaContext() {
  // Work still queued may use the workspace or cached blocks: finish it first. Errors are not fatal here (a
  // faulted context cannot be recovered, and the program may be reporting that very error).
  if (cudaSetDevice(info_.index) != cudaSuccess) (void)cudaGetLastError();
  if (stream_ && cudaStreamSynchronize(stream_) != cudaSuccess) (void)cudaGetLastError();
  workspace_.reset();
  staging_.clear();
  for (cudaEvent_t e : profile_events_) (void)cudaEventDestroy(e);
  if (timing_end_) (void)cudaEventDestroy(timing_end_);
  if (timing_start_) (void)cudaEventDestroy(timing_start_);
  if (cudnn_) (void)cudnnDestroy(cudnn_);
  if (cublaslt_) (void)cublasLtDestroy(cublaslt_);
  if (stream_) (void)cudaStreamDestroy(stream_);
  (void)cudaGetLastError();
  // allocator_ goes with the last Buffer it lent out (each holds a reference).
}

std::string CudaContext::Describe() const { return DescribeCudaDevice(info_); }

Status CudaContext::Activate() {
  ONNXAMP_CUDA_RETURN_IF_ERROR(cudaSetDevice(info_.index), "selecting cuda:", info_.index);
  return Status::Ok();
}

StatusOr<std::shared_ptr<ir::Buffer>> CudaContext::Allocate(size_t bytes) {
  StatusOr<std::shared_ptr<ir::Buffer>> block = allocator_->Allocate(bytes);
  if (retaining_ && block.ok()) retained_.push_back(*block);
  return block;
}

Status CudaContext::CopyHostToDevice(const void* src, void* dst, size_t bytes) {
  if (bytes == 0) return Status::Ok();
  // A copy captured into a CUDA Graph would read the same host address on every replay, after the host data (or the
  // pinned block it was staged in) is gone, and UploadAsync's release would run again on each. Refused, so that the
  // capture fails and the step runs eagerly (trainer/cuda/cuda_training.cc).
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  ONNXAMP_CUDA_RETURN_IF_ERROR(cudaStreamIsCapturing(stream_, &capture), "copying to cuda:", info_.index);
  if (capture != cudaStreamCaptureStatusNone) {
    return FailedPrecondition("copying ", bytes, " bytes of host data to cuda:", info_.index,
                              " while the stream is captured into a CUDA Graph");
  }
  // Pageable memory of some size goes through a pinned block first: one host memcpy, then a DMA copy that runs
  // asynchronously at the link's full rate (the driver's own pageable path copies in small synchronous pieces).
  constexpr size_t kStageFrom = size_t{64} << 10;
  constexpr size_t kMaxStaged = size_t{256} << 20;
  if (bytes >= kStageFrom && !IsPinnedHostMemory(src)) {
    if (staging_bytes_ + bytes > kMaxStaged) ONNXAMP_RETURN_IF_ERROR(Synchronize());
    ONNXAMP_ASSIGN_OR_RETURN(std::shared_ptr<ir::Buffer> block, pinned_->Allocate(bytes));
    std::memcpy(block->data(), src, bytes);
    src = block->data();
    staging_bytes_ += bytes;
    staging_.push_back(std::move(block));
  }
  ONNXAMP_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_), "copying ", bytes,
                               " bytes to cuda:", info_.index);
  return Status::Ok();
}

Status CudaContext::CopyDeviceToDevice(const void* src, void* dst, size_t bytes) {
  if (bytes == 0) return Status::Ok();
  ONNXAMP_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_), "copying ", bytes,
                               " bytes on cuda:", info_.index);
  return Status::Ok();
}

Status CudaContext::CopyDeviceToHost(const void* src, void* dst, size_t bytes) {
  if (bytes == 0) return Status::Ok();
  ONNXAMP_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_), "copying ", bytes,
                               " bytes from cuda:", info_.index);
  // The kernels before the copy may have failed asynchronously: the stream's error says so here.
  ONNXAMP_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_), "copying ", bytes, " bytes from cuda:", info_.index);
  staging_.clear();
  staging_bytes_ = 0;
  return Status::Ok();
}

Status CudaContext::Synchronize() {
  ONNXAMP_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_), "running on cuda:", info_.index);
  staging_.clear();  // the stream has read every staged upload
  staging_bytes_ = 0;
  // A launch error not yet reported by a kernel (launches are asynchronous).
  ONNXAMP_CUDA_RETURN_IF_ERROR(cudaGetLastError(), "running on cuda:", info_.index);
  return Status::Ok();
}

Status CudaContext::BeginTiming() {
  ONNXAMP_CUDA_RETURN_IF_ERROR(cudaEventRecord(timing_start_, stream_), "timing on cuda:", info_.index);
  return Status::Ok();
}

StatusOr<double> CudaContext::EndTiming() {
  ONNXAMP_CUDA_RETURN_IF_ERROR(cudaEventRecord(timing_end_, stream_), "timing on cuda:", info_.index);
  ONNXAMP_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(timing_end_), "timing on cuda:", info_.index);
  float ms = 0;
  ONNXAMP_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, timing_start_, timing_end_), "timing on cuda:", info_.index);
  return static_cast<double>(ms) * 1e-3;
}

Status CudaContext::BeginProfile(size_t marks) {
  while (profile_events_.size() < marks) {
    cudaEvent_t e = nullptr;
    ONNXAMP_CUDA_RETURN_IF_ERROR(cudaEventCreate(&e), "profiling on cuda:", info_.index);
    profile_events_.push_back(e);
  }
  profile_marked_.assign(marks, false);
  return Status::Ok();
}

Status CudaContext::Mark(size_t i) {
  if (i >= profile_marked_.size()) return Internal("profile mark ", i, " of ", profile_marked_.size());
  ONNXAMP_CUDA_RETURN_IF_ERROR(cudaEventRecord(profile_events_[i], stream_), "profiling on cuda:", info_.index);
  profile_marked_[i] = true;
  return Status::Ok();
}

StatusOr<std::vector<double>> CudaContext::EndProfile() {
  ONNXAMP_RETURN_IF_ERROR(Synchronize());
  std::vector<double> seconds(profile_marked_.empty() ? 0 : profile_marked_.size() - 1, 0.0);
  for (size_t i = 0; i < seconds.size(); ++i) {
    if (!profile_marked_[i] || !profile_marked_[i + 1]) continue;
    float ms = 0;
    ONNXAMP_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, profile_events_[i], profile_events_[i + 1]),
                                 "profiling on cuda:", info_.index);
    seconds[i] = static_cast<double>(ms) * 1e-3;
  }
  profile_marked_.clear();
  return seconds;
}

StatusOr<std::shared_ptr<ir::Buffer>> CudaContext::AllocateHost(size_t bytes) { return pinned_->Allocate(bytes); }

exec::DeviceMemoryStats CudaContext::memory_stats() const { return allocator_->stats(); }

void CudaContext::ResetPeak() { allocator_->ResetPeak(); }

StatusOr<void*> CudaContext::Workspace(size_t bytes) {
  if (bytes == 0) return static_cast<void*>(nullptr);
  if (!workspace_ || workspace_->size() < bytes) {
    // Grow by at least half again so that a run of slowly growing requests does not reallocate every time. The old
    // block goes back to the cache; work queued on the stream that still uses it runs before any reuse.
    const size_t grown = workspace_ ? std::max(bytes, workspace_->size() + workspace_->size() / 2) : bytes;
    if (retaining_ && workspace_) retained_.push_back(workspace_);
    workspace_.reset();
    StatusOr<std::shared_ptr<ir::Buffer>> block = allocator_->Allocate(grown);
    if (!block.ok()) return block.status().WithContext(StrCat("workspace of ", grown, " bytes"));
    workspace_ = std::move(block).value();
  }
  if (retaining_ && (retained_.empty() || retained_.back() != workspace_)) retained_.push_back(workspace_);
  return static_cast<void*>(workspace_->data());
}

CudaContext& GetCudaContext(const exec::KernelContext& ctx) {
  exec::DeviceContext* device = ctx.device_context();
  ONNXAMP_CHECK(device != nullptr && device->device() == exec::Device::kCuda, "node ", ctx.node().Describe(),
                ": a CUDA kernel runs outside a CUDA session");
  return static_cast<CudaContext&>(*device);
}

std::function<StatusOr<void*>(size_t bytes)> WorkspaceOf(const exec::KernelContext& ctx) {
  return [&ctx](size_t bytes) -> StatusOr<void*> { return GetCudaContext(ctx).Workspace(bytes); };
}

StatusOr<const uint64_t*> DeviceRngStep(const exec::KernelContext& ctx) {
  const uint64_t* device_step = GetCudaContext(ctx).device_rng_step();
  if (device_step && ctx.rng_step() != 0) {
    return FailedPrecondition("node ", ctx.node().Describe(), ": rng_step ", ctx.rng_step(),
                              " given with a device-resident RNG step");
  }
  return device_step;
}

}  // namespace onnxamp::cuda
