// PinnedHostAllocator: page-locked host blocks by power-of-two size class, cached for reuse.
#include "runtime/cuda/pinned_allocator.h"

#include <cuda_runtime_api.h>

#include <bit>
#include <utility>

namespace onnxamp::cuda {

std::shared_ptr<PinnedHostAllocator> PinnedHostAllocator::Create() {
  return std::shared_ptr<PinnedHostAllocator>(new PinnedHostAllocator());
}

PinnedHostAllocator::~PinnedHostAllocator() {
  for (auto& [size, ptr] : cache_) {
    if (cudaFreeHost(ptr) != cudaSuccess) (void)cudaGetLastError();
  }
}

size_t PinnedHostAllocator::RoundSize(size_t bytes) { return std::bit_ceil(std::max(bytes, kMinBlock)); }

uint64_t PinnedHostAllocator::cached_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cached_bytes_;
}

StatusOr<std::shared_ptr<ir::Buffer>> PinnedHostAllocator::Allocate(size_t bytes) {
  if (bytes == 0) return std::make_shared<ir::Buffer>(0, ir::Buffer::Init::kUninitialized);
  const size_t block = RoundSize(bytes);
  void* ptr = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = cache_.find(block);
    if (it != cache_.end()) {
      ptr = it->second;
      cache_.erase(it);
      cached_bytes_ -= block;
    }
  }
  if (!ptr && cudaHostAlloc(&ptr, block, cudaHostAllocDefault) != cudaSuccess) {
    (void)cudaGetLastError();  // out of lockable memory: ordinary memory still works
    return std::make_shared<ir::Buffer>(bytes, ir::Buffer::Init::kUninitialized);
  }
  std::shared_ptr<PinnedHostAllocator> self = shared_from_this();
  std::shared_ptr<void> owner(ptr, [self, block](void* p) { self->Release(p, block); });
  return std::make_shared<ir::Buffer>(static_cast<std::byte*>(ptr), bytes, std::move(owner));
}

void PinnedHostAllocator::Release(void* ptr, size_t block_bytes) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (cached_bytes_ + block_bytes <= kMaxCachedBytes) {
      cache_.emplace(block_bytes, ptr);
      cached_bytes_ += block_bytes;
      return;
    }
  }
  if (cudaFreeHost(ptr) != cudaSuccess) (void)cudaGetLastError();
}

bool IsPinnedHostMemory(const void* ptr) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return attr.type == cudaMemoryTypeHost;
}

}  // namespace onnxamp::cuda
