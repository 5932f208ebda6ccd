// Page-locked ("pinned") host memory from a cache: what copies between host and device run fastest with. The
// executor downloads outputs into it (DeviceContext::AllocateHost) and CudaContext stages uploads of pageable memory
// through it, so that steady-state runs neither page-lock nor touch fresh pages.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "runtime/common/status.h"
#include "runtime/ir/tensor.h"

namespace onnxamp::cuda {

class PinnedHostAllocator : public std::enable_shared_from_this<PinnedHostAllocator> {
 public:
  // Requests round up to a power of two, at least kMinBlock; at most kMaxCachedBytes of free blocks are kept.
  static constexpr size_t kMinBlock = size_t{64} << 10;
  static constexpr size_t kMaxCachedBytes = size_t{1} << 30;

  // Always held by a shared_ptr: each Buffer it hands out keeps it alive.
  static std::shared_ptr<PinnedHostAllocator> Create();
  ~PinnedHostAllocator();  // frees the cached blocks
  PinnedHostAllocator(const PinnedHostAllocator&) = delete;
  PinnedHostAllocator& operator=(const PinnedHostAllocator&) = delete;

  // `bytes` of page-locked host memory (MemoryKind::kHost) that goes back to the cache with its last reference.
  // Falls back to ordinary host memory when the system refuses to lock more (copies are then merely slower).
  // bytes == 0 gives an empty Buffer.
  StatusOr<std::shared_ptr<ir::Buffer>> Allocate(size_t bytes);

  // The size class of a request.
  static size_t RoundSize(size_t bytes);
  uint64_t cached_bytes() const;

 private:
  PinnedHostAllocator() = default;
  void Release(void* ptr, size_t block_bytes);

  mutable std::mutex mutex_;
  std::multimap<size_t, void*> cache_;
  uint64_t cached_bytes_ = 0;
};

// Whether `ptr` is page-locked host memory (pinned by cudaHostAlloc or registered), which copies can read directly.
bool IsPinnedHostMemory(const void* ptr);

}  // namespace onnxamp::cuda
