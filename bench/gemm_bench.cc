// onnxamp_gemm_bench: times the CPU float GEMM paths on one product shape, beside this core's measured FMA peak.
//
//   onnxamp_gemm_bench [--m M] [--n N] [--k K] [--trans-a] [--trans-b] [--threads T] [--repeats R] [--cpu-time]
//                      [--paths packed,unpacked,gemv,small,onednn,onednn-bf16]
//
// Prints, for the AVX2 GEMM (B packed once, as for a weight; and B packed per call), the AVX-512 small GEMM (where
// it applies), oneDNN's sgemm and the same product in bfloat16 on oneDNN (float C, as BF16 AMP runs it), the minimum
// and median time of R runs and the GFLOP/s of the minimum, and the peak that a loop of independent AVX2 FMAs reaches
// on one thread of this machine (so a kernel's share of the peak is read against the same clock, turbo included). A
// kernel-development tool, not a comparison with a peer: bench_inference.py compares whole models with ONNX Runtime.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "runtime/executor/thread_pool.h"
#include "runtime/ops/common/gemm.h"
#include "runtime/ops/common/gemm_avx2.h"
#include "runtime/ops/common/gemm_small.h"
#include "runtime/ops/common/gemv.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

namespace {

using Clock = std::chrono::steady_clock;

struct Times {
  double min_ms = 0, median_ms = 0;
};

// Milliseconds now: wall-clock time, or (cpu_time) the calling thread's CPU time, which a busy machine's other
// processes do not inflate by taking the core away (for one-thread runs only).
bool g_cpu_time = false;
double NowMs() {
  if (g_cpu_time) {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
  }
  return std::chrono::duration<double, std::milli>(Clock::now().time_since_epoch()).count();
}

template <typename Fn>
Times Time(int repeats, Fn&& fn) {
  fn();  // warm-up: packs, first-touch, caches
  std::vector<double> ms;
  for (int r = 0; r < repeats; ++r) {
    const double t0 = NowMs();
    fn();
    ms.push_back(NowMs() - t0);
  }
  std::sort(ms.begin(), ms.end());
  return {ms.front(), ms[ms.size() / 2]};
}

#if defined(__x86_64__) && defined(__GNUC__)
// GFLOP/s of a loop of 12 independent FMA chains on 8 floats: what one thread of this core can reach.
__attribute__((target("avx2,fma"))) double FmaPeakGflops() {
  constexpr int kChains = 12;
  constexpr int64_t kIters = 20'000'000;
  double best = 0;
  for (int trial = 0; trial < 5; ++trial) {
    __m256 acc[kChains];
    for (int c = 0; c < kChains; ++c) acc[c] = _mm256_set1_ps(static_cast<float>(c));
    const __m256 x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-7f);
    const double t0 = NowMs();
    for (int64_t i = 0; i < kIters; ++i) {
#pragma GCC unroll 12
      for (int c = 0; c < kChains; ++c) acc[c] = _mm256_fmadd_ps(acc[c], x, y);
    }
    const double s = (NowMs() - t0) * 1e-3;
    __m256 sum = acc[0];
    for (int c = 1; c < kChains; ++c) sum = _mm256_add_ps(sum, acc[c]);
    volatile float sink = _mm256_cvtss_f32(sum);
    (void)sink;
    best = std::max(best, 2.0 * 8 * kChains * static_cast<double>(kIters) / s / 1e9);
  }
  return best;
}
#endif

// A dense problem of the given shape over a, b and c.
template <typename T>
onnxamp::ops::GemmArgs<T, float> Args(int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b, const T* a,
                                      const T* b, float* c) {
  onnxamp::ops::GemmArgs<T, float> g;
  g.m = m;
  g.n = n;
  g.k = k;
  g.trans_a = trans_a;
  g.trans_b = trans_b;
  onnxamp::ops::SetDenseLayout(g);
  g.a = a;
  g.b = b;
  g.c = c;
  return g;
}

void Report(const char* what, const Times& t, double flops) {
  std::printf("%-28s min %9.3f ms  median %9.3f ms  %7.1f GFLOP/s\n", what, t.min_ms, t.median_ms,
              flops / (t.min_ms * 1e-3) / 1e9);
}

}  // namespace

int main(int argc, char** argv) {
  int64_t m = 64, n = 4096, k = 4096;
  bool trans_a = false, trans_b = false;
  int threads = 1, repeats = 9;
  std::string paths = "packed,unpacked,gemv,small,onednn,onednn-bf16";
  CLI::App app{"Times the CPU float GEMM paths on one product shape"};
  app.add_option("--m", m)->check(CLI::PositiveNumber);
  app.add_option("--n", n)->check(CLI::PositiveNumber);
  app.add_option("--k", k)->check(CLI::PositiveNumber);
  app.add_flag("--trans-a", trans_a, "A is stored [k, m] (as the weight gradient X^T dY reads X)");
  app.add_flag("--trans-b", trans_b, "B is stored [n, k] (as a Gemm with transB=1 stores a weight)");
  app.add_option("--threads", threads)->check(CLI::PositiveNumber);
  app.add_option("--repeats", repeats)->check(CLI::PositiveNumber);
  app.add_option("--paths", paths,
                 "Comma-separated paths to time, of packed (AVX2, B packed once), unpacked (AVX2, B packed per call), "
                 "gemv, small (the AVX-512 small GEMM, where it applies), onednn, onednn-bf16 (A and B in bfloat16)")
      ->capture_default_str();
  app.add_flag("--cpu-time", g_cpu_time, "Time by the thread's CPU time, not the wall clock (needs --threads 1)");
  CLI11_PARSE(app, argc, argv);
  if (g_cpu_time && threads != 1) {
    std::fprintf(stderr, "error: --cpu-time needs --threads 1\n");
    return 2;
  }

  auto wants = [&](const std::string& path) { return ("," + paths + ",").find("," + path + ",") != std::string::npos; };
  using onnxamp::ops::GemmArgs;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * n)), c(static_cast<size_t>(m * n));
  for (float& v : a) v = dist(rng);
  for (float& v : b) v = dist(rng);
  const GemmArgs<float> g = Args(m, n, k, trans_a, trans_b, a.data(), b.data(), c.data());
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  onnxamp::exec::ThreadPool pool(threads);
  std::printf("m %lld n %lld k %lld%s%s, %d thread(s), %d repeats\n", static_cast<long long>(m),
              static_cast<long long>(n), static_cast<long long>(k), trans_a ? " (A transposed)" : "",
              trans_b ? " (B transposed)" : "", threads, repeats);
#if defined(__x86_64__) && defined(__GNUC__)
  if (onnxamp::ops::GemmAvx2Supported()) {
    std::printf("FMA peak, one thread: %.1f GFLOP/s\n", FmaPeakGflops());
    if (wants("packed")) {
      const onnxamp::ops::GemmAvx2PackedB packed = onnxamp::ops::GemmAvx2PackB(g);
      Report("avx2, B packed once", Time(repeats, [&] { onnxamp::ops::GemmAvx2(g, &packed, pool); }), flops);
    }
    if (wants("unpacked"))
      Report("avx2, B packed per call", Time(repeats, [&] { onnxamp::ops::GemmAvx2(g, nullptr, pool); }), flops);
  }
#endif
  if (m <= onnxamp::ops::kGemvMaxM && !trans_a && wants("gemv")) {
    // The product streams B once: report the rate B's bytes are read at.
    onnxamp::ops::GemvArgs<float> v;
    v.m = m;
    v.n = n;
    v.k = k;
    v.a = a.data();
    v.lda = k;
    v.b = b.data();
    v.ldb = trans_b ? k : n;
    v.trans_b = trans_b;
    v.c = c.data();
    v.ldc = n;
    const Times t = Time(repeats, [&] { onnxamp::ops::Gemv(v, pool); });
    Report(onnxamp::ops::GemvIsaName(onnxamp::ops::GemvActiveIsa()), t, flops);
    std::printf("%-28s %.1f GB/s of B\n", "", static_cast<double>(b.size()) * sizeof(float) / (t.min_ms * 1e-3) / 1e9);
  }
  if (wants("small") && onnxamp::ops::SmallGemmApplies(g)) {
    Report("small GEMM (AVX-512)", Time(repeats, [&] { onnxamp::ops::RunSmallGemm(g, pool); }), flops);
  }
  // oneDNN's sgemm, as an AVX-512 CPU's GemmRunner would run (here forced, the small GEMM off), for reference.
  onnxamp::ops::SetGemmAvx2Use(onnxamp::ops::GemmAvx2Use::kNever);
  onnxamp::ops::SetSmallGemm(false);
  const onnxamp::ops::GemmRunner runner(onnxamp::ops::LinalgImpl::kOneDnn);
  if (wants("onednn")) Report("oneDNN sgemm", Time(repeats, [&] { (void)runner.Run(g, pool); }), flops);
  if (!wants("onednn-bf16")) return 0;
  // The same product in bfloat16 (A and B rounded, float C), as a BF16 AMP session runs it.
  if (!runner.RunsBf16()) {
    std::printf("%-28s not run: oneDNN has no bfloat16 matmul on this CPU\n", "oneDNN bf16");
    return 0;
  }
  std::vector<onnxamp::BFloat16> a16(a.size()), b16(b.size());
  for (size_t i = 0; i < a.size(); ++i) a16[i] = onnxamp::BFloat16(a[i]);
  for (size_t i = 0; i < b.size(); ++i) b16[i] = onnxamp::BFloat16(b[i]);
  const GemmArgs<onnxamp::BFloat16, float> h = Args(m, n, k, trans_a, trans_b, a16.data(), b16.data(), c.data());
  Report("oneDNN bf16 (float C)", Time(repeats, [&] { (void)runner.Run(h, pool); }), flops);
  return 0;
}
