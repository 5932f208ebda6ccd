// DeviceBlockPool: best-fit block selection, splitting and coalescing within device segments, and byte counts.
#include "runtime/executor/device_block_pool.h"

#include <algorithm>
#include <cstdint>

namespace onnxamp::exec {

size_t DeviceBlockPool::RoundRequest(size_t bytes) {
  if (bytes > SIZE_MAX - kLargeRoundBytes) return bytes;  // absurd: the device refuses it
  return std::max<size_t>(kMinBlockBytes, (bytes + kMinBlockBytes - 1) / kMinBlockBytes * kMinBlockBytes);
}

size_t DeviceBlockPool::SegmentBytes(size_t bytes) {
  const size_t rounded = RoundRequest(bytes);
  if (rounded > SIZE_MAX - kLargeRoundBytes) return rounded;
  if (IsSmall(rounded)) return kSmallSegmentBytes;
  if (rounded < kMediumRequestMax) return kMediumSegmentBytes;
  return (rounded + kLargeRoundBytes - 1) / kLargeRoundBytes * kLargeRoundBytes;
}

std::optional<uintptr_t> DeviceBlockPool::TryAllocate(size_t bytes) {
  const size_t rounded = RoundRequest(bytes);
  FreeSet& pool = IsSmall(rounded) ? small_free_ : large_free_;
  auto fit = pool.lower_bound({rounded, 0});
  if (fit == pool.end()) return std::nullopt;
  return Lend(blocks_.find(fit->second), bytes, rounded);
}

uintptr_t DeviceBlockPool::AllocateFromSegment(uintptr_t base, size_t segment_bytes, size_t bytes) {
  const size_t rounded = RoundRequest(bytes);
  segments_[base] = segment_bytes;
  if (IsSmall(rounded)) small_segments_.insert(base);
  (IsSmall(rounded) ? small_free_ : large_free_).insert({segment_bytes, base});
  auto it = blocks_.emplace(base, Block{segment_bytes, 0, base, true}).first;
  stats_.reserved_bytes += segment_bytes;
  ++stats_.segments;
  ++stats_.segment_allocations;
  return Lend(it, bytes, rounded);
}

uintptr_t DeviceBlockPool::Lend(std::map<uintptr_t, Block>::iterator it, size_t bytes, size_t rounded) {
  const uintptr_t address = it->first;
  Block& block = it->second;
  FreeSet& pool = PoolOf(block.segment);
  pool.erase({block.bytes, address});
  const size_t rest = block.bytes - rounded;
  // The small pool keeps any rest (a multiple of kMinBlockBytes); the large pool only a rest a large request could
  // use, so a large block goes whole to a request at most kSmallRequestMax smaller.
  const bool split = &pool == &small_free_ ? rest >= kMinBlockBytes : rest > kSmallRequestMax;
  if (split) {
    block.bytes = rounded;
    blocks_.emplace(address + rounded, Block{rest, 0, block.segment, true});
    pool.insert({rest, address + rounded});
  }
  block.free = false;
  block.requested = bytes;
  stats_.allocated_bytes += block.bytes;
  stats_.requested_bytes += bytes;
  UpdatePeaks();
  return address;
}

bool DeviceBlockPool::Free(uintptr_t address) {
  auto it = blocks_.find(address);
  if (it == blocks_.end() || it->second.free) return false;
  Block& block = it->second;
  stats_.allocated_bytes -= block.bytes;
  stats_.requested_bytes -= block.requested;
  block.free = true;
  block.requested = 0;
  FreeSet& pool = PoolOf(block.segment);
  // Merge with the next block, then with the previous one, when they are free parts of the same segment.
  auto next = std::next(it);
  if (next != blocks_.end() && next->second.free && next->second.segment == block.segment) {
    pool.erase({next->second.bytes, next->first});
    block.bytes += next->second.bytes;
    blocks_.erase(next);
  }
  if (it != blocks_.begin()) {
    auto prev = std::prev(it);
    if (prev->second.free && prev->second.segment == block.segment) {
      pool.erase({prev->second.bytes, prev->first});
      prev->second.bytes += block.bytes;
      blocks_.erase(it);
      it = prev;
    }
  }
  pool.insert({it->second.bytes, it->first});
  return true;
}

std::vector<std::pair<uintptr_t, size_t>> DeviceBlockPool::ReleaseFreeSegments() {
  std::vector<std::pair<uintptr_t, size_t>> released;
  for (auto seg = segments_.begin(); seg != segments_.end();) {
    const auto [base, bytes] = *seg;
    auto it = blocks_.find(base);
    if (it == blocks_.end() || !it->second.free || it->second.bytes != bytes) {
      ++seg;
      continue;
    }
    PoolOf(base).erase({bytes, base});
    small_segments_.erase(base);
    blocks_.erase(it);
    stats_.reserved_bytes -= bytes;
    --stats_.segments;
    released.emplace_back(base, bytes);
    seg = segments_.erase(seg);
  }
  return released;
}

size_t DeviceBlockPool::BlockBytes(uintptr_t address) const {
  auto it = blocks_.find(address);
  return it == blocks_.end() || it->second.free ? 0 : it->second.bytes;
}

void DeviceBlockPool::UpdatePeaks() {
  stats_.peak_requested_bytes = std::max(stats_.peak_requested_bytes, stats_.requested_bytes);
  stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
  stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
}

void DeviceBlockPool::ResetPeaks() {
  stats_.peak_requested_bytes = stats_.requested_bytes;
  stats_.peak_allocated_bytes = stats_.allocated_bytes;
  stats_.peak_reserved_bytes = stats_.reserved_bytes;
}

void DeviceMemoryLedger::Add(int64_t requested_delta, int64_t allocated_delta, int64_t reserved_delta) {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.requested_bytes += static_cast<uint64_t>(requested_delta);  // wraps back for a negative delta
  stats_.allocated_bytes += static_cast<uint64_t>(allocated_delta);
  stats_.reserved_bytes += static_cast<uint64_t>(reserved_delta);
  auto raise = [&](DeviceBlockStats& peaks) {
    peaks.peak_requested_bytes = std::max(peaks.peak_requested_bytes, stats_.requested_bytes);
    peaks.peak_allocated_bytes = std::max(peaks.peak_allocated_bytes, stats_.allocated_bytes);
    peaks.peak_reserved_bytes = std::max(peaks.peak_reserved_bytes, stats_.reserved_bytes);
  };
  raise(stats_);
  for (auto& [id, peaks] : windows_) raise(peaks);
}

DeviceBlockStats DeviceMemoryLedger::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void DeviceMemoryLedger::ResetPeaks() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak_requested_bytes = stats_.requested_bytes;
  stats_.peak_allocated_bytes = stats_.allocated_bytes;
  stats_.peak_reserved_bytes = stats_.reserved_bytes;
}

int DeviceMemoryLedger::OpenPeakWindow() {
  std::lock_guard<std::mutex> lock(mutex_);
  DeviceBlockStats& w = windows_[next_window_];
  w.peak_requested_bytes = stats_.requested_bytes;
  w.peak_allocated_bytes = stats_.allocated_bytes;
  w.peak_reserved_bytes = stats_.reserved_bytes;
  return next_window_++;
}

DeviceBlockStats DeviceMemoryLedger::WindowStats(int window) const {
  std::lock_guard<std::mutex> lock(mutex_);
  DeviceBlockStats s = stats_;
  if (const auto it = windows_.find(window); it != windows_.end()) {
    s.peak_requested_bytes = it->second.peak_requested_bytes;
    s.peak_allocated_bytes = it->second.peak_allocated_bytes;
    s.peak_reserved_bytes = it->second.peak_reserved_bytes;
  }
  return s;
}

void DeviceMemoryLedger::ClosePeakWindow(int window) {
  std::lock_guard<std::mutex> lock(mutex_);
  windows_.erase(window);
}

}  // namespace onnxamp::exec
