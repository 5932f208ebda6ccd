// The small float GEMM (see gemm_small.h): rows of A against 64-column strips of B in AVX-512 registers.
#include "runtime/ops/common/gemm_small.h"

#include <algorithm>
#include <atomic>
#include <vector>

#include "runtime/ops/common/transpose_blocked.h"

#if defined(__x86_64__) && defined(__GNUC__)
// GCC 12 reports its own AVX-512 intrinsics (those built on _mm512_undefined_ps) as maybe-uninitialized.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#define ONNXAMP_SMALL_GEMM 1
#define ONNXAMP_AVX512_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma")))
#endif

namespace onnxamp::ops {
namespace {

constexpr int64_t kMaxBElements = int64_t{1} << 18;
constexpr double kMaxMacs = 16.0 * (1 << 20);
constexpr int kRows = 4;  // rows of C per register block

std::atomic<bool> g_allowed{true};

// A float scratch of the calling thread (for a transposed B), grown as needed and kept.
float* Scratch(size_t count) {
  thread_local std::vector<float> buffer;
  if (buffer.size() < count) buffer.resize(count);
  return buffer.data();
}

#ifdef ONNXAMP_SMALL_GEMM
bool HasAvx512() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("fma");
  }();
  return has;
}

inline __mmask16 Mask(int64_t count) {
  return count >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << count) - 1u);
}

// Where op(A)'s element (i, p) lies: a[i * row + p * step]. Plain A: (lda, 1); transposed A ([k, m] stored): (1,
// lda), whose M values of one step p are then adjacent. Either is read in place.
struct AStrides {
  int64_t row = 0, step = 0;
};

// Rows [i0, i0 + M) of C for columns [j0, j0 + 16 * V) (the last vector masked by `tail`): sum over p of
// a[i, p] * b[p, j], then C = alpha * sum + beta * C.
template <int M, int V>
ONNXAMP_AVX512_TARGET inline void Block(int64_t k, const float* a, AStrides as, const float* b, int64_t ldb, float* c,
                                        int64_t ldc, __mmask16 tail, float alpha, float beta) {
  // Every loop over i and v is unrolled, so that the accumulators stay in registers.
  __m512 acc[M][V];
#pragma GCC unroll 4
  for (int i = 0; i < M; ++i) {
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) acc[i][v] = _mm512_setzero_ps();
  }
  for (int64_t p = 0; p < k; ++p) {
    const float* bp = b + p * ldb;
    __m512 bv[V];
#pragma GCC unroll 4
    for (int v = 0; v + 1 < V; ++v) bv[v] = _mm512_loadu_ps(bp + 16 * v);
    bv[V - 1] = _mm512_maskz_loadu_ps(tail, bp + 16 * (V - 1));
#pragma GCC unroll 4
    for (int i = 0; i < M; ++i) {
      const __m512 av = _mm512_set1_ps(a[i * as.row + p * as.step]);
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) acc[i][v] = _mm512_fmadd_ps(av, bv[v], acc[i][v]);
    }
  }
  const __m512 al = _mm512_set1_ps(alpha);
  const __m512 be = _mm512_set1_ps(beta);
#pragma GCC unroll 4
  for (int i = 0; i < M; ++i) {
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      const __mmask16 m = v + 1 < V ? static_cast<__mmask16>(0xffff) : tail;
      float* out = c + i * ldc + 16 * v;
      __m512 r = _mm512_mul_ps(al, acc[i][v]);
      if (beta != 0.0f) r = _mm512_add_ps(r, _mm512_mul_ps(be, _mm512_maskz_loadu_ps(m, out)));
      _mm512_mask_storeu_ps(out, m, r);
    }
  }
}

// Rows [i0, i0 + M) of C, every column: strips of 64 columns, then one narrower strip.
template <int M>
ONNXAMP_AVX512_TARGET void RowBlock(const GemmArgs<float>& g, const float* a, AStrides as, const float* b, int64_t ldb,
                                    float* c) {
  int64_t j = 0;
  for (; j + 64 <= g.n; j += 64) Block<M, 4>(g.k, a, as, b + j, ldb, c + j, g.ldc, Mask(16), g.alpha, g.beta);
  const int64_t rest = g.n - j;
  if (rest == 0) return;
  const __mmask16 tail = Mask(rest - (rest - 1) / 16 * 16);
  switch ((rest + 15) / 16) {
    case 1:
      return Block<M, 1>(g.k, a, as, b + j, ldb, c + j, g.ldc, tail, g.alpha, g.beta);
    case 2:
      return Block<M, 2>(g.k, a, as, b + j, ldb, c + j, g.ldc, tail, g.alpha, g.beta);
    case 3:
      return Block<M, 3>(g.k, a, as, b + j, ldb, c + j, g.ldc, tail, g.alpha, g.beta);
    default:
      return Block<M, 4>(g.k, a, as, b + j, ldb, c + j, g.ldc, tail, g.alpha, g.beta);
  }
}

// Row blocks [r0, r1) (of kRows rows) of one matrix: op(A) at `a` with strides `as`, B plain [k, n] (ldb).
ONNXAMP_AVX512_TARGET void Rows(const GemmArgs<float>& g, const float* a, AStrides as, const float* b, int64_t ldb,
                                float* c, int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t i = r * kRows;
    const float* ai = a + i * as.row;
    float* ci = c + i * g.ldc;
    switch (std::min<int64_t>(kRows, g.m - i)) {
      case 1:
        RowBlock<1>(g, ai, as, b, ldb, ci);
        break;
      case 2:
        RowBlock<2>(g, ai, as, b, ldb, ci);
        break;
      case 3:
        RowBlock<3>(g, ai, as, b, ldb, ci);
        break;
      default:
        RowBlock<4>(g, ai, as, b, ldb, ci);
        break;
    }
  }
}

#endif

}  // namespace

void TransposeBToPlain(const GemmArgs<float>& g, float* dst) {
  // op(B)[p, j] = b[j * ldb + p]: tiles of the Transpose op's blocked copy, so that the reads and the writes of a tile
  // stay within a few cache lines (an element-by-element copy writes one line per element).
  BlockedTranspose2D(g.b, dst, g.k, g.n, g.ldb, g.n, DimVector(), DimVector(), DimVector(), nullptr);
}

void SetSmallGemm(bool allowed) { g_allowed.store(allowed); }

bool SmallGemmAllowed() { return g_allowed.load(std::memory_order_relaxed); }

bool SmallGemmApplies(const GemmArgs<float>& g) {
#ifdef ONNXAMP_SMALL_GEMM
  return g_allowed.load(std::memory_order_relaxed) && HasAvx512() && g.k * g.n <= kMaxBElements &&
         static_cast<double>(g.batch) * g.m * g.n * g.k <= kMaxMacs;
#else
  (void)g;
  return false;
#endif
}

void RunSmallGemm(const GemmArgs<float>& args, exec::ThreadPool& threads) {
#ifdef ONNXAMP_SMALL_GEMM
  if (args.batch <= 0 || args.m <= 0 || args.n <= 0) return;
  const int64_t blocks = (args.m + kRows - 1) / kRows;
  const double macs = static_cast<double>(args.m) * args.n * args.k;
  for (int64_t bt = 0; bt < args.batch; ++bt) {
    GemmArgs<float> g = args;
    const float* a = args.a + bt * args.batch_stride_a;
    const float* b = args.b + bt * args.batch_stride_b;
    float* c = args.c + bt * args.batch_stride_c;
    // A transposed A is read in place (AStrides); a transposed B is copied into plain layout first (it is small).
    const AStrides as = g.trans_a ? AStrides{1, g.lda} : AStrides{g.lda, 1};
    int64_t ldb = g.ldb;
    if (g.trans_b) {
      float* t = Scratch(static_cast<size_t>(g.k * g.n));
      g.b = b;  // this matrix of the batch
      TransposeBToPlain(g, t);
      b = t;
      ldb = g.n;
    }
    if (macs >= (1 << 20) && blocks >= 2) {
      threads.ParallelFor(blocks, 1, [&](int64_t r0, int64_t r1) { Rows(g, a, as, b, ldb, c, r0, r1); });
    } else {
      Rows(g, a, as, b, ldb, c, 0, blocks);
    }
  }
#else
  (void)args;
  (void)threads;
#endif
}

}  // namespace onnxamp::ops
