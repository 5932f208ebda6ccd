// The AVX2 float GEMM (gemm_avx2.h) against the reference loop: every layout GemmArgs can express (transposes,
// padded leading dimensions, batch strides and broadcast operands, alpha and beta), edges of the register blocks
// and of the packed blocks, B packed per call and packed once, several threads; and GemmRunner's use of it (a
// constant B packed once and repacked when its address changes). Skipped on a CPU without AVX2 and FMA.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "runtime/common/half.h"
#include "runtime/executor/thread_pool.h"
#include "runtime/ops/common/gemm.h"
#include "runtime/ops/common/gemm_avx2.h"
#include "runtime/ops/common/gemm_small.h"

namespace onnxamp::ops {
namespace {

struct Shape {
  int64_t batch, m, n, k;
  bool ta, tb;
  bool broadcast_a, broadcast_b;
  float alpha, beta;
};

std::string Describe(const Shape& s) {
  return "batch " + std::to_string(s.batch) + " m " + std::to_string(s.m) + " n " + std::to_string(s.n) + " k " +
         std::to_string(s.k) + " ta " + std::to_string(s.ta) + " tb " + std::to_string(s.tb) + " bcast " +
         std::to_string(s.broadcast_a) + std::to_string(s.broadcast_b) + " alpha " + std::to_string(s.alpha) +
         " beta " + std::to_string(s.beta);
}

struct Operands {
  std::vector<float> a, b, c;
  GemmArgs<float> args;
};

// Random operands with padded leading dimensions and gaps between the batch matrices; C holds NaN where beta is 0
// (it must not be read then).
Operands Make(const Shape& s, uint32_t seed) {
  Operands d;
  GemmArgs<float>& g = d.args;
  g.batch = s.batch;
  g.m = s.m;
  g.n = s.n;
  g.k = s.k;
  g.trans_a = s.ta;
  g.trans_b = s.tb;
  g.lda = (s.ta ? s.m : s.k) + 3;
  g.ldb = (s.tb ? s.k : s.n) + 5;
  g.ldc = s.n + 2;
  const int64_t a_rows = s.ta ? s.k : s.m, b_rows = s.tb ? s.n : s.k;
  g.batch_stride_a = s.broadcast_a ? 0 : a_rows * g.lda + 1;
  g.batch_stride_b = s.broadcast_b ? 0 : b_rows * g.ldb + 7;
  g.batch_stride_c = s.m * g.ldc + 3;
  g.alpha = s.alpha;
  g.beta = s.beta;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  d.a.resize(static_cast<size_t>((s.broadcast_a ? 1 : s.batch) * (a_rows * g.lda + 1)));
  d.b.resize(static_cast<size_t>((s.broadcast_b ? 1 : s.batch) * (b_rows * g.ldb + 7)));
  d.c.resize(static_cast<size_t>(s.batch * g.batch_stride_c));
  for (float& v : d.a) v = dist(rng);
  for (float& v : d.b) v = dist(rng);
  for (float& v : d.c) v = dist(rng);
  if (s.beta == 0) {
    for (int64_t bt = 0; bt < s.batch; ++bt)
      for (int64_t i = 0; i < s.m; ++i)
        for (int64_t j = 0; j < s.n; ++j) d.c[static_cast<size_t>(bt * g.batch_stride_c + i * g.ldc + j)] = NAN;
  }
  g.a = d.a.data();
  g.b = d.b.data();
  g.c = d.c.data();
  return d;
}

// `got` against the reference on the same operands: every element of C within the dot-product error bound, and
// the padding around the C matrices untouched.
void ExpectMatchesReference(const Shape& s, const std::vector<float>& got, const Operands& want_in) {
  Operands want = want_in;
  want.args.a = want.a.data();
  want.args.b = want.b.data();
  want.args.c = want.c.data();
  GemmReference(want.args);
  const double tol =
      std::numeric_limits<float>::epsilon() * 4 * (s.k + 2) * (std::fabs(s.alpha) + std::fabs(s.beta) + 1);
  ASSERT_EQ(got.size(), want.c.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want.c[i])) {
      ASSERT_TRUE(std::isnan(got[i])) << Describe(s) << " padding at " << i;  // never written
    } else {
      ASSERT_NEAR(got[i], want.c[i], tol) << Describe(s) << " at " << i;
    }
  }
}

// Runs GemmAvx2 on s (B packed per call, and packed once when the batch shares B) and checks both results.
void CheckShape(const Shape& s, uint32_t seed, int threads) {
  exec::ThreadPool pool(threads);
  const Operands original = Make(s, seed);
  Operands run = Make(s, seed);
  GemmAvx2(run.args, nullptr, pool);
  ExpectMatchesReference(s, run.c, original);
  if (s.batch == 1 || s.broadcast_b) {
    Operands packed_run = Make(s, seed);
    const GemmAvx2PackedB packed = GemmAvx2PackB(packed_run.args);
    EXPECT_EQ(packed.k, s.k);
    EXPECT_EQ(packed.n, s.n);
    EXPECT_EQ(packed.padded_n % kGemmAvx2Nr, 0);
    packed_run.args.b = nullptr;  // the packed copy is all it reads
    GemmAvx2(packed_run.args, &packed, pool);
    ExpectMatchesReference(s, packed_run.c, original);
  }
}

std::vector<Shape> RandomShapes(int count, uint32_t seed) {
  std::mt19937 rng(seed);
  auto dim = [&](int max) { return static_cast<int64_t>(std::uniform_int_distribution<int>(1, max)(rng)); };
  auto coin = [&] { return std::uniform_int_distribution<int>(0, 1)(rng) == 1; };
  std::vector<Shape> out;
  for (int i = 0; i < count; ++i) {
    Shape s{dim(3), dim(40), dim(70), dim(300), coin(), coin(), false, false, 1.0f, 0.0f};
    if (s.batch > 1) {
      s.broadcast_a = coin() && coin();
      s.broadcast_b = !s.broadcast_a && coin();
    }
    if (coin()) s.alpha = 0.5f + static_cast<float>(i % 3);
    if (coin()) s.beta = (i % 2) ? 1.0f : -0.75f;
    out.push_back(s);
  }
  return out;
}

class GemmAvx2Test : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!GemmAvx2Supported()) GTEST_SKIP() << "this CPU has no AVX2 and FMA";
  }
};

TEST_F(GemmAvx2Test, RandomShapesMatchReference) {
  int i = 0;
  for (const Shape& s : RandomShapes(60, 17)) {
    CheckShape(s, 100 + i, 1 + i % 3);
    ++i;
  }
}

TEST_F(GemmAvx2Test, BlockEdgesMatchReference) {
  // Rows around the 6-row register block, columns around the 16-column strips and the 256-column tasks, K around
  // the 256-row packed blocks; many tasks over several threads (split by columns, or by rows when N is narrow).
  const Shape shapes[] = {
      {1, 6, 16, 256, false, false, false, false, 1, 0},      {1, 7, 17, 257, false, true, false, false, 1, 0},
      {1, 5, 15, 255, true, true, false, false, 1, 1},        {1, 13, 271, 513, false, true, false, false, 1, 0},
      {1, 130, 33, 600, false, false, false, false, 2, 0.5f}, {1, 250, 8, 40, true, false, false, false, 1, 0},
      {2, 64, 520, 300, false, true, false, true, 1, 1},      {3, 31, 48, 1, false, false, true, false, -1, 0},
  };
  for (int threads : {1, 2, 4}) {
    for (const Shape& s : shapes) CheckShape(s, 7, threads);
  }
}

// GemmRunner (kOneDnn) with the AVX2 GEMM forced on: results match the reference, and a constant B is packed
// once and packed again when its address changes (the packed copy of the old B is not reused).
TEST_F(GemmAvx2Test, RunnerPacksConstantBOnceAndRepacksANewB) {
  if (!OneDnnAvailable()) GTEST_SKIP() << "GemmRunner takes the AVX2 GEMM only in the oneDNN mode";
  SetGemmAvx2Use(GemmAvx2Use::kAlways);
  SetSmallGemm(false);
  EXPECT_TRUE(GemmRunnerUsesAvx2());
  exec::ThreadPool pool(2);
  GemmRunner runner(LinalgImpl::kOneDnn);
  runner.SetConstantB(true);
  const Shape s{1, 40, 70, 300, false, true, false, false, 1, 0};
  const Operands original = Make(s, 3);
  for (int rep = 0; rep < 2; ++rep) {
    Operands run = Make(s, 3);
    run.args.b = original.b.data();  // the same address every time
    ASSERT_TRUE(runner.Run(run.args, pool).ok());
    ExpectMatchesReference(s, run.c, original);
  }
  // A different B at a new address: its own packing, not the old one.
  const Operands other = Make(s, 4);
  Operands run = Make(s, 4);
  ASSERT_TRUE(runner.Run(run.args, pool).ok());
  ExpectMatchesReference(s, run.c, other);
  // Without SetConstantB, B is read on every call (a training session's weights): changing its values in place
  // changes the result.
  GemmRunner plain(LinalgImpl::kOneDnn);
  Operands changing = Make(s, 5);
  const std::vector<float> c0 = changing.c;
  ASSERT_TRUE(plain.Run(changing.args, pool).ok());
  ExpectMatchesReference(s, changing.c, Make(s, 5));
  for (float& v : changing.b) v = -v;
  std::copy(c0.begin(), c0.end(), changing.c.begin());
  ASSERT_TRUE(plain.Run(changing.args, pool).ok());
  Operands negated = Make(s, 5);
  for (float& v : negated.b) v = -v;
  ExpectMatchesReference(s, changing.c, negated);
  SetSmallGemm(true);
  SetGemmAvx2Use(GemmAvx2Use::kAuto);
}

// The small GEMM (AVX-512 CPUs) with a constant transposed B (a Gemm weight with transB = 1): op(B) is put in plain
// layout at the first call and reused while B's address stays (so changing its values in place is not seen, as the
// contract of SetConstantB says), and made again for a B at a new address; batches sharing B too.
TEST_F(GemmAvx2Test, SmallGemmKeepsAConstantTransposedBPlain) {
  const Shape shapes[] = {{1, 40, 70, 300, false, true, false, false, 1, 0},
                          {3, 10, 50, 64, true, true, false, true, 0.5f, 0.25f}};
  for (const Shape& s : shapes) {
    SCOPED_TRACE(Describe(s));
    if (!SmallGemmApplies(Make(s, 1).args)) GTEST_SKIP() << "the small GEMM needs AVX-512";
    exec::ThreadPool pool(2);
    GemmRunner runner(LinalgImpl::kOneDnn);
    runner.SetConstantB(true);
    Operands run = Make(s, 3);
    const Operands original = Make(s, 3);
    const std::vector<float> c0 = run.c;
    ASSERT_TRUE(runner.Run(run.args, pool).ok());
    ExpectMatchesReference(s, run.c, original);
    for (float& v : run.b) v = -v;  // in place: the plain copy of the first call is used
    std::copy(c0.begin(), c0.end(), run.c.begin());
    ASSERT_TRUE(runner.Run(run.args, pool).ok());
    ExpectMatchesReference(s, run.c, original);
    // A different B at a new address: its own copy.
    Operands other = Make(s, 4);
    ASSERT_TRUE(runner.Run(other.args, pool).ok());
    ExpectMatchesReference(s, other.c, Make(s, 4));
  }
}

// An fp16 B marked constant is packed once from its 16-bit values (no float copy kept) and repacked for a new B.
TEST_F(GemmAvx2Test, RunnerPacksConstantFloat16B) {
  if (!OneDnnAvailable()) GTEST_SKIP() << "GemmRunner takes the AVX2 GEMM only in the oneDNN mode";
  SetGemmAvx2Use(GemmAvx2Use::kAlways);
  exec::ThreadPool pool(2);
  GemmRunner runner(LinalgImpl::kOneDnn);
  runner.SetConstantB(true);
  for (uint32_t seed : {8u, 9u}) {
    const Shape s{2, 20, 50, 270, false, seed == 8, false, true, 1, 0};
    Operands want = Make(s, seed);
    for (float& v : want.a) v = static_cast<float>(Float16(v));
    for (float& v : want.b) v = static_cast<float>(Float16(v));
    std::vector<Float16> a16, b16;
    for (float v : want.a) a16.emplace_back(v);
    for (float v : want.b) b16.emplace_back(v);
    for (int rep = 0; rep < 2; ++rep) {
      std::vector<float> c = Make(s, seed).c;
      GemmArgs<Float16, float> g;
      g.batch = s.batch;
      g.m = s.m;
      g.n = s.n;
      g.k = s.k;
      g.trans_a = want.args.trans_a;
      g.trans_b = want.args.trans_b;
      g.a = a16.data();
      g.lda = want.args.lda;
      g.batch_stride_a = want.args.batch_stride_a;
      g.b = b16.data();
      g.ldb = want.args.ldb;
      g.batch_stride_b = want.args.batch_stride_b;
      g.c = c.data();
      g.ldc = want.args.ldc;
      g.batch_stride_c = want.args.batch_stride_c;
      ASSERT_TRUE(runner.Run(g, pool).ok());
      ExpectMatchesReference(s, c, want);
    }
  }
  SetGemmAvx2Use(GemmAvx2Use::kAuto);
}

TEST(GemmAvx2Use, SettingDecidesWhetherTheRunnerTakesIt) {
  SetGemmAvx2Use(GemmAvx2Use::kNever);
  EXPECT_FALSE(GemmRunnerUsesAvx2());
  SetGemmAvx2Use(GemmAvx2Use::kAlways);
  EXPECT_EQ(GemmRunnerUsesAvx2(), GemmAvx2Supported());
  SetGemmAvx2Use(GemmAvx2Use::kAuto);
  if (!GemmAvx2Supported()) {
    EXPECT_FALSE(GemmRunnerUsesAvx2());
  }
}

}  // namespace
}  // namespace onnxamp::ops
