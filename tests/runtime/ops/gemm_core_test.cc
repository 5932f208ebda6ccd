// The GEMM cores behind the linalg kernels: the reference loop against a double-precision product, and the blocked
// portable GEMM and oneDNN's matmul (through GemmRunner) against the reference, over random odd shapes, transposes,
// batch strides (broadcast included), alpha/beta and empty dimensions.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "runtime/executor/thread_pool.h"
#include "runtime/ops/common/gemm.h"
#include "runtime/ops/common/gemm_small.h"
#include "tests/runtime/ops/linalg_test_util.h"

namespace onnxamp::ops {
namespace {

struct Problem {
  int64_t batch, m, n, k;
  bool ta, tb;
  bool broadcast_a, broadcast_b;
  double alpha, beta;
};

template <typename T>
struct Data {
  std::vector<T> a, b, c;
  GemmArgs<T> args;
};

// Dense operands for `p`, with padded leading dimensions (lda etc. larger than needed) to exercise strides.
template <typename T>
Data<T> MakeData(const Problem& p, uint32_t seed) {
  Data<T> d;
  GemmArgs<T>& g = d.args;
  g.batch = p.batch;
  g.m = p.m;
  g.n = p.n;
  g.k = p.k;
  g.trans_a = p.ta;
  g.trans_b = p.tb;
  g.lda = (p.ta ? p.m : p.k) + 3;
  g.ldb = (p.tb ? p.k : p.n) + 1;
  g.ldc = p.n + 2;
  const int64_t a_rows = p.ta ? p.k : p.m, b_rows = p.tb ? p.n : p.k;
  g.batch_stride_a = p.broadcast_a ? 0 : a_rows * g.lda;
  g.batch_stride_b = p.broadcast_b ? 0 : b_rows * g.ldb;
  g.batch_stride_c = p.m * g.ldc + 5;
  g.alpha = static_cast<T>(p.alpha);
  g.beta = static_cast<T>(p.beta);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<T> dist(-1, 1);
  d.a.resize(static_cast<size_t>((p.broadcast_a ? 1 : p.batch) * a_rows * g.lda + 1));
  d.b.resize(static_cast<size_t>((p.broadcast_b ? 1 : p.batch) * b_rows * g.ldb + 1));
  d.c.resize(static_cast<size_t>(p.batch * g.batch_stride_c + 1));
  for (T& v : d.a) v = dist(rng);
  for (T& v : d.b) v = dist(rng);
  for (T& v : d.c) v = dist(rng);
  g.a = d.a.data();
  g.b = d.b.data();
  g.c = d.c.data();
  return d;
}

// The same product in long double arithmetic, for the reference itself.
template <typename T>
void CheckAgainstExact(const Problem& p, uint32_t seed) {
  Data<T> d = MakeData<T>(p, seed);
  const std::vector<T> c0 = d.c;
  GemmReference(d.args);
  const GemmArgs<T>& g = d.args;
  for (int64_t bt = 0; bt < g.batch; ++bt) {
    for (int64_t i = 0; i < g.m; ++i) {
      for (int64_t j = 0; j < g.n; ++j) {
        long double sum = 0, mag = 0;
        for (int64_t q = 0; q < g.k; ++q) {
          const long double x =
              g.trans_a ? d.a[bt * g.batch_stride_a + q * g.lda + i] : d.a[bt * g.batch_stride_a + i * g.lda + q];
          const long double y =
              g.trans_b ? d.b[bt * g.batch_stride_b + j * g.ldb + q] : d.b[bt * g.batch_stride_b + q * g.ldb + j];
          sum += x * y;
          mag += std::fabs(x * y);
        }
        const size_t ci = static_cast<size_t>(bt * g.batch_stride_c + i * g.ldc + j);
        const long double want = p.alpha * sum + (p.beta != 0 ? p.beta * c0[ci] : 0);
        const double eps = std::numeric_limits<T>::epsilon();
        EXPECT_NEAR(static_cast<double>(d.c[ci]), static_cast<double>(want),
                    eps * (g.k + 2) * static_cast<double>(std::fabs(p.alpha) * mag + std::fabs(want)) + 1e-300)
            << "batch " << bt << " i " << i << " j " << j;
      }
    }
  }
  // Elements outside the C matrices (padding between rows and batches) are left alone.
  std::vector<bool> written(d.c.size(), false);
  for (int64_t bt = 0; bt < g.batch; ++bt)
    for (int64_t i = 0; i < g.m; ++i)
      for (int64_t j = 0; j < g.n; ++j) written[static_cast<size_t>(bt * g.batch_stride_c + i * g.ldc + j)] = true;
  for (size_t i = 0; i < d.c.size(); ++i) {
    if (!written[i]) {
      EXPECT_EQ(d.c[i], c0[i]) << "padding element " << i;
    }
  }
}

std::vector<Problem> RandomProblems(int count, uint32_t seed) {
  std::mt19937 rng(seed);
  auto dim = [&](int max) { return static_cast<int64_t>(std::uniform_int_distribution<int>(1, max)(rng)); };
  auto coin = [&] { return std::uniform_int_distribution<int>(0, 1)(rng) == 1; };
  std::vector<Problem> out;
  for (int i = 0; i < count; ++i) {
    Problem p{dim(3), dim(70), dim(90), dim(300), coin(), coin(), false, false, 1.0, 0.0};
    if (p.batch > 1) {
      p.broadcast_a = coin() && coin();
      p.broadcast_b = !p.broadcast_a && coin();
    }
    if (coin()) p.alpha = 0.5 + i % 3;
    if (coin()) p.beta = (i % 2) ? 1.0 : -0.75;
    out.push_back(p);
  }
  return out;
}

TEST(GemmReference, MatchesExactProductFloat) {
  for (const Problem& p : RandomProblems(12, 1)) CheckAgainstExact<float>(p, 7);
}

TEST(GemmReference, MatchesExactProductDouble) {
  for (const Problem& p : RandomProblems(6, 2)) CheckAgainstExact<double>(p, 8);
}

TEST(GemmReference, HandComputed) {
  // [[1,2],[3,4]] x [[5,6],[7,8]] = [[19,22],[43,50]]; alpha 2, beta 1 with C = 1.
  const float a[] = {1, 2, 3, 4}, b[] = {5, 6, 7, 8};
  float c[] = {1, 1, 1, 1};
  GemmArgs<float> g;
  g.m = g.n = g.k = 2;
  g.a = a;
  g.b = b;
  g.c = c;
  g.alpha = 2;
  g.beta = 1;
  SetDenseLayout(g);
  GemmReference(g);
  EXPECT_EQ(std::vector<float>(c, c + 4), (std::vector<float>{39, 45, 87, 101}));
  // Transposed A: A^T = [[1,3],[2,4]] -> [[26,30],[38,44]].
  g.trans_a = true;
  g.alpha = 1;
  g.beta = 0;
  c[0] = NAN;  // beta 0 ignores C, NaN included
  GemmReference(g);
  EXPECT_EQ(std::vector<float>(c, c + 4), (std::vector<float>{26, 30, 38, 44}));
}

// Each fast implementation against the reference on the same data.
template <typename T>
void CheckImplAgainstReference(LinalgImpl impl, const Problem& p, uint32_t seed, int threads) {
  exec::ThreadPool pool(threads);
  Data<T> want = MakeData<T>(p, seed);
  Data<T> got = MakeData<T>(p, seed);
  GemmReference(want.args);
  GemmRunner runner(impl);
  Status st = runner.Run(got.args, pool);
  ASSERT_TRUE(st.ok()) << st.ToString();
  const double eps = std::numeric_limits<T>::epsilon();
  for (size_t i = 0; i < want.c.size(); ++i) {
    ASSERT_NEAR(got.c[i], want.c[i], eps * 4 * (p.k + 2) * (std::fabs(p.alpha) + std::fabs(p.beta) + 1))
        << LinalgImplName(impl) << " batch " << p.batch << " m " << p.m << " n " << p.n << " k " << p.k << " ta "
        << p.ta << " tb " << p.tb << " bcast " << p.broadcast_a << p.broadcast_b << " alpha " << p.alpha << " beta "
        << p.beta << " at " << i;
  }
}

TEST(GemmRunner, FastPathsMatchReferenceFloat) {
  // With the direct kernels for small shapes (the default) and without them (the blocked GEMM and oneDNN).
  for (bool small : {true, false}) {
    SetSmallGemm(small);
    for (LinalgImpl impl : testing::AvailableImpls()) {
      for (OneDnnThreading mode : {OneDnnThreading::kShared, OneDnnThreading::kSplit}) {
        testing::ScopedOneDnnThreading threading(mode);
        int i = 0;
        for (const Problem& p : RandomProblems(40, 3)) {
          CheckImplAgainstReference<float>(impl, p, 11 + i, 1 + i % 3);
          ++i;
        }
      }
    }
  }
  SetSmallGemm(true);
}

TEST(GemmRunner, FastPathsMatchReferenceDouble) {
  for (LinalgImpl impl : testing::AvailableImpls()) {
    int i = 0;
    for (const Problem& p : RandomProblems(15, 4)) {
      CheckImplAgainstReference<double>(impl, p, 21 + i, 1 + i % 2);
      ++i;
    }
  }
}

TEST(GemmPortable, BaselineAndAvx2KernelsMatchReference) {
  // Both register kernels of the portable GEMM, whatever this CPU picks by default.
  const bool had_avx2 = PortableGemmUsesAvx2();
  SetSmallGemm(false);  // every shape to the blocked GEMM
  for (bool avx2 : {false, true}) {
    SetPortableGemmAvx2(avx2);
    int i = 0;
    for (const Problem& p : RandomProblems(12, 5)) {
      CheckImplAgainstReference<float>(LinalgImpl::kPortable, p, 60 + i, 1 + i % 2);
      CheckImplAgainstReference<double>(LinalgImpl::kPortable, p, 80 + i, 2);
      ++i;
    }
    CheckImplAgainstReference<float>(LinalgImpl::kPortable, {2, 150, 300, 520, true, false, false, true, 1, 1}, 3, 2);
  }
  SetPortableGemmAvx2(true);
  SetSmallGemm(true);
  EXPECT_EQ(PortableGemmUsesAvx2(), had_avx2);
}

TEST(GemmRunner, LargeBlockedShapes) {
  // Several K blocks, partial edge tiles, a batch folded into rows (B shared), and many threads.
  const Problem shapes[] = {{1, 97, 300, 520, false, false, false, false, 1, 0},
                            {4, 37, 65, 257, false, true, false, true, 1, 1},
                            {2, 64, 256, 513, true, false, true, false, 0.5, 0}};
  for (LinalgImpl impl : testing::AvailableImpls()) {
    for (OneDnnThreading mode : {OneDnnThreading::kShared, OneDnnThreading::kSplit}) {
      testing::ScopedOneDnnThreading threading(mode);
      for (const Problem& p : shapes) CheckImplAgainstReference<float>(impl, p, 5, 4);
    }
  }
}

TEST(GemmRunner, OneDnnKernelChoicesMatchReference) {
  // The shapes GemmRunner hands to oneDNN's jit GEMM (B not transposed, no more rows than columns, a sum of 256 or
  // more) and the column blocks of a transposed B it computes into a dense buffer and copies out (C is padded, so
  // every part is a column block of a wider C; beta reads C into the buffer first), with one to three parts.
  const Problem shapes[] = {{1, 32, 300, 260, false, false, false, false, 0.5, 1},
                            {1, 24, 280, 512, true, false, false, false, 1, 0},
                            {1, 40, 96, 300, false, true, false, false, 1, 0.5},
                            {1, 17, 200, 64, true, true, false, false, -1, 0},
                            {3, 16, 80, 40, false, true, false, true, 1, 1}};
  SetSmallGemm(false);
  for (LinalgImpl impl : testing::AvailableImpls()) {
    testing::ScopedOneDnnThreading threading(OneDnnThreading::kSplit);
    int i = 0;
    for (const Problem& p : shapes) {
      for (int threads = 1; threads <= 3; ++threads) CheckImplAgainstReference<float>(impl, p, 90 + i++, threads);
    }
  }
  SetSmallGemm(true);
}

TEST(GemmRunner, Bf16InputsMatchFloatReference) {
  GemmRunner runner(LinalgImpl::kOneDnn);
  if (!runner.RunsBf16()) GTEST_SKIP() << "no oneDNN bfloat16 GEMM on this build or CPU";
  exec::ThreadPool pool(3);
  testing::ScopedOneDnnThreading threading(OneDnnThreading::kSplit);  // the parts of a split bf16 problem too
  int i = 0;
  for (const Problem& p : RandomProblems(20, 9)) {
    // Float data rounded to bfloat16: the reference multiplies exactly the values the bf16 GEMM sees.
    Data<float> want = MakeData<float>(p, 40 + i);
    std::vector<BFloat16> a16, b16;
    for (float& v : want.a) {
      a16.push_back(BFloat16(v));
      v = static_cast<float>(a16.back());
    }
    for (float& v : want.b) {
      b16.push_back(BFloat16(v));
      v = static_cast<float>(b16.back());
    }
    std::vector<float> c = want.c;
    GemmArgs<BFloat16, float> g = testing::WithOperands(want.args, a16.data(), b16.data(), c.data());
    GemmReference(want.args);
    Status st = runner.Run(g, pool);
    ASSERT_TRUE(st.ok()) << st.ToString();
    for (size_t j = 0; j < c.size(); ++j) {
      ASSERT_NEAR(c[j], want.c[j], 1e-6 * 4 * (p.k + 2) * (std::fabs(p.alpha) + std::fabs(p.beta) + 1))
          << "problem " << i << " at " << j;
    }
    ++i;
  }
}

TEST(GemmRunner, EmptyDimensions) {
  exec::ThreadPool pool(2);
  for (LinalgImpl impl : testing::AvailableImpls()) {
    GemmRunner runner(impl);
    // K == 0: C = beta * C.
    std::vector<float> c = {1, 2, 3, 4};
    GemmArgs<float> g;
    g.m = g.n = 2;
    g.k = 0;
    g.c = c.data();
    g.beta = 2;
    SetDenseLayout(g);
    ASSERT_TRUE(runner.Run(g, pool).ok());
    EXPECT_EQ(c, (std::vector<float>{2, 4, 6, 8})) << LinalgImplName(impl);
    g.beta = 0;
    ASSERT_TRUE(runner.Run(g, pool).ok());
    EXPECT_EQ(c, (std::vector<float>{0, 0, 0, 0})) << LinalgImplName(impl);
    // M == 0: nothing happens.
    g.m = 0;
    g.k = 3;
    ASSERT_TRUE(runner.Run(g, pool).ok());
  }
}

TEST(GemmRunner, CachedPrimitivesServeRepeatedAndChangingShapes) {
  exec::ThreadPool pool(2);
  GemmRunner runner(AvailableLinalgImpl(LinalgImpl::kOneDnn));
  for (int round = 0; round < 3; ++round) {
    for (int64_t m : {5, 9, 5}) {
      Problem p{1, m, 7, 11, false, false, false, false, 1, 0};
      Data<float> want = MakeData<float>(p, 31 + round), got = MakeData<float>(p, 31 + round);
      GemmReference(want.args);
      ASSERT_TRUE(runner.Run(got.args, pool).ok());
      for (size_t i = 0; i < want.c.size(); ++i) ASSERT_NEAR(got.c[i], want.c[i], 1e-5);
    }
  }
}

TEST(LinalgImpl, SessionOptionAndNames) {
  // The default option resolves to oneDNN where the build has it; kernels read the option from their KernelInfo.
  EXPECT_EQ(AvailableLinalgImpl(exec::KernelOptions{}.linalg),
            OneDnnAvailable() ? LinalgImpl::kOneDnn : LinalgImpl::kPortable);
  EXPECT_EQ(AvailableLinalgImpl(LinalgImpl::kReference), LinalgImpl::kReference);
  EXPECT_EQ(AvailableLinalgImpl(LinalgImpl::kPortable), LinalgImpl::kPortable);
  EXPECT_STREQ(LinalgImplName(LinalgImpl::kPortable), "portable");
  EXPECT_STREQ(LinalgImplName(LinalgImpl::kOneDnn), "onednn");
  EXPECT_EQ(GemmRunner(LinalgImpl::kOneDnn).impl(), OneDnnAvailable() ? LinalgImpl::kOneDnn : LinalgImpl::kPortable);
}

}  // namespace
}  // namespace onnxamp::ops
