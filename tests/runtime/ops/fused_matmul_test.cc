// com.onnxamp FusedMatMul's CPU kernels (runtime/ops/matmul/fused_matmul.h): the float output of fp16/bf16 products
// against MatMul / Gemm followed by a Cast to float, the bias gradient against SumToShape (+ Cast), the epilogue
// against the unfused ops, the GEMM-core path of every linalg implementation against the reference loop, and the
// attribute checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "runtime/ops/common/broadcast.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/matmul/fused_matmul.h"
#include "tests/runtime/ops/linalg_test_util.h"

namespace onnxamp::testing {
namespace {

using Dims = std::vector<int64_t>;

ir::Tensor Random(DType dtype, const Dims& dims, uint32_t seed) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return TensorOf(dtype, dims, RandomValues(dtype, n, seed));
}

OpTester Fused(const ir::Tensor& a, const ir::Tensor& b) {
  OpTester t = InternalOp(ops::kFusedMatMulOp);
  t.Input(a).Input(b);
  return t;
}

std::vector<ir::Tensor> RunOk(const OpTester& t) {
  StatusOr<std::vector<ir::Tensor>> out = t.Run();
  EXPECT_TRUE(out.ok()) << out.status().message();
  return out.ok() ? *std::move(out) : std::vector<ir::Tensor>{};
}

// `x` (fp16/bf16) cast to float, as the Cast after the unfused GEMM does.
std::vector<double> CastToFloat(const ir::Tensor& x) { return AsDoubles(x); }

// The unit roundoff of a 16-bit type: the most a value rounded to it moves, relative to its magnitude.
double HalfUlp(DType t) { return t == DType::kFloat16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8); }

// fused (float) against unfused (the 16-bit result cast to float): they differ by the 16-bit rounding of the unfused
// one (at most its unit roundoff times the value), plus FP32 accumulation in another order (the MatMul kernel's
// blocking): at most K * 2^-24 * sum |terms|, under 1e-5 for these inputs in [-1, 1] and K < 40.
void ExpectWithinHalfRounding(const ir::Tensor& fused, const ir::Tensor& unfused16, const std::string& what) {
  ASSERT_EQ(fused.dtype(), DType::kFloat32) << what;
  ASSERT_EQ(fused.dims(), unfused16.dims()) << what;
  const std::vector<double> got = AsDoubles(fused), want = CastToFloat(unfused16);
  const double ulp = HalfUlp(unfused16.dtype());
  int failures = 0;
  double largest_gap = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double allowed = ulp * std::max(std::abs(got[i]), std::abs(want[i])) + 1e-5;
    largest_gap = std::max(largest_gap, std::abs(got[i] - want[i]));
    if (!(std::abs(got[i] - want[i]) <= allowed) && failures++ < 5) {
      ADD_FAILURE() << what << ": element " << i << " is " << got[i] << ", the 16-bit result " << want[i];
    }
  }
  // The fused result keeps more than the 16-bit one: somewhere they differ (the inputs are random).
  EXPECT_GT(largest_gap, 0.0) << what << ": the float output equals the rounded one everywhere";
}

class FusedMatMulFloatOutput : public ::testing::TestWithParam<DType> {};

TEST_P(FusedMatMulFloatOutput, MatMulThenCastUpToTheHalfRounding) {
  const DType t = GetParam();
  for (const auto& [ad, bd] : std::vector<std::pair<Dims, Dims>>{{{7, 33}, {33, 5}}, {{2, 3, 9, 17}, {17, 6}}}) {
    const ir::Tensor a = Random(t, ad, 1), b = Random(t, bd, 2);
    OpTester mm = MakeTester("MatMul", 17);
    mm.Input(a).Input(b);
    const std::vector<ir::Tensor> unfused = RunOk(mm);
    OpTester f = Fused(a, b);
    f.Attr(ir::Attribute::Int("output_type", static_cast<int64_t>(DType::kFloat32)));
    const std::vector<ir::Tensor> fused = RunOk(f);
    ASSERT_EQ(unfused.size(), 1u);
    ASSERT_EQ(fused.size(), 1u);
    ExpectWithinHalfRounding(fused[0], unfused[0], std::string(DTypeName(t)) + " MatMul");
  }
}

TEST_P(FusedMatMulFloatOutput, TransposedGemmAndBiasGradientsThenCast) {
  const DType t = GetParam();
  // The weight gradient of a Linear (Y = X W^T + b): dW = dY^T X (Gemm transA), db = SumToShape(dY, [N]).
  const int64_t batch = 37, n = 11, k = 19;
  const ir::Tensor dy = Random(t, {batch, n}, 3), x = Random(t, {batch, k}, 4);
  OpTester gemm = MakeTester("Gemm", 17);
  gemm.Input(dy).Input(x).Attr(ir::Attribute::Int("transA", 1));
  const std::vector<ir::Tensor> dw = RunOk(gemm);
  OpTester sum = InternalOp(ops::kSumToShapeOp);
  sum.Input(dy).Input(TensorOf(DType::kInt64, {1}, {static_cast<double>(n)}));
  const std::vector<ir::Tensor> db = RunOk(sum);
  OpTester f = Fused(dy, x);
  f.Attr(ir::Attribute::Int("transA", 1))
      .Attr(ir::Attribute::Int("output_type", static_cast<int64_t>(DType::kFloat32)))
      .Attr(ir::Attribute::String("bias_grad", "A"));
  f.num_outputs = 2;
  const std::vector<ir::Tensor> fused = RunOk(f);
  ASSERT_EQ(fused.size(), 2u);
  ASSERT_EQ(dw.size(), 1u);
  ASSERT_EQ(db.size(), 1u);
  ExpectWithinHalfRounding(fused[0], dw[0], "dW");
  EXPECT_EQ(fused[1].dims(), Dims{n});
  ExpectWithinHalfRounding(fused[1], db[0], "db");

  // X^T dY (MatMul form, W [K, N]): the bias gradient of B, summed over its rows.
  OpTester mm = MakeTester("Gemm", 17);
  mm.Input(x).Input(dy).Attr(ir::Attribute::Int("transA", 1));
  const std::vector<ir::Tensor> dw2 = RunOk(mm);
  OpTester f2 = Fused(x, dy);
  f2.Attr(ir::Attribute::Int("transA", 1))
      .Attr(ir::Attribute::Int("output_type", static_cast<int64_t>(DType::kFloat32)))
      .Attr(ir::Attribute::String("bias_grad", "B"));
  f2.num_outputs = 2;
  const std::vector<ir::Tensor> fused2 = RunOk(f2);
  ASSERT_EQ(fused2.size(), 2u);
  ASSERT_EQ(dw2.size(), 1u);
  ExpectWithinHalfRounding(fused2[0], dw2[0], "dW (B)");
  ExpectWithinHalfRounding(fused2[1], db[0], "db (B)");
}

INSTANTIATE_TEST_SUITE_P(Types, FusedMatMulFloatOutput, ::testing::Values(DType::kFloat16, DType::kBFloat16),
                         [](const ::testing::TestParamInfo<DType>& p) { return std::string(DTypeName(p.param)); });

// In the inputs' own type the fused kernel is the unfused ops bit for bit where the reference loops agree: float
// accumulation in order k = 0..K-1, one rounding.
TEST(FusedMatMulCpu, SameTypeBiasGradientsEqualSumToShape) {
  for (const DType t : {DType::kFloat32, DType::kFloat16, DType::kFloat64}) {
    const ir::Tensor dy = Random(t, {9, 4}, 5), x = Random(t, {9, 6}, 6);
    OpTester f = Fused(dy, x);
    f.Attr(ir::Attribute::Int("transA", 1)).Attr(ir::Attribute::String("bias_grad", "A"));
    f.num_outputs = 2;
    const std::vector<ir::Tensor> fused = RunOk(f);
    OpTester sum = InternalOp(ops::kSumToShapeOp);
    sum.Input(dy).Input(TensorOf(DType::kInt64, {1}, {4}));
    const std::vector<ir::Tensor> db = RunOk(sum);
    ASSERT_EQ(fused.size(), 2u);
    ASSERT_EQ(db.size(), 1u);
    EXPECT_EQ(fused[0].dtype(), t);
    EXPECT_EQ(fused[0].dims(), (Dims{4, 6}));
    // Both sum 9 values in float (double for float64), possibly in another order: a few units in the last place.
    const double eps = t == DType::kFloat64 ? 1e-15 : t == DType::kFloat32 ? 1e-6 : std::ldexp(1.0, -10);
    const std::vector<double> got_db = AsDoubles(fused[1]), want_db = AsDoubles(db[0]);
    ASSERT_EQ(got_db.size(), want_db.size());
    for (size_t i = 0; i < got_db.size(); ++i) EXPECT_NEAR(got_db[i], want_db[i], 9 * eps) << DTypeName(t);
    // The product against the double reference.
    const std::vector<double> dv = AsDoubles(dy), xv = AsDoubles(x), got = AsDoubles(fused[0]);
    for (int64_t i = 0; i < 4; ++i) {
      for (int64_t j = 0; j < 6; ++j) {
        double want = 0, mag = 0;
        for (int64_t p = 0; p < 9; ++p) {
          want += dv[p * 4 + i] * xv[p * 6 + j];
          mag += std::abs(dv[p * 4 + i] * xv[p * 6 + j]);
        }
        EXPECT_NEAR(got[i * 6 + j], want, 4 * HalfUlp(DType::kFloat16) * mag) << DTypeName(t);
      }
    }
  }
}

TEST(FusedMatMulCpu, BiasAndActivationMatchTheUnfusedOps) {
  const ir::Tensor a = Random(DType::kFloat32, {5, 8}, 7), b = Random(DType::kFloat32, {6, 8}, 8);
  const ir::Tensor bias = Random(DType::kFloat32, {6}, 9);
  OpTester gemm = MakeTester("Gemm", 17);
  gemm.Input(a).Input(b).Input(bias).Attr(ir::Attribute::Int("transB", 1)).Attr(ir::Attribute::Float("alpha", 0.5f));
  const std::vector<ir::Tensor> y = RunOk(gemm);
  ASSERT_EQ(y.size(), 1u);
  for (const char* act : {"", "Relu", "Gelu", "GeluTanh"}) {
    OpTester f = Fused(a, b);
    f.Input(bias)
        .Attr(ir::Attribute::Int("transB", 1))
        .Attr(ir::Attribute::Float("alpha", 0.5f))
        .Attr(ir::Attribute::String("activation", act));
    const std::vector<ir::Tensor> got = RunOk(f);
    ASSERT_EQ(got.size(), 1u);
    const std::vector<double> g = AsDoubles(got[0]), x = AsDoubles(y[0]);
    const std::string name = act;
    for (size_t i = 0; i < g.size(); ++i) {
      double want = x[i];
      if (name == "Relu") want = std::max(x[i], 0.0);
      if (name == "Gelu") want = 0.5 * x[i] * (1 + std::erf(x[i] / std::sqrt(2.0)));
      if (name == "GeluTanh") {
        want = 0.5 * x[i] * (1 + std::tanh(std::sqrt(2 / M_PI) * (x[i] + 0.044715 * x[i] * x[i] * x[i])));
      }
      EXPECT_NEAR(g[i], want, 1e-5) << name << " element " << i;
    }
  }
}

// A NaN in A makes its row of the product NaN; the fused ReLU keeps it, as Relu does (PyTorch and ONNX Runtime too),
// under every implementation and element type.
TEST(FusedMatMulCpu, ReluKeepsNaN) {
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64}) {
    std::vector<double> a = AsDoubles(Random(t, {6, 40}, 31));
    a[2 * 40 + 7] = std::nan("");
    const ir::Tensor at = TensorOf(t, {6, 40}, a);
    const ir::Tensor b = Random(t, {40, 9}, 32), bias = Random(t, {9}, 33);
    for (ops::LinalgImpl impl : AvailableImpls()) {
      OpTester f = Fused(at, b);
      f.Input(bias).Attr(ir::Attribute::String("activation", "Relu"));
      const std::vector<ir::Tensor> got = RunWith(f, impl);
      ASSERT_EQ(got.size(), 1u);
      const std::vector<double> g = AsDoubles(got[0]);
      for (int64_t i = 0; i < 6 * 9; ++i) {
        EXPECT_EQ(std::isnan(g[i]), i / 9 == 2)
            << DTypeName(t) << " on " << ops::LinalgImplName(impl) << ": element " << i << " is " << g[i];
        if (i / 9 != 2) {
          EXPECT_GE(g[i], 0) << DTypeName(t) << " element " << i;
        }
      }
    }
  }
}

// |x| elementwise (for the magnitude of the terms summed into each output).
ir::Tensor Abs(const ir::Tensor& x) {
  ir::Tensor out = x;
  const Status st = ops::DispatchFloat(x.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    for (T& v : out.mutable_values<T>()) v = ops::Store<T>(std::abs(ops::Load<T>(v)));
    return Status::Ok();
  });
  EXPECT_TRUE(st.ok());
  return out;
}

struct FastCase {
  Dims a, b;
  bool trans_a = false, trans_b = false;
  Dims bias;  // empty: none
  float alpha = 1;
  std::string activation;
};

// The GEMM-core path (portable and oneDNN / AVX2) against the reference loop, for every float type: batched and
// broadcast shapes, transposed operands, a 1-D B, K = 0, bias and every activation, and products large enough to be
// split over threads (the epilogue runs per band of rows). The allowed error is the element type's tolerance
// relative to the sum of |terms| (accumulation order) and to the value (the vector Gelu against std::erf).
TEST(FusedMatMulCpu, FastPathsMatchTheReferenceLoop) {
  const std::vector<FastCase> cases = {
      {{5, 8}, {8, 6}, false, false, {6}, 1, ""},
      {{8, 5}, {6, 8}, true, true, {1, 6}, 0.5f, "Relu"},
      {{3, 7, 33}, {33, 19}, false, false, {19}, -1.25f, "Gelu"},
      {{2, 1, 4, 9}, {3, 9, 10}, false, false, {10}, 1, "GeluTanh"},  // broadcast batch: one GEMM per matrix
      {{2, 3, 6, 9}, {9}, false, false, {}, 0.125f, "Relu"},          // 1-D B: no N in the result
      {{4, 0}, {0, 7}, false, false, {7}, 1, "Gelu"},                 // K = 0: bias and activation of zeros
      {{130, 300}, {70, 300}, false, true, {70}, 1, "Gelu"},          // several bands, several k blocks
  };
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64}) {
    uint32_t seed = 100;
    for (const FastCase& c : cases) {
      const ir::Tensor a = Random(t, c.a, seed++), b = Random(t, c.b, seed++);
      const ir::Tensor bias = c.bias.empty() ? ir::Tensor() : Random(t, c.bias, seed++);
      auto make = [&](const ir::Tensor& x, const ir::Tensor& y, const ir::Tensor* z, float alpha, const char* act) {
        OpTester f = Fused(x, y);
        if (z) f.Input(*z);
        f.Attr(ir::Attribute::Int("transA", c.trans_a ? 1 : 0))
            .Attr(ir::Attribute::Int("transB", c.trans_b ? 1 : 0))
            .Attr(ir::Attribute::Float("alpha", alpha))
            .Attr(ir::Attribute::String("activation", act));
        return f;
      };
      const ir::Tensor* z = c.bias.empty() ? nullptr : &bias;
      const OpTester f = make(a, b, z, c.alpha, c.activation.c_str());
      const std::vector<ir::Tensor> want = RunWith(f, ops::LinalgImpl::kReference);
      const ir::Tensor abs_bias = z ? Abs(bias) : ir::Tensor();
      const std::vector<ir::Tensor> mag =
          RunWith(make(Abs(a), Abs(b), z ? &abs_bias : nullptr, std::abs(c.alpha), ""), ops::LinalgImpl::kReference);
      ASSERT_EQ(want.size(), 1u);
      ASSERT_EQ(mag.size(), 1u);
      for (ops::LinalgImpl impl : AvailableImpls()) {
        if (impl == ops::LinalgImpl::kReference) continue;
        const std::vector<ir::Tensor> got = RunWith(f, impl);
        ASSERT_EQ(got.size(), 1u);
        EXPECT_EQ(got[0].dims(), want[0].dims());
        ExpectNear(got[0], AsDoubles(want[0]), AsDoubles(mag[0]),
                   std::string(DTypeName(t)) + " " + ops::ShapeToString(c.a) + " x " + ops::ShapeToString(c.b) + " " +
                       c.activation + " on " + ops::LinalgImplName(impl));
      }
    }
  }
}

// The bias gradient of the GEMM-core path is the reference's loop: the same bits.
TEST(FusedMatMulCpu, FastPathBiasGradientsEqualTheReference) {
  for (DType t : {DType::kFloat32, DType::kFloat16}) {
    for (const char* which : {"A", "B"}) {
      OpTester f = Fused(Random(t, {9, 13}, 40), Random(t, {13, 11}, 41));
      f.Attr(ir::Attribute::String("bias_grad", which));
      f.num_outputs = 2;
      const std::vector<ir::Tensor> want = RunWith(f, ops::LinalgImpl::kReference);
      ASSERT_EQ(want.size(), 2u);
      for (ops::LinalgImpl impl : AvailableImpls()) {
        const std::vector<ir::Tensor> got = RunWith(f, impl);
        ASSERT_EQ(got.size(), 2u);
        EXPECT_EQ(AsDoubles(got[1]), AsDoubles(want[1]))
            << DTypeName(t) << " " << which << " on " << ops::LinalgImplName(impl);
      }
    }
  }
}

// The same type, dims and bytes (NaN included).
bool SameBits(const ir::Tensor& x, const ir::Tensor& y) {
  return x.dtype() == y.dtype() && x.dims() == y.dims() && std::ranges::equal(x.bytes(), y.bytes());
}

// The ReLU mask a forward node writes (relu_mask) is Y > 0 bit by bit, rows of 128-bit multiples with the bits past
// N clear; a product given that mask (activation_grad "Relu") is ReluGrad(product, Y), bit for bit, on every path
// and element type: 3-D A (the rows of every batch entry are rows of the mask), a transposed B, N not a multiple of
// 8 or 128, K = 0, NaN in the forward (no bit: ReluGrad's Y > 0 is false for NaN).
TEST(FusedMatMulCpu, ReluMaskIsWhereYIsPositiveAndTheMaskedProductIsReluGrad) {
  struct MaskCase {
    Dims a, w;  // forward: A [.., K] x W [K, N] (or W [N, K] with trans_b)
    bool trans_b;
    Dims g;  // backward: G [.., N2] x V [N2, N]
  };
  const std::vector<MaskCase> cases = {
      {{5, 8}, {8, 6}, false, {5, 7}},
      {{2, 3, 9}, {131, 9}, true, {2, 3, 4}},  // N = 131: two 128-bit words per row
      {{4, 0}, {0, 13}, false, {4, 3}},        // K = 0: Y is the bias's ReLU
      {{40, 33}, {33, 200}, false, {40, 50}},  // bands over threads
  };
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64}) {
    uint32_t seed = 300;
    for (const MaskCase& c : cases) {
      const std::string what = std::string(DTypeName(t)) + " " + ops::ShapeToString(c.a) + " x " +
                               ops::ShapeToString(c.w) + (c.trans_b ? "^T" : "");
      std::vector<double> av = AsDoubles(Random(t, c.a, seed++));
      if (!av.empty()) av[av.size() / 2] = std::nan("");
      const ir::Tensor a = TensorOf(t, c.a, av), w = Random(t, c.w, seed++);
      const int64_t n = c.trans_b ? c.w[0] : c.w[1];
      const ir::Tensor bias = Random(t, {n}, seed++);
      Dims vdims = {c.g.back(), n};
      const ir::Tensor g = Random(t, c.g, seed++), v = Random(t, vdims, seed++);
      for (ops::LinalgImpl impl : AvailableImpls()) {
        const std::string on = what + " on " + ops::LinalgImplName(impl);
        OpTester plain = Fused(a, w);
        plain.Input(bias)
            .Attr(ir::Attribute::Int("transB", c.trans_b ? 1 : 0))
            .Attr(ir::Attribute::String("activation", "Relu"));
        OpTester masked = plain;
        masked.Attr(ir::Attribute::Int("relu_mask", 1));
        masked.num_outputs = 2;
        const std::vector<ir::Tensor> want_y = RunWith(plain, impl);
        const std::vector<ir::Tensor> got = RunWith(masked, impl);
        ASSERT_EQ(want_y.size(), 1u) << on;
        ASSERT_EQ(got.size(), 2u) << on;
        EXPECT_TRUE(SameBits(got[0], want_y[0])) << on;
        const ir::Tensor& y = got[0];
        const ir::Tensor& mask = got[1];
        const int64_t rows = y.num_elements() / std::max<int64_t>(n, 1);
        ASSERT_EQ(mask.dtype(), DType::kUint8) << on;
        ASSERT_EQ(mask.dims(), (Dims{c.a.size() == 3 ? c.a[0] * c.a[1] : c.a[0], (n + 127) / 128 * 16})) << on;
        const std::vector<double> yv = AsDoubles(y);
        const auto bytes = mask.values<uint8_t>();
        const int64_t row_bytes = mask.dims()[1];
        int set = 0;
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t j = 0; j < row_bytes * 8; ++j) {
            const bool bit = (bytes[r * row_bytes + j / 8] >> (j % 8)) & 1;
            const bool want = j < n && yv[r * n + j] > 0;
            set += bit;
            ASSERT_EQ(bit, want) << on << ": row " << r << " column " << j;
          }
        }
        EXPECT_GT(set, 0) << on;
        // Backward: ReluGrad(G x V, Y) against the masked product.
        OpTester product = MakeTester("MatMul", 13);
        product.Input(g).Input(v);
        const std::vector<ir::Tensor> gv = RunWith(product, impl);
        ASSERT_EQ(gv.size(), 1u) << on;
        OpTester relu_grad = InternalOp(ops::kReluGradOp);
        relu_grad.Input(gv[0]).Input(y);
        const std::vector<ir::Tensor> want = RunOk(relu_grad);
        OpTester fused = Fused(g, v);
        fused.OmittedInput().Input(mask).Attr(ir::Attribute::String("activation_grad", "Relu"));
        const std::vector<ir::Tensor> got_grad = RunWith(fused, impl);
        ASSERT_EQ(want.size(), 1u) << on;
        ASSERT_EQ(got_grad.size(), 1u) << on;
        EXPECT_EQ(got_grad[0].dims(), want[0].dims()) << on;
        EXPECT_TRUE(SameBits(got_grad[0], want[0])) << on;
      }
    }
  }
}

// activation_grad "GeluTanh": the product times the tanh GELU's derivative at input 3 is GeluGrad(MatMul, X,
// approximate "tanh"): the same bits in float and double on every path (the same derivative times the same product),
// within one rounding of the type for fp16/bf16 (the fused product is not rounded before it is scaled). 3-D A, a
// transposed B, K = 0, and X with NaN and values beyond the derivative's cut-off at |x| = 100.
TEST(FusedMatMulCpu, GeluTanhGradientIsGeluGradOfTheProduct) {
  struct GradCase {
    Dims g, v;  // G [.., N2] x V [N2, N] (V given as [N, N2] with trans_b)
    bool trans_b;
  };
  const std::vector<GradCase> cases = {
      {{5, 7}, {7, 6}, false}, {{2, 3, 9}, {131, 9}, true}, {{4, 0}, {0, 13}, false}, {{40, 50}, {50, 200}, false}};
  for (DType t : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16}) {
    uint32_t seed = 500;
    for (const GradCase& c : cases) {
      const ir::Tensor g = Random(t, c.g, seed++), v = Random(t, c.v, seed++);
      const int64_t n = c.trans_b ? c.v[0] : c.v[1];
      Dims y_dims = c.g;
      y_dims.back() = n;
      std::vector<double> xv = AsDoubles(Random(t, y_dims, seed++));
      for (double& x : xv) x *= 4;
      if (xv.size() > 3) {
        xv[0] = std::nan("");
        xv[1] = 150;
        xv[2] = -150;
      }
      const ir::Tensor x = TensorOf(t, y_dims, xv);
      const std::string what =
          std::string(DTypeName(t)) + " " + ops::ShapeToString(c.g) + " x " + ops::ShapeToString(c.v);
      for (ops::LinalgImpl impl : AvailableImpls()) {
        const std::string on = what + " on " + ops::LinalgImplName(impl);
        OpTester product = MakeTester("Gemm", 13);
        if (c.g.size() == 2) {
          product.Input(g).Input(v).Attr(ir::Attribute::Int("transB", c.trans_b ? 1 : 0));
        } else {
          product = Fused(g, v);
          product.Attr(ir::Attribute::Int("transB", c.trans_b ? 1 : 0));
        }
        const std::vector<ir::Tensor> gv = RunWith(product, impl);
        ASSERT_EQ(gv.size(), 1u) << on;
        OpTester gelu_grad = InternalOp(ops::kGeluGradOp);
        gelu_grad.Input(gv[0]).Input(x).Attr(ir::Attribute::String("approximate", "tanh"));
        const std::vector<ir::Tensor> want = RunOk(gelu_grad);
        OpTester fused = Fused(g, v);
        fused.OmittedInput().Input(x);
        fused.Attr(ir::Attribute::Int("transB", c.trans_b ? 1 : 0))
            .Attr(ir::Attribute::String("activation_grad", "GeluTanh"));
        const std::vector<ir::Tensor> got = RunWith(fused, impl);
        ASSERT_EQ(want.size(), 1u) << on;
        ASSERT_EQ(got.size(), 1u) << on;
        ASSERT_EQ(got[0].dims(), want[0].dims()) << on;
        if (t == DType::kFloat32 || t == DType::kFloat64) {
          EXPECT_TRUE(SameBits(got[0], want[0])) << on;
          continue;
        }
        const std::vector<double> a = AsDoubles(got[0]), b = AsDoubles(want[0]);
        const double unit = HalfUlp(t) * 2;
        for (size_t i = 0; i < a.size(); ++i) {
          if (std::isnan(b[i])) {
            EXPECT_TRUE(std::isnan(a[i])) << on << " element " << i;
            continue;
          }
          // Two roundings of the unfused side (the product, then the result) against one: a unit of each.
          EXPECT_NEAR(a[i], b[i], 2 * unit * std::abs(b[i]) + 1e-6) << on << " element " << i;
        }
      }
    }
  }
}

TEST(FusedMatMulCpu, RefusesWhatTheContractLeavesOut) {
  const ir::Tensor a16 = Random(DType::kFloat16, {4, 3}, 10), b16 = Random(DType::kFloat16, {3, 2}, 11);
  auto error = [](const OpTester& t) {
    StatusOr<std::vector<ir::Tensor>> out = t.Run();
    return out.ok() ? std::string("ok") : std::string(out.status().message());
  };
  {
    OpTester f = Fused(a16, b16);
    f.Input(Random(DType::kFloat16, {2}, 12)).Attr(ir::Attribute::Int("output_type", 1));
    EXPECT_NE(error(f).find("no bias and no activation"), std::string::npos) << error(f);
  }
  {
    OpTester f = Fused(Random(DType::kFloat32, {4, 3}, 13), Random(DType::kFloat32, {3, 2}, 14));
    f.Attr(ir::Attribute::Int("output_type", static_cast<int64_t>(DType::kFloat16)));
    EXPECT_NE(error(f).find("output_type"), std::string::npos) << error(f);
  }
  {
    OpTester f = Fused(a16, b16);
    f.Attr(ir::Attribute::String("bias_grad", "B")).Attr(ir::Attribute::String("activation", "Relu"));
    f.num_outputs = 2;
    EXPECT_NE(error(f).find("bias_grad"), std::string::npos) << error(f);
  }
  {
    OpTester f = Fused(a16, b16);
    f.Attr(ir::Attribute::String("bias_grad", "C"));
    EXPECT_NE(error(f).find("bias_grad"), std::string::npos) << error(f);
  }
  {
    OpTester f = Fused(Random(DType::kFloat16, {2, 4, 3}, 15), b16);
    f.Attr(ir::Attribute::String("bias_grad", "B"));
    f.num_outputs = 2;
    EXPECT_NE(error(f).find("2-D A and B"), std::string::npos) << error(f);
  }
  // ReLU masks: the ReLU itself, a 2-D B, a uint8 mask of Y's rows and 128-bit multiples.
  {
    OpTester f = Fused(a16, b16);
    f.Attr(ir::Attribute::Int("relu_mask", 1));
    f.num_outputs = 2;
    EXPECT_NE(error(f).find("relu_mask"), std::string::npos) << error(f);
  }
  {
    OpTester f = Fused(a16, Random(DType::kFloat16, {2, 3, 2}, 16));
    f.Attr(ir::Attribute::Int("relu_mask", 1)).Attr(ir::Attribute::String("activation", "Relu"));
    f.num_outputs = 2;
    EXPECT_NE(error(f).find("needs a 2-D B"), std::string::npos) << error(f);
  }
  {
    OpTester f = Fused(a16, b16);
    f.Attr(ir::Attribute::String("activation_grad", "Gelu"));
    EXPECT_NE(error(f).find("activation_grad"), std::string::npos) << error(f);
  }
  {
    OpTester f = Fused(a16, b16);
    f.Attr(ir::Attribute::String("activation_grad", "Relu")).Attr(ir::Attribute::String("activation", "Relu"));
    EXPECT_NE(error(f).find("no activation"), std::string::npos) << error(f);
  }
  {
    OpTester f = Fused(a16, b16);
    f.Attr(ir::Attribute::String("activation_grad", "Relu"));
    EXPECT_NE(error(f).find("input 3 (the ReLU mask) is required"), std::string::npos) << error(f);
  }
  {
    OpTester f = Fused(a16, b16);
    f.OmittedInput().Input(TensorOf(DType::kUint8, {4, 8}, std::vector<double>(32, 0)));
    f.Attr(ir::Attribute::String("activation_grad", "Relu"));
    EXPECT_NE(error(f).find("expected uint8 [4,16]"), std::string::npos) << error(f);
  }
  {
    OpTester f = Fused(a16, b16);
    f.Attr(ir::Attribute::String("activation_grad", "GeluTanh"));
    EXPECT_NE(error(f).find("input 3 (the GELU's input) is required"), std::string::npos) << error(f);
  }
  {
    OpTester f = Fused(a16, b16);
    f.OmittedInput().Input(Random(DType::kFloat16, {4, 3}, 17));
    f.Attr(ir::Attribute::String("activation_grad", "GeluTanh"));
    EXPECT_NE(error(f).find("expected float16 [4,2]"), std::string::npos) << error(f);
  }
}

}  // namespace
}  // namespace onnxamp::testing
