// The bookkeeping of a caching device allocator, without any device call: which cached block serves a request, how
// blocks are split and coalesced inside the segments obtained from the device, and the byte counts (requested,
// allocated, reserved, with peaks). The CUDA allocator (runtime/cuda/caching_allocator.h) drives it with addresses
// from cudaMalloc; tests drive it with made-up addresses.
//
// Policy (the one PyTorch's CUDA caching allocator follows):
// - A request is rounded up to a multiple of kMinBlockBytes (512 B); that is the block it gets.
// - Two pools that never share blocks: small requests (rounded size up to kSmallRequestMax, 1 MiB) and large ones.
// - A miss obtains a segment from the device: kSmallSegmentBytes (2 MiB) for a small request, kMediumSegmentBytes
//   (20 MiB) for a large request below kMediumRequestMax (10 MiB), otherwise the request rounded up to
//   kLargeRoundBytes (2 MiB). The block is carved from the segment's start; the rest stays cached.
// - A hit takes the smallest free block of the request's pool that holds it (best fit; lowest address on ties) and
//   splits off the rest as a free block when the rest is worth keeping: at least kMinBlockBytes in the small pool,
//   more than kSmallRequestMax in the large pool. So a cached block is never handed whole to a much smaller request:
//   at most kSmallRequestMax bytes of a block go unused.
// - A freed block merges with its free neighbours of the same segment. A segment that is wholly free again is
//   returned to the device only by ReleaseFreeSegments (EmptyCache, or before a retry when the device is full).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <utility>
#include <vector>

namespace onnxamp::exec {

// Byte counts of an allocator (or of a whole device). "Peak" is the most at once since the last ResetPeaks.
struct DeviceBlockStats {
  uint64_t requested_bytes = 0;  // what callers asked for, summed over the blocks lent out
  uint64_t allocated_bytes = 0;  // the blocks lent out (rounded requests): PyTorch's memory_allocated()
  uint64_t reserved_bytes = 0;   // held from the device, lent out or cached: PyTorch's memory_reserved()
  uint64_t peak_requested_bytes = 0;
  uint64_t peak_allocated_bytes = 0;  // PyTorch's max_memory_allocated()
  uint64_t peak_reserved_bytes = 0;   // PyTorch's max_memory_reserved()
  uint64_t segments = 0;              // segments held from the device now
  uint64_t segment_allocations = 0;   // segments ever obtained from the device
};

class DeviceBlockPool {
 public:
  static constexpr size_t kMinBlockBytes = 512;
  static constexpr size_t kSmallRequestMax = size_t{1} << 20;
  static constexpr size_t kSmallSegmentBytes = size_t{2} << 20;
  static constexpr size_t kMediumRequestMax = size_t{10} << 20;
  static constexpr size_t kMediumSegmentBytes = size_t{20} << 20;
  static constexpr size_t kLargeRoundBytes = size_t{2} << 20;

  // The block a request of `bytes` gets (bytes > 0).
  static size_t RoundRequest(size_t bytes);
  // The segment to obtain from the device when no cached block holds a request of `bytes`.
  static size_t SegmentBytes(size_t bytes);

  // A cached block for `bytes` (> 0), split as the policy says, now lent out; nullopt when none holds it (then obtain
  // SegmentBytes(bytes) from the device and call AllocateFromSegment).
  std::optional<uintptr_t> TryAllocate(size_t bytes);
  // Adds the segment [base, base + segment_bytes) just obtained from the device and lends out a block for `bytes`
  // from its start. segment_bytes must be at least RoundRequest(bytes).
  uintptr_t AllocateFromSegment(uintptr_t base, size_t segment_bytes, size_t bytes);
  // Returns the block lent out at `address` to the cache, merging it with its free neighbours. Returns false (and
  // changes nothing) when no block is lent out there.
  bool Free(uintptr_t address);

  // Removes every segment with no block lent out and returns them (base, bytes) for the caller to give back to the
  // device.
  std::vector<std::pair<uintptr_t, size_t>> ReleaseFreeSegments();

  // The block lent out at `address` (its rounded size), or 0.
  size_t BlockBytes(uintptr_t address) const;
  // Free blocks cached now, and their bytes.
  size_t cached_blocks() const { return small_free_.size() + large_free_.size(); }
  uint64_t cached_bytes() const { return stats_.reserved_bytes - stats_.allocated_bytes; }

  const DeviceBlockStats& stats() const { return stats_; }
  void ResetPeaks();

 private:
  struct Block {
    size_t bytes = 0;
    size_t requested = 0;  // 0 while free
    uintptr_t segment = 0;
    bool free = true;
  };
  using FreeSet = std::set<std::pair<size_t, uintptr_t>>;  // (bytes, address): best fit, then lowest address

  static bool IsSmall(size_t block_bytes) { return block_bytes <= kSmallRequestMax; }
  FreeSet& PoolOf(uintptr_t segment) { return small_segments_.count(segment) ? small_free_ : large_free_; }
  // Lends out the free block at `it` for a request of `bytes` (rounded: `rounded`), splitting off the rest.
  uintptr_t Lend(std::map<uintptr_t, Block>::iterator it, size_t bytes, size_t rounded);
  void UpdatePeaks();

  std::map<uintptr_t, Block> blocks_;     // every block of every segment, by address
  std::map<uintptr_t, size_t> segments_;  // base -> bytes
  std::set<uintptr_t> small_segments_;    // the bases of the small pool's segments
  FreeSet small_free_, large_free_;
  DeviceBlockStats stats_;
};

// Device-wide byte counts over every allocator of one device and the memory its users obtain from the device
// directly (Add with the same delta for all three). Its segment fields stay 0. Thread-safe.
class DeviceMemoryLedger {
 public:
  void Add(int64_t requested_delta, int64_t allocated_delta, int64_t reserved_delta);
  DeviceBlockStats stats() const;
  void ResetPeaks();

  // A window of its own over the peaks, from now on, which neither ResetPeaks nor other windows move: each user's
  // peak while it lives (a training's), though another opens its window meanwhile. Returns the window's id.
  int OpenPeakWindow();
  // The current counts, with the window's peaks. An id not open gives the ledger's own stats().
  DeviceBlockStats WindowStats(int window) const;
  void ClosePeakWindow(int window);

 private:
  mutable std::mutex mutex_;
  DeviceBlockStats stats_;
  std::map<int, DeviceBlockStats> windows_;  // their peak fields
  int next_window_ = 1;
};

}  // namespace onnxamp::exec
