// MatMul kernel: hand-computed cases, numpy 1-D and batch-broadcasting rules, every element type against a
// double-precision product, every implementation (reference, portable, oneDNN) on random odd shapes, and errors.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "runtime/ops/common/broadcast.h"
#include "tests/runtime/ops/linalg_test_util.h"

namespace onnxamp::testing {
namespace {

using Dims = std::vector<int64_t>;

// numpy.matmul in double: values and magnitudes (sum of |terms|) of the result.
struct Expected {
  Dims dims;
  std::vector<double> values, magnitude;
};

Expected MatMulDouble(const Dims& a_dims, const std::vector<double>& a, const Dims& b_dims,
                      const std::vector<double>& b) {
  Dims ad = a_dims, bd = b_dims;
  if (ad.size() == 1) ad.insert(ad.begin(), 1);
  if (bd.size() == 1) bd.push_back(1);
  const int64_t m = ad[ad.size() - 2], k = ad.back(), n = bd.back();
  const size_t rank = std::max(ad.size(), bd.size()) - 2;
  Dims pa(rank, 1), pb(rank, 1), batch(rank);
  std::copy(ad.begin(), ad.end() - 2, pa.begin() + (rank - (ad.size() - 2)));
  std::copy(bd.begin(), bd.end() - 2, pb.begin() + (rank - (bd.size() - 2)));
  int64_t count = 1;
  for (size_t i = 0; i < rank; ++i) {
    batch[i] = std::max(pa[i], pb[i]);
    count *= batch[i];
  }
  Expected e;
  e.dims = batch;
  if (a_dims.size() > 1) e.dims.push_back(m);
  if (b_dims.size() > 1) e.dims.push_back(n);
  for (int64_t flat = 0; flat < count; ++flat) {
    int64_t rest = flat, oa = 0, ob = 0, sa = 1, sb = 1;
    for (size_t i = rank; i-- > 0;) {
      const int64_t idx = rest % batch[i];
      rest /= batch[i];
      oa += (pa[i] == 1 ? 0 : idx) * sa;
      ob += (pb[i] == 1 ? 0 : idx) * sb;
      sa *= pa[i];
      sb *= pb[i];
    }
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0, mag = 0;
        for (int64_t p = 0; p < k; ++p) {
          const double t = a[(oa * m + i) * k + p] * b[(ob * k + p) * n + j];
          sum += t;
          mag += std::abs(t);
        }
        e.values.push_back(sum);
        e.magnitude.push_back(mag);
      }
    }
  }
  return e;
}

OpTester MatMulTester(DType dtype, const Dims& a_dims, const std::vector<double>& a, const Dims& b_dims,
                      const std::vector<double>& b, int64_t opset = 13) {
  OpTester t = MakeTester("MatMul", opset);
  t.Input(TensorOf(dtype, a_dims, a)).Input(TensorOf(dtype, b_dims, b));
  return t;
}

TEST(MatMul, HandComputed2D) {
  for (ops::LinalgImpl impl : AvailableImpls()) {
    auto out = RunWith(MatMulTester(DType::kFloat32, {2, 3}, {1, 2, 3, 4, 5, 6}, {3, 2}, {7, 8, 9, 10, 11, 12}), impl);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].dims(), (Dims{2, 2}));
    EXPECT_EQ(Values<float>(out[0]), (std::vector<float>{58, 64, 139, 154})) << ops::LinalgImplName(impl);
  }
}

TEST(MatMul, OneDimensionalOperands) {
  for (ops::LinalgImpl impl : AvailableImpls()) {
    // [3] x [3, 2] -> [2]; [2, 3] x [3] -> [2]; [3] x [3] -> [] (a scalar).
    auto v = RunWith(MatMulTester(DType::kFloat32, {3}, {1, 2, 3}, {3, 2}, {1, 2, 3, 4, 5, 6}), impl);
    ASSERT_EQ(v.size(), 1u);
    EXPECT_EQ(v[0].dims(), (Dims{2}));
    EXPECT_EQ(Values<float>(v[0]), (std::vector<float>{22, 28}));
    auto w = RunWith(MatMulTester(DType::kFloat32, {2, 3}, {1, 2, 3, 4, 5, 6}, {3}, {1, 0, -1}), impl);
    ASSERT_EQ(w.size(), 1u);
    EXPECT_EQ(w[0].dims(), (Dims{2}));
    EXPECT_EQ(Values<float>(w[0]), (std::vector<float>{-2, -2}));
    auto s = RunWith(MatMulTester(DType::kFloat32, {3}, {1, 2, 3}, {3}, {4, 5, 6}), impl);
    ASSERT_EQ(s.size(), 1u);
    EXPECT_EQ(s[0].dims(), (Dims{}));
    EXPECT_EQ(Values<float>(s[0]), (std::vector<float>{32}));
    // [2, 1, 3] x [3]: the 1-D B drops its dim after batching -> [2, 1].
    auto b = RunWith(MatMulTester(DType::kFloat32, {2, 1, 3}, {1, 2, 3, 4, 5, 6}, {3}, {1, 1, 1}), impl);
    ASSERT_EQ(b.size(), 1u);
    EXPECT_EQ(b[0].dims(), (Dims{2, 1}));
    EXPECT_EQ(Values<float>(b[0]), (std::vector<float>{6, 15}));
  }
}

class MatMulTyped : public ::testing::TestWithParam<DType> {};

TEST_P(MatMulTyped, RandomShapesAgainstDouble) {
  const DType dtype = GetParam();
  const bool is_int =
      !(dtype == DType::kFloat32 || dtype == DType::kFloat16 || dtype == DType::kBFloat16 || dtype == DType::kFloat64);
  const bool is_unsigned = dtype == DType::kUint32 || dtype == DType::kUint64;
  const double lo = is_unsigned ? 0 : (is_int ? -20 : -1), hi = is_int ? 20 : 1;
  // Odd sizes, broadcasting of every kind, 1-D operands, one big enough for several GEMM blocks.
  const std::vector<std::pair<Dims, Dims>> cases = {
      {{7, 13}, {13, 5}},        {{3, 7, 13}, {13, 5}},     {{7, 13}, {3, 13, 5}},     {{2, 3, 5, 4}, {3, 4, 6}},
      {{2, 1, 5, 4}, {3, 4, 6}}, {{1, 5, 4}, {2, 4, 3}},    {{9}, {4, 9, 2}},          {{4, 2, 9}, {9}},
      {{130, 67}, {67, 70}},     {{3, 1, 2, 1}, {2, 1, 4}}, {{2, 33, 300}, {300, 17}},
  };
  uint32_t seed = 1;
  for (const auto& [ad, bd] : cases) {
    int64_t na = 1, nb = 1;
    for (int64_t d : ad) na *= d;
    for (int64_t d : bd) nb *= d;
    const auto a = RandomValues(dtype, na, seed++, lo, hi), b = RandomValues(dtype, nb, seed++, lo, hi);
    const Expected want = MatMulDouble(ad, a, bd, b);
    for (ops::LinalgImpl impl : AvailableImpls()) {
      auto out = RunWith(MatMulTester(dtype, ad, a, bd, b), impl);
      ASSERT_EQ(out.size(), 1u);
      EXPECT_EQ(out[0].dims(), want.dims);
      std::vector<double> expect = want.values;
      for (double& v : expect) v = RoundTo(dtype, v);  // the one rounding on store
      ExpectNear(out[0], is_int ? expect : want.values, is_int ? std::vector<double>{} : want.magnitude,
                 StrCat(ops::LinalgImplName(impl), " ", ops::ShapeToString(ad), " x ", ops::ShapeToString(bd)));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, MatMulTyped,
                         ::testing::Values(DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64,
                                           DType::kInt32, DType::kInt64, DType::kUint32, DType::kUint64),
                         DTypeParamName);

TEST(MatMul, Fp16AccumulatesInFloat) {
  // 4096 products of 1 * 1: an fp16 accumulator would stop at 2048; FP32 accumulation gives 4096 exactly.
  const std::vector<double> ones(4096, 1.0);
  for (ops::LinalgImpl impl : AvailableImpls()) {
    for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
      auto out = RunWith(MatMulTester(dt, {1, 4096}, ones, {4096, 1}, ones), impl);
      ASSERT_EQ(out.size(), 1u);
      EXPECT_EQ(AsDoubles(out[0])[0], 4096.0) << ops::LinalgImplName(impl) << " " << DTypeName(dt);
    }
  }
}

TEST(MatMul, IntegersWrapAround) {
  // int32: 65536 * 65536 wraps to 0, plus 3 * 1.
  auto out = MatMulTester(DType::kInt32, {1, 2}, {65536, 3}, {2, 1}, {65536, 1}).Run();
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out.value()[0].values<int32_t>()[0], 3);
}

TEST(MatMul, EmptyAndZeroK) {
  for (ops::LinalgImpl impl : AvailableImpls()) {
    auto e = RunWith(MatMulTester(DType::kFloat32, {0, 3}, {}, {3, 4}, std::vector<double>(12, 1)), impl);
    ASSERT_EQ(e.size(), 1u);
    EXPECT_EQ(e[0].dims(), (Dims{0, 4}));
    auto z = RunWith(MatMulTester(DType::kFloat32, {2, 0}, {}, {0, 3}, {}), impl);
    ASSERT_EQ(z.size(), 1u);
    EXPECT_EQ(z[0].dims(), (Dims{2, 3}));
    EXPECT_EQ(Values<float>(z[0]), std::vector<float>(6, 0.0f));
  }
}

TEST(MatMul, OpsetsAndTypes) {
  // Registered from opset 1; bfloat16 is accepted everywhere (the runtime computes converted models).
  for (int64_t opset : {1, 9, 13, 21}) {
    auto out = MatMulTester(DType::kBFloat16, {1, 2}, {1, 2}, {2, 1}, {3, 4}, opset).Run();
    ASSERT_TRUE(out.ok()) << opset << ": " << out.status().ToString();
    EXPECT_EQ(AsDoubles(out.value()[0])[0], 11.0);
  }
  auto b = MatMulTester(DType::kBool, {1}, {1}, {1}, {1}).Run();
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("does not support input 0 of type bool"), std::string::npos)
      << b.status().message();
}

TEST(MatMul, Errors) {
  auto inner = MatMulTester(DType::kFloat32, {2, 3}, std::vector<double>(6), {4, 2}, std::vector<double>(8)).Run();
  ASSERT_FALSE(inner.ok());
  EXPECT_NE(inner.status().message().find("input A [2,3] has 3 columns but input B [4,2] has 4 rows"),
            std::string::npos)
      << inner.status().message();
  EXPECT_NE(inner.status().message().find("node MatMul"), std::string::npos) << inner.status().message();
  auto batch =
      MatMulTester(DType::kFloat32, {2, 2, 3}, std::vector<double>(12), {3, 3, 2}, std::vector<double>(18)).Run();
  ASSERT_FALSE(batch.ok());
  EXPECT_NE(batch.status().message().find("batch dimensions [2] and [3] cannot be broadcast"), std::string::npos)
      << batch.status().message();
  auto scalar = MatMulTester(DType::kFloat32, {}, {1}, {1}, {1}).Run();
  ASSERT_FALSE(scalar.ok());
  EXPECT_NE(scalar.status().message().find("rank >= 1"), std::string::npos) << scalar.status().message();
  OpTester mixed = MakeTester("MatMul", 13);
  mixed.Input(TensorOf(DType::kFloat32, {1, 1}, {1})).Input(TensorOf(DType::kFloat16, {1, 1}, {1}));
  auto m = mixed.Run();
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("input B has element type float16, expected float"), std::string::npos)
      << m.status().message();
}

}  // namespace
}  // namespace onnxamp::testing
