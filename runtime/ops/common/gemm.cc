// GEMM cores (see gemm.h): the reference loop, the blocked portable GEMM, and GemmRunner's oneDNN path.
#include "runtime/ops/common/gemm.h"

#include <algorithm>
#include <atomic>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif
#include <bit>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string_view>
#include <type_traits>
#include <vector>

#include "runtime/common/cpu_features.h"
#include "runtime/ops/common/gemm_avx2.h"
#include "runtime/ops/common/gemm_small.h"
#include "runtime/ops/common/gemm_util.h"
#include "runtime/ops/common/gemv.h"
#include "runtime/ops/common/onednn.h"

namespace onnxamp::ops {
namespace {

// kSplit everywhere: the thread pool runs on its own threads (thread_pool.cc), and oneDNN's OpenMP team would
// compete with them for the cores.
std::atomic<OneDnnThreading> g_onednn_threading{OneDnnThreading::kSplit};

// ---- The blocked GEMM ----------------------------------------------------------------------------------------
//
// C is cut into tiles of at most kMc x nc (one task each). A task walks K in blocks of kKc: it packs the A block
// into kMr-row strips and the B block into kNr-column strips (zero-padded at the edges), then runs the register
// kernel over every (strip of A, strip of B) pair. Two builds of the same code: one for the baseline ISA (SSE2:
// kMr x kNr accumulators in 8 vector registers) and, chosen at run time, one for AVX2 with FMA (12 registers of
// accumulators).

template <typename T, int Mr, int Nr, int64_t Mc, int64_t Nc, bool Avx2>
struct Blocking {
  using Type = T;
  static constexpr int kMr = Mr, kNr = Nr;
  static constexpr int64_t kKc = 256, kMc = Mc, kNc = Nc;
  static constexpr bool kAvx2 = Avx2;  // the intrinsics kernel (only called where the CPU has AVX2 and FMA)
};
using BaseFloat = Blocking<float, 4, 8, 64, 256, false>;
using BaseDouble = Blocking<double, 4, 4, 64, 128, false>;
using Avx2Float = Blocking<float, 6, 16, 72, 256, true>;
using Avx2Double = Blocking<double, 6, 8, 72, 128, true>;

#if defined(__GNUC__)
#define ONNXAMP_GEMM_INLINE inline __attribute__((always_inline))
#else
#define ONNXAMP_GEMM_INLINE inline
#endif

#if defined(__x86_64__) && defined(__GNUC__)
#define ONNXAMP_GEMM_AVX2 1
// The AVX2 register kernels: 6 rows of A broadcast against 2 vectors of B, 12 accumulators.
__attribute__((target("avx2,fma"))) inline void MicroKernelAvx2(int64_t kc, const float* pa, const float* pb,
                                                                float (&acc)[6][16]) {
  __m256 c[6][2];
  for (auto& row : c) row[0] = row[1] = _mm256_setzero_ps();
  for (int64_t p = 0; p < kc; ++p, pa += 6, pb += 16) {
    const __m256 b0 = _mm256_loadu_ps(pb), b1 = _mm256_loadu_ps(pb + 8);
    for (int i = 0; i < 6; ++i) {
      const __m256 a = _mm256_broadcast_ss(pa + i);
      c[i][0] = _mm256_fmadd_ps(a, b0, c[i][0]);
      c[i][1] = _mm256_fmadd_ps(a, b1, c[i][1]);
    }
  }
  for (int i = 0; i < 6; ++i) {
    _mm256_storeu_ps(acc[i], c[i][0]);
    _mm256_storeu_ps(acc[i] + 8, c[i][1]);
  }
}

__attribute__((target("avx2,fma"))) inline void MicroKernelAvx2(int64_t kc, const double* pa, const double* pb,
                                                                double (&acc)[6][8]) {
  __m256d c[6][2];
  for (auto& row : c) row[0] = row[1] = _mm256_setzero_pd();
  for (int64_t p = 0; p < kc; ++p, pa += 6, pb += 8) {
    const __m256d b0 = _mm256_loadu_pd(pb), b1 = _mm256_loadu_pd(pb + 4);
    for (int i = 0; i < 6; ++i) {
      const __m256d a = _mm256_broadcast_sd(pa + i);
      c[i][0] = _mm256_fmadd_pd(a, b0, c[i][0]);
      c[i][1] = _mm256_fmadd_pd(a, b1, c[i][1]);
    }
  }
  for (int i = 0; i < 6; ++i) {
    _mm256_storeu_pd(acc[i], c[i][0]);
    _mm256_storeu_pd(acc[i] + 4, c[i][1]);
  }
}
#endif

// acc = sum over p < kc of the packed A strip (kc x kMr) times the packed B strip (kc x kNr).
template <typename B>
ONNXAMP_GEMM_INLINE void MicroKernel(int64_t kc, const typename B::Type* __restrict pa,
                                     const typename B::Type* __restrict pb, typename B::Type (&acc)[B::kMr][B::kNr]) {
  using T = typename B::Type;
#ifdef ONNXAMP_GEMM_AVX2
  if constexpr (B::kAvx2) {
    MicroKernelAvx2(kc, pa, pb, acc);
    return;
  }
#endif
  for (int i = 0; i < B::kMr; ++i)
    for (int j = 0; j < B::kNr; ++j) acc[i][j] = 0;
  for (int64_t p = 0; p < kc; ++p) {
    const T* a = pa + p * B::kMr;
    const T* b = pb + p * B::kNr;
    for (int i = 0; i < B::kMr; ++i) {
      const T ai = a[i];
      for (int j = 0; j < B::kNr; ++j) acc[i][j] += ai * b[j];
    }
  }
}

// Packs rows [i0, i0+mc) x cols [p0, p0+kc) of op(A) as strips of kMr rows: strip s, step p, row i at
// dst[(s * kc + p) * kMr + i]. Rows past the edge are zero.
template <typename B, typename T>
ONNXAMP_GEMM_INLINE void PackA(const GemmArgs<T>& g, const T* a, int64_t i0, int64_t mc, int64_t p0, int64_t kc,
                               T* dst) {
  constexpr int kMr = B::kMr;
  for (int64_t s = 0; s * kMr < mc; ++s) {
    T* d = dst + s * kc * kMr;
    const int rows = static_cast<int>(std::min<int64_t>(kMr, mc - s * kMr));
    for (int64_t p = 0; p < kc; ++p) {
      for (int i = 0; i < kMr; ++i) {
        const int64_t r = i0 + s * kMr + i;
        d[p * kMr + i] = i < rows ? (g.trans_a ? a[(p0 + p) * g.lda + r] : a[r * g.lda + p0 + p]) : T(0);
      }
    }
  }
}

// Packs rows [p0, p0+kc) x cols [j0, j0+nc) of op(B) as strips of kNr columns: strip s, step p, column j at
// dst[(s * kc + p) * kNr + j]. Columns past the edge are zero.
template <typename B, typename T>
ONNXAMP_GEMM_INLINE void PackB(const GemmArgs<T>& g, const T* b, int64_t p0, int64_t kc, int64_t j0, int64_t nc,
                               T* dst) {
  constexpr int kNr = B::kNr;
  for (int64_t s = 0; s * kNr < nc; ++s) {
    T* d = dst + s * kc * kNr;
    const int cols = static_cast<int>(std::min<int64_t>(kNr, nc - s * kNr));
    for (int64_t p = 0; p < kc; ++p) {
      const int64_t row = p0 + p;
      for (int j = 0; j < kNr; ++j) {
        const int64_t col = j0 + s * kNr + j;
        d[p * kNr + j] = j < cols ? (g.trans_b ? b[col * g.ldb + row] : b[row * g.ldb + col]) : T(0);
      }
    }
  }
}

template <typename B, typename T>
ONNXAMP_GEMM_INLINE void PortableTile(const GemmArgs<T>& g, int64_t bt, int64_t i0, int64_t mc, int64_t j0,
                                      int64_t nc) {
  constexpr int kMr = B::kMr, kNr = B::kNr;
  thread_local std::vector<T> pack_a, pack_b;
  const int64_t mc_pad = (mc + kMr - 1) / kMr * kMr;
  const int64_t nc_pad = (nc + kNr - 1) / kNr * kNr;
  pack_a.resize(static_cast<size_t>(mc_pad * B::kKc));
  pack_b.resize(static_cast<size_t>(nc_pad * B::kKc));
  const T* a = g.a + bt * g.batch_stride_a;
  const T* b = g.b + bt * g.batch_stride_b;
  T* c = g.c + bt * g.batch_stride_c;
  for (int64_t p0 = 0; p0 < g.k; p0 += B::kKc) {
    const int64_t kc = std::min<int64_t>(B::kKc, g.k - p0);
    PackA<B>(g, a, i0, mc, p0, kc, pack_a.data());
    PackB<B>(g, b, p0, kc, j0, nc, pack_b.data());
    for (int64_t jr = 0; jr < nc; jr += kNr) {
      const T* pb = pack_b.data() + (jr / kNr) * kc * kNr;
      const int nr = static_cast<int>(std::min<int64_t>(kNr, nc - jr));
      for (int64_t ir = 0; ir < mc; ir += kMr) {
        T acc[kMr][kNr];
        MicroKernel<B>(kc, pack_a.data() + (ir / kMr) * kc * kMr, pb, acc);
        const int mr = static_cast<int>(std::min<int64_t>(kMr, mc - ir));
        T* cp = c + (i0 + ir) * g.ldc + j0 + jr;
        for (int i = 0; i < mr; ++i) {
          for (int j = 0; j < nr; ++j) {
            T& out = cp[i * g.ldc + j];
            const T v = g.alpha * acc[i][j];
            if (p0 > 0) {
              out += v;
            } else {
              out = g.beta == T(0) ? v : v + g.beta * out;
            }
          }
        }
      }
    }
  }
}

// The tiles of C, numbered row-major over (batch, tile row, tile column).
struct TileGrid {
  int64_t tiles_m = 0, tiles_n = 0, mc = 0, nc = 0;
  int64_t count(int64_t batch) const { return batch * tiles_m * tiles_n; }
};

template <typename B, typename T>
ONNXAMP_GEMM_INLINE void RunTiles(const GemmArgs<T>& g, const TileGrid& grid, int64_t begin, int64_t end) {
  for (int64_t t = begin; t < end; ++t) {
    const int64_t bt = t / (grid.tiles_m * grid.tiles_n);
    const int64_t ti = (t / grid.tiles_n) % grid.tiles_m;
    const int64_t tj = t % grid.tiles_n;
    const int64_t i0 = ti * grid.mc, j0 = tj * grid.nc;
    PortableTile<B>(g, bt, i0, std::min(grid.mc, g.m - i0), j0, std::min(grid.nc, g.n - j0));
  }
}

void RunTilesBase(const GemmArgs<float>& g, const TileGrid& grid, int64_t begin, int64_t end) {
  RunTiles<BaseFloat>(g, grid, begin, end);
}
void RunTilesBase(const GemmArgs<double>& g, const TileGrid& grid, int64_t begin, int64_t end) {
  RunTiles<BaseDouble>(g, grid, begin, end);
}

#ifdef ONNXAMP_GEMM_AVX2
__attribute__((target("avx2,fma"))) void RunTilesAvx2(const GemmArgs<float>& g, const TileGrid& grid, int64_t begin,
                                                      int64_t end) {
  RunTiles<Avx2Float>(g, grid, begin, end);
}
__attribute__((target("avx2,fma"))) void RunTilesAvx2(const GemmArgs<double>& g, const TileGrid& grid, int64_t begin,
                                                      int64_t end) {
  RunTiles<Avx2Double>(g, grid, begin, end);
}

#endif

std::atomic<bool> g_portable_avx2_allowed{true};

// C = beta * C (K == 0: the product is empty).
template <typename T>
void ScaleC(const GemmArgs<T>& g) {
  for (int64_t bt = 0; bt < g.batch; ++bt) {
    T* c = g.c + bt * g.batch_stride_c;
    for (int64_t i = 0; i < g.m; ++i)
      for (int64_t j = 0; j < g.n; ++j) c[i * g.ldc + j] = g.beta == T(0) ? T(0) : g.beta * c[i * g.ldc + j];
  }
}

// A batch whose B is shared and whose A and C rows follow each other from one batch to the next is one GEMM with
// batch * m rows.
template <typename T, typename TC>
GemmArgs<T, TC> FoldBatch(GemmArgs<T, TC> g) {
  if (g.batch > 1 && g.batch_stride_b == 0 && !g.trans_a && g.batch_stride_a == g.m * g.lda &&
      g.batch_stride_c == g.m * g.ldc) {
    g.m *= g.batch;
    g.batch = 1;
  }
  return g;
}

// Cuts g into at most `parts` independent GEMMs for the thread pool: by batch when there are enough matrices,
// else by columns (B and C column blocks, multiples of 16) or rows (A and C row blocks, multiples of 8). At most
// two distinct shapes come out, so a split problem needs at most two cached primitives.
template <typename T, typename TC>
std::vector<GemmArgs<T, TC>> SplitGemm(const GemmArgs<T, TC>& g, int64_t parts) {
  std::vector<GemmArgs<T, TC>> out;
  if (parts <= 1) return {g};
  auto chunks = [&](int64_t total, int64_t align) {
    const int64_t size = ((total + parts - 1) / parts + align - 1) / align * align;
    std::vector<std::pair<int64_t, int64_t>> c;
    for (int64_t begin = 0; begin < total; begin += size) c.emplace_back(begin, std::min(size, total - begin));
    return c;
  };
  if (g.batch >= parts) {
    for (const auto& [b0, nb] : chunks(g.batch, 1)) {
      GemmArgs<T, TC> p = g;
      p.batch = nb;
      p.a += b0 * g.batch_stride_a;
      p.b += b0 * g.batch_stride_b;
      p.c += b0 * g.batch_stride_c;
      out.push_back(p);
    }
  } else if (g.n >= g.m) {
    for (const auto& [j0, nj] : chunks(g.n, 16)) {
      GemmArgs<T, TC> p = g;
      p.n = nj;
      p.b += g.trans_b ? j0 * g.ldb : j0;
      p.c += j0;
      out.push_back(p);
    }
  } else {
    for (const auto& [i0, mi] : chunks(g.m, 8)) {
      GemmArgs<T, TC> p = g;
      p.m = mi;
      p.a += g.trans_a ? i0 : i0 * g.lda;
      p.c += i0 * g.ldc;
      out.push_back(p);
    }
  }
  return out;
}

}  // namespace

const char* LinalgImplName(LinalgImpl impl) {
  switch (impl) {
    case LinalgImpl::kReference:
      return "reference";
    case LinalgImpl::kPortable:
      return "portable";
    case LinalgImpl::kOneDnn:
      return "onednn";
  }
  return "?";
}

OneDnnThreading GetOneDnnThreading() { return g_onednn_threading.load(); }

void SetOneDnnThreading(OneDnnThreading mode) { g_onednn_threading.store(mode); }

bool OneDnnAvailable() {
#ifdef ONNXAMP_WITH_DNNL
  return true;
#else
  return false;
#endif
}

LinalgImpl AvailableLinalgImpl(LinalgImpl impl) {
  return impl == LinalgImpl::kOneDnn && !OneDnnAvailable() ? LinalgImpl::kPortable : impl;
}

LinalgImpl LinalgImplFor(const exec::KernelInfo& info) { return AvailableLinalgImpl(info.options.linalg); }

template <typename T>
void GemmReference(const GemmArgs<T>& g) {
  for (int64_t bt = 0; bt < g.batch; ++bt) {
    const T* a = g.a + bt * g.batch_stride_a;
    const T* b = g.b + bt * g.batch_stride_b;
    T* c = g.c + bt * g.batch_stride_c;
    for (int64_t i = 0; i < g.m; ++i) {
      for (int64_t j = 0; j < g.n; ++j) {
        T sum = 0;
        for (int64_t p = 0; p < g.k; ++p) {
          const T x = g.trans_a ? a[p * g.lda + i] : a[i * g.lda + p];
          const T y = g.trans_b ? b[j * g.ldb + p] : b[p * g.ldb + j];
          sum += x * y;
        }
        T& out = c[i * g.ldc + j];
        out = g.beta == T(0) ? g.alpha * sum : g.alpha * sum + g.beta * out;
      }
    }
  }
}

bool PortableGemmUsesAvx2() {
#ifdef ONNXAMP_GEMM_AVX2
  return g_portable_avx2_allowed.load() && CpuHasAvx2Fma();
#else
  return false;
#endif
}

void SetPortableGemmAvx2(bool allowed) { g_portable_avx2_allowed.store(allowed); }

template <typename T>
void GemmPortable(const GemmArgs<T>& args, exec::ThreadPool& threads) {
  const GemmArgs<T> g = FoldBatch(args);
  if (g.batch <= 0 || g.m <= 0 || g.n <= 0) return;
  if (g.k <= 0) return ScaleC(g);
  const bool avx2 = PortableGemmUsesAvx2();
  using Base = std::conditional_t<std::is_same_v<T, float>, BaseFloat, BaseDouble>;
  using Wide = std::conditional_t<std::is_same_v<T, float>, Avx2Float, Avx2Double>;
  TileGrid grid;
  grid.mc = avx2 ? Wide::kMc : Base::kMc;
  grid.tiles_m = (g.m + grid.mc - 1) / grid.mc;
  // Narrower tiles when there would be too few to keep every thread busy.
  grid.nc = avx2 ? Wide::kNc : Base::kNc;
  const int64_t min_nc = 4 * (avx2 ? Wide::kNr : Base::kNr);
  const int64_t want = 2 * static_cast<int64_t>(threads.num_threads());
  while (grid.nc > min_nc && g.batch * grid.tiles_m * ((g.n + grid.nc - 1) / grid.nc) < want) grid.nc /= 2;
  grid.tiles_n = (g.n + grid.nc - 1) / grid.nc;
  auto run = [&](int64_t begin, int64_t end) {
#ifdef ONNXAMP_GEMM_AVX2
    if (avx2) return RunTilesAvx2(g, grid, begin, end);
#endif
    RunTilesBase(g, grid, begin, end);
  };
  const double flops = 2.0 * static_cast<double>(g.batch) * g.m * g.n * g.k;
  if (flops < (1 << 20)) {
    run(0, grid.count(g.batch));
  } else {
    threads.ParallelFor(grid.count(g.batch), 1, run);
  }
}

template void GemmReference<float>(const GemmArgs<float>&);
template void GemmReference<double>(const GemmArgs<double>&);
template void GemmPortable<float>(const GemmArgs<float>&, exec::ThreadPool&);
template void GemmPortable<double>(const GemmArgs<double>&, exec::ThreadPool&);

// ---- GemmRunner ------------------------------------------------------------------------------------------------

struct GemmRunner::OneDnnCache {
#ifdef ONNXAMP_WITH_DNNL
  struct Entry {
    bool usable = false;  // false: oneDNN refused this problem; it runs on GemmPortable
    dnnl::matmul::primitive_desc pd;
    dnnl::matmul prim;
    dnnl::memory::desc a_md, b_md, c_md;
  };
  onednn::Cache<Entry> cache;

  // Splits g over the threads and runs every part on a cached primitive.
  template <typename T>
  Status Run(const GemmArgs<T, float>& g, exec::ThreadPool& threads) {
    const std::vector<GemmArgs<T, float>> parts =
        SplitGemm(g, onednn::PartsFor(2.0 * static_cast<double>(g.batch) * g.m * g.n * g.k, threads));
    return onednn::ParallelParts(threads, static_cast<int64_t>(parts.size()), [&](int64_t i) -> Status {
      const GemmArgs<T, float>& given = parts[static_cast<size_t>(i)];
      // A column block of C with a transposed B is computed into a dense buffer and copied out: oneDNN runs a dense
      // destination on its brgemm kernels and a strided one on its older jit GEMM, which takes 1.2 to 1.3 times as
      // long with B transposed (docs/runtime.md, "oneDNN GEMM kernels"). Blocks of up to 4 MiB: the buffer stays
      // with the thread.
      const bool dense_copy = std::is_same_v<T, float> && given.trans_b && given.batch == 1 && given.ldc != given.n &&
                              given.m * given.n <= kDenseCMaxElements;
      GemmArgs<T, float> part = given;
      if (dense_copy) {
        part.ldc = part.n;
        part.c = static_cast<float*>(onednn::ThreadBuffer(kDenseCSlot, sizeof(float) * part.m * part.n));
        if (part.beta != 0.0f) CopyRows(given.c, given.ldc, part.c, part.n, part.m, part.n);
      }
      const std::vector<int64_t> key = {std::is_same_v<T, BFloat16>,
                                        part.batch,
                                        part.m,
                                        part.n,
                                        part.k,
                                        part.trans_a,
                                        part.trans_b,
                                        part.lda,
                                        part.ldb,
                                        part.ldc,
                                        part.batch_stride_a,
                                        part.batch_stride_b,
                                        part.batch_stride_c,
                                        std::bit_cast<int32_t>(part.alpha),
                                        std::bit_cast<int32_t>(part.beta)};
      ONNXAMP_ASSIGN_OR_RETURN(auto entry, cache.Get(key, [&]() -> StatusOr<Entry> { return Make(part); }));
      if (!entry->usable) {
        if constexpr (std::is_same_v<T, float>) {
          GemmPortable(part, threads);  // oneDNN refused the layout (it takes every layout GemmArgs can express)
          return Status::Ok();
        } else {
          return Internal("oneDNN has no bfloat16 matmul for ", part.m, "x", part.k, " by ", part.k, "x", part.n);
        }
      }
      try {
        ONNXAMP_RETURN_IF_ERROR(onednn::Execute(entry->prim, entry->pd,
                                                {{DNNL_ARG_SRC, onednn::Wrap(entry->a_md, part.a)},
                                                 {DNNL_ARG_WEIGHTS, onednn::Wrap(entry->b_md, part.b)},
                                                 {DNNL_ARG_DST, onednn::Wrap(entry->c_md, part.c)}},
                                                "matmul"));
      } catch (const dnnl::error& e) {
        return onednn::ErrorStatus("matmul", e);
      }
      if (dense_copy) CopyRows(part.c, part.n, given.c, given.ldc, part.m, part.n);
      return Status::Ok();
    });
  }

  static constexpr int kDenseCSlot = 4;  // the ThreadBuffer slot of the dense destination
  static constexpr int64_t kDenseCMaxElements = int64_t{1} << 20;

  static void CopyRows(const float* from, int64_t ld_from, float* to, int64_t ld_to, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) std::memcpy(to + r * ld_to, from + r * ld_from, sizeof(float) * cols);
  }

  // The first implementation of `desc` whose name starts with `name` (a primitive descriptor the caller owns), or
  // null. Through the C API's iterator: oneDNN 2.6's C++ next_impl() stopped after the first implementation here.
  static dnnl_primitive_desc_t FirstImplementation(const dnnl::matmul::desc& desc, const dnnl::primitive_attr& attr,
                                                   std::string_view name) {
    dnnl_primitive_desc_iterator_t iterator = nullptr;
    if (dnnl_primitive_desc_iterator_create(&iterator, &desc.data, attr.get(), onednn::Engine().get(), nullptr) !=
        dnnl_success) {
      return nullptr;
    }
    dnnl_primitive_desc_t found = nullptr;
    do {
      dnnl_primitive_desc_t pd = dnnl_primitive_desc_iterator_fetch(iterator);
      const char* impl = nullptr;
      if (pd && dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl &&
          std::string_view(impl).starts_with(name)) {
        found = pd;
        break;
      }
      if (pd) dnnl_primitive_desc_destroy(pd);
    } while (dnnl_primitive_desc_iterator_next(iterator) == dnnl_success);
    dnnl_primitive_desc_iterator_destroy(iterator);
    return found;
  }

  template <typename T>
  static Entry Make(const GemmArgs<T, float>& g) {
    using dnnl::memory;
    const memory::data_type in_type = std::is_same_v<T, BFloat16> ? memory::data_type::bf16 : memory::data_type::f32;
    Entry e;
    const bool batched = g.batch > 1;
    const int64_t ba = g.batch_stride_a == 0 ? 1 : g.batch;
    const int64_t bb = g.batch_stride_b == 0 ? 1 : g.batch;
    const int64_t sa = g.batch_stride_a == 0 ? g.m * g.k : g.batch_stride_a;
    const int64_t sb = g.batch_stride_b == 0 ? g.k * g.n : g.batch_stride_b;
    memory::dims a_dims = {g.m, g.k}, a_strides = g.trans_a ? memory::dims{1, g.lda} : memory::dims{g.lda, 1};
    memory::dims b_dims = {g.k, g.n}, b_strides = g.trans_b ? memory::dims{1, g.ldb} : memory::dims{g.ldb, 1};
    memory::dims c_dims = {g.m, g.n}, c_strides = {g.ldc, 1};
    if (batched) {
      a_dims.insert(a_dims.begin(), ba);
      a_strides.insert(a_strides.begin(), sa);
      b_dims.insert(b_dims.begin(), bb);
      b_strides.insert(b_strides.begin(), sb);
      c_dims.insert(c_dims.begin(), g.batch);
      c_strides.insert(c_strides.begin(), g.batch_stride_c);
    }
    try {
      e.a_md = memory::desc(a_dims, in_type, a_strides);
      e.b_md = memory::desc(b_dims, in_type, b_strides);
      e.c_md = memory::desc(c_dims, memory::data_type::f32, c_strides);
      dnnl::primitive_attr attr = onednn::UserScratchpadAttr();
      if (g.alpha != 1.0f) attr.set_output_scales(0, {g.alpha});
      if (g.beta != 0.0f) {
        dnnl::post_ops ops;
        ops.append_sum(g.beta);
        attr.set_post_ops(ops);
      }
      const dnnl::matmul::desc desc(e.a_md, e.b_md, e.c_md);
      // A float product with B not transposed, no more rows than columns and a long sum runs on oneDNN's jit GEMM,
      // not on the primitive's first choice, brgemm: on a Zen 5 core brgemm took 1.1 to 1.6 times as long for such
      // products (64x4096 by 4096x4096: 14.6 against 9.9 ms), and was faster only with more rows than columns or
      // a short sum (2048x512 by 512x512: 4.2 against 4.4 ms; docs/runtime.md, "oneDNN GEMM kernels"). bfloat16
      // products gain only when they are also wide: 64x4096 by 4096x4096 7.97 against 6.30 ms, 1024x4096 by
      // 4096x1024 18.4 against 17.2, but 128x2048 by 2048x1024 1.13 against 1.17.
      const bool jit_gemm = std::is_same_v<T, float> ? g.k >= 256 : g.k >= 512 && g.n >= 2048;
      dnnl_primitive_desc_t chosen = nullptr;
      if (!g.trans_b && g.m <= g.n && jit_gemm) {
        chosen = FirstImplementation(desc, attr, "gemm:jit");
      }
      if (chosen) {
        // The C++ descriptor holds a clone of the C one, which is ours to destroy.
        std::unique_ptr<dnnl_primitive_desc, decltype(&dnnl_primitive_desc_destroy)> owned(
            chosen, &dnnl_primitive_desc_destroy);
        e.pd = dnnl::matmul::primitive_desc(owned.get());
      } else {
        e.pd = dnnl::matmul::primitive_desc(desc, attr, onednn::Engine());
      }
      e.prim = dnnl::matmul(e.pd);
      e.usable = true;
    } catch (const dnnl::error&) {
      e.usable = false;
    }
    return e;
  }
#endif
};

// The float copy of a constant 16-bit B, with the address and extent it was made from.
struct GemmRunner::FloatB {
  std::mutex mu;
  const void* source = nullptr;
  int64_t extent = 0;
  std::vector<float> values;
};

// Something made from a constant B (op(B) packed for GemmAvx2, or op(B) in plain layout for the small GEMM), with the
// address (of the float, fp16 or bf16 data it was made from) and layout it was made from.
template <typename V>
struct GemmRunner::ConstantBCache {
  std::mutex mu;
  const void* source = nullptr;
  int64_t k = 0, n = 0, ldb = 0;
  bool trans_b = false;
  std::shared_ptr<const V> value;

  // The value for `shape` (k, n, ldb, trans_b) stored at b: make() the first time and after either changes.
  template <typename Make>
  std::shared_ptr<const V> Get(const void* b, const GemmArgs<float>& shape, Make&& make) {
    std::lock_guard<std::mutex> lock(mu);
    if (!value || source != b || k != shape.k || n != shape.n || ldb != shape.ldb || trans_b != shape.trans_b) {
      value.reset();  // the old copy goes before the new one is made
      value = std::make_shared<const V>(make());
      source = b;
      k = shape.k;
      n = shape.n;
      ldb = shape.ldb;
      trans_b = shape.trans_b;
    }
    return value;
  }
};

std::shared_ptr<const GemmAvx2PackedB> GemmRunner::PackedB(const GemmArgs<float>& g) const {
  if (!constant_b_ || (g.batch > 1 && g.batch_stride_b != 0)) return nullptr;
  return packed_b_->Get(g.b, g, [&] { return GemmAvx2PackB(g); });
}

GemmRunner::GemmRunner(LinalgImpl impl)
    : impl_(impl),
      float_b_(std::make_unique<FloatB>()),
      packed_b_(std::make_unique<ConstantBCache<GemmAvx2PackedB>>()),
      plain_b_(std::make_unique<ConstantBCache<std::vector<float>>>()) {
  if (impl_ == LinalgImpl::kOneDnn && !OneDnnAvailable()) impl_ = LinalgImpl::kPortable;
  if (impl_ == LinalgImpl::kOneDnn) cache_ = std::make_unique<OneDnnCache>();
}

GemmRunner::~GemmRunner() = default;

Status GemmRunner::Run(const GemmArgs<float>& args, exec::ThreadPool& threads) const {
  if (impl_ == LinalgImpl::kReference) {
    GemmReference(args);
    return Status::Ok();
  }
  {
    const GemmArgs<float> g = FoldBatch(args);
    if (SmallGemmAllowed() && g.batch == 1 && g.m >= 1 && g.m <= kGemvMaxM && !g.trans_a && g.n > 0 && g.k > 0) {
      // Matrix-vector shapes: stream B once (gemv.h).
      GemvArgs<float> v;
      v.m = g.m;
      v.n = g.n;
      v.k = g.k;
      v.a = g.a;
      v.lda = g.lda;
      v.b = g.b;
      v.ldb = g.ldb;
      v.trans_b = g.trans_b;
      v.c = g.c;
      v.ldc = g.ldc;
      v.alpha = g.alpha;
      v.beta = g.beta;
      Gemv(v, threads);
      return Status::Ok();
    }
    if (SmallGemmApplies(g)) {  // no library call for small shapes (gemm_small.h)
      if (g.trans_b && constant_b_ && (g.batch == 1 || g.batch_stride_b == 0)) {
        // A constant transposed B (a weight of a Gemm with transB = 1) in plain layout once, not at every call.
        const std::shared_ptr<const std::vector<float>> plain = plain_b_->Get(g.b, g, [&] {
          std::vector<float> b(static_cast<size_t>(g.k * g.n));
          TransposeBToPlain(g, b.data());
          return b;
        });
        GemmArgs<float> p = g;
        p.b = plain->data();
        p.ldb = g.n;
        p.trans_b = false;
        p.batch_stride_b = 0;
        RunSmallGemm(p, threads);
        return Status::Ok();
      }
      RunSmallGemm(g, threads);
      return Status::Ok();
    }
  }
  if (impl_ == LinalgImpl::kOneDnn && GemmRunnerUsesAvx2()) {
    const GemmArgs<float> g = FoldBatch(args);
    if (g.batch > 0 && g.m > 0 && g.n > 0 && g.k > 0) {
      GemmAvx2(g, PackedB(g).get(), threads);
      return Status::Ok();
    }
  }
#ifdef ONNXAMP_WITH_DNNL
  const GemmArgs<float> g = FoldBatch(args);
  if (impl_ == LinalgImpl::kOneDnn && g.batch > 0 && g.m > 0 && g.n > 0 && g.k > 0) return cache_->Run(g, threads);
#endif
  GemmPortable(args, threads);
  return Status::Ok();
}

bool GemmRunner::RunsBf16() const {
#ifdef ONNXAMP_WITH_DNNL
  return impl_ == LinalgImpl::kOneDnn && onednn::Bf16Supported();
#else
  return false;
#endif
}

namespace {

// Elements spanned by an operand of `batch` matrices of rows x cols, ld elements apart, batch_stride apart (0:
// one matrix for the whole batch).
int64_t OperandExtent(int64_t batch, int64_t batch_stride, int64_t rows, int64_t cols, int64_t ld) {
  const int64_t matrices = batch_stride == 0 ? 1 : batch;
  return (matrices - 1) * batch_stride + (rows - 1) * ld + cols;
}

// A float scratch buffer of the calling thread (grows, never shrinks): no allocation per run in steady state.
float* ThreadScratch(int slot, size_t count) {
  thread_local std::vector<float> buffers[3];
  std::vector<float>& b = buffers[slot];
  if (b.size() < count) b.resize(count);
  return b.data();
}

}  // namespace

template <typename T>
Status GemmRunner::RunHalf(const GemmArgs<T, float>& args, exec::ThreadPool& threads) const {
  const GemmArgs<T, float> g = FoldBatch(args);
  if (g.batch <= 0 || g.m <= 0 || g.n <= 0) return Status::Ok();
  if (g.k <= 0) {
    GemmArgs<float> scale;  // the product is empty: C = beta * C
    scale.batch = g.batch;
    scale.m = g.m;
    scale.n = g.n;
    scale.c = g.c;
    scale.ldc = g.ldc;
    scale.batch_stride_c = g.batch_stride_c;
    scale.beta = g.beta;
    ScaleC(scale);
    return Status::Ok();
  }
  if (g.m <= kGemvMaxM) {
    // Matrix-vector shapes: A (a few rows) becomes dense float rows; B is streamed as it is stored.
    float* a_rows = ThreadScratch(0, static_cast<size_t>(g.m * g.k));
    for (int64_t bt = 0; bt < g.batch; ++bt) {
      const T* a = g.a + bt * g.batch_stride_a;
      for (int64_t i = 0; i < g.m; ++i) {
        if (g.trans_a) {
          for (int64_t p = 0; p < g.k; ++p) a_rows[i * g.k + p] = Load<T>(a[p * g.lda + i]);
        } else {
          LoadBlock(a + i * g.lda, a_rows + i * g.k, g.k);
        }
      }
      GemvArgs<T> v;
      v.m = g.m;
      v.n = g.n;
      v.k = g.k;
      v.a = a_rows;
      v.lda = g.k;
      v.b = g.b + bt * g.batch_stride_b;
      v.ldb = g.ldb;
      v.trans_b = g.trans_b;
      v.c = g.c + bt * g.batch_stride_c;
      v.ldc = g.ldc;
      v.alpha = g.alpha;
      v.beta = g.beta;
      Gemv(v, threads);
    }
    return Status::Ok();
  }
#ifdef ONNXAMP_WITH_DNNL
  if constexpr (std::is_same_v<T, BFloat16>) {
    if (RunsBf16()) return cache_->Run(g, threads);
  }
#endif
  // Convert A and B to float (same layout) and run the float GEMM; a constant B is converted once.
  GemmArgs<float> f;
  f.batch = g.batch;
  f.m = g.m;
  f.n = g.n;
  f.k = g.k;
  f.trans_a = g.trans_a;
  f.trans_b = g.trans_b;
  f.lda = g.lda;
  f.ldb = g.ldb;
  f.ldc = g.ldc;
  f.batch_stride_a = g.batch_stride_a;
  f.batch_stride_b = g.batch_stride_b;
  f.batch_stride_c = g.batch_stride_c;
  f.c = g.c;
  f.alpha = g.alpha;
  f.beta = g.beta;
  const int64_t extent_a =
      OperandExtent(g.batch, g.batch_stride_a, g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k, g.lda);
  const int64_t extent_b =
      OperandExtent(g.batch, g.batch_stride_b, g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n, g.ldb);
  float* fa = ThreadScratch(1, static_cast<size_t>(extent_a));
  ConvertToFloat(g.a, fa, extent_a, threads);
  f.a = fa;
  if (constant_b_ && impl_ == LinalgImpl::kOneDnn && GemmRunnerUsesAvx2() && (g.batch == 1 || g.batch_stride_b == 0)) {
    // The AVX2 GEMM packs a constant B once, from a temporary float copy: only the packed copy is kept.
    const std::shared_ptr<const GemmAvx2PackedB> packed = packed_b_->Get(g.b, f, [&] {
      std::vector<float> values(static_cast<size_t>(extent_b));
      ConvertToFloat(g.b, values.data(), extent_b, threads);
      GemmArgs<float> source = f;
      source.b = values.data();
      return GemmAvx2PackB(source);
    });
    GemmAvx2(f, packed.get(), threads);
    return Status::Ok();
  }
  if (constant_b_) {
    std::lock_guard<std::mutex> lock(float_b_->mu);
    if (float_b_->source != g.b || float_b_->extent != extent_b) {
      float_b_->values.resize(static_cast<size_t>(extent_b));
      ConvertToFloat(g.b, float_b_->values.data(), extent_b, threads);
      float_b_->source = g.b;
      float_b_->extent = extent_b;
    }
    f.b = float_b_->values.data();
    return Run(f, threads);
  }
  float* fb = ThreadScratch(2, static_cast<size_t>(extent_b));
  ConvertToFloat(g.b, fb, extent_b, threads);
  f.b = fb;
  return Run(f, threads);
}

Status GemmRunner::Run(const GemmArgs<Float16, float>& g, exec::ThreadPool& threads) const {
  return RunHalf(g, threads);
}

Status GemmRunner::Run(const GemmArgs<BFloat16, float>& g, exec::ThreadPool& threads) const {
  return RunHalf(g, threads);
}

Status GemmRunner::Run(const GemmArgs<double>& args, exec::ThreadPool& threads) const {
  if (impl_ == LinalgImpl::kReference) {
    GemmReference(args);
  } else {
    GemmPortable(args, threads);
  }
  return Status::Ok();
}

}  // namespace onnxamp::ops
