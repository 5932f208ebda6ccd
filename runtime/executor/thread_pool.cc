// ThreadPool: workers sleep on a condition variable and take chunks of the current loop.
#include "runtime/executor/thread_pool.h"

#include <algorithm>

#ifdef ONNXAMP_WITH_OPENMP
#include <omp.h>
#endif

namespace onnxamp::exec {

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0) num_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
#ifdef ONNXAMP_WITH_OPENMP
  num_threads_ = num_threads;
  omp_set_num_threads(num_threads);  // oneDNN's primitives size their parallel regions by this too
#else
  for (int i = 1; i < num_threads; ++i) workers_.emplace_back([this] { WorkerLoop(); });
#endif
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
      last = ++chunks_done_ == num_chunks_;
    }
    if (last) done_cv_.notify_all();
  }
}

void ThreadPool::WorkerLoop() {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    RunChunks();
  }
}

void ThreadPool::ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t max_chunks = std::min<int64_t>(num_threads(), n / grain);
#ifdef ONNXAMP_WITH_OPENMP
  if (max_chunks < 2 || omp_in_parallel()) {
    fn(0, n);
    return;
  }
  const int64_t chunk = (n + max_chunks - 1) / max_chunks;
  const int64_t chunks = (n + chunk - 1) / chunk;
#pragma omp parallel for num_threads(static_cast <int>(chunks)) schedule(static, 1)
  for (int64_t c = 0; c < chunks; ++c) fn(c * chunk, std::min(n, (c + 1) * chunk));
  return;
#endif
  bool inline_run = workers_.empty() || max_chunks < 2;
  if (!inline_run) {
    std::lock_guard<std::mutex> lock(mu_);
    if (busy_) {
      inline_run = true;  // nested or concurrent use: run on the caller
    } else {
      busy_ = true;
      fn_ = &fn;
      n_ = n;
      num_chunks_ = max_chunks;
      chunk_ = (n + max_chunks - 1) / max_chunks;
      num_chunks_ = (n + chunk_ - 1) / chunk_;
      next_chunk_ = 0;
      chunks_done_ = 0;
      ++generation_;
    }
  }
  if (inline_run) {
    fn(0, n);
    return;
  }
  work_cv_.notify_all();
  RunChunks();
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return chunks_done_ == num_chunks_; });
  busy_ = false;
  fn_ = nullptr;
}

}  // namespace onnxamp::exec
