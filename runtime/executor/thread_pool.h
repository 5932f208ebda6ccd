// Data-parallel loops inside kernels, on a fixed pool of std::threads. The caller and the workers take the chunks
// of a loop from a shared counter, so a worker that is slow to wake (or has lost its core to another process) delays
// no chunk it has not started; idle workers poll briefly for the next loop, then sleep (thread_pool.cc).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace onnxamp::exec {

class ThreadPool {
 public:
  // `num_threads` counts the calling thread; 0 means one per hardware thread. 1 runs everything inline.
  explicit ThreadPool(int num_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_ > 0 ? num_threads_ : static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) over disjoint ranges covering [0, n), in parallel when n is at least 2 * grain.
  // Ranges are at least `grain` long (except the last). Returns when all calls have returned. Not reentrant:
  // a ParallelFor inside fn runs inline.
  void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void WorkerLoop();
  void RunChunks();

  int num_threads_ = 0;  // the calling thread and the workers
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  bool stop_ = false;
  uint64_t generation_ = 0;
  // The current loop.
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  int64_t chunk_ = 0;
  int64_t num_chunks_ = 0;
  int64_t next_chunk_ = 0;   // guarded by mu_
  int64_t chunks_done_ = 0;  // guarded by mu_
  bool busy_ = false;
};

}  // namespace onnxamp::exec
