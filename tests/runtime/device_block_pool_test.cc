// DeviceBlockPool (the caching device allocator's bookkeeping) and DeviceMemoryLedger, with made-up addresses.
#include "runtime/executor/device_block_pool.h"

#include <gtest/gtest.h>

#include <optional>
#include <vector>

namespace onnxamp::exec {
namespace {

constexpr size_t kKiB = size_t{1} << 10;
constexpr size_t kMiB = size_t{1} << 20;

// Drives a pool as the CUDA allocator does, handing out fresh made-up segment addresses on a miss.
class PoolDriver {
 public:
  uintptr_t Allocate(size_t bytes) {
    if (std::optional<uintptr_t> hit = pool.TryAllocate(bytes)) return *hit;
    const size_t segment = DeviceBlockPool::SegmentBytes(bytes);
    const uintptr_t base = next_base_;
    next_base_ += segment + kMiB * 64;  // segments are not adjacent, as separate cudaMallocs need not be
    return pool.AllocateFromSegment(base, segment, bytes);
  }

  DeviceBlockPool pool;

 private:
  uintptr_t next_base_ = uintptr_t{1} << 32;
};

TEST(DeviceBlockPool, RoundsRequestsAndChoosesSegments) {
  EXPECT_EQ(DeviceBlockPool::RoundRequest(1), 512u);
  EXPECT_EQ(DeviceBlockPool::RoundRequest(512), 512u);
  EXPECT_EQ(DeviceBlockPool::RoundRequest(513), 1024u);
  EXPECT_EQ(DeviceBlockPool::RoundRequest(3 * kMiB + 1), 3 * kMiB + 512);
  EXPECT_EQ(DeviceBlockPool::SegmentBytes(100), 2 * kMiB);
  EXPECT_EQ(DeviceBlockPool::SegmentBytes(kMiB), 2 * kMiB);
  EXPECT_EQ(DeviceBlockPool::SegmentBytes(kMiB + 1), 20 * kMiB);
  EXPECT_EQ(DeviceBlockPool::SegmentBytes(10 * kMiB - 512), 20 * kMiB);
  EXPECT_EQ(DeviceBlockPool::SegmentBytes(10 * kMiB), 10 * kMiB);
  EXPECT_EQ(DeviceBlockPool::SegmentBytes(64 * kMiB + 1), 66 * kMiB);
}

TEST(DeviceBlockPool, SmallRequestsShareOneSegment) {
  PoolDriver d;
  const uintptr_t a = d.Allocate(100);
  const uintptr_t b = d.Allocate(1000);
  const uintptr_t c = d.Allocate(512);
  EXPECT_EQ(d.pool.stats().segment_allocations, 1u);
  EXPECT_EQ(b, a + 512);
  EXPECT_EQ(c, b + 1024);
  EXPECT_EQ(d.pool.BlockBytes(b), 1024u);
  const DeviceBlockStats s = d.pool.stats();
  EXPECT_EQ(s.requested_bytes, 1612u);
  EXPECT_EQ(s.allocated_bytes, 2048u);
  EXPECT_EQ(s.reserved_bytes, 2 * kMiB);
}

TEST(DeviceBlockPool, ReusesAFreedBlockWithoutANewSegment) {
  PoolDriver d;
  const uintptr_t a = d.Allocate(64 * kMiB);
  ASSERT_TRUE(d.pool.Free(a));
  EXPECT_EQ(d.pool.stats().allocated_bytes, 0u);
  EXPECT_EQ(d.pool.stats().reserved_bytes, 64 * kMiB);
  EXPECT_EQ(d.Allocate(64 * kMiB), a);
  EXPECT_EQ(d.pool.stats().segment_allocations, 1u);
  EXPECT_FALSE(d.pool.Free(a + 512)) << "no block is lent out there";
  ASSERT_TRUE(d.pool.Free(a));
  EXPECT_FALSE(d.pool.Free(a)) << "freed twice";
}

TEST(DeviceBlockPool, SplitsALargeBlockInsteadOfLendingItWhole) {
  PoolDriver d;
  const uintptr_t big = d.Allocate(64 * kMiB);
  ASSERT_TRUE(d.pool.Free(big));
  // A 4 MiB request takes the front of the cached 64 MiB block and counts 4 MiB, not 64.
  const uintptr_t a = d.Allocate(4 * kMiB);
  EXPECT_EQ(a, big);
  EXPECT_EQ(d.pool.BlockBytes(a), 4 * kMiB);
  EXPECT_EQ(d.pool.stats().allocated_bytes, 4 * kMiB);
  // The rest serves the next requests from the same segment.
  const uintptr_t b = d.Allocate(32 * kMiB);
  EXPECT_EQ(b, big + 4 * kMiB);
  EXPECT_EQ(d.pool.stats().segment_allocations, 1u);
  EXPECT_EQ(d.pool.cached_bytes(), 28 * kMiB);
}

TEST(DeviceBlockPool, LendsALargeBlockWholeOnlyWhenTheRestIsUnderAMebibyte) {
  PoolDriver d;
  const uintptr_t big = d.Allocate(16 * kMiB);
  ASSERT_TRUE(d.pool.Free(big));
  // 16 MiB - 15.5 MiB = 0.5 MiB: not worth a block of the large pool, lent whole.
  const uintptr_t a = d.Allocate(15 * kMiB + 512 * kKiB);
  EXPECT_EQ(a, big);
  EXPECT_EQ(d.pool.BlockBytes(a), 16 * kMiB);
  EXPECT_EQ(d.pool.stats().requested_bytes, 15 * kMiB + 512 * kKiB);
  EXPECT_EQ(d.pool.cached_blocks(), 0u);
  ASSERT_TRUE(d.pool.Free(a));
  // 16 MiB - 14 MiB = 2 MiB: split.
  EXPECT_EQ(d.Allocate(14 * kMiB), big);
  EXPECT_EQ(d.pool.BlockBytes(big), 14 * kMiB);
  EXPECT_EQ(d.pool.cached_bytes(), 2 * kMiB);
}

TEST(DeviceBlockPool, SmallAndLargePoolsDoNotShareBlocks) {
  PoolDriver d;
  const uintptr_t large = d.Allocate(4 * kMiB);  // a 20 MiB segment with 16 MiB cached
  EXPECT_EQ(d.pool.stats().reserved_bytes, 20 * kMiB);
  const uintptr_t small = d.Allocate(4 * kKiB);
  EXPECT_EQ(d.pool.stats().segment_allocations, 2u) << "a small request does not split the large pool's block";
  EXPECT_GE(small >= large ? small - large : large - small, 20 * kMiB);
  ASSERT_TRUE(d.pool.Free(small));
  d.Allocate(2 * kMiB);
  EXPECT_EQ(d.pool.stats().segment_allocations, 2u) << "served from the large segment's rest";
}

TEST(DeviceBlockPool, BestFitPicksTheSmallestBlockThatHolds) {
  PoolDriver d;
  const uintptr_t a = d.Allocate(40 * kMiB);
  const uintptr_t b = d.Allocate(12 * kMiB);
  const uintptr_t c = d.Allocate(24 * kMiB);
  ASSERT_TRUE(d.pool.Free(a));
  ASSERT_TRUE(d.pool.Free(b));
  ASSERT_TRUE(d.pool.Free(c));
  EXPECT_EQ(d.Allocate(20 * kMiB), c);
  EXPECT_EQ(d.Allocate(12 * kMiB), b);
  EXPECT_EQ(d.Allocate(30 * kMiB), a);
}

TEST(DeviceBlockPool, CoalescesFreedNeighbours) {
  PoolDriver d;
  const uintptr_t big = d.Allocate(30 * kMiB);
  ASSERT_TRUE(d.pool.Free(big));
  const uintptr_t a = d.Allocate(10 * kMiB);
  const uintptr_t b = d.Allocate(10 * kMiB);
  const uintptr_t c = d.Allocate(10 * kMiB);
  ASSERT_EQ(b, a + 10 * kMiB);
  ASSERT_EQ(c, b + 10 * kMiB);
  ASSERT_TRUE(d.pool.Free(a));
  ASSERT_TRUE(d.pool.Free(c));
  EXPECT_EQ(d.pool.cached_blocks(), 2u);
  ASSERT_TRUE(d.pool.Free(b));  // merges with both neighbours
  EXPECT_EQ(d.pool.cached_blocks(), 1u);
  EXPECT_EQ(d.Allocate(30 * kMiB), big);
  EXPECT_EQ(d.pool.stats().segment_allocations, 1u);
}

TEST(DeviceBlockPool, DoesNotMergeAcrossSegments) {
  DeviceBlockPool pool;
  // Two segments that happen to be adjacent in the address space stay apart (cudaFree frees one allocation).
  const uintptr_t base = uintptr_t{1} << 32;
  const uintptr_t a = pool.AllocateFromSegment(base, 20 * kMiB, 20 * kMiB);
  const uintptr_t b = pool.AllocateFromSegment(base + 20 * kMiB, 20 * kMiB, 20 * kMiB);
  ASSERT_TRUE(pool.Free(a));
  ASSERT_TRUE(pool.Free(b));
  EXPECT_EQ(pool.cached_blocks(), 2u);
  EXPECT_FALSE(pool.TryAllocate(40 * kMiB).has_value());
  EXPECT_EQ(pool.ReleaseFreeSegments().size(), 2u);
}

TEST(DeviceBlockPool, ReleasesOnlyWhollyFreeSegments) {
  PoolDriver d;
  const uintptr_t a = d.Allocate(12 * kMiB);
  const uintptr_t b = d.Allocate(100);
  const uintptr_t c = d.Allocate(200);
  const uintptr_t e = d.Allocate(64 * kMiB);
  ASSERT_TRUE(d.pool.Free(a));
  ASSERT_TRUE(d.pool.Free(b));  // c keeps the small segment
  const std::vector<std::pair<uintptr_t, size_t>> released = d.pool.ReleaseFreeSegments();
  ASSERT_EQ(released.size(), 1u);
  EXPECT_EQ(released[0].first, a);
  EXPECT_EQ(released[0].second, 12 * kMiB);
  const DeviceBlockStats s = d.pool.stats();
  EXPECT_EQ(s.segments, 2u);
  EXPECT_EQ(s.reserved_bytes, 2 * kMiB + 64 * kMiB);
  EXPECT_EQ(s.allocated_bytes, 512 + 64 * kMiB);
  ASSERT_TRUE(d.pool.Free(c));
  ASSERT_TRUE(d.pool.Free(e));
  EXPECT_EQ(d.pool.ReleaseFreeSegments().size(), 2u);
  EXPECT_EQ(d.pool.stats().reserved_bytes, 0u);
  EXPECT_EQ(d.pool.cached_blocks(), 0u);
  EXPECT_EQ(d.pool.stats().segment_allocations, 3u);
}

TEST(DeviceBlockPool, TracksPeaksAndResetsThem) {
  PoolDriver d;
  const uintptr_t a = d.Allocate(30 * kMiB + 1);
  const uintptr_t b = d.Allocate(10 * kMiB);
  ASSERT_TRUE(d.pool.Free(a));
  DeviceBlockStats s = d.pool.stats();
  EXPECT_EQ(s.peak_requested_bytes, 40 * kMiB + 1);
  EXPECT_EQ(s.peak_allocated_bytes, 40 * kMiB + 512);
  EXPECT_EQ(s.peak_reserved_bytes, 42 * kMiB);
  EXPECT_EQ(s.allocated_bytes, 10 * kMiB);
  ASSERT_EQ(d.pool.ReleaseFreeSegments().size(), 1u);
  d.pool.ResetPeaks();
  s = d.pool.stats();
  EXPECT_EQ(s.peak_allocated_bytes, 10 * kMiB);
  EXPECT_EQ(s.peak_reserved_bytes, 10 * kMiB);
  ASSERT_TRUE(d.pool.Free(b));
  EXPECT_EQ(d.pool.stats().peak_allocated_bytes, 10 * kMiB);
}

// A step's pattern repeated: after the first, nothing new is obtained from the device and reserved stays put.
TEST(DeviceBlockPool, SteadyStateObtainsNothing) {
  PoolDriver d;
  const std::vector<size_t> sizes = {64 * kMiB, 64 * kMiB, 32 * kMiB, 4 * kMiB, 4 * kMiB, 256, 4096, 3 * kMiB};
  uint64_t reserved_after_first = 0;
  for (int step = 0; step < 5; ++step) {
    std::vector<uintptr_t> held;
    for (size_t s : sizes) held.push_back(d.Allocate(s));
    for (size_t i = 0; i < held.size(); i += 2) ASSERT_TRUE(d.pool.Free(held[i]));
    for (size_t i = 1; i < held.size(); i += 2) ASSERT_TRUE(d.pool.Free(held[i]));
    if (step == 0) reserved_after_first = d.pool.stats().reserved_bytes;
    EXPECT_EQ(d.pool.stats().reserved_bytes, reserved_after_first) << "step " << step;
  }
  EXPECT_EQ(d.pool.stats().allocated_bytes, 0u);
  EXPECT_EQ(d.pool.stats().requested_bytes, 0u);
}

TEST(DeviceMemoryLedger, SumsDeltasAndKeepsPeaks) {
  DeviceMemoryLedger ledger;
  ledger.Add(100, 512, 2 * kMiB);
  ledger.Add(1000, 1024, 0);
  ledger.Add(-100, -512, 0);
  DeviceBlockStats s = ledger.stats();
  EXPECT_EQ(s.requested_bytes, 1000u);
  EXPECT_EQ(s.allocated_bytes, 1024u);
  EXPECT_EQ(s.reserved_bytes, 2 * kMiB);
  EXPECT_EQ(s.peak_requested_bytes, 1100u);
  EXPECT_EQ(s.peak_allocated_bytes, 1536u);
  ledger.ResetPeaks();
  EXPECT_EQ(ledger.stats().peak_allocated_bytes, 1024u);
}

// Two users' windows over the peaks: each counts from its opening, and neither the other's opening nor ResetPeaks
// moves it (a second training started while the first runs).
TEST(DeviceMemoryLedger, PeakWindowsAreIndependent) {
  DeviceMemoryLedger ledger;
  ledger.Add(0, 4096, 4096);
  const int first = ledger.OpenPeakWindow();
  ledger.Add(0, 8192, 8192);  // the first training's step: 12288 at once
  ledger.Add(0, -8192, 0);
  const int second = ledger.OpenPeakWindow();
  ledger.ResetPeaks();
  ledger.Add(0, 1024, 0);
  EXPECT_EQ(ledger.WindowStats(first).peak_allocated_bytes, 12288u);
  EXPECT_EQ(ledger.WindowStats(first).peak_reserved_bytes, 12288u);
  EXPECT_EQ(ledger.WindowStats(second).peak_allocated_bytes, 5120u);
  EXPECT_EQ(ledger.WindowStats(second).allocated_bytes, 5120u);
  EXPECT_EQ(ledger.stats().peak_allocated_bytes, 5120u);
  ledger.ClosePeakWindow(first);
  EXPECT_EQ(ledger.WindowStats(first).peak_allocated_bytes, 5120u) << "a closed window reads the ledger's own";
  ledger.Add(0, 10000, 0);
  EXPECT_EQ(ledger.WindowStats(second).peak_allocated_bytes, 15120u);
}

}  // namespace
}  // namespace onnxamp::exec
