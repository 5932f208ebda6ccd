// A caching allocator for device memory used from one CUDA stream: blocks released by their last Buffer go back to
// a cache and are handed out again without calling cudaMalloc, since every use of a block is ordered on the one
// stream. Which cached block serves a request, and how segments from cudaMalloc are split into blocks and merged
// again, is DeviceBlockPool's policy (runtime/executor/device_block_pool.h: 512-byte blocks, separate pools for
// requests up to 1 MiB and above, large blocks split rather than lent whole to a much smaller request).
//
// Every allocator also adds its counts to its device's DeviceMemoryLedger (DeviceLedger), so that the memory of all
// the sessions on a device (and what their users register there) has one peak, as PyTorch's max_memory_allocated().
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

#include "runtime/common/status.h"
#include "runtime/executor/device_block_pool.h"
#include "runtime/executor/device_context.h"
#include "runtime/ir/tensor.h"

namespace onnxamp::cuda {

class CachingAllocator : public std::enable_shared_from_this<CachingAllocator> {
 public:
  // An allocator for device `device`. Always held by a shared_ptr: each Buffer it hands out keeps it alive.
  static std::shared_ptr<CachingAllocator> Create(int device);
  ~CachingAllocator();  // frees every cached segment (blocks still lent out keep the allocator alive)
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // `bytes` of device memory as a Buffer view (MemoryKind::kCuda, 256-byte aligned); the block returns to the cache
  // when the last reference to the Buffer goes. A cache miss calls cudaMalloc for a segment
  // (DeviceBlockPool::SegmentBytes); when the device is full, the wholly free segments are freed and cudaMalloc tried
  // once more, then ResourceExhausted names the size and what is in use. bytes == 0 gives an empty Buffer (null
  // data) that uses no memory.
  StatusOr<std::shared_ptr<ir::Buffer>> Allocate(size_t bytes);

  // Frees every segment with no block lent out back to the device.
  Status EmptyCache();

  // in_use_bytes: the blocks lent out (requests rounded to 512 B); peak_bytes: their most since ResetPeak;
  // reserved_bytes: the segments held; device_allocations: cudaMalloc calls.
  exec::DeviceMemoryStats stats() const;
  // Every count: requested, allocated (lent out), reserved, with peaks since ResetPeak.
  exec::DeviceBlockStats block_stats() const;
  void ResetPeak();

  // The counts of every allocator of device `device` together, plus what users add themselves (memory they obtain
  // from cudaMalloc directly). Its peaks are reset only by its own ResetPeaks, not by ResetPeak above.
  static exec::DeviceMemoryLedger& DeviceLedger(int device);

 private:
  explicit CachingAllocator(int device);
  // Called by a Buffer's owner when the Buffer goes: the block goes back to the cache.
  void Release(void* ptr);
  // Frees the wholly free segments; the caller holds mutex_.
  cudaError_t FreeCacheLocked();
  // Adds the change of pool_'s counts since `before` to the device ledger; the caller holds mutex_.
  void ReportLocked(const exec::DeviceBlockStats& before);

  const int device_;
  exec::DeviceMemoryLedger& ledger_;
  mutable std::mutex mutex_;
  exec::DeviceBlockPool pool_;
};

}  // namespace onnxamp::cuda
