// ThreadPool: std::thread workers take chunks of the current loop from a shared counter, and so does the caller. A
// worker waits for the next loop by polling for a short while (kSpinWait) and then sleeping on a condition variable;
// the caller waits for the chunks taken by others the same way. Because chunks are taken rather than assigned, a
// worker that has not woken up yet, or has lost its core to another process, holds up no chunk it has not started:
// the caller runs it. (OpenMP's team, which the loops used before, assigns every member its share and waits for all
// of them at the end of each region; on a machine whose cores are busy with other work, a member that spins on the
// caller's core made each region wait for a time slice, and runs 100 to 800 times slower than on one thread.)
//
// Built with OpenMP, the constructor still sets OpenMP's team size to num_threads, for oneDNN primitives that run
// with OneDnnThreading::kShared (runtime/ops/common/gemm.h); the default, kSplit, runs oneDNN single-threaded on the
// pool's threads.
#include "runtime/executor/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>

#ifdef ONNXAMP_WITH_OPENMP
#include <omp.h>
#endif

namespace onnxamp::exec {
namespace {

// How a waiting thread polls before it sleeps: with the pause instruction for kPauseWait, then yielding its core
// between polls (to a thread it may be waiting for, on a machine with more threads than cores) up to kSpinWait. Longer
// than the gap between two loops of consecutive small nodes, so that a worker is usually still polling when the next
// loop starts and waking it costs no system call.
constexpr std::chrono::microseconds kPauseWait{20};
constexpr std::chrono::microseconds kSpinWait{300};

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

// Polls `done()` for up to kSpinWait; true when it became true.
template <typename Done>
bool SpinUntil(Done&& done) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 1;; ++i) {
    if (done()) return true;
    CpuRelax();
    if (i % 64 == 0 && std::chrono::steady_clock::now() - start >= kPauseWait) break;
  }
  for (;;) {
    if (done()) return true;
    std::this_thread::yield();
    if (std::chrono::steady_clock::now() - start >= kSpinWait) return done();
  }
}

// generation_ and chunks_done_ are written under mu_ but also polled without it: every access goes through these.
template <typename T>
inline T Load(const T& v) {
  return std::atomic_ref<T>(const_cast<T&>(v)).load(std::memory_order_acquire);
}
template <typename T>
inline void Store(T& v, T value) {
  std::atomic_ref<T>(v).store(value, std::memory_order_release);
}

}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0) num_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
#ifdef ONNXAMP_WITH_OPENMP
  omp_set_num_threads(num_threads);  // the team of oneDNN primitives under OneDnnThreading::kShared
#endif
  num_threads_ = num_threads;
  for (int i = 1; i < num_threads; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::RunChunks() {
  for (;;) {
    const std::function<void(int64_t, int64_t)>* fn;
    int64_t begin, end;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!busy_ || next_chunk_ >= num_chunks_) return;
      const int64_t chunk = next_chunk_++;
      fn = fn_;
      begin = chunk * chunk_;
      end = std::min(n_, begin + chunk_);
    }
    (*fn)(begin, end);
    bool last;
    {
      std::lock_guard<std::mutex> lock(mu_);
      Store(chunks_done_, Load(chunks_done_) + 1);
      last = Load(chunks_done_) == num_chunks_;
    }
    if (last) done_cv_.notify_all();
  }
}

void ThreadPool::WorkerLoop() {
  uint64_t seen = 0;
  for (;;) {
    SpinUntil([&] { return Load(generation_) != seen; });
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [&] { return stop_ || Load(generation_) != seen; });
      if (stop_) return;
      seen = Load(generation_);
    }
    RunChunks();
  }
}

void ThreadPool::ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t max_chunks = std::min<int64_t>(num_threads(), n / grain);
  bool inline_run = workers_.empty() || max_chunks < 2;
  int64_t num_chunks = 0;
  if (!inline_run) {
    std::lock_guard<std::mutex> lock(mu_);
    if (busy_) {
      inline_run = true;  // nested or concurrent use: run on the caller
    } else {
      busy_ = true;
      fn_ = &fn;
      n_ = n;
      chunk_ = (n + max_chunks - 1) / max_chunks;
      num_chunks_ = num_chunks = (n + chunk_ - 1) / chunk_;
      next_chunk_ = 0;
      Store(chunks_done_, int64_t{0});
      Store(generation_, Load(generation_) + 1);
    }
  }
  if (inline_run) {
    fn(0, n);
    return;
  }
  work_cv_.notify_all();
  RunChunks();
  // Every chunk is taken by now; wait for those still running on other threads.
  if (!SpinUntil([&] { return Load(chunks_done_) == num_chunks; })) {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [&] { return Load(chunks_done_) == num_chunks_; });
  }
  std::lock_guard<std::mutex> lock(mu_);
  busy_ = false;
  fn_ = nullptr;
}

}  // namespace onnxamp::exec
