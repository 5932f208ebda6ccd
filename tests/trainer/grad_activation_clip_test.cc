// Finite-difference checks (float64) of the Elu, Gelu (Gelu-20 and com.onnxamp Gelu), CastLike and Clip gradient
// builders over their attribute and opset variants; the EluGrad and GeluGrad kernels in float32 and fp16/bf16 against
// float64, known values and special values; com.onnxamp Gelu's forward kernel; and a check that every opset at which
// a CPU kernel runs Elu, Gelu, CastLike, Clip, Min, Max and the Reduce* ops has a builder.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "runtime/common/half.h"
#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/gradient.h"
#include "runtime/ops/gradient_ops.h"
#include "tests/runtime/op_tester.h"
#include "tests/trainer/analytic_grad.h"
#include "tests/trainer/grad_check.h"

namespace onnxamp::testing {
namespace {

using gradtest::Contains;
using gradtest::Dims;
using gradtest::DimsName;
using gradtest::Doubles;
using gradtest::DoublesAway;
using gradtest::EmittedOps;
using gradtest::Op;
using ir::Attribute;

ir::Tensor Scalar64(double v) { return MakeTensor<double>({}, {v}); }

std::string Name(const std::string& op, int64_t opset, const Dims& dims) {
  return op + " opset " + std::to_string(opset) + " " + DimsName(dims);
}

// ---- Elu

TEST(EluGradTest, AlphaAndOpsets) {
  uint32_t seed = 1;
  for (int64_t opset : {6, 22}) {
    for (const Dims& dims : {Dims{}, Dims{7}, Dims{3, 5}, Dims{2, 3, 5}}) {
      for (float alpha : {-1.0f, 1.0f, 0.35f}) {  // -1: attribute absent (default 1)
        OpTester t = Op("Elu", opset);
        if (alpha > 0) t.Attr(Attribute::Float("alpha", alpha));
        t.Input(DoublesAway(dims, seed++, -3, 2, {0}));
        ExpectGradientsMatchFiniteDifferences(t, Name("Elu", opset, dims) + " alpha " + std::to_string(alpha));
      }
    }
  }
}

TEST(EluGradTest, EmitsEluGrad) {
  OpTester t = Op("Elu", 13);
  t.Input(Doubles({4}, 3));
  EXPECT_TRUE(Contains(EmittedOps(t), ops::kEluGradOp));
}

// ---- Gelu

TEST(GeluGradTest, BothApproximations) {
  uint32_t seed = 11;
  for (const char* approximate : {"", "none", "tanh"}) {
    for (const Dims& dims : {Dims{}, Dims{9}, Dims{3, 7}, Dims{2, 3, 5}}) {
      OpTester t = Op("Gelu", 20);
      if (*approximate) t.Attr(Attribute::String("approximate", approximate));
      t.Input(Doubles(dims, seed++, -5, 5));
      ExpectGradientsMatchFiniteDifferences(t, Name("Gelu", 20, dims) + " approximate '" + approximate + "'");
    }
  }
}

// com.onnxamp Gelu (the training graphs' fused erf-form GELU): the same builder as Gelu-20.
TEST(GeluGradTest, InternalGeluBothApproximations) {
  uint32_t seed = 31;
  for (const char* approximate : {"", "tanh"}) {
    for (const Dims& dims : {Dims{}, Dims{9}, Dims{2, 3, 5}}) {
      OpTester t = InternalOp(ops::kGeluOp);
      if (*approximate) t.Attr(Attribute::String("approximate", approximate));
      t.Input(Doubles(dims, seed++, -5, 5));
      ExpectGradientsMatchFiniteDifferences(t, "com.onnxamp " + Name("Gelu", 1, dims) + " '" + approximate + "'");
      EXPECT_TRUE(Contains(EmittedOps(t), ops::kGeluGradOp));
    }
  }
}

TEST(GeluGradTest, EmitsGeluGradWithTheApproximation) {
  OpTester t = Op("Gelu", 20);
  t.Attr(Attribute::String("approximate", "tanh")).Input(Doubles({4}, 3));
  EXPECT_TRUE(Contains(EmittedOps(t), ops::kGeluGradOp));
}

// GeluGrad and EluGrad kernels: known values, and float32 against float64 on the same points.
std::vector<double> RunGradKernel(const std::string& op, std::vector<Attribute> attrs, DType type,
                                  const std::vector<double>& x, const std::vector<double>& dy) {
  OpTester t = InternalOp(op);
  for (Attribute& a : attrs) t.Attr(std::move(a));
  const Dims dims = {static_cast<int64_t>(x.size())};
  if (type == DType::kFloat64) {
    t.Input(MakeTensor<double>(dims, dy)).Input(MakeTensor<double>(dims, x));
  } else {
    std::vector<float> dyf(dy.begin(), dy.end()), xf(x.begin(), x.end());
    t.Input(MakeTensor<float>(dims, dyf)).Input(MakeTensor<float>(dims, xf));
  }
  auto out = t.Run();
  EXPECT_TRUE(out.ok()) << op << ": " << out.status().message();
  if (!out.ok()) return {};
  if (type == DType::kFloat64) return Values<double>((*out)[0]);
  std::vector<double> r;
  for (float v : Values<float>((*out)[0])) r.push_back(v);
  return r;
}

TEST(ActivationGradKernel, KnownValues) {
  // Gelu'(0) = 0.5 for both forms; Gelu'(1) = Phi(1) + phi(1); Gelu'(-1) = Phi(-1) - phi(-1).
  const double phi1 = std::exp(-0.5) / std::sqrt(2 * M_PI), cdf1 = 0.5 * std::erfc(-1 / std::sqrt(2.0));
  std::vector<double> g = RunGradKernel(ops::kGeluGradOp, {}, DType::kFloat64, {0, 1, -1}, {1, 2, 1});
  ASSERT_EQ(g.size(), 3u);
  EXPECT_DOUBLE_EQ(g[0], 0.5);
  EXPECT_NEAR(g[1], 2 * (cdf1 + phi1), 1e-14);
  EXPECT_NEAR(g[2], (1 - cdf1) - phi1, 1e-14);
  g = RunGradKernel(ops::kGeluGradOp, {Attribute::String("approximate", "tanh")}, DType::kFloat64, {0}, {1});
  ASSERT_EQ(g.size(), 1u);
  EXPECT_DOUBLE_EQ(g[0], 0.5);
  // Elu: 1 above 0, alpha exp(x) at and below 0.
  g = RunGradKernel(ops::kEluGradOp, {Attribute::Float("alpha", 0.5f)}, DType::kFloat64, {2, 0, -1}, {3, 1, 2});
  EXPECT_EQ(g, (std::vector<double>{3, 0.5, 2 * 0.5 * std::exp(-1.0)}));
}

// Float32 (GeluGrad: the vectorized FastErf/FastExp arrays, in runs long enough for their vector loops and tails)
// against float64 (the standard library), on random points, a dense sweep of [-20, 20] and the special values.
TEST(ActivationGradKernel, Float32MatchesFloat64) {
  std::vector<double> x, dy;
  std::mt19937 gen(5);
  std::uniform_real_distribution<double> u(-6, 6);
  for (int i = 0; i < 257; ++i) {
    x.push_back(static_cast<float>(u(gen)));
    dy.push_back(static_cast<float>(u(gen)));
  }
  for (double v = -20; v <= 20; v += 1.0 / 64) {
    x.push_back(v);
    dy.push_back(1);
  }
  for (double v : {0.0, -0.0, 1e-30, -1e-30, 14.9, 15.0, 15.1, -14.9, -15.0, -15.1, 99.0, 101.0, -101.0, 1e30, -1e30}) {
    x.push_back(v);
    dy.push_back(-2);
  }
  struct Case {
    std::string op;
    std::vector<Attribute> attrs;
  };
  const std::vector<Case> cases = {{ops::kGeluGradOp, {}},
                                   {ops::kGeluGradOp, {Attribute::String("approximate", "tanh")}},
                                   {ops::kEluGradOp, {Attribute::Float("alpha", 1.5f)}}};
  for (const Case& c : cases) {
    const std::vector<double> f64 = RunGradKernel(c.op, c.attrs, DType::kFloat64, x, dy);
    const std::vector<double> f32 = RunGradKernel(c.op, c.attrs, DType::kFloat32, x, dy);
    ASSERT_EQ(f64.size(), x.size());
    ASSERT_EQ(f32.size(), x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      EXPECT_NEAR(f32[i], f64[i], 2e-6 * std::max(1.0, std::abs(f64[i]))) << c.op << " at x = " << x[i];
    }
  }
}

// Infinities give the derivative's limits (1 and 0, not inf * 0), NaN stays NaN, in float32 and float64, for both
// forms.
TEST(ActivationGradKernel, GeluGradAtInfinitiesAndNaN) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  for (const char* approximate : {"none", "tanh"}) {
    for (DType type : {DType::kFloat32, DType::kFloat64}) {
      const std::vector<double> g = RunGradKernel(ops::kGeluGradOp, {Attribute::String("approximate", approximate)},
                                                  type, {inf, -inf, nan, 1}, {3, 3, 1, nan});
      ASSERT_EQ(g.size(), 4u);
      const std::string what = std::string(approximate) + " " + std::string(DTypeName(type));
      EXPECT_EQ(g[0], 3) << what;
      EXPECT_EQ(g[1], 0) << what;
      EXPECT_TRUE(std::isnan(g[2])) << what;
      EXPECT_TRUE(std::isnan(g[3])) << what;
    }
  }
}

ir::Tensor HalfTensor(DType type, const std::vector<float>& v) {
  const Dims dims = {static_cast<int64_t>(v.size())};
  return type == DType::kFloat16 ? MakeTensor<Float16>(dims, v) : MakeTensor<BFloat16>(dims, v);
}
std::vector<float> HalfValues(const ir::Tensor& t) {
  return t.dtype() == DType::kFloat16 ? Values<Float16>(t) : Values<BFloat16>(t);
}
float RoundTo(DType type, float v) { return HalfValues(HalfTensor(type, {v}))[0]; }

// fp16 and bf16 are widened, computed in float and rounded once: the result is the float32 kernel's, rounded.
TEST(ActivationGradKernel, HalfTypesRoundTheFloatResult) {
  std::mt19937 gen(9);
  std::uniform_real_distribution<float> u(-8, 8);
  for (DType type : {DType::kFloat16, DType::kBFloat16}) {
    for (const char* approximate : {"none", "tanh"}) {
      std::vector<float> x(1000), dy(1000);  // values the type holds exactly
      for (size_t i = 0; i < x.size(); ++i) {
        x[i] = RoundTo(type, u(gen));
        dy[i] = RoundTo(type, u(gen));
      }
      OpTester f32 = InternalOp(ops::kGeluGradOp);
      f32.Attr(Attribute::String("approximate", approximate));
      f32.Input(MakeTensor<float>({1000}, dy)).Input(MakeTensor<float>({1000}, x));
      OpTester half = InternalOp(ops::kGeluGradOp);
      half.Attr(Attribute::String("approximate", approximate));
      half.Input(HalfTensor(type, dy)).Input(HalfTensor(type, x));
      auto want = f32.Run();
      auto got = half.Run();
      ASSERT_TRUE(want.ok() && got.ok());
      ASSERT_EQ((*got)[0].dtype(), type);
      const std::vector<float> w = Values<float>((*want)[0]);
      const std::vector<float> g = HalfValues((*got)[0]);
      for (size_t i = 0; i < x.size(); ++i) {
        ASSERT_EQ(g[i], RoundTo(type, w[i])) << DTypeName(type) << " " << approximate << " at x = " << x[i];
      }
    }
  }
}

// The forward of com.onnxamp Gelu in float32 (FastGeluErf, as FusedMatMul's epilogue) against the exact erf form in
// float64, absolute error within 2e-6 of max(1, |Gelu|); fp16 rounds that float result once.
TEST(ActivationGradKernel, InternalGeluForward) {
  std::vector<float> x;
  for (float v = -12; v <= 12; v += 1.0f / 128) x.push_back(v);
  OpTester t = InternalOp(ops::kGeluOp);
  t.Input(MakeTensor<float>({static_cast<int64_t>(x.size())}, x));
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status().message();
  const std::vector<float> y = Values<float>((*out)[0]);
  for (size_t i = 0; i < x.size(); ++i) {
    const double exact = 0.5 * x[i] * std::erfc(-x[i] / std::sqrt(2.0));
    ASSERT_NEAR(y[i], exact, 2e-6 * std::max(1.0, std::abs(exact))) << "x = " << x[i];
  }
  OpTester h = InternalOp(ops::kGeluOp);
  h.Input(HalfTensor(DType::kFloat16, x));
  auto half = h.Run();
  ASSERT_TRUE(half.ok()) << half.status().message();
  const std::vector<float> yh = HalfValues((*half)[0]);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(yh[i], RoundTo(DType::kFloat16, y[i])) << "x = " << x[i];
}

TEST(ActivationGradKernel, RefusesABadApproximation) {
  OpTester t = InternalOp(ops::kGeluGradOp);
  t.Attr(Attribute::String("approximate", "erf"));
  t.Input(MakeTensor<float>({1}, {1})).Input(MakeTensor<float>({1}, {1}));
  auto out = t.Run();
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("attribute 'approximate' must be \"none\" or \"tanh\", got \"erf\""),
            std::string::npos)
      << out.status().message();
}

// ---- CastLike

TEST(CastLikeGradTest, BackToTheInputType) {
  OpTester t = Op("CastLike", 15);
  t.Input(Doubles({3, 4}, 21)).Input(Doubles({2}, 22));
  GradCheckOptions o;
  o.wrt = {0};
  ExpectGradientsMatchFiniteDifferences(t, "CastLike float64 to float64", o);
  // The target only lends its type: a zero gradient (checked against the central differences, which are 0).
  o.wrt = {0, 1};
  o.min_abs = -1;
  ExpectGradientsMatchFiniteDifferences(t, "CastLike target", o);
}

TEST(CastLikeGradTest, CastsBackAcrossTypes) {
  OpTester t = Op("CastLike", 19);
  t.Input(Doubles({3}, 23)).Input(MakeTensor<float>({1}, {0}));
  EXPECT_TRUE(Contains(EmittedOps(t), "Cast"));
}

// ---- Clip

TEST(ClipGradTest, AttributeBounds) {  // opsets 6-10: min and max attributes, each optional
  struct Case {
    int64_t opset;
    bool has_min, has_max;
  };
  uint32_t seed = 31;
  for (const Case& c : std::vector<Case>{{6, true, true}, {6, true, false}, {10, false, true}, {10, false, false}}) {
    for (const Dims& dims : {Dims{7}, Dims{3, 5}, Dims{2, 3, 5}}) {
      OpTester t = Op("Clip", c.opset);
      if (c.has_min) t.Attr(Attribute::Float("min", -0.75f));
      if (c.has_max) t.Attr(Attribute::Float("max", 0.5f));
      t.Input(DoublesAway(dims, seed++, -2, 2, {-0.75, 0.5}));
      ExpectGradientsMatchFiniteDifferences(
          t, Name("Clip", c.opset, dims) + (c.has_min ? " min" : "") + (c.has_max ? " max" : ""));
    }
  }
}

TEST(ClipGradTest, InputBounds) {  // opsets 11+: optional inputs, omitted in the middle with ""
  struct Case {
    int64_t opset;
    bool has_min, has_max;
  };
  uint32_t seed = 41;
  for (const Case& c : std::vector<Case>{
           {11, true, true}, {12, true, false}, {13, false, true}, {13, false, false}, {13, true, true}}) {
    for (const Dims& dims : {Dims{}, Dims{7}, Dims{3, 5}, Dims{2, 3, 5}}) {
      OpTester t = Op("Clip", c.opset);
      // A scalar input sits below min (so that every differentiated value gets a gradient).
      t.Input(dims.empty() ? Scalar64(-1.5) : DoublesAway(dims, seed++, -2, 2, {-0.75, 0.5}));
      if (c.has_min) {
        t.Input(Scalar64(-0.75));
      } else if (c.has_max) {
        t.OmittedInput();
      }
      if (c.has_max) t.Input(Scalar64(0.5));
      GradCheckOptions o;
      o.wrt = {0};
      if (c.has_min) o.wrt.push_back(1);
      if (c.has_max && !dims.empty()) o.wrt.push_back(2);
      if (dims.empty()) o.wrt = {c.has_min ? 1 : 0};
      ExpectGradientsMatchFiniteDifferences(
          t, Name("Clip", c.opset, dims) + (c.has_min ? " min" : "") + (c.has_max ? " max" : ""), o);
    }
  }
}

TEST(ClipGradTest, MinAboveMaxSendsEverythingToMax) {
  // Every element becomes max: the gradient goes to max (sum of dY), none to X or min (as torch.clamp).
  OpTester t = Op("Clip", 13);
  t.Input(Doubles({3, 4}, 51)).Input(Scalar64(1.0)).Input(Scalar64(-1.0));
  GradCheckOptions o;
  o.wrt = {2};
  ExpectGradientsMatchFiniteDifferences(t, "Clip min > max: max", o);
  o.wrt = {0, 1};
  o.min_abs = -1;
  ExpectGradientsMatchFiniteDifferences(t, "Clip min > max: X and min", o);
}

TEST(ClipGradTest, BoundsThemselvesPassTheGradient) {
  // PyTorch's rule: min <= x <= max passes dY, so an element equal to a bound gets dY and the bound nothing from it.
  OpTester t = Op("Clip", 13);
  t.Input(MakeTensor<double>({5}, {-2, -1, 0.25, 1, 3})).Input(Scalar64(-1.0)).Input(Scalar64(1.0));
  auto g = gradtest::AnalyticGradients(t, MakeTensor<double>({5}, {1, 2, 3, 4, 5}), {0, 1, 2});
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ((*g)[0], (std::vector<double>{0, 2, 3, 4, 0}));
  EXPECT_EQ((*g)[1], (std::vector<double>{1}));
  EXPECT_EQ((*g)[2], (std::vector<double>{5}));
  // The attribute form at the bounds.
  OpTester a = Op("Clip", 9);
  a.Attr(Attribute::Float("min", -1)).Attr(Attribute::Float("max", 1));
  a.Input(MakeTensor<double>({5}, {-2, -1, 0.25, 1, 3}));
  g = gradtest::AnalyticGradients(a, MakeTensor<double>({5}, {1, 2, 3, 4, 5}), {0});
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ((*g)[0], (std::vector<double>{0, 2, 3, 4, 0}));
}

// ---- Opset coverage: every opset whose CPU forward kernel exists has a builder.

TEST(GradientCoverage, EveryForwardOpsetHasABuilder) {
  const exec::KernelRegistry& kernels = exec::KernelRegistry::Global();
  const ops::GradientRegistry& grads = ops::GradientRegistry::Global();
  int checked = 0;
  for (const char* op : {"Elu", "Gelu", "CastLike", "Clip", "Min", "Max", "ReduceMax", "ReduceMin", "ReduceProd",
                         "ReduceLogSum", "ReduceLogSumExp", "ReduceSum", "ReduceMean", "ReduceSumSquare"}) {
    for (int64_t opset = 1; opset <= 23; ++opset) {
      if (!kernels.Find(op, "", opset, exec::Device::kCpu).ok()) continue;
      ++checked;
      auto def = grads.Find(op, "", opset);
      EXPECT_TRUE(def.ok()) << op << " at opset " << opset << ": " << def.status().message();
    }
  }
  EXPECT_GT(checked, 200);
}

}  // namespace
}  // namespace onnxamp::testing
