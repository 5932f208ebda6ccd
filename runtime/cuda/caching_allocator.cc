// The CUDA caching allocator: size classes, best-fit reuse of cached blocks, and cudaMalloc on a miss.
#include "runtime/cuda/caching_allocator.h"

#include <algorithm>

#include "runtime/cuda/cuda_check.h"

namespace onnxamp::cuda {

std::shared_ptr<CachingAllocator> CachingAllocator::Create(int device) {
  return std::shared_ptr<CachingAllocator>(new CachingAllocator(device));
}

CachingAllocator::~CachingAllocator() {
  // Runs when the context and every Buffer are gone, so nothing uses the cached blocks any more. A failure here
  // (a faulted context) must not abort the program that is tearing down.
  if (cudaSetDevice(device_) != cudaSuccess) {
    (void)cudaGetLastError();
    return;
  }
  if (FreeCacheLocked() != cudaSuccess) (void)cudaGetLastError();
}

size_t CachingAllocator::RoundSize(size_t bytes) {
  const size_t g = bytes < kLargeThreshold ? kSmallGranularity : kLargeGranularity;
  if (bytes > SIZE_MAX - g) return bytes;  // absurd: cudaMalloc reports it
  return std::max<size_t>(g, (bytes + g - 1) / g * g);
}

StatusOr<std::shared_ptr<ir::Buffer>> CachingAllocator::Allocate(size_t bytes) {
  if (bytes == 0) {
    return std::make_shared<ir::Buffer>(nullptr, 0, std::shared_ptr<void>(shared_from_this()), ir::MemoryKind::kCuda);
  }
  const size_t rounded = RoundSize(bytes);
  void* ptr = nullptr;
  size_t block = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // Best fit: the smallest cached block that holds the request, as long as it does not waste more than the
    // request itself (a huge cached block is kept for a huge request).
    auto it = cache_.lower_bound(rounded);
    if (it != cache_.end() && it->first <= 2 * rounded) {
      block = it->first;
      ptr = it->second;
      cache_.erase(it);
    } else {
      ONNXAMP_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_), "allocating ", bytes, " bytes");
      cudaError_t err = cudaMalloc(&ptr, rounded);
      if (err == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        // Give the cached blocks back to the device and try once more.
        const cudaError_t freed = FreeCacheLocked();
        if (freed != cudaSuccess) return CudaErrorToStatus(freed, "cudaFree", "freeing the cache");
        err = cudaMalloc(&ptr, rounded);
      }
      if (err == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        return ResourceExhausted("CUDA out of memory on cuda:", device_, ": cannot allocate ", bytes, " bytes (",
                                 rounded, " rounded) with ", stats_.in_use_bytes, " bytes in use and ",
                                 stats_.reserved_bytes, " reserved by this session");
      }
      if (err != cudaSuccess) return CudaErrorToStatus(err, "cudaMalloc", StrCat("allocating ", bytes, " bytes"));
      block = rounded;
      ++stats_.device_allocations;
      stats_.reserved_bytes += block;
    }
    stats_.in_use_bytes += block;
    stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.in_use_bytes);
  }
  std::shared_ptr<CachingAllocator> self = shared_from_this();
  std::shared_ptr<void> owner(ptr, [self, block](void* p) { self->Release(p, block); });
  return std::make_shared<ir::Buffer>(static_cast<std::byte*>(ptr), bytes, std::move(owner), ir::MemoryKind::kCuda);
}

void CachingAllocator::Release(void* ptr, size_t block_bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.in_use_bytes -= block_bytes;
  cache_.emplace(block_bytes, ptr);
}

cudaError_t CachingAllocator::FreeCacheLocked() {
  cudaError_t first = cudaSuccess;
  for (const auto& [size, ptr] : cache_) {
    const cudaError_t err = cudaFree(ptr);
    if (err != cudaSuccess && first == cudaSuccess) first = err;
    stats_.reserved_bytes -= size;
  }
  cache_.clear();
  return first;
}

Status CachingAllocator::EmptyCache() {
  std::lock_guard<std::mutex> lock(mutex_);
  ONNXAMP_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_), "emptying the allocator cache");
  const cudaError_t err = FreeCacheLocked();
  if (err != cudaSuccess) return CudaErrorToStatus(err, "cudaFree", "emptying the allocator cache");
  return Status::Ok();
}

exec::DeviceMemoryStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void CachingAllocator::ResetPeak() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak_bytes = stats_.in_use_bytes;
}

}  // namespace onnxamp::cuda
