// Softmax and LogSoftmax along one axis of a tensor viewed as [outer, n, inner], computed stably (the maximum
// along the axis is subtracted before exponentiating) with accumulation in ComputeType<T> (float for fp16/bf16).
// Used by Softmax/LogSoftmax and by SoftmaxCrossEntropyLoss.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "runtime/executor/thread_pool.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/common/elementwise_half.h"
#include "runtime/ops/common/elementwise_math.h"
#include "runtime/ops/common/reduce.h"

namespace onnxamp::ops::reduce {

// Outputs of the strided ([outer, n, inner > 1]) path are processed in blocks of this many positions of `inner`.
inline constexpr int64_t kSoftmaxInnerBlock = 256;

// NaN-propagating maximum (a row holding NaN gives NaN, as NumPy does).
template <typename A>
inline A MaxPropagatingNan(A a, A b) {
  return ((a >= b) | (a != a)) ? a : b;
}

// Maximum (NaN-propagating) and sum of a contiguous run, in kLanes independent lanes so the loops vectorise.
template <typename A>
inline A RunMax(const A* x, int64_t n) {
  A lanes[kLanes];
  for (A& l : lanes) l = -std::numeric_limits<A>::infinity();
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    for (int l = 0; l < kLanes; ++l) lanes[l] = MaxPropagatingNan(lanes[l], x[j + l]);
  }
  A m = -std::numeric_limits<A>::infinity();
  for (; j < n; ++j) m = MaxPropagatingNan(m, x[j]);
  for (int l = 0; l < kLanes; ++l) m = MaxPropagatingNan(m, lanes[l]);
  return m;
}

template <typename A>
inline A RunSum(const A* x, int64_t n) {
  A lanes[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    for (int l = 0; l < kLanes; ++l) lanes[l] += x[j + l];
  }
  A s = 0;
  for (; j < n; ++j) s += x[j];
  for (A l : lanes) s += l;
  return s;
}

// Row `row` (n values of T) in the compute type: the row itself when T is its own compute type, else converted
// into `buffer` (vector conversions, elementwise_half.h).
template <typename T>
inline const ComputeType<T>* RowInComputeType(const T* row, int64_t n, ComputeType<T>* buffer) {
  if constexpr (std::is_same_v<T, ComputeType<T>>) {
    return row;
  } else {
    LoadBlock(row, buffer, n);
    return buffer;
  }
}

// A scratch row of the calling thread (slot 0 or 1), grown as needed and kept: no allocation per call.
template <typename A>
inline A* SoftmaxScratch(int slot, int64_t n) {
  thread_local std::vector<A> rows[2];
  std::vector<A>& r = rows[slot];
  if (r.size() < static_cast<size_t>(n)) r.resize(static_cast<size_t>(n));
  return r.data();
}

// e^d for a difference d = x - max (float: flushed to 0 below kSoftmaxExpFloor, see elementwise_math.h).
template <typename A>
inline A ShiftedExp(A d) {
  if constexpr (std::is_same_v<A, float>) {
    return SoftmaxExp(d);
  } else {
    return std::exp(d);
  }
}

// One contiguous row: its maximum m, e[j] = exp(x[j] - m), and the sum of e (e may be x's own storage only when
// x is not needed afterwards).
template <typename A>
inline A ExpRow(const A* x, int64_t n, A* e, A* max) {
  if constexpr (std::is_same_v<A, float>) {
    // Both passes vectorized for the CPU's widest ISA (elementwise_math.h).
    const float m = MaxArray(x, n);
    *max = m;
    return SoftmaxExpArray(x, m, e, n);
  } else {
    const A m = RunMax(x, n);
    *max = m;
    for (int64_t j = 0; j < n; ++j) e[j] = ShiftedExp<A>(x[j] - m);
    return RunSum(e, n);
  }
}

// For `w` adjacent columns of a [n, inner] block starting at `base`: m = the column max (NaN propagates), s = the
// sum over the n rows of exp(x - m).
template <typename A, typename T>
inline void BlockMaxAndExpSum(const T* base, int64_t n, int64_t inner, int64_t w, A* m, A* s) {
  for (int64_t i = 0; i < w; ++i) m[i] = -std::numeric_limits<A>::infinity();
  for (int64_t j = 0; j < n; ++j) {
    const T* row = base + j * inner;
    for (int64_t i = 0; i < w; ++i) m[i] = MaxPropagatingNan(m[i], LoadFast<T>(row[i]));
  }
  for (int64_t i = 0; i < w; ++i) s[i] = 0;
  for (int64_t j = 0; j < n; ++j) {
    const T* row = base + j * inner;
    for (int64_t i = 0; i < w; ++i) s[i] += ShiftedExp<A>(LoadFast<T>(row[i]) - m[i]);
  }
}

// For every (o, i): max[o*inner + i] = max over j of x[o, j, i] and log_sum[...] = log(sum over j of
// exp(x[o, j, i] - max)), so that LogSoftmax(x) = x - max - log_sum and Softmax(x) = exp(x - max) / exp(log_sum).
template <typename T>
void LogSoftmaxStats(const T* x, int64_t outer, int64_t n, int64_t inner, ComputeType<T>* max, ComputeType<T>* log_sum,
                     exec::ThreadPool& pool) {
  using A = ComputeType<T>;
  if (inner == 1) {
    ParallelOver(pool, outer, n, [&](int64_t o0, int64_t o1) {
      A* xbuf = SoftmaxScratch<A>(0, n);
      A* e = SoftmaxScratch<A>(1, n);
      for (int64_t o = o0; o < o1; ++o) {
        const A* row = RowInComputeType(x + o * n, n, xbuf);
        log_sum[o] = std::log(ExpRow(row, n, e, &max[o]));
      }
    });
    return;
  }
  const int64_t blocks = (inner + kSoftmaxInnerBlock - 1) / kSoftmaxInnerBlock;
  ParallelOver(pool, outer * blocks, n * std::min(inner, kSoftmaxInnerBlock), [&](int64_t u0, int64_t u1) {
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t o = u / blocks, i0 = (u % blocks) * kSoftmaxInnerBlock;
      const int64_t w = std::min(kSoftmaxInnerBlock, inner - i0);
      A* m = max + o * inner + i0;
      A* s = log_sum + o * inner + i0;
      const T* base = x + o * n * inner + i0;
      BlockMaxAndExpSum<A>(base, n, inner, w, m, s);
      for (int64_t i = 0; i < w; ++i) s[i] = std::log(s[i]);
    }
  });
}

// y = Softmax(x) or LogSoftmax(x) along the middle dimension of [outer, n, inner]. x and y may not overlap.
template <typename T>
void SoftmaxForward(const T* x, T* y, int64_t outer, int64_t n, int64_t inner, bool log_softmax,
                    exec::ThreadPool& pool) {
  using A = ComputeType<T>;
  if (inner == 1) {
    // Contiguous rows, three passes: the maximum, exp(x - max) and its sum (into the output row itself for float
    // Softmax, else a scratch row), then the scale (or shift); 16-bit rows are converted in and out in blocks.
    ParallelOver(pool, outer, n, [&](int64_t o0, int64_t o1) {
      A* xbuf = SoftmaxScratch<A>(0, n);
      A* e = SoftmaxScratch<A>(1, n);
      for (int64_t o = o0; o < o1; ++o) {
        const A* row = RowInComputeType(x + o * n, n, xbuf);
        T* out = y + o * n;
        A m;
        if (log_softmax) {
          const A s = ExpRow(row, n, e, &m);
          // (x - m) - log(s) rather than x - (m + log s): x - m is exact near the maximum.
          const A log_s = std::log(s);
          for (int64_t j = 0; j < n; ++j) e[j] = (row[j] - m) - log_s;
        } else if constexpr (std::is_same_v<T, A>) {
          const A inv = A(1) / ExpRow(row, n, out, &m);
          for (int64_t j = 0; j < n; ++j) out[j] *= inv;
          continue;
        } else {
          const A inv = A(1) / ExpRow(row, n, e, &m);
          for (int64_t j = 0; j < n; ++j) e[j] *= inv;
        }
        StoreBlock(e, out, n);
      }
    });
    return;
  }
  // Strided: per block of inner positions, the max and sum advance row by row (vectorisable across i).
  const int64_t blocks = (inner + kSoftmaxInnerBlock - 1) / kSoftmaxInnerBlock;
  ParallelOver(pool, outer * blocks, n * std::min(inner, kSoftmaxInnerBlock), [&](int64_t u0, int64_t u1) {
    A m[kSoftmaxInnerBlock], s[kSoftmaxInnerBlock];
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t o = u / blocks, i0 = (u % blocks) * kSoftmaxInnerBlock;
      const int64_t w = std::min(kSoftmaxInnerBlock, inner - i0);
      const T* base = x + o * n * inner + i0;
      T* out = y + o * n * inner + i0;
      BlockMaxAndExpSum<A>(base, n, inner, w, m, s);
      if (log_softmax) {
        for (int64_t i = 0; i < w; ++i) s[i] = std::log(s[i]);
        for (int64_t j = 0; j < n; ++j) {
          const T* row = base + j * inner;
          T* dst = out + j * inner;
          for (int64_t i = 0; i < w; ++i) dst[i] = StoreFast<T>((LoadFast<T>(row[i]) - m[i]) - s[i]);
        }
      } else {
        for (int64_t i = 0; i < w; ++i) s[i] = A(1) / s[i];
        for (int64_t j = 0; j < n; ++j) {
          const T* row = base + j * inner;
          T* dst = out + j * inner;
          for (int64_t i = 0; i < w; ++i) dst[i] = StoreFast<T>(ShiftedExp<A>(LoadFast<T>(row[i]) - m[i]) * s[i]);
        }
      }
    }
  });
}

}  // namespace onnxamp::ops::reduce
