// The AVX2 float GEMM (see gemm_avx2.h): B packed in strips of 16 columns, A in panels of 6 rows, a 6 x 16 register
// kernel.
#include "runtime/ops/common/gemm_avx2.h"

#include <algorithm>
#include <atomic>
#include <vector>

#include "runtime/common/cpu_features.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define ONNXAMP_GEMM_AVX2_KERNELS 1
#define ONNXAMP_AVX2_TARGET __attribute__((target("avx2,fma")))
#endif

namespace onnxamp::ops {
namespace {

constexpr int kMr = 6;                              // rows of C per register block
constexpr int kNr = static_cast<int>(kGemmAvx2Nr);  // columns of C per register block (two vectors of 8)
constexpr int64_t kKc = kGemmAvx2Kc;                // rows of op(B) per block
constexpr int64_t kNcMin = 256;   // fewest columns of C per task (16 strips: a 256 x 256 block of B is 256 KiB)
constexpr int64_t kNcMax = 1024;  // most columns of C per task (each task packs its rows of A once per block of K)
constexpr int64_t kTasksPerThread = 4;    // tasks per thread, so that a thread that loses its core delays few columns
constexpr int64_t kMc = 120;              // rows of A per pass over the strips of a block (120 x 256 floats: 120 KiB)
constexpr double kMinFlopsPerTask = 2e6;  // smaller problems run on the calling thread

std::atomic<GemmAvx2Use> g_use{GemmAvx2Use::kAuto};

// Element (i, p) of op(A) is at a[i * row_stride + p * col_stride].
struct AView {
  const float* a;
  int64_t row_stride, col_stride;
};

#ifdef ONNXAMP_GEMM_AVX2_KERNELS

// A lane mask for the first `count` (0..8) floats of a vector.
ONNXAMP_AVX2_TARGET inline __m256i LaneMask(int count) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(count), lanes);
}

// The C block (rows x cols, rows <= 6, cols <= 16) at c from the accumulators: for the first block of K (first),
// alpha * acc + beta * C (C not read when beta == 0); after it, C + alpha * acc. Not inlined: the kernel's loop
// needs all 16 vector registers, and constants of the store hoisted above it would push an accumulator to memory.
ONNXAMP_AVX2_TARGET __attribute__((noinline)) void StoreBlock(const __m256 (&acc)[kMr][2], float* c, int64_t ldc,
                                                              int rows, int cols, bool first, float alpha, float beta) {
  const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
  const bool scale = alpha != 1.0f;
  const bool read_c = !first || beta != 0.0f;
  if (rows == kMr && cols == kNr) {
#pragma GCC unroll 6
    for (int r = 0; r < kMr; ++r) {
      float* row = c + r * ldc;
#pragma GCC unroll 2
      for (int v = 0; v < 2; ++v) {
        __m256 x = scale ? _mm256_mul_ps(acc[r][v], va) : acc[r][v];
        if (read_c) {
          const __m256 old = _mm256_loadu_ps(row + 8 * v);
          x = first ? _mm256_fmadd_ps(old, vb, x) : _mm256_add_ps(old, x);
        }
        _mm256_storeu_ps(row + 8 * v, x);
      }
    }
    return;
  }
  const __m256i m0 = LaneMask(std::min(cols, 8)), m1 = LaneMask(std::max(cols - 8, 0));
#pragma GCC unroll 6
  for (int r = 0; r < kMr; ++r) {
    if (r >= rows) break;
    float* row = c + r * ldc;
#pragma GCC unroll 2
    for (int v = 0; v < 2; ++v) {
      const __m256i mask = v == 0 ? m0 : m1;
      if (v == 1 && cols <= 8) break;
      __m256 x = scale ? _mm256_mul_ps(acc[r][v], va) : acc[r][v];
      if (read_c) {
        const __m256 old = _mm256_maskload_ps(row + 8 * v, mask);
        x = first ? _mm256_fmadd_ps(old, vb, x) : _mm256_add_ps(old, x);
      }
      _mm256_maskstore_ps(row + 8 * v, mask, x);
    }
  }
}

// kc steps of the 6 x 16 register kernel: acc += the panel of A at pa times the strip of B at pb, advancing both.
// With kFetch, each step also brings the line at next into cache and advances next by one line.
template <bool kFetch>
ONNXAMP_AVX2_TARGET __attribute__((always_inline)) inline void Steps(int64_t kc, const float*& pa, const float*& pb,
                                                                     const float*& next, __m256 (&acc)[kMr][2]) {
#pragma GCC unroll 4
  for (int64_t p = 0; p < kc; ++p) {
    _mm_prefetch(reinterpret_cast<const char*>(pa + 8 * kMr), _MM_HINT_T0);
    if constexpr (kFetch) {
      _mm_prefetch(reinterpret_cast<const char*>(next), _MM_HINT_T0);
      next += kNr;
    }
    const __m256 b0 = _mm256_loadu_ps(pb), b1 = _mm256_loadu_ps(pb + 8);
#pragma GCC unroll 6
    for (int r = 0; r < kMr; ++r) {
      const __m256 x = _mm256_broadcast_ss(pa + r);
      acc[r][0] = _mm256_fmadd_ps(x, b0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(x, b1, acc[r][1]);
    }
    pa += kMr;
    pb += kNr;
  }
}

// The 6 x 16 register kernel over kc steps: pa is a packed panel of A (kc steps of 6 rows, zero rows past the
// matrix), pb a packed strip of B (kc rows of 16). Stores the first `rows` rows and `cols` columns at c. Its first
// `fetch` steps also bring `fetch` lines from next into cache: a share of the strip of B that the caller runs next.
ONNXAMP_AVX2_TARGET void Kernel(int64_t kc, const float* pa, const float* pb, const float* next, int64_t fetch,
                                float* c, int64_t ldc, int rows, int cols, bool first, float alpha, float beta) {
  // Bring the C block towards L1 while the products run (its rows are a whole row of C apart).
  for (int r = 0; r < rows; ++r) {
    _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc + kNr - 1), _MM_HINT_T0);
  }
  __m256 acc[kMr][2];
#pragma GCC unroll 6
  for (int r = 0; r < kMr; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  Steps<true>(fetch, pa, pb, next, acc);
  Steps<false>(kc - fetch, pa, pb, next, acc);
  // A copy for the store, so that the accumulators' own address is never taken (else they live in memory).
  __m256 out[kMr][2];
#pragma GCC unroll 6
  for (int r = 0; r < kMr; ++r) out[r][0] = acc[r][0], out[r][1] = acc[r][1];
  StoreBlock(out, c, ldc, rows, cols, first, alpha, beta);
}

// Packs rows [i0, i0+mc) x columns [p0, p0+kc) of op(A) as panels of 6 rows (zero rows past mc): panel q holds
// op(A)(i0 + 6q + r, p0 + p) at dst[q * kc * 6 + p * 6 + r].
ONNXAMP_AVX2_TARGET void PackA(const AView& a, int64_t i0, int64_t mc, int64_t p0, int64_t kc, float* dst) {
  for (int64_t q = 0; q * kMr < mc; ++q, dst += kc * kMr) {
    const int rows = static_cast<int>(std::min<int64_t>(kMr, mc - q * kMr));
    const float* src = a.a + (i0 + q * kMr) * a.row_stride + p0 * a.col_stride;
    if (a.col_stride == 1) {
      // Rows of A are contiguous: 8 steps of each row at a time, transposed through registers.
      int64_t p = 0;
      if (rows == kMr) {
        for (; p + 8 <= kc; p += 8) {
          float t[kMr][8];
          for (int r = 0; r < kMr; ++r) _mm256_storeu_ps(t[r], _mm256_loadu_ps(src + r * a.row_stride + p));
          float* d = dst + p * kMr;
          for (int j = 0; j < 8; ++j)
            for (int r = 0; r < kMr; ++r) d[j * kMr + r] = t[r][j];
        }
      }
      for (; p < kc; ++p)
        for (int r = 0; r < kMr; ++r) dst[p * kMr + r] = r < rows ? src[r * a.row_stride + p] : 0.0f;
    } else {
      // op(A) is A transposed: the 6 rows of a step are consecutive in memory.
      for (int64_t p = 0; p < kc; ++p) {
        const float* col = src + p * a.col_stride;
        for (int r = 0; r < kMr; ++r) dst[p * kMr + r] = r < rows ? col[r * a.row_stride] : 0.0f;
      }
    }
  }
}

// Packs rows [p0, p0+kc) x columns [j0, j0+nc) of op(B) as strips of 16 columns (zero beyond nc) at dst.
ONNXAMP_AVX2_TARGET void PackBlock(const float* b, int64_t ldb, bool trans_b, int64_t p0, int64_t kc, int64_t j0,
                                   int64_t nc, float* dst) {
  for (int64_t s = 0; s * kNr < nc; ++s, dst += kc * kNr) {
    const int cols = static_cast<int>(std::min<int64_t>(kNr, nc - s * kNr));
    const int64_t col0 = j0 + s * kNr;
    if (!trans_b) {
      // Row p of the strip is 16 consecutive floats of B's row p0 + p.
      const __m256i m0 = LaneMask(std::min(cols, 8)), m1 = LaneMask(std::max(cols - 8, 0));
      for (int64_t p = 0; p < kc; ++p) {
        const float* src = b + (p0 + p) * ldb + col0;
        if (cols == kNr) {
          _mm256_storeu_ps(dst + p * kNr, _mm256_loadu_ps(src));
          _mm256_storeu_ps(dst + p * kNr + 8, _mm256_loadu_ps(src + 8));
        } else {
          _mm256_storeu_ps(dst + p * kNr, _mm256_maskload_ps(src, m0));
          _mm256_storeu_ps(dst + p * kNr + 8, _mm256_maskload_ps(src + 8, m1));
        }
      }
      continue;
    }
    // op(B)(p, j) = B[j, p]: column j of the strip is a row of B. Full groups of 8 rows and 8 columns are moved
    // with an 8 x 8 register transpose.
    int64_t p = 0;
    if (cols == kNr) {
      for (; p + 8 <= kc; p += 8) {
        for (int half = 0; half < 2; ++half) {
          __m256 r[8];
          for (int j = 0; j < 8; ++j) r[j] = _mm256_loadu_ps(b + (col0 + half * 8 + j) * ldb + p0 + p);
          const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
          const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
          const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
          const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
          const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
          const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
          const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
          const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
          float* d = dst + p * kNr + half * 8;
          _mm256_storeu_ps(d + 0 * kNr, _mm256_permute2f128_ps(u0, u4, 0x20));
          _mm256_storeu_ps(d + 1 * kNr, _mm256_permute2f128_ps(u1, u5, 0x20));
          _mm256_storeu_ps(d + 2 * kNr, _mm256_permute2f128_ps(u2, u6, 0x20));
          _mm256_storeu_ps(d + 3 * kNr, _mm256_permute2f128_ps(u3, u7, 0x20));
          _mm256_storeu_ps(d + 4 * kNr, _mm256_permute2f128_ps(u0, u4, 0x31));
          _mm256_storeu_ps(d + 5 * kNr, _mm256_permute2f128_ps(u1, u5, 0x31));
          _mm256_storeu_ps(d + 6 * kNr, _mm256_permute2f128_ps(u2, u6, 0x31));
          _mm256_storeu_ps(d + 7 * kNr, _mm256_permute2f128_ps(u3, u7, 0x31));
        }
      }
    }
    for (; p < kc; ++p) {
      float* d = dst + p * kNr;
      for (int j = 0; j < kNr; ++j) d[j] = j < cols ? b[(col0 + j) * ldb + p0 + p] : 0.0f;
    }
  }
}

// Floats of one packed block of kc rows and nc columns.
int64_t BlockFloats(int64_t kc, int64_t nc) { return kc * ((nc + kNr - 1) / kNr * kNr); }

// Float buffers of the calling thread (grow, never shrink): one for packed B, one for packed A.
float* PackBuffer(int which, int64_t count) {
  thread_local std::vector<float> buffers[2];
  std::vector<float>& buffer = buffers[which];
  if (buffer.size() < static_cast<size_t>(count)) buffer.resize(static_cast<size_t>(count));
  return buffer.data();
}

// One task: rows [i0, i0+mc) and columns [j0, j0+nc) of C for batch matrix bt. For each block of kc rows of op(B)
// (packed already, or packed here), and each block of kMc rows of A (packed here, into L2), the register kernel
// runs over every strip of B (in L1 while it runs) and every panel of the A block.
ONNXAMP_AVX2_TARGET void RunTask(const GemmArgs<float>& g, const GemmAvx2PackedB* packed, int64_t bt, int64_t i0,
                                 int64_t mc, int64_t j0, int64_t nc) {
  const AView a{g.a + bt * g.batch_stride_a + (g.trans_a ? i0 : i0 * g.lda), g.trans_a ? 1 : g.lda,
                g.trans_a ? g.lda : 1};
  const float* b = g.b + bt * g.batch_stride_b;
  float* c = g.c + bt * g.batch_stride_c + i0 * g.ldc + j0;
  const int64_t kc_max = std::min(kKc, g.k);
  float* b_buffer = packed ? nullptr : PackBuffer(0, BlockFloats(kc_max, nc));
  float* a_buffer = PackBuffer(1, (std::min(kMc, mc) + kMr - 1) / kMr * kMr * kc_max);
  for (int64_t p0 = 0; p0 < g.k; p0 += kKc) {
    const int64_t kc = std::min(kKc, g.k - p0);
    const float* block;
    if (packed) {
      block = packed->data.data() + p0 * packed->padded_n + (j0 / kNr) * kc * kNr;
    } else {
      PackBlock(b, g.ldb, g.trans_b, p0, kc, j0, nc, b_buffer);
      block = b_buffer;
    }
    const bool first = p0 == 0;
    for (int64_t ib = 0; ib < mc; ib += kMc) {
      const int64_t rows = std::min(kMc, mc - ib);
      PackA(a, ib, rows, p0, kc, a_buffer);
      for (int64_t s = 0; s * kNr < nc; ++s) {
        const int cols = static_cast<int>(std::min<int64_t>(kNr, nc - s * kNr));
        const float* pb = block + s * kc * kNr;
        const float* pa = a_buffer;
        // The strip of B that comes next (kc lines of 16 floats) is brought into cache while the panels of A run
        // over this one, a share of its lines per panel: all of it in the first panel's steps would stall that
        // panel on memory. (A prefetch never faults: past the task's last strip it only costs the steps.)
        const float* next = pb + kc * kNr;
        const int64_t panels = (rows + kMr - 1) / kMr;
        const int64_t chunk = (kc + panels - 1) / panels;
        int64_t q = 0;
        for (int64_t i = ib; i < ib + rows; i += kMr, pa += kc * kMr, ++q) {
          const int r = static_cast<int>(std::min<int64_t>(kMr, ib + rows - i));
          float* ci = c + i * g.ldc + s * kNr;
          const int64_t from = q * chunk, fetch = std::clamp<int64_t>(kc - from, 0, chunk);
          Kernel(kc, pa, pb, next + from * kNr, fetch, ci, g.ldc, r, cols, first, g.alpha, g.beta);
        }
      }
    }
  }
}

#endif  // ONNXAMP_GEMM_AVX2_KERNELS

}  // namespace

bool GemmAvx2Supported() {
#ifdef ONNXAMP_GEMM_AVX2_KERNELS
  return CpuHasAvx2Fma();
#else
  return false;
#endif
}

void SetGemmAvx2Use(GemmAvx2Use use) { g_use.store(use); }

bool GemmRunnerUsesAvx2() {
#ifdef ONNXAMP_GEMM_AVX2_KERNELS
  switch (g_use.load()) {
    case GemmAvx2Use::kAuto:
      return CpuHasAvx2Fma() && !CpuHasAvx512F();
    case GemmAvx2Use::kAlways:
      return CpuHasAvx2Fma();
    case GemmAvx2Use::kNever:
      return false;
  }
#endif
  return false;
}

GemmAvx2PackedB GemmAvx2PackB(const GemmArgs<float>& g) {
  GemmAvx2PackedB out;
  out.k = g.k;
  out.n = g.n;
  out.padded_n = (g.n + kNr - 1) / kNr * kNr;
#ifdef ONNXAMP_GEMM_AVX2_KERNELS
  out.data.resize(static_cast<size_t>(g.k * out.padded_n));
  for (int64_t p0 = 0; p0 < g.k; p0 += kKc) {
    const int64_t kc = std::min(kKc, g.k - p0);
    PackBlock(g.b, g.ldb, g.trans_b, p0, kc, 0, g.n, out.data.data() + p0 * out.padded_n);
  }
#endif
  return out;
}

void GemmAvx2(const GemmArgs<float>& g, const GemmAvx2PackedB* packed, exec::ThreadPool& threads) {
#ifdef ONNXAMP_GEMM_AVX2_KERNELS
  // Tasks: (batch matrix, row block, column block). Columns first: each task packs the part of B it uses once for
  // all its rows; rows are split only when there are too few column blocks for the threads.
  const int64_t want = threads.num_threads();
  const double flops = 2.0 * static_cast<double>(g.batch) * g.m * g.n * g.k;
  const int64_t parts =
      flops < kMinFlopsPerTask ? 1 : std::min<int64_t>(want, static_cast<int64_t>(flops / kMinFlopsPerTask));
  // Columns per task: wide enough that A is packed few times over, narrow enough for kTasksPerThread tasks per
  // thread.
  const int64_t per_task = (g.n + parts * kTasksPerThread - 1) / (parts * kTasksPerThread);
  int64_t nc = std::clamp<int64_t>((per_task + kNr - 1) / kNr * kNr, kNcMin, kNcMax);
  while (nc > kNr && g.batch * ((g.n + nc - 1) / nc) < parts) nc = std::max<int64_t>(kNr, nc / 2);
  const int64_t tiles_n = (g.n + nc - 1) / nc;
  int64_t tiles_m = 1;
  if (g.batch * tiles_n < parts)
    tiles_m = std::min<int64_t>((g.m + kMr - 1) / kMr, (parts + g.batch * tiles_n - 1) / (g.batch * tiles_n));
  const int64_t mc = ((g.m + tiles_m - 1) / tiles_m + kMr - 1) / kMr * kMr;
  tiles_m = (g.m + mc - 1) / mc;
  const int64_t tasks = g.batch * tiles_m * tiles_n;
  auto run_task = [&](int64_t t) {
    const int64_t bt = t / (tiles_m * tiles_n);
    const int64_t ti = (t / tiles_n) % tiles_m;
    const int64_t tj = t % tiles_n;
    const int64_t i0 = ti * mc, j0 = tj * nc;
    RunTask(g, packed, bt, i0, std::min(mc, g.m - i0), j0, std::min(nc, g.n - j0));
  };
  if (parts <= 1) {
    for (int64_t t = 0; t < tasks; ++t) run_task(t);
    return;
  }
  // Each thread takes the next task until none is left: a thread that loses its core for a while (a busy machine)
  // holds up one task, not a fixed share of them.
  std::atomic<int64_t> next{0};
  threads.ParallelFor(std::min<int64_t>(parts, tasks), 1, [&](int64_t, int64_t) {
    for (int64_t t = next.fetch_add(1); t < tasks; t = next.fetch_add(1)) run_task(t);
  });
#else
  (void)g;
  (void)packed;
  (void)threads;
#endif
}

}  // namespace onnxamp::ops
