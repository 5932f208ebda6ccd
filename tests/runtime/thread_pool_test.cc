// ThreadPool beyond session_test.cc's coverage check: many loops back to back (workers still polling for the next
// loop), loops after the workers have gone to sleep, the grain, two callers at once, and a loop whose chunks need
// both threads at once.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "runtime/executor/thread_pool.h"

namespace onnxamp::exec {
namespace {

// Runs one loop over [0, n) that counts every index it visits; expects each visited exactly once.
void ExpectCoveredOnce(ThreadPool& pool, int64_t n, int64_t grain) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
  pool.ParallelFor(n, grain, [&](int64_t b, int64_t e) {
    ASSERT_LE(0, b);
    ASSERT_LE(b, e);
    ASSERT_LE(e, n);
    for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
  });
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "n " << n << " index " << i;
}

TEST(ThreadPool, ManyLoopsBackToBack) {
  for (int threads : {2, 3}) {
    ThreadPool pool(threads);
    for (int i = 0; i < 5000; ++i) ExpectCoveredOnce(pool, 2 + i % 37, 1);
  }
}

TEST(ThreadPool, LoopsAfterTheWorkersSleep) {
  ThreadPool pool(2);
  for (int i = 0; i < 5; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // far past the workers' polling
    ExpectCoveredOnce(pool, 1000, 10);
  }
}

TEST(ThreadPool, ChunksRespectTheGrain) {
  ThreadPool pool(4);
  std::atomic<int> short_chunks{0}, chunks{0};
  pool.ParallelFor(100, 30, [&](int64_t b, int64_t e) {
    ++chunks;
    if (e - b < 30 && e != 100) ++short_chunks;
  });
  EXPECT_EQ(short_chunks.load(), 0);
  EXPECT_GE(chunks.load(), 1);
  EXPECT_LE(chunks.load(), 3);  // at most n / grain chunks
  // Less than two grains of work runs inline, in one call.
  chunks = 0;
  pool.ParallelFor(59, 30, [&](int64_t b, int64_t e) {
    ++chunks;
    EXPECT_EQ(b, 0);
    EXPECT_EQ(e, 59);
  });
  EXPECT_EQ(chunks.load(), 1);
}

TEST(ThreadPool, TwoCallersAtOnce) {
  ThreadPool pool(2);
  std::atomic<bool> failed{false};
  auto caller = [&] {
    for (int i = 0; i < 2000; ++i) {
      std::vector<std::atomic<int>> hits(64);
      pool.ParallelFor(64, 1, [&](int64_t b, int64_t e) {
        for (int64_t j = b; j < e; ++j) hits[static_cast<size_t>(j)]++;
      });
      for (auto& h : hits) failed = failed || h.load() != 1;
    }
  };
  std::thread other(caller);
  caller();
  other.join();
  EXPECT_FALSE(failed.load());
}

TEST(ThreadPool, WorkersTakeChunksAndNestedLoopsRunInline) {
  // The loop's chunks each wait until both have started, so a worker must take one; a loop started from inside it
  // (nested) runs inline on that thread.
  ThreadPool pool(2);
  std::atomic<int> started{0};
  std::atomic<int64_t> inner_total{0};
  pool.ParallelFor(2, 1, [&](int64_t, int64_t) {
    ++started;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (started.load() < 2 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    pool.ParallelFor(10, 1, [&](int64_t b, int64_t e) { inner_total += e - b; });
  });
  EXPECT_EQ(started.load(), 2);
  EXPECT_EQ(inner_total.load(), 20);
}

}  // namespace
}  // namespace onnxamp::exec
