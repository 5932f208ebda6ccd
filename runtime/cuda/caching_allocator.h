// A caching allocator for device memory used from one CUDA stream: blocks released by their last Buffer go back to
// a cache and are handed out again (best fit within a size class) without calling cudaMalloc, since every use of a
// block is ordered on the one stream.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "runtime/common/status.h"
#include "runtime/executor/device_context.h"
#include "runtime/ir/tensor.h"

namespace onnxamp::cuda {

class CachingAllocator : public std::enable_shared_from_this<CachingAllocator> {
 public:
  // Requests below kLargeThreshold round up to kSmallGranularity, larger ones to kLargeGranularity.
  static constexpr size_t kSmallGranularity = 512;
  static constexpr size_t kLargeThreshold = size_t{1} << 20;
  static constexpr size_t kLargeGranularity = size_t{2} << 20;

  // An allocator for device `device`. Always held by a shared_ptr: each Buffer it hands out keeps it alive.
  static std::shared_ptr<CachingAllocator> Create(int device);
  ~CachingAllocator();  // frees every cached block (blocks still lent out keep the allocator alive)
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // `bytes` of device memory as a Buffer view (MemoryKind::kCuda, 256-byte aligned); the block returns to the cache
  // when the last reference to the Buffer goes. A cache miss calls cudaMalloc; when the device is full, the cache is
  // freed and cudaMalloc tried once more, then ResourceExhausted names the size and what is in use. bytes == 0 gives
  // an empty Buffer (null data) that uses no memory.
  StatusOr<std::shared_ptr<ir::Buffer>> Allocate(size_t bytes);

  // Frees every cached (not lent out) block back to the device.
  Status EmptyCache();

  exec::DeviceMemoryStats stats() const;
  void ResetPeak();

  // The size a request of `bytes` occupies (its size class).
  static size_t RoundSize(size_t bytes);

 private:
  explicit CachingAllocator(int device) : device_(device) {}
  // Called by a Buffer's owner when the Buffer goes: the block goes back to the cache.
  void Release(void* ptr, size_t block_bytes);
  // Frees the cached blocks; the caller holds mutex_.
  cudaError_t FreeCacheLocked();

  const int device_;
  mutable std::mutex mutex_;
  std::multimap<size_t, void*> cache_;  // free blocks by size
  exec::DeviceMemoryStats stats_;
};

}  // namespace onnxamp::cuda
