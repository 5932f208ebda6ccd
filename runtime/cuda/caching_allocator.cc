// The CUDA caching allocator: DeviceBlockPool's bookkeeping over segments from cudaMalloc, and the device ledger.
#include "runtime/cuda/caching_allocator.h"

#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "runtime/cuda/cuda_check.h"

namespace onnxamp::cuda {

exec::DeviceMemoryLedger& CachingAllocator::DeviceLedger(int device) {
  static std::mutex mutex;
  static std::map<int, std::unique_ptr<exec::DeviceMemoryLedger>>* ledgers =
      new std::map<int, std::unique_ptr<exec::DeviceMemoryLedger>>();  // never destroyed: allocators may outlive main
  std::lock_guard<std::mutex> lock(mutex);
  std::unique_ptr<exec::DeviceMemoryLedger>& ledger = (*ledgers)[device];
  if (!ledger) ledger = std::make_unique<exec::DeviceMemoryLedger>();
  return *ledger;
}

CachingAllocator::CachingAllocator(int device) : device_(device), ledger_(DeviceLedger(device)) {}

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
  std::lock_guard<std::mutex> lock(mutex_);
  if (FreeCacheLocked() != cudaSuccess) (void)cudaGetLastError();
}

void CachingAllocator::ReportLocked(const exec::DeviceBlockStats& before) {
  const exec::DeviceBlockStats& now = pool_.stats();
  auto delta = [](uint64_t after, uint64_t was) { return static_cast<int64_t>(after) - static_cast<int64_t>(was); };
  ledger_.Add(delta(now.requested_bytes, before.requested_bytes), delta(now.allocated_bytes, before.allocated_bytes),
              delta(now.reserved_bytes, before.reserved_bytes));
}

StatusOr<std::shared_ptr<ir::Buffer>> CachingAllocator::Allocate(size_t bytes) {
  if (bytes == 0) {
    return std::make_shared<ir::Buffer>(nullptr, 0, std::shared_ptr<void>(shared_from_this()), ir::MemoryKind::kCuda);
  }
  void* ptr = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    exec::DeviceBlockStats before = pool_.stats();
    if (std::optional<uintptr_t> hit = pool_.TryAllocate(bytes)) {
      ptr = reinterpret_cast<void*>(*hit);
    } else {
      const size_t segment = exec::DeviceBlockPool::SegmentBytes(bytes);
      ONNXAMP_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_), "allocating ", bytes, " bytes");
      cudaError_t err = cudaMalloc(&ptr, segment);
      if (err == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        // Give the wholly free segments back to the device and try once more.
        const cudaError_t freed = FreeCacheLocked();
        before = pool_.stats();  // FreeCacheLocked reported what it gave back: counted once
        if (freed != cudaSuccess) {
          ReportLocked(before);
          return CudaErrorToStatus(freed, "cudaFree", "freeing the cache");
        }
        err = cudaMalloc(&ptr, segment);
      }
      if (err == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        ReportLocked(before);
        const exec::DeviceBlockStats& s = pool_.stats();
        return ResourceExhausted("CUDA out of memory on cuda:", device_, ": cannot allocate ", bytes, " bytes (a ",
                                 segment, "-byte segment) with ", s.allocated_bytes, " bytes in use and ",
                                 s.reserved_bytes, " reserved by this session");
      }
      if (err != cudaSuccess) {
        ReportLocked(before);
        return CudaErrorToStatus(err, "cudaMalloc", StrCat("allocating ", bytes, " bytes"));
      }
      pool_.AllocateFromSegment(reinterpret_cast<uintptr_t>(ptr), segment, bytes);
    }
    ReportLocked(before);
  }
  std::shared_ptr<CachingAllocator> self = shared_from_this();
  std::shared_ptr<void> owner(ptr, [self](void* p) { self->Release(p); });
  return std::make_shared<ir::Buffer>(static_cast<std::byte*>(ptr), bytes, std::move(owner), ir::MemoryKind::kCuda);
}

void CachingAllocator::Release(void* ptr) {
  std::lock_guard<std::mutex> lock(mutex_);
  const exec::DeviceBlockStats before = pool_.stats();
  const bool freed = pool_.Free(reinterpret_cast<uintptr_t>(ptr));
  ONNXAMP_CHECK(freed, "the CUDA caching allocator released a block it did not lend out");
  ReportLocked(before);
}

cudaError_t CachingAllocator::FreeCacheLocked() {
  const exec::DeviceBlockStats before = pool_.stats();
  cudaError_t first = cudaSuccess;
  for (const auto& [base, bytes] : pool_.ReleaseFreeSegments()) {
    const cudaError_t err = cudaFree(reinterpret_cast<void*>(base));
    if (err != cudaSuccess && first == cudaSuccess) first = err;
  }
  ReportLocked(before);
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
  const exec::DeviceBlockStats& s = pool_.stats();
  exec::DeviceMemoryStats out;
  out.in_use_bytes = s.allocated_bytes;
  out.peak_bytes = s.peak_allocated_bytes;
  out.reserved_bytes = s.reserved_bytes;
  out.device_allocations = s.segment_allocations;
  return out;
}

exec::DeviceBlockStats CachingAllocator::block_stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return pool_.stats();
}

void CachingAllocator::ResetPeak() {
  std::lock_guard<std::mutex> lock(mutex_);
  pool_.ResetPeaks();
}

}  // namespace onnxamp::cuda
