// The CUDA context and its caching allocator: allocation reuse, splitting and statistics, the device ledger, copies,
// the workspace, timing and out-of-memory handling. Each test skips without a CUDA device; the allocator's policy
// itself (DeviceBlockPool) is tested without one in tests/runtime/device_block_pool_test.cc.
#include "runtime/cuda/cuda_context.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include "runtime/cuda/caching_allocator.h"
#include "tests/cuda/cuda_op_test_util.h"

namespace onnxamp::cuda {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

std::unique_ptr<CudaContext> MakeContext() {
  StatusOr<std::unique_ptr<CudaContext>> ctx = CudaContext::Create(0);
  EXPECT_TRUE(ctx.ok()) << ctx.status().message();
  return ctx.ok() ? std::move(ctx).value() : nullptr;
}

TEST(CudaContextTest, DescribesItsDevice) {
  ONNXAMP_REQUIRE_CUDA();
  auto ctx = MakeContext();
  ASSERT_TRUE(ctx);
  EXPECT_EQ(ctx->device(), exec::Device::kCuda);
  EXPECT_EQ(ctx->Describe().rfind("cuda:0 ", 0), 0u) << ctx->Describe();
  EXPECT_NE(ctx->stream(), nullptr);
  EXPECT_NE(ctx->cublaslt(), nullptr);
  EXPECT_NE(ctx->cudnn(), nullptr);
  EXPECT_GT(ctx->total_memory_bytes(), 0u);
}

TEST(CudaContextTest, MissingDeviceIsAFailedPrecondition) {
  ONNXAMP_REQUIRE_CUDA();
  StatusOr<std::unique_ptr<CudaContext>> ctx = CudaContext::Create(1000);
  ASSERT_FALSE(ctx.ok());
  EXPECT_EQ(ctx.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(ctx.status().message().find("cuda:1000"), std::string::npos) << ctx.status().message();
}

TEST(CudaContextTest, ReleasedBlocksAreReusedWithoutCudaMalloc) {
  ONNXAMP_REQUIRE_CUDA();
  auto ctx = MakeContext();
  ASSERT_TRUE(ctx);
  const void* first = nullptr;
  {
    auto a = ctx->Allocate(1000);
    ASSERT_TRUE(a.ok()) << a.status().message();
    EXPECT_EQ((*a)->kind(), ir::MemoryKind::kCuda);
    EXPECT_EQ((*a)->size(), 1000u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>((*a)->data()) % 256, 0u);
    first = (*a)->data();
    const exec::DeviceMemoryStats s = ctx->memory_stats();
    EXPECT_EQ(s.in_use_bytes, 1024u);
    EXPECT_EQ(s.reserved_bytes, 2 * kMiB);  // a small-pool segment
    EXPECT_EQ(s.device_allocations, 1u);
  }
  exec::DeviceMemoryStats s = ctx->memory_stats();
  EXPECT_EQ(s.in_use_bytes, 0u);
  EXPECT_EQ(s.reserved_bytes, 2 * kMiB);
  EXPECT_EQ(s.peak_bytes, 1024u);
  auto b = ctx->Allocate(900);  // the cached block
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*b)->data(), first);
  EXPECT_EQ(ctx->memory_stats().device_allocations, 1u);
  auto c = ctx->Allocate(3 * kMiB);  // the large pool's first request: a 20 MiB segment
  ASSERT_TRUE(c.ok());
  const void* large = (*c)->data();
  s = ctx->memory_stats();
  EXPECT_EQ(s.device_allocations, 2u);
  EXPECT_EQ(s.in_use_bytes, 1024u + 3 * kMiB);
  EXPECT_EQ(s.peak_bytes, 1024u + 3 * kMiB);
  EXPECT_EQ(s.reserved_bytes, 22 * kMiB);
  c->reset();
  ctx->ResetPeak();
  EXPECT_EQ(ctx->memory_stats().peak_bytes, 1024u);
  auto d = ctx->Allocate(16 * kMiB);  // the front of the cached 20 MiB segment, no cudaMalloc
  ASSERT_TRUE(d.ok());
  EXPECT_EQ((*d)->data(), large);
  EXPECT_EQ(ctx->memory_stats().device_allocations, 2u);
  EXPECT_EQ(ctx->memory_stats().in_use_bytes, 1024u + 16 * kMiB);
  auto f = ctx->Allocate(64 * kMiB);  // nothing cached holds it
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(ctx->memory_stats().device_allocations, 3u);
  auto e = ctx->Allocate(0);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ((*e)->size(), 0u);
  EXPECT_EQ((*e)->kind(), ir::MemoryKind::kCuda);
}

// Blocks split from one segment do not overlap, merge again when freed, and EmptyCache gives wholly free segments back.
TEST(CachingAllocatorTest, SplitBlocksAreDisjointAndEmptyCacheFreesSegments) {
  ONNXAMP_REQUIRE_CUDA();
  std::shared_ptr<CachingAllocator> alloc = CachingAllocator::Create(0);
  const void* base = nullptr;
  {
    auto whole = alloc->Allocate(64 * kMiB);
    ASSERT_TRUE(whole.ok()) << whole.status().message();
    base = (*whole)->data();
  }
  auto a = alloc->Allocate(16 * kMiB);
  auto b = alloc->Allocate(16 * kMiB);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ((*a)->data(), base);
  EXPECT_EQ((*b)->data(), static_cast<const std::byte*>(base) + 16 * kMiB);
  EXPECT_EQ(alloc->block_stats().segment_allocations, 1u);
  EXPECT_EQ(alloc->block_stats().allocated_bytes, 32 * kMiB);
  std::vector<uint8_t> ones(16 * kMiB, 1), twos(16 * kMiB, 2), back(16 * kMiB, 0);
  ASSERT_EQ(cudaMemcpy((*a)->data(), ones.data(), ones.size(), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy((*b)->data(), twos.data(), twos.size(), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(back.data(), (*a)->data(), back.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(back, ones);
  ASSERT_TRUE(alloc->EmptyCache().ok());
  EXPECT_EQ(alloc->block_stats().reserved_bytes, 64 * kMiB) << "a segment with blocks lent out stays";
  a->reset();
  b->reset();
  EXPECT_EQ(alloc->block_stats().allocated_bytes, 0u);
  ASSERT_TRUE(alloc->EmptyCache().ok());
  EXPECT_EQ(alloc->block_stats().reserved_bytes, 0u);
  EXPECT_EQ(alloc->block_stats().peak_allocated_bytes, 64 * kMiB);
}

// Every allocator of a device adds to one ledger: its peak is the device's, whichever allocator held the blocks.
TEST(CachingAllocatorTest, DeviceLedgerSumsTheAllocatorsOfADevice) {
  ONNXAMP_REQUIRE_CUDA();
  exec::DeviceMemoryLedger& ledger = CachingAllocator::DeviceLedger(0);
  const exec::DeviceBlockStats start = ledger.stats();
  ledger.ResetPeaks();
  std::shared_ptr<CachingAllocator> one = CachingAllocator::Create(0);
  std::shared_ptr<CachingAllocator> two = CachingAllocator::Create(0);
  {
    auto a = one->Allocate(32 * kMiB);
    ASSERT_TRUE(a.ok());
    auto b = two->Allocate(16 * kMiB);
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(ledger.stats().allocated_bytes, start.allocated_bytes + 48 * kMiB);
  }
  // Each allocator alone peaked lower than the two together.
  auto c = two->Allocate(8 * kMiB);
  ASSERT_TRUE(c.ok());
  const exec::DeviceBlockStats s = ledger.stats();
  EXPECT_EQ(s.allocated_bytes, start.allocated_bytes + 8 * kMiB);
  EXPECT_EQ(s.peak_allocated_bytes, start.allocated_bytes + 48 * kMiB);
  EXPECT_EQ(s.reserved_bytes, start.reserved_bytes + 48 * kMiB);
  c->reset();
  ASSERT_TRUE(one->EmptyCache().ok());
  ASSERT_TRUE(two->EmptyCache().ok());
  EXPECT_EQ(ledger.stats().reserved_bytes, start.reserved_bytes);
  EXPECT_EQ(ledger.stats().allocated_bytes, start.allocated_bytes);
}

TEST(CudaContextTest, CopiesRoundTrip) {
  ONNXAMP_REQUIRE_CUDA();
  auto ctx = MakeContext();
  ASSERT_TRUE(ctx);
  for (size_t n : {size_t{1}, size_t{1000}, size_t{3} * kMiB + 7}) {
    std::vector<uint8_t> src(n), back(n, 0);
    std::iota(src.begin(), src.end(), uint8_t{3});
    auto a = ctx->Allocate(n);
    auto b = ctx->Allocate(n);
    ASSERT_TRUE(a.ok() && b.ok());
    ASSERT_TRUE(ctx->CopyHostToDevice(src.data(), (*a)->data(), n).ok());
    ASSERT_TRUE(ctx->CopyDeviceToDevice((*a)->data(), (*b)->data(), n).ok());
    ASSERT_TRUE(ctx->CopyDeviceToHost((*b)->data(), back.data(), n).ok());
    EXPECT_EQ(back, src) << n;
  }
  EXPECT_TRUE(ctx->CopyHostToDevice(nullptr, nullptr, 0).ok());
  EXPECT_TRUE(ctx->Synchronize().ok());
}

TEST(CudaContextTest, WorkspaceGrowsAndIsReused) {
  ONNXAMP_REQUIRE_CUDA();
  auto ctx = MakeContext();
  ASSERT_TRUE(ctx);
  auto zero = ctx->Workspace(0);
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ(*zero, nullptr);
  auto small = ctx->Workspace(1000);
  ASSERT_TRUE(small.ok());
  ASSERT_NE(*small, nullptr);
  auto smaller = ctx->Workspace(10);
  ASSERT_TRUE(smaller.ok());
  EXPECT_EQ(*smaller, *small);
  const uint64_t in_use = ctx->memory_stats().in_use_bytes;
  auto big = ctx->Workspace(8 * kMiB);
  ASSERT_TRUE(big.ok());
  ASSERT_NE(*big, nullptr);
  EXPECT_GE(ctx->memory_stats().in_use_bytes, in_use + 8 * kMiB - 1024);
  // Usable: write it and read it back.
  std::vector<uint8_t> ones(8 * kMiB, 1), back(8 * kMiB, 0);
  ASSERT_TRUE(ctx->CopyHostToDevice(ones.data(), *big, ones.size()).ok());
  ASSERT_TRUE(ctx->CopyDeviceToHost(*big, back.data(), back.size()).ok());
  EXPECT_EQ(back, ones);
}

TEST(CudaContextTest, OutOfMemoryIsResourceExhausted) {
  ONNXAMP_REQUIRE_CUDA();
  auto ctx = MakeContext();
  ASSERT_TRUE(ctx);
  auto keep = ctx->Allocate(1000);
  ASSERT_TRUE(keep.ok());
  // A wholly free cached segment, which the failed allocation gives back to the device before it retries.
  ASSERT_TRUE(ctx->Allocate(4 * kMiB).ok());
  const exec::DeviceBlockStats before = CachingAllocator::DeviceLedger(0).stats();
  const size_t huge = size_t{1} << 50;  // 1 PiB
  auto a = ctx->Allocate(huge);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(a.status().message().find(std::to_string(huge)), std::string::npos) << a.status().message();
  EXPECT_NE(a.status().message().find("1024 bytes in use"), std::string::npos) << a.status().message();
  // The device's ledger lost that segment once (counted twice, its unsigned total wrapped around).
  const exec::DeviceBlockStats after = CachingAllocator::DeviceLedger(0).stats();
  EXPECT_EQ(before.reserved_bytes - after.reserved_bytes, exec::DeviceBlockPool::SegmentBytes(4 * kMiB));
  EXPECT_EQ(after.allocated_bytes, before.allocated_bytes);
  // The context still works afterwards.
  auto b = ctx->Allocate(1000);
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_TRUE(ctx->Synchronize().ok());
}

TEST(CudaContextTest, TimingMeasuresDeviceWork) {
  ONNXAMP_REQUIRE_CUDA();
  auto ctx = MakeContext();
  ASSERT_TRUE(ctx);
  auto a = ctx->Allocate(64 * kMiB);
  auto b = ctx->Allocate(64 * kMiB);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(ctx->BeginTiming().ok());
  ASSERT_TRUE(ctx->CopyDeviceToDevice((*a)->data(), (*b)->data(), 64 * kMiB).ok());
  StatusOr<double> seconds = ctx->EndTiming();
  ASSERT_TRUE(seconds.ok()) << seconds.status().message();
  EXPECT_GT(*seconds, 0.0);
  EXPECT_LT(*seconds, 10.0);
}

TEST(CudaContextTest, BuffersMayOutliveTheirContext) {
  ONNXAMP_REQUIRE_CUDA();
  auto ctx = MakeContext();
  ASSERT_TRUE(ctx);
  auto a = ctx->Allocate(4096);
  ASSERT_TRUE(a.ok());
  std::shared_ptr<ir::Buffer> kept = std::move(a).value();
  ctx.reset();
  kept.reset();  // returns the block to the allocator, which then frees everything
  SUCCEED();
}

}  // namespace
}  // namespace onnxamp::cuda
