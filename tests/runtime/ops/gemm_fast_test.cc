// The direct GEMM kernels against the reference: GEMV with float, fp16 and bf16 B in both layouts (AVX-512 and
// AVX2 and portable kernels, each where the CPU runs it), the small float GEMM, GemmRunner's fp16/bf16 path (GEMV,
// converted operands, a constant B converted once), and the rounding of fp16/bf16 MatMul and Gemm results through a
// Session: with sums that are exact in float, every fast path gives the reference kernel's bits.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "runtime/executor/session.h"
#include "runtime/executor/thread_pool.h"
#include "runtime/ops/common/gemm.h"
#include "runtime/ops/common/gemm_small.h"
#include "runtime/ops/common/gemv.h"
#include "tests/runtime/ops/linalg_test_util.h"

namespace onnxamp::ops {
namespace {

template <typename T>
float ToFloat(T v) {
  return static_cast<float>(v);
}

template <typename T>
T FromFloat(float v) {
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else {
    return T(v);
  }
}

// Gemv against a double-precision sum, for B of type TB, every m, both layouts, odd n and k (vector tails),
// padded leading dimensions, alpha and beta.
template <typename TB>
void CheckGemv(GemvIsa isa, uint32_t seed) {
  SetGemvMaxIsa(isa);
  if (GemvActiveIsa() != isa) {  // the CPU lacks it: nothing new to check
    SetGemvMaxIsa(GemvIsa::kAvx512);
    return;
  }
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  exec::ThreadPool pool(2);
  for (int64_t m = 1; m <= kGemvMaxM; ++m) {
    for (int64_t n : {1, 5, 17, 64, 65, 300, 513}) {
      for (int64_t k : {1, 7, 16, 33, 300}) {
        for (bool trans_b : {false, true}) {
          GemvArgs<TB> g;
          g.m = m;
          g.n = n;
          g.k = k;
          g.lda = k + 3;
          g.ldb = (trans_b ? k : n) + 5;
          g.ldc = n + 2;
          g.trans_b = trans_b;
          g.alpha = (n % 2) ? 1.5f : 1.0f;
          g.beta = (k % 2) ? 0.5f : 0.0f;
          std::vector<float> a(static_cast<size_t>(m * g.lda)), c(static_cast<size_t>(m * g.ldc));
          std::vector<TB> b(static_cast<size_t>((trans_b ? n : k) * g.ldb));
          for (float& v : a) v = dist(rng);
          for (TB& v : b) v = FromFloat<TB>(dist(rng));
          for (float& v : c) v = g.beta == 0.0f ? NAN : dist(rng);  // beta 0 must ignore C, NaN included
          const std::vector<float> c0 = c;
          g.a = a.data();
          g.b = b.data();
          g.c = c.data();
          Gemv(g, pool);
          for (int64_t i = 0; i < m; ++i) {
            for (int64_t j = 0; j < n; ++j) {
              double sum = 0, mag = 0;
              for (int64_t p = 0; p < k; ++p) {
                const double x = a[i * g.lda + p];
                const double y = ToFloat(trans_b ? b[j * g.ldb + p] : b[p * g.ldb + j]);
                sum += x * y;
                mag += std::fabs(x * y);
              }
              const double old = c0[i * g.ldc + j];
              const double want = g.alpha * sum + (g.beta != 0.0f ? g.beta * old : 0.0);
              ASSERT_NEAR(c[i * g.ldc + j], want, 1.2e-7 * (k + 4) * (mag * g.alpha + std::fabs(want)) + 1e-30)
                  << GemvIsaName(isa) << " m " << m << " n " << n << " k " << k << " trans_b " << trans_b << " at " << i
                  << "," << j;
            }
            // Padding after each row of C is left alone.
            for (int64_t j = n; j < g.ldc; ++j) {
              const float got = c[i * g.ldc + j], old = c0[i * g.ldc + j];
              ASSERT_TRUE(got == old || (std::isnan(got) && std::isnan(old))) << "padding at " << i << "," << j;
            }
          }
        }
      }
    }
  }
  SetGemvMaxIsa(GemvIsa::kAvx512);
}

TEST(Gemv, FloatMatchesExactSum) {
  CheckGemv<float>(GemvIsa::kAvx512, 1);
  CheckGemv<float>(GemvIsa::kAvx2, 7);
  CheckGemv<float>(GemvIsa::kPortable, 2);
}

TEST(Gemv, Float16MatchesExactSum) {
  CheckGemv<Float16>(GemvIsa::kAvx512, 3);
  CheckGemv<Float16>(GemvIsa::kAvx2, 8);
  CheckGemv<Float16>(GemvIsa::kPortable, 4);
}

TEST(Gemv, BFloat16MatchesExactSum) {
  CheckGemv<BFloat16>(GemvIsa::kAvx512, 5);
  CheckGemv<BFloat16>(GemvIsa::kAvx2, 9);
  CheckGemv<BFloat16>(GemvIsa::kPortable, 6);
}

// Every machine that runs the tests has at least AVX2 (the CI machines: AVX-512 Xeons and AVX2 AMD EPYCs), so the
// fast path cannot be skipped silently there.
TEST(Gemv, UsesTheWidestKernelTheCpuHas) {
  __builtin_cpu_init();
  const GemvIsa want =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl")
          ? GemvIsa::kAvx512
      : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? GemvIsa::kAvx2
                                                                        : GemvIsa::kPortable;
  EXPECT_EQ(GemvIsaName(GemvActiveIsa()), std::string(GemvIsaName(want)));
}

// Random operands for a batched problem with padded layouts (values of the reference's type, float).
struct Problem {
  int64_t batch, m, n, k;
  bool ta, tb;
  float alpha, beta;
};

struct Operands {
  std::vector<float> a, b, c;
  GemmArgs<float> g;
};

Operands MakeOperands(const Problem& p, std::mt19937& rng, bool round_to_half) {
  std::uniform_real_distribution<float> dist(-1, 1);
  Operands o;
  GemmArgs<float>& g = o.g;
  g.batch = p.batch;
  g.m = p.m;
  g.n = p.n;
  g.k = p.k;
  g.trans_a = p.ta;
  g.trans_b = p.tb;
  g.lda = (p.ta ? p.m : p.k) + 1;
  g.ldb = (p.tb ? p.k : p.n) + 2;
  g.ldc = p.n + 3;
  g.batch_stride_a = (p.ta ? p.k : p.m) * g.lda;
  g.batch_stride_b = (p.tb ? p.n : p.k) * g.ldb;
  g.batch_stride_c = p.m * g.ldc;
  g.alpha = p.alpha;
  g.beta = p.beta;
  o.a.resize(static_cast<size_t>(p.batch * g.batch_stride_a));
  o.b.resize(static_cast<size_t>(p.batch * g.batch_stride_b));
  o.c.resize(static_cast<size_t>(p.batch * g.batch_stride_c));
  for (auto* v : {&o.a, &o.b, &o.c}) {
    for (float& x : *v) x = round_to_half ? static_cast<float>(Float16(dist(rng))) : dist(rng);
  }
  g.a = o.a.data();
  g.b = o.b.data();
  g.c = o.c.data();
  return o;
}

std::vector<Problem> Problems(uint32_t seed, int count) {
  std::mt19937 rng(seed);
  auto dim = [&](int lo, int hi) { return static_cast<int64_t>(std::uniform_int_distribution<int>(lo, hi)(rng)); };
  std::vector<Problem> out;
  for (int i = 0; i < count; ++i) {
    out.push_back({dim(1, 3), i % 3 == 0 ? dim(1, 4) : dim(1, 70), dim(1, 150), dim(1, 90), i % 4 == 1, i % 2 == 1,
                   i % 5 == 0 ? 0.5f : 1.0f, i % 3 == 2 ? 0.75f : 0.0f});
  }
  return out;
}

TEST(SmallGemm, MatchesReference) {
  std::mt19937 rng(11);
  exec::ThreadPool pool(2);
  int tested = 0;
  for (const Problem& p : Problems(12, 60)) {
    Operands want = MakeOperands(p, rng, false);
    Operands got = want;
    got.g.a = got.a.data();
    got.g.b = got.b.data();
    got.g.c = got.c.data();
    if (!SmallGemmApplies(got.g)) continue;
    ++tested;
    GemmReference(want.g);
    RunSmallGemm(got.g, pool);
    for (size_t i = 0; i < want.c.size(); ++i) {
      ASSERT_NEAR(got.c[i], want.c[i], 1.2e-7 * 4 * (p.k + 2) * 3)
          << "batch " << p.batch << " m " << p.m << " n " << p.n << " k " << p.k << " ta " << p.ta << " tb " << p.tb
          << " at " << i;
    }
  }
  if (tested == 0) GTEST_SKIP() << "the small GEMM does not run on this CPU";
}

// GemmRunner with fp16/bf16 operands against the float reference on the same (rounded) values: GEMV shapes,
// converted shapes, and a constant B converted once.
template <typename T>
void CheckRunnerHalf(LinalgImpl impl, bool constant_b, uint32_t seed) {
  std::mt19937 rng(seed);
  exec::ThreadPool pool(2);
  GemmRunner runner(impl);
  runner.SetConstantB(constant_b);
  int i = 0;
  for (const Problem& p : Problems(seed + 1, 24)) {
    Operands want = MakeOperands(p, rng, true);
    if constexpr (std::is_same_v<T, BFloat16>) {
      for (auto* v : {&want.a, &want.b}) {
        for (float& x : *v) x = static_cast<float>(BFloat16(x));
      }
    }
    std::vector<T> a16, b16;
    for (float x : want.a) a16.push_back(T(x));
    for (float x : want.b) b16.push_back(T(x));
    std::vector<float> c = want.c;
    GemmArgs<T, float> g = testing::WithOperands(want.g, a16.data(), b16.data(), c.data());
    GemmReference(want.g);
    // Twice: with a constant B the second call uses the float copy made by the first (a new B each problem has a
    // new address, so the copy is remade).
    for (int rep = 0; rep < 2; ++rep) {
      std::vector<float> out = c;
      g.c = out.data();
      Status st = runner.Run(g, pool);
      ASSERT_TRUE(st.ok()) << st.ToString();
      for (size_t j = 0; j < out.size(); ++j) {
        ASSERT_NEAR(out[j], want.c[j], 1.2e-7 * 4 * (p.k + 2) * 3)
            << LinalgImplName(impl) << " constant_b " << constant_b << " problem " << i << " m " << p.m << " n " << p.n
            << " k " << p.k << " at " << j;
      }
    }
    ++i;
  }
}

TEST(GemmRunnerHalf, Float16MatchesReference) {
  for (LinalgImpl impl : {LinalgImpl::kPortable, LinalgImpl::kOneDnn}) {
    for (bool constant_b : {false, true}) CheckRunnerHalf<Float16>(impl, constant_b, 20);
  }
}

TEST(GemmRunnerHalf, BFloat16MatchesReference) {
  for (LinalgImpl impl : {LinalgImpl::kPortable, LinalgImpl::kOneDnn}) {
    for (bool constant_b : {false, true}) CheckRunnerHalf<BFloat16>(impl, constant_b, 30);
  }
}

// ---- Through a Session: rounding of fp16/bf16 MatMul and Gemm results -------------------------------------------

// A one-node model: `op` on A (a graph input) and B (an initializer when b_constant, else an input), plus C for
// Gemm (an initializer).
ir::Model LinalgModel(const std::string& op, const ir::Tensor& a, const ir::Tensor& b, const ir::Tensor* c,
                      bool b_constant, bool trans_b) {
  ir::Model m;
  m.opset_imports = {{"", 17}};
  ir::Graph& g = *m.graph;
  auto input = [&](const std::string& name, const ir::Tensor& t) {
    ir::Value* v = g.CreateValue(name);
    ir::Shape shape;
    for (int64_t d : t.dims()) shape.push_back(ir::Dim::Value(d));
    v->set_type(ir::ValueType::Tensor(t.dtype(), shape));
    g.AddInput(v);
    return v;
  };
  ir::Value* va = input("a", a);
  ir::Value* vb = nullptr;
  if (b_constant) {
    vb = g.CreateValue("b");
    g.SetInitializer(vb, b);
  } else {
    vb = input("b", b);
  }
  std::vector<ir::Value*> ins = {va, vb};
  if (c) {
    ir::Value* vc = g.CreateValue("c");
    g.SetInitializer(vc, *c);
    ins.push_back(vc);
  }
  ir::Value* y = g.CreateValue("y");
  ir::Node* node = g.AddNode(op, ins, {y}, "node");
  if (trans_b) node->SetAttribute(ir::Attribute::Int("transB", 1));
  g.AddOutput(y);
  return m;
}

// Multiples of 1/8 up to 4 in magnitude: products and sums of up to a few hundred terms are exact in float, so the
// summation order cannot matter, and the results need more than fp16's 11 bits: storing them rounds.
template <typename T>
ir::Tensor ExactTensor(std::vector<int64_t> dims, std::mt19937& rng) {
  ir::Tensor t(DTypeOf<T>(), std::move(dims));
  std::uniform_int_distribution<int> dist(-32, 32);
  for (T& v : t.mutable_values<T>()) v = T(static_cast<float>(dist(rng)) / 8.0f);
  return t;
}

template <typename T>
void CheckExactRounding(const std::string& op) {
  std::mt19937 rng(5);
  const bool gemm = op == "Gemm";
  struct Shape {
    std::vector<int64_t> a;
    int64_t n;
  };
  // GEMV (1 and 3 rows), the converted path (37 rows), a batch folded into rows (MatMul only).
  std::vector<Shape> shapes = {{{1, 200}, 300}, {{3, 77}, 65}, {{37, 120}, 50}};
  if (!gemm) shapes.push_back({{2, 5, 64}, 33});
  for (const Shape& s : shapes) {
    const int64_t k = s.a.back();
    for (bool b_constant : {false, true}) {
      for (bool trans_b : gemm ? std::vector<bool>{false, true} : std::vector<bool>{false}) {
        ir::Tensor a = ExactTensor<T>(s.a, rng);
        ir::Tensor b = ExactTensor<T>(trans_b ? std::vector<int64_t>{s.n, k} : std::vector<int64_t>{k, s.n}, rng);
        ir::Tensor c = ExactTensor<T>({s.n}, rng);
        std::vector<std::vector<double>> results;
        for (LinalgImpl impl : testing::AvailableImpls()) {
          auto session = exec::Session::Create(LinalgModel(op, a, b, gemm ? &c : nullptr, b_constant, trans_b),
                                               testing::CpuSession(0, impl));
          ASSERT_TRUE(session.ok()) << session.status().ToString();
          std::vector<ir::Tensor> feeds;
          ir::Tensor fa = a;
          fa.set_name("a");
          feeds.push_back(fa);
          if (!b_constant) {
            ir::Tensor fb = b;
            fb.set_name("b");
            feeds.push_back(fb);
          }
          for (int run = 0; run < 2; ++run) {  // the second run is planned, with a cached float B
            auto out = (*session)->Run(feeds);
            ASSERT_TRUE(out.ok()) << out.status().ToString();
            results.push_back(testing::AsDoubles((*out)[0]));
          }
        }
        for (size_t r = 1; r < results.size(); ++r) {
          ASSERT_EQ(results[r], results[0])
              << op << " " << DTypeName(DTypeOf<T>()) << " rows " << s.a[0] << " k " << k << " n " << s.n
              << " b_constant " << b_constant << " trans_b " << trans_b << " result " << r;
        }
      }
    }
  }
}

TEST(LinalgHalfRounding, MatMulFloat16EqualsReferenceBits) { CheckExactRounding<Float16>("MatMul"); }
TEST(LinalgHalfRounding, MatMulBFloat16EqualsReferenceBits) { CheckExactRounding<BFloat16>("MatMul"); }
TEST(LinalgHalfRounding, GemmFloat16EqualsReferenceBits) { CheckExactRounding<Float16>("Gemm"); }
TEST(LinalgHalfRounding, GemmBFloat16EqualsReferenceBits) { CheckExactRounding<BFloat16>("Gemm"); }

}  // namespace
}  // namespace onnxamp::ops
