// Gemm kernel: alpha/beta/transA/transB, every unidirectional broadcast of C, the opset rules for C (broadcast
// attribute before 7, optional from 11), every element type against a double-precision reference under every
// implementation, and errors.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "runtime/ops/common/broadcast.h"
#include "tests/runtime/ops/linalg_test_util.h"

namespace onnxamp::testing {
namespace {

using Dims = std::vector<int64_t>;

struct GemmCase {
  int64_t m, n, k;
  bool ta, tb;
  Dims c_dims;  // {-1}: no C
  float alpha, beta;
};

OpTester GemmTester(DType dtype, const GemmCase& g, const std::vector<double>& a, const std::vector<double>& b,
                    const std::vector<double>& c, int64_t opset = 13) {
  OpTester t = MakeTester("Gemm", opset);
  t.Attr(ir::Attribute::Float("alpha", g.alpha)).Attr(ir::Attribute::Float("beta", g.beta));
  t.Attr(ir::Attribute::Int("transA", g.ta)).Attr(ir::Attribute::Int("transB", g.tb));
  t.Input(TensorOf(dtype, g.ta ? Dims{g.k, g.m} : Dims{g.m, g.k}, a));
  t.Input(TensorOf(dtype, g.tb ? Dims{g.n, g.k} : Dims{g.k, g.n}, b));
  if (g.c_dims != Dims{-1}) t.Input(TensorOf(dtype, g.c_dims, c));
  return t;
}

int64_t Count(const Dims& d) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  return n;
}

// alpha * op(A) op(B) + beta * C in double; magnitudes of the terms for the tolerance.
void GemmDouble(const GemmCase& g, const std::vector<double>& a, const std::vector<double>& b,
                const std::vector<double>& c, std::vector<double>* out, std::vector<double>* mag) {
  const bool has_c = g.c_dims != Dims{-1};
  std::vector<int64_t> cs = has_c ? ops::BroadcastStrides(g.c_dims, Dims{g.m, g.n}) : std::vector<int64_t>{0, 0};
  for (int64_t i = 0; i < g.m; ++i) {
    for (int64_t j = 0; j < g.n; ++j) {
      double sum = 0, m = 0;
      for (int64_t p = 0; p < g.k; ++p) {
        const double t = (g.ta ? a[p * g.m + i] : a[i * g.k + p]) * (g.tb ? b[j * g.k + p] : b[p * g.n + j]);
        sum += t;
        m += std::abs(t);
      }
      double v = g.alpha * sum, vm = std::abs(g.alpha) * m;
      if (has_c && g.beta != 0) {
        const double cv = c[i * cs[0] + j * cs[1]];
        v += g.beta * cv;
        vm += std::abs(g.beta * cv);
      }
      out->push_back(v);
      mag->push_back(vm);
    }
  }
}

TEST(Gemm, HandComputed) {
  // A [2,3] transposed from [3,2]; B [3,2]; C [2] broadcast over rows; alpha 2, beta 0.5.
  const GemmCase g{2, 2, 3, true, false, {2}, 2.0f, 0.5f};
  const std::vector<double> a = {1, 4, 2, 5, 3, 6};  // A^T = [[1,2,3],[4,5,6]]
  const std::vector<double> b = {1, 0, 0, 1, 1, 1};  // [[1,0],[0,1],[1,1]]
  for (ops::LinalgImpl impl : AvailableImpls()) {
    auto out = RunWith(GemmTester(DType::kFloat32, g, a, b, {10, 20}), impl);
    ASSERT_EQ(out.size(), 1u);
    // A B = [[4,5],[10,11]] -> 2 * that + [5, 10].
    EXPECT_EQ(Values<float>(out[0]), (std::vector<float>{13, 20, 25, 32})) << ops::LinalgImplName(impl);
  }
}

class GemmTyped : public ::testing::TestWithParam<DType> {};

TEST_P(GemmTyped, AllLayoutsAndBroadcastsAgainstDouble) {
  const DType dtype = GetParam();
  const bool is_float =
      dtype == DType::kFloat32 || dtype == DType::kFloat16 || dtype == DType::kBFloat16 || dtype == DType::kFloat64;
  const bool is_unsigned = dtype == DType::kUint32 || dtype == DType::kUint64;
  const double lo = is_unsigned ? 0 : (is_float ? -1 : -9), hi = is_float ? 1 : 9;
  const int64_t m = 7, n = 11, k = 37;
  const std::vector<Dims> c_shapes = {{-1}, {}, {1}, {n}, {m, 1}, {1, n}, {m, n}};
  uint32_t seed = 100;
  for (int layout = 0; layout < 4; ++layout) {
    for (const Dims& c_dims : c_shapes) {
      GemmCase g{
          m, n, k, (layout & 1) != 0, (layout & 2) != 0, c_dims, is_float ? 0.75f : 2.0f, is_float ? -1.5f : 3.0f};
      const auto a = RandomValues(dtype, m * k, seed++, lo, hi), b = RandomValues(dtype, k * n, seed++, lo, hi);
      const auto c = RandomValues(dtype, c_dims == Dims{-1} ? 0 : Count(c_dims), seed++, lo, hi);
      std::vector<double> want, mag;
      GemmDouble(g, a, b, c, &want, &mag);
      for (ops::LinalgImpl impl : AvailableImpls()) {
        auto out = RunWith(GemmTester(dtype, g, a, b, c), impl);
        ASSERT_EQ(out.size(), 1u);
        EXPECT_EQ(out[0].dims(), (Dims{m, n}));
        ExpectNear(out[0], want, is_float ? mag : std::vector<double>{},
                   StrCat(ops::LinalgImplName(impl), " transA ", g.ta, " transB ", g.tb, " C ",
                          c_dims == Dims{-1} ? "none" : ops::ShapeToString(c_dims)));
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, GemmTyped,
                         ::testing::Values(DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64,
                                           DType::kInt32, DType::kInt64, DType::kUint32, DType::kUint64),
                         DTypeParamName);

TEST(Gemm, LargeLinearLayer) {
  // A Linear layer as exported: transB = 1, bias [N]; big enough for several GEMM blocks and threads.
  const GemmCase g{67, 300, 260, false, true, {300}, 1.0f, 1.0f};
  const auto a = RandomValues(DType::kFloat32, g.m * g.k, 1), b = RandomValues(DType::kFloat32, g.n * g.k, 2);
  const auto c = RandomValues(DType::kFloat32, g.n, 3);
  std::vector<double> want, mag;
  GemmDouble(g, a, b, c, &want, &mag);
  for (ops::LinalgImpl impl : AvailableImpls()) {
    OpTester t = GemmTester(DType::kFloat32, g, a, b, c);
    t.options.num_threads = 3;
    auto out = RunWith(t, impl);
    ASSERT_EQ(out.size(), 1u);
    ExpectNear(out[0], want, mag, ops::LinalgImplName(impl));
  }
}

TEST(Gemm, BetaZeroIgnoresC) {
  const GemmCase g{1, 2, 1, false, false, {2}, 1.0f, 0.0f};
  for (ops::LinalgImpl impl : AvailableImpls()) {
    auto out = RunWith(GemmTester(DType::kFloat32, g, {2}, {3, 4}, {NAN, INFINITY}), impl);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(Values<float>(out[0]), (std::vector<float>{6, 8})) << ops::LinalgImplName(impl);
  }
}

TEST(Gemm, OptionalCByOpset) {
  const GemmCase g{1, 1, 2, false, false, {-1}, 1.0f, 1.0f};
  auto v11 = GemmTester(DType::kFloat32, g, {1, 2}, {3, 4}, {}, 11).Run();
  ASSERT_TRUE(v11.ok()) << v11.status().ToString();
  EXPECT_EQ(Values<float>(v11.value()[0]), (std::vector<float>{11}));
  auto v9 = GemmTester(DType::kFloat32, g, {1, 2}, {3, 4}, {}, 9).Run();
  ASSERT_FALSE(v9.ok());
  EXPECT_NE(v9.status().message().find("input C is required before opset 11"), std::string::npos)
      << v9.status().message();
}

TEST(Gemm, LegacyBroadcastAttribute) {
  // Before opset 7 a C smaller than [M, N] needs broadcast = 1.
  const GemmCase g{2, 2, 1, false, false, {2}, 1.0f, 1.0f};
  auto no = GemmTester(DType::kFloat32, g, {1, 2}, {1, 1}, {10, 20}, 6).Run();
  ASSERT_FALSE(no.ok());
  EXPECT_NE(no.status().message().find("input C has shape [2], expected [2,2] (attribute 'broadcast' is 0)"),
            std::string::npos)
      << no.status().message();
  OpTester yes = GemmTester(DType::kFloat32, g, {1, 2}, {1, 1}, {10, 20}, 6);
  yes.Attr(ir::Attribute::Int("broadcast", 1));
  auto r = yes.Run();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Values<float>(r.value()[0]), (std::vector<float>{11, 21, 12, 22}));
}

TEST(Gemm, Errors) {
  OpTester t = MakeTester("Gemm", 13);
  t.Input(TensorOf(DType::kFloat32, {2, 3}, std::vector<double>(6))).Input(TensorOf(DType::kFloat32, {4, 2}, {}));
  auto k = t.Run();
  ASSERT_FALSE(k.ok());
  EXPECT_NE(k.status().message().find("input A [2,3] has K = 3 but input B [4,2] has K = 4"), std::string::npos)
      << k.status().message();

  OpTester r3 = MakeTester("Gemm", 13);
  r3.Input(TensorOf(DType::kFloat32, {1, 2, 3}, {})).Input(TensorOf(DType::kFloat32, {3, 2}, {}));
  auto rank = r3.Run();
  ASSERT_FALSE(rank.ok());
  EXPECT_NE(rank.status().message().find("inputs A and B must be 2-D"), std::string::npos) << rank.status().message();

  const GemmCase bad_c{2, 3, 1, false, false, {2}, 1.0f, 1.0f};
  auto c = GemmTester(DType::kFloat32, bad_c, {1, 2}, {1, 2, 3}, {1, 2}).Run();
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("input C shape [2] cannot be broadcast to [2,3]"), std::string::npos)
      << c.status().message();

  OpTester attr = MakeTester("Gemm", 13);
  attr.Attr(ir::Attribute::Int("transA", 2));
  attr.Input(TensorOf(DType::kFloat32, {1, 1}, {1})).Input(TensorOf(DType::kFloat32, {1, 1}, {1}));
  auto a = attr.Run();
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("attributes 'transA' and 'transB' must be 0 or 1, got 2 and 0"),
            std::string::npos)
      << a.status().message();

  const GemmCase frac{1, 1, 1, false, false, {-1}, 0.5f, 1.0f};
  auto f = GemmTester(DType::kInt32, frac, {2}, {3}, {}).Run();
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("must be whole numbers for element type int32"), std::string::npos)
      << f.status().message();
}

}  // namespace
}  // namespace onnxamp::testing
