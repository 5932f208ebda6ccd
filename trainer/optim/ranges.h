// The element loops of a training step (optimizer, unscale, moving average, weight copies) in ranges on a thread
// pool. Each element is computed on its own, so the results are the same bits with any pool or none.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "runtime/executor/thread_pool.h"

namespace onnxamp::trainer {

// Elements per range: 128 KiB of each float array.
inline constexpr int64_t kStepRangeElements = int64_t{1} << 15;

// fn(begin, end) over disjoint ranges covering [0, n): on `pool` when there is one with more than one thread and n
// is at least two ranges, else once on the calling thread.
inline void ForRanges(exec::ThreadPool* pool, size_t n, const std::function<void(size_t, size_t)>& fn) {
  if (pool == nullptr || pool->num_threads() <= 1 || static_cast<int64_t>(n) < 2 * kStepRangeElements) {
    fn(0, n);
    return;
  }
  pool->ParallelFor(static_cast<int64_t>(n), kStepRangeElements,
                    [&](int64_t b, int64_t e) { fn(static_cast<size_t>(b), static_cast<size_t>(e)); });
}

}  // namespace onnxamp::trainer
