// GEMV kernels (see gemv.h): AVX-512 or AVX2 intrinsics where the CPU has them, portable loops otherwise.
#include "runtime/ops/common/gemv.h"

#include <algorithm>
#include <atomic>
#include <type_traits>

#include "runtime/common/status.h"
#include "runtime/ops/common/elementwise_half.h"

#if defined(__x86_64__) && defined(__GNUC__)
// GCC 12 reports its own AVX-512 intrinsics (those built on _mm512_undefined_ps) as maybe-uninitialized.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#define ONNXAMP_GEMV_AVX512 1
#define ONNXAMP_AVX512_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))
#define ONNXAMP_AVX2_TARGET __attribute__((target("avx2,fma,f16c")))
#endif

namespace onnxamp::ops {
namespace {

// Columns of C one task computes when B is not transposed (its rows are read in slices this wide).
constexpr int64_t kColsPerTask = 256;
// Rows of B (columns of C) one task computes when B is transposed.
constexpr int64_t kRowsPerTask = 32;
// The portable kernels convert B in blocks of this many elements.
constexpr int64_t kKBlock = 256;
// Rows of B a non-transposed task walks before it moves to the next column slice (keeps its pages in the TLB).
constexpr int64_t kKRows = 64;

std::atomic<GemvIsa> g_max_isa{GemvIsa::kAvx512};

inline void Finish(float* c, float alpha, float beta, float sum) {
  *c = beta == 0.0f ? alpha * sum : alpha * sum + beta * *c;
}

template <typename TB>
inline const float* BlockToFloat(const TB* src, float* buf, int64_t n) {
  if constexpr (std::is_same_v<TB, float>) {
    return src;
  } else {
    LoadBlock(src, buf, n);
    return buf;
  }
}

// ---- Portable kernels -------------------------------------------------------------------------------------------

// op(B) = B^T: every column of C is m dot products with one contiguous row of B.
template <typename TB>
void DotRowsPortable(const GemvArgs<TB>& g, int64_t j0, int64_t j1) {
  constexpr int kL = 16;
  alignas(64) float buf[kKBlock];
  for (int64_t j = j0; j < j1; ++j) {
    float acc[kGemvMaxM][kL] = {};
    const TB* row = g.b + j * g.ldb;
    for (int64_t p0 = 0; p0 < g.k; p0 += kKBlock) {
      const int64_t kb = std::min(kKBlock, g.k - p0);
      const float* bf = BlockToFloat(row + p0, buf, kb);
      for (int64_t i = 0; i < g.m; ++i) {
        const float* a = g.a + i * g.lda + p0;
        float* ac = acc[i];
        int64_t p = 0;
        for (; p + kL <= kb; p += kL) {
          for (int l = 0; l < kL; ++l) ac[l] += a[p + l] * bf[p + l];
        }
        for (; p < kb; ++p) ac[0] += a[p] * bf[p];
      }
    }
    for (int64_t i = 0; i < g.m; ++i) {
      float s = 0.0f;
      for (int l = 0; l < kL; ++l) s += acc[i][l];
      Finish(g.c + i * g.ldc + j, g.alpha, g.beta, s);
    }
  }
}

// op(B) = B: columns [j0, j1) of C (at most kColsPerTask) accumulate a[i, p] times row p of B.
template <typename TB>
void AxpyColsPortable(const GemvArgs<TB>& g, int64_t j0, int64_t j1) {
  const int64_t w = j1 - j0;
  alignas(64) float acc[kGemvMaxM][kColsPerTask] = {};
  alignas(64) float buf[kColsPerTask];
  for (int64_t p = 0; p < g.k; ++p) {
    const float* bf = BlockToFloat(g.b + p * g.ldb + j0, buf, w);
    for (int64_t i = 0; i < g.m; ++i) {
      const float av = g.a[i * g.lda + p];
      float* ac = acc[i];
      for (int64_t j = 0; j < w; ++j) ac[j] += av * bf[j];
    }
  }
  for (int64_t i = 0; i < g.m; ++i)
    for (int64_t j = 0; j < w; ++j) Finish(g.c + i * g.ldc + j0 + j, g.alpha, g.beta, acc[i][j]);
}

// ---- AVX-512 kernels --------------------------------------------------------------------------------------------

#ifdef ONNXAMP_GEMV_AVX512
// 16 values of B as floats (exact: fp16 through F16C, bf16 by a shift into the high half); `mask` selects the
// lanes read (the others are 0).
ONNXAMP_AVX512_TARGET inline __m512 Load16(const float* p) { return _mm512_loadu_ps(p); }
ONNXAMP_AVX512_TARGET inline __m512 Load16(const Float16* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
ONNXAMP_AVX512_TARGET inline __m512 Load16(const BFloat16* p) {
  const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}
ONNXAMP_AVX512_TARGET inline __m512 Load16(const float* p, __mmask16 mask) { return _mm512_maskz_loadu_ps(mask, p); }
ONNXAMP_AVX512_TARGET inline __m512 Load16(const Float16* p, __mmask16 mask) {
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, p));
}
ONNXAMP_AVX512_TARGET inline __m512 Load16(const BFloat16* p, __mmask16 mask) {
  const __m512i w = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mask, p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}

// The sum of the 16 lanes, as a fixed tree of adds (through memory: GCC 12 warns about the shuffle intrinsics).
ONNXAMP_AVX512_TARGET inline float HorizontalSum(__m512 v) {
  alignas(64) float t[16];
  _mm512_store_ps(t, v);
  for (int w = 8; w >= 1; w /= 2)
    for (int l = 0; l < w; ++l) t[l] += t[l + w];
  return t[0];
}

// How far ahead of its loads the transposed kernel prefetches each row of B.
constexpr int64_t kPrefetchBytes = 1024;

inline __mmask16 TailMask(int64_t count) { return static_cast<__mmask16>((1u << count) - 1u); }

// op(B) = B^T, M rows of A: four rows of B at a time, each against every row of A.
template <int M, typename TB>
ONNXAMP_AVX512_TARGET void DotRowsAvx512(const GemvArgs<TB>& g, int64_t j0, int64_t j1) {
  const int64_t kfull = g.k / 16 * 16;
  const __mmask16 tail = TailMask(g.k - kfull);
  int64_t j = j0;
  for (; j + 4 <= j1; j += 4) {
    __m512 acc[M][4];
    for (int i = 0; i < M; ++i)
      for (int r = 0; r < 4; ++r) acc[i][r] = _mm512_setzero_ps();
    const TB* rows[4] = {g.b + j * g.ldb, g.b + (j + 1) * g.ldb, g.b + (j + 2) * g.ldb, g.b + (j + 3) * g.ldb};
    for (int64_t p = 0; p < kfull; p += 16) {
      __m512 b[4];
      for (int r = 0; r < 4; ++r) {
        // Four streams at once are more than the hardware prefetcher runs ahead of: ask for each row early.
        _mm_prefetch(reinterpret_cast<const char*>(rows[r] + p) + kPrefetchBytes, _MM_HINT_T0);
        b[r] = Load16(rows[r] + p);
      }
      for (int i = 0; i < M; ++i) {
        const __m512 a = _mm512_loadu_ps(g.a + i * g.lda + p);
        for (int r = 0; r < 4; ++r) acc[i][r] = _mm512_fmadd_ps(a, b[r], acc[i][r]);
      }
    }
    if (tail) {
      __m512 b[4];
      for (int r = 0; r < 4; ++r) b[r] = Load16(rows[r] + kfull, tail);
      for (int i = 0; i < M; ++i) {
        const __m512 a = _mm512_maskz_loadu_ps(tail, g.a + i * g.lda + kfull);
        for (int r = 0; r < 4; ++r) acc[i][r] = _mm512_fmadd_ps(a, b[r], acc[i][r]);
      }
    }
    for (int i = 0; i < M; ++i)
      for (int r = 0; r < 4; ++r) Finish(g.c + i * g.ldc + j + r, g.alpha, g.beta, HorizontalSum(acc[i][r]));
  }
  for (; j < j1; ++j) {
    __m512 acc[M];
    for (int i = 0; i < M; ++i) acc[i] = _mm512_setzero_ps();
    const TB* row = g.b + j * g.ldb;
    for (int64_t p = 0; p < kfull; p += 16) {
      const __m512 b = Load16(row + p);
      for (int i = 0; i < M; ++i) acc[i] = _mm512_fmadd_ps(_mm512_loadu_ps(g.a + i * g.lda + p), b, acc[i]);
    }
    if (tail) {
      const __m512 b = Load16(row + kfull, tail);
      for (int i = 0; i < M; ++i)
        acc[i] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, g.a + i * g.lda + kfull), b, acc[i]);
    }
    for (int i = 0; i < M; ++i) Finish(g.c + i * g.ldc + j, g.alpha, g.beta, HorizontalSum(acc[i]));
  }
}

// op(B) = B, M rows of A, columns [j0, j1) of C (at most kColsPerTask): sums kept in `sums` (L1) while B's rows
// are walked kKRows at a time, 64 columns (four vectors) per pass.
template <int M, typename TB>
ONNXAMP_AVX512_TARGET void AxpyColsAvx512(const GemvArgs<TB>& g, int64_t j0, int64_t j1) {
  const int64_t w = j1 - j0;
  alignas(64) float sums[M][kColsPerTask];
  for (int64_t p0 = 0; p0 < g.k; p0 += kKRows) {
    const int64_t p1 = std::min(g.k, p0 + kKRows);
    int64_t c0 = 0;
    for (; c0 + 64 <= w; c0 += 64) {
      __m512 acc[M][4];
      for (int i = 0; i < M; ++i)
        for (int v = 0; v < 4; ++v) acc[i][v] = p0 == 0 ? _mm512_setzero_ps() : _mm512_load_ps(&sums[i][c0 + 16 * v]);
      for (int64_t p = p0; p < p1; ++p) {
        const TB* brow = g.b + p * g.ldb + j0 + c0;
        __m512 b[4];
        for (int v = 0; v < 4; ++v) b[v] = Load16(brow + 16 * v);
        for (int i = 0; i < M; ++i) {
          const __m512 a = _mm512_set1_ps(g.a[i * g.lda + p]);
          for (int v = 0; v < 4; ++v) acc[i][v] = _mm512_fmadd_ps(a, b[v], acc[i][v]);
        }
      }
      for (int i = 0; i < M; ++i)
        for (int v = 0; v < 4; ++v) _mm512_store_ps(&sums[i][c0 + 16 * v], acc[i][v]);
    }
    for (; c0 < w; c0 += 16) {
      const int64_t cw = std::min<int64_t>(16, w - c0);
      const __mmask16 mask = TailMask(cw);
      __m512 acc[M];
      for (int i = 0; i < M; ++i) acc[i] = p0 == 0 ? _mm512_setzero_ps() : _mm512_load_ps(&sums[i][c0]);
      for (int64_t p = p0; p < p1; ++p) {
        const __m512 b = Load16(g.b + p * g.ldb + j0 + c0, mask);
        for (int i = 0; i < M; ++i) acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(g.a[i * g.lda + p]), b, acc[i]);
      }
      for (int i = 0; i < M; ++i) _mm512_store_ps(&sums[i][c0], acc[i]);
    }
  }
  for (int i = 0; i < M; ++i)
    for (int64_t j = 0; j < w; ++j) Finish(g.c + i * g.ldc + j0 + j, g.alpha, g.beta, sums[i][j]);
}

template <typename TB>
void RunAvx512(const GemvArgs<TB>& g, int64_t j0, int64_t j1) {
  switch (g.m) {
    case 1:
      return g.trans_b ? DotRowsAvx512<1>(g, j0, j1) : AxpyColsAvx512<1>(g, j0, j1);
    case 2:
      return g.trans_b ? DotRowsAvx512<2>(g, j0, j1) : AxpyColsAvx512<2>(g, j0, j1);
    case 3:
      return g.trans_b ? DotRowsAvx512<3>(g, j0, j1) : AxpyColsAvx512<3>(g, j0, j1);
    default:
      return g.trans_b ? DotRowsAvx512<4>(g, j0, j1) : AxpyColsAvx512<4>(g, j0, j1);
  }
}

// ---- AVX2 kernels -----------------------------------------------------------------------------------------------
// The same contract with 8-float vectors, for CPUs without AVX-512 (AMD EPYC before Zen 4, older Xeons). With 16
// vector registers instead of 32, the kernels keep fewer accumulators live when A has more than two rows.

// 8 values of B as floats (exact: fp16 through F16C, bf16 by a shift into the high half).
ONNXAMP_AVX2_TARGET inline __m256 Load8(const float* p) { return _mm256_loadu_ps(p); }
ONNXAMP_AVX2_TARGET inline __m256 Load8(const Float16* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
ONNXAMP_AVX2_TARGET inline __m256 Load8(const BFloat16* p) {
  const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}
// The first `count` (< 8) values at p, the other lanes 0.
template <typename T>
ONNXAMP_AVX2_TARGET inline __m256 LoadTail8(const T* p, int64_t count) {
  alignas(32) float t[8] = {};
  for (int64_t l = 0; l < count; ++l) t[l] = static_cast<float>(p[l]);
  return _mm256_load_ps(t);
}

// The sum of the 8 lanes, as a fixed tree of adds.
ONNXAMP_AVX2_TARGET inline float HorizontalSum8(__m256 v) {
  alignas(32) float t[8];
  _mm256_store_ps(t, v);
  for (int w = 4; w >= 1; w /= 2)
    for (int l = 0; l < w; ++l) t[l] += t[l + w];
  return t[0];
}

// op(B) = B^T, M rows of A: R rows of B at a time (R * M accumulators), each against every row of A.
template <int M, typename TB>
ONNXAMP_AVX2_TARGET void DotRowsAvx2(const GemvArgs<TB>& g, int64_t j0, int64_t j1) {
  constexpr int R = M <= 2 ? 4 : 2;
  const int64_t kfull = g.k / 8 * 8;
  const int64_t tail = g.k - kfull;
  int64_t j = j0;
  for (; j + R <= j1; j += R) {
    __m256 acc[M][R];
    for (int i = 0; i < M; ++i)
      for (int r = 0; r < R; ++r) acc[i][r] = _mm256_setzero_ps();
    const TB* rows[R];
    for (int r = 0; r < R; ++r) rows[r] = g.b + (j + r) * g.ldb;
    int64_t p = 0;
    if constexpr (M == 1) {
      // One row of A: 16 steps per pass with two accumulators per row of B (8 independent chains, one prefetch
      // per row and pass: a cache line of float B).
      __m256 acc2[R];
      for (int r = 0; r < R; ++r) acc2[r] = _mm256_setzero_ps();
      for (; p + 16 <= kfull; p += 16) {
        const __m256 a0 = _mm256_loadu_ps(g.a + p), a1 = _mm256_loadu_ps(g.a + p + 8);
        for (int r = 0; r < R; ++r) {
          _mm_prefetch(reinterpret_cast<const char*>(rows[r] + p) + kPrefetchBytes, _MM_HINT_T0);
          acc[0][r] = _mm256_fmadd_ps(a0, Load8(rows[r] + p), acc[0][r]);
          acc2[r] = _mm256_fmadd_ps(a1, Load8(rows[r] + p + 8), acc2[r]);
        }
      }
      for (int r = 0; r < R; ++r) acc[0][r] = _mm256_add_ps(acc[0][r], acc2[r]);
    }
    for (; p < kfull; p += 8) {
      __m256 b[R];
      for (int r = 0; r < R; ++r) {
        _mm_prefetch(reinterpret_cast<const char*>(rows[r] + p) + kPrefetchBytes, _MM_HINT_T0);
        b[r] = Load8(rows[r] + p);
      }
      for (int i = 0; i < M; ++i) {
        const __m256 a = _mm256_loadu_ps(g.a + i * g.lda + p);
        for (int r = 0; r < R; ++r) acc[i][r] = _mm256_fmadd_ps(a, b[r], acc[i][r]);
      }
    }
    if (tail) {
      __m256 b[R];
      for (int r = 0; r < R; ++r) b[r] = LoadTail8(rows[r] + kfull, tail);
      for (int i = 0; i < M; ++i) {
        const __m256 a = LoadTail8(g.a + i * g.lda + kfull, tail);
        for (int r = 0; r < R; ++r) acc[i][r] = _mm256_fmadd_ps(a, b[r], acc[i][r]);
      }
    }
    for (int i = 0; i < M; ++i)
      for (int r = 0; r < R; ++r) Finish(g.c + i * g.ldc + j + r, g.alpha, g.beta, HorizontalSum8(acc[i][r]));
  }
  for (; j < j1; ++j) {
    __m256 acc[M];
    for (int i = 0; i < M; ++i) acc[i] = _mm256_setzero_ps();
    const TB* row = g.b + j * g.ldb;
    for (int64_t p = 0; p < kfull; p += 8) {
      const __m256 b = Load8(row + p);
      for (int i = 0; i < M; ++i) acc[i] = _mm256_fmadd_ps(_mm256_loadu_ps(g.a + i * g.lda + p), b, acc[i]);
    }
    if (tail) {
      const __m256 b = LoadTail8(row + kfull, tail);
      for (int i = 0; i < M; ++i) acc[i] = _mm256_fmadd_ps(LoadTail8(g.a + i * g.lda + kfull, tail), b, acc[i]);
    }
    for (int i = 0; i < M; ++i) Finish(g.c + i * g.ldc + j, g.alpha, g.beta, HorizontalSum8(acc[i]));
  }
}

// op(B) = B, M rows of A, columns [j0, j1) of C (at most kColsPerTask): sums kept in `sums` (L1) while B's rows
// are walked kKRows at a time, V vectors (8 V columns) per pass; the last columns (fewer than 8) in scalar code.
template <int M, typename TB>
ONNXAMP_AVX2_TARGET void AxpyColsAvx2(const GemvArgs<TB>& g, int64_t j0, int64_t j1) {
  constexpr int V = M <= 2 ? 4 : 2;
  constexpr int64_t kStep = 8 * V;
  const int64_t w = j1 - j0;
  const int64_t wvec = w / 8 * 8;
  alignas(32) float sums[M][kColsPerTask];
  for (int64_t p0 = 0; p0 < g.k; p0 += kKRows) {
    const int64_t p1 = std::min(g.k, p0 + kKRows);
    int64_t c0 = 0;
    for (; c0 + kStep <= w; c0 += kStep) {
      __m256 acc[M][V];
      for (int i = 0; i < M; ++i)
        for (int v = 0; v < V; ++v) acc[i][v] = p0 == 0 ? _mm256_setzero_ps() : _mm256_load_ps(&sums[i][c0 + 8 * v]);
      for (int64_t p = p0; p < p1; ++p) {
        const TB* brow = g.b + p * g.ldb + j0 + c0;
        __m256 b[V];
        for (int v = 0; v < V; ++v) b[v] = Load8(brow + 8 * v);
        for (int i = 0; i < M; ++i) {
          const __m256 a = _mm256_set1_ps(g.a[i * g.lda + p]);
          for (int v = 0; v < V; ++v) acc[i][v] = _mm256_fmadd_ps(a, b[v], acc[i][v]);
        }
      }
      for (int i = 0; i < M; ++i)
        for (int v = 0; v < V; ++v) _mm256_store_ps(&sums[i][c0 + 8 * v], acc[i][v]);
    }
    for (; c0 < wvec; c0 += 8) {
      __m256 acc[M];
      for (int i = 0; i < M; ++i) acc[i] = p0 == 0 ? _mm256_setzero_ps() : _mm256_load_ps(&sums[i][c0]);
      for (int64_t p = p0; p < p1; ++p) {
        const __m256 b = Load8(g.b + p * g.ldb + j0 + c0);
        for (int i = 0; i < M; ++i) acc[i] = _mm256_fmadd_ps(_mm256_set1_ps(g.a[i * g.lda + p]), b, acc[i]);
      }
      for (int i = 0; i < M; ++i) _mm256_store_ps(&sums[i][c0], acc[i]);
    }
    for (int64_t c = wvec; c < w; ++c) {
      for (int i = 0; i < M; ++i) {
        float s = p0 == 0 ? 0.0f : sums[i][c];
        for (int64_t p = p0; p < p1; ++p) s += g.a[i * g.lda + p] * static_cast<float>(g.b[p * g.ldb + j0 + c]);
        sums[i][c] = s;
      }
    }
  }
  for (int i = 0; i < M; ++i)
    for (int64_t j = 0; j < w; ++j) Finish(g.c + i * g.ldc + j0 + j, g.alpha, g.beta, sums[i][j]);
}

template <typename TB>
void RunAvx2(const GemvArgs<TB>& g, int64_t j0, int64_t j1) {
  switch (g.m) {
    case 1:
      return g.trans_b ? DotRowsAvx2<1>(g, j0, j1) : AxpyColsAvx2<1>(g, j0, j1);
    case 2:
      return g.trans_b ? DotRowsAvx2<2>(g, j0, j1) : AxpyColsAvx2<2>(g, j0, j1);
    case 3:
      return g.trans_b ? DotRowsAvx2<3>(g, j0, j1) : AxpyColsAvx2<3>(g, j0, j1);
    default:
      return g.trans_b ? DotRowsAvx2<4>(g, j0, j1) : AxpyColsAvx2<4>(g, j0, j1);
  }
}

bool HasAvx2() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  }();
  return has;
}

bool HasAvx512() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("avx2");
  }();
  return has;
}
#endif

}  // namespace

GemvIsa GemvActiveIsa() {
#ifdef ONNXAMP_GEMV_AVX512
  const GemvIsa cap = g_max_isa.load(std::memory_order_relaxed);
  if (cap >= GemvIsa::kAvx512 && HasAvx512()) return GemvIsa::kAvx512;
  if (cap >= GemvIsa::kAvx2 && HasAvx2()) return GemvIsa::kAvx2;
#endif
  return GemvIsa::kPortable;
}

void SetGemvMaxIsa(GemvIsa cap) { g_max_isa.store(cap); }

const char* GemvIsaName(GemvIsa isa) {
  switch (isa) {
    case GemvIsa::kAvx512:
      return "avx512";
    case GemvIsa::kAvx2:
      return "avx2";
    case GemvIsa::kPortable:
      break;
  }
  return "portable";
}

template <typename TB>
void Gemv(const GemvArgs<TB>& g, exec::ThreadPool& threads) {
  ONNXAMP_CHECK(g.m >= 1 && g.m <= kGemvMaxM, "Gemv takes 1 to ", kGemvMaxM, " rows, got ", g.m);
  if (g.n <= 0) return;
  if (g.k <= 0) {  // an empty sum: C = beta * C
    for (int64_t i = 0; i < g.m; ++i)
      for (int64_t j = 0; j < g.n; ++j) Finish(g.c + i * g.ldc + j, g.alpha, g.beta, 0.0f);
    return;
  }
  const GemvIsa isa = GemvActiveIsa();
  const int64_t per_task = g.trans_b ? kRowsPerTask : kColsPerTask;
  const int64_t tasks = (g.n + per_task - 1) / per_task;
  auto run = [&](int64_t t0, int64_t t1) {
    if (g.trans_b) {
      const int64_t j0 = t0 * per_task;
      const int64_t j1 = std::min(g.n, t1 * per_task);
#ifdef ONNXAMP_GEMV_AVX512
      if (isa == GemvIsa::kAvx512) return RunAvx512(g, j0, j1);
      if (isa == GemvIsa::kAvx2) return RunAvx2(g, j0, j1);
#endif
      return DotRowsPortable(g, j0, j1);
    }
    // Not transposed: one column slice per task (the sums of a slice live on the stack).
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t c0 = t * per_task, c1 = std::min(g.n, c0 + per_task);
#ifdef ONNXAMP_GEMV_AVX512
      if (isa == GemvIsa::kAvx512) {
        RunAvx512(g, c0, c1);
        continue;
      }
      if (isa == GemvIsa::kAvx2) {
        RunAvx2(g, c0, c1);
        continue;
      }
#endif
      AxpyColsPortable(g, c0, c1);
    }
  };
  // Below about 64K multiply-adds a second thread costs more than it saves.
  if (g.m * g.n * std::max<int64_t>(g.k, 1) < (int64_t{1} << 16) || tasks < 2) {
    run(0, tasks);
  } else {
    threads.ParallelFor(tasks, 1, run);
  }
}

template void Gemv<float>(const GemvArgs<float>&, exec::ThreadPool&);
template void Gemv<Float16>(const GemvArgs<Float16>&, exec::ThreadPool&);
template void Gemv<BFloat16>(const GemvArgs<BFloat16>&, exec::ThreadPool&);

}  // namespace onnxamp::ops
