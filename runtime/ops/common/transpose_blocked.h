// The blocked 2-D transpose of the Transpose op (runtime/ops/transpose/), shared with the kernels that transpose an
// operand themselves (the small GEMM's transposed B, gemm_small.h).
#pragma once

#include <algorithm>
#include <cstdint>

#include "runtime/executor/thread_pool.h"
#include "runtime/ops/common/shape_util.h"

namespace onnxamp::ops {

// Transposes tiles of a batch of matrices: src element (b, a) of batch item n is at src_batch[n] + b * src_b + a,
// written to dst_batch[n] + a * dst_a + b; a < len_a, b < len_b.
template <typename T>
void BlockedTranspose2D(const T* src, T* dst, int64_t len_a, int64_t len_b, int64_t src_b, int64_t dst_a,
                        const DimVector& batch_dims, const DimVector& batch_src_strides,
                        const DimVector& batch_dst_strides, exec::ThreadPool* pool) {
  // Square tiles small enough that the strided side touches no more cache lines than L1 holds in one set.
  constexpr int64_t kTile = sizeof(T) >= 8 ? 8 : 16;
  const int64_t tiles_a = (len_a + kTile - 1) / kTile;
  const int64_t batch = DimProduct(batch_dims, 0, batch_dims.size());
  const int64_t units = batch * tiles_a;  // one unit: a strip of kTile columns of a, all rows of b
  const size_t batch_rank = batch_dims.size();
  const int64_t* bdims = batch_dims.data();
  const int64_t* bsrc = batch_src_strides.data();
  const int64_t* bdst = batch_dst_strides.data();
  auto run = [&](int64_t begin, int64_t end) {
    for (int64_t u = begin; u < end; ++u) {
      int64_t n = u / tiles_a;
      const int64_t a0 = (u % tiles_a) * kTile;
      int64_t src_off = 0, dst_off = 0;
      for (size_t k = batch_rank; k-- > 0;) {
        const int64_t i = n % bdims[k];
        n /= bdims[k];
        src_off += i * bsrc[k];
        dst_off += i * bdst[k];
      }
      const T* s = src + src_off;
      T* d = dst + dst_off;
      const int64_t a1 = std::min(len_a, a0 + kTile);
      for (int64_t b0 = 0; b0 < len_b; b0 += kTile) {
        const int64_t b1 = std::min(len_b, b0 + kTile);
        if (a1 - a0 == kTile && b1 - b0 == kTile) {
          // Full tile: fixed trip counts let the compiler unroll.
          for (int64_t a = 0; a < kTile; ++a) {
            T* drow = d + (a0 + a) * dst_a + b0;
            const T* scol = s + b0 * src_b + a0 + a;
            for (int64_t b = 0; b < kTile; ++b) drow[b] = scol[b * src_b];
          }
        } else {
          for (int64_t a = a0; a < a1; ++a)
            for (int64_t b = b0; b < b1; ++b) d[a * dst_a + b] = s[b * src_b + a];
        }
      }
    }
  };
  const int64_t per_unit = std::max<int64_t>(1, kTile * len_b);
  const int64_t grain = std::max<int64_t>(1, (1 << 15) / per_unit);
  if (pool && units >= 2 * grain) {
    pool->ParallelFor(units, grain, run);
  } else {
    run(0, units);
  }
}

}  // namespace onnxamp::ops
