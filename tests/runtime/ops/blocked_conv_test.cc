// BlockedConv's AVX2 direct convolution (runtime/ops/layout/blocked_conv_avx2.h) against a double-precision
// convolution written out here: plain and blocked X, strides, dilations, asymmetric pads, kernels from 1x1 to 7x7,
// channel counts that are and are not multiples of 8 (odd numbers of output blocks included), output rows of 1 to
// 33 positions, with and without bias, Z and ReLU, one and two threads; infinities and NaN in the input; which
// problems the kernel takes (not 1x1 kernels, short products or more than 128 input channels); and the BlockedConv op
// with W as a graph input (packed per run) and as an initializer (packed once).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/thread_pool.h"
#include "runtime/ops/common/conv_geometry.h"
#include "runtime/ops/common/conv_onednn.h"
#include "runtime/ops/layout/blocked_conv_avx2.h"
#include "tests/runtime/ops/blocked_test_util.h"
#include "tests/runtime/ops/linalg_test_util.h"

namespace onnxamp::testing {
namespace {

using Dims = std::vector<int64_t>;

struct ConvCase {
  std::string name;
  int64_t n, c, m, h, w;
  Dims kernel, strides = {1, 1}, dilations = {1, 1}, pads = {0, 0, 0, 0};
};

std::vector<ConvCase> Cases() {
  return {
      {"cnn_layer1_16to16_k3_pad1", 2, 16, 16, 16, 16, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}},
      {"cnn_layer2_16to32_k3_s2_pad1", 2, 16, 32, 16, 16, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}},
      {"c13_m5_k3_no_pad", 1, 13, 5, 9, 11, {3, 3}},
      {"c8_m24_k5_pad2_row17", 1, 8, 24, 7, 17, {5, 5}, {1, 1}, {1, 1}, {2, 2, 2, 2}},
      {"c3_m40_k7_s2_pad3_stem", 2, 3, 40, 19, 23, {7, 7}, {2, 2}, {1, 1}, {3, 3, 3, 3}},
      {"c32_m16_k1x2", 1, 32, 16, 5, 7, {1, 2}},
      {"c64_m8_k2_s2", 3, 64, 8, 9, 9, {2, 2}, {2, 2}},
      {"c128_m16_k3_pad1_widest", 1, 128, 16, 6, 7, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}},
      {"c20_m12_k3_dilation2_asymmetric_pads", 1, 20, 12, 12, 13, {3, 3}, {1, 1}, {2, 2}, {2, 1, 0, 3}},
      {"c24_m17_k1x3_s3x1_pad_w", 2, 24, 17, 10, 6, {1, 3}, {3, 1}, {1, 1}, {0, 1, 0, 1}},
      {"c16_m16_k3_row1_pad1", 1, 16, 16, 5, 1, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}},
      {"c16_m8_k3_row2", 1, 16, 8, 4, 4, {3, 3}},
      {"c24_m32_k3_s2_row33_pad_end", 1, 24, 32, 6, 66, {3, 3}, {2, 2}, {1, 1}, {0, 0, 1, 1}},
      {"c8_m16_k4_pads_past_kernel_rows", 1, 8, 16, 3, 8, {4, 3}, {1, 1}, {1, 1}, {4, 1, 4, 1}},
  };
}

ops::ConvProblem ProblemOf(const ConvCase& c) {
  ops::WindowAttrs a;
  a.kernel_shape = c.kernel;
  a.strides = c.strides;
  a.dilations = c.dilations;
  a.pads = c.pads;
  auto g = ops::ForwardGeometry(a, {c.h, c.w}, c.kernel);
  EXPECT_TRUE(g.ok()) << c.name << ": " << g.status().ToString();
  return ops::ConvProblem{c.n, c.c, c.m, 1, g.ok() ? *g : ops::WindowGeometry{}};
}

// relu?(conv(x, w) + bias + z) in double, and for each output the sum of the magnitudes of its terms (the scale of
// its rounding error in float).
struct Expected {
  std::vector<double> y, scale;
};

Expected Reference(const ops::ConvProblem& p, const std::vector<float>& x, const std::vector<float>& w,
                   const std::vector<float>* bias, const std::vector<float>* z, bool relu) {
  const ops::WindowGeometry& g = p.geo;
  const int64_t h = g.in[0], wd = g.in[1], oh = g.out[0], ow = g.out[1], kh = g.kernel[0], kw = g.kernel[1];
  Expected e;
  e.y.resize(static_cast<size_t>(p.n * p.m * oh * ow));
  e.scale.resize(e.y.size());
  for (int64_t i = 0; i < p.n; ++i) {
    for (int64_t m = 0; m < p.m; ++m) {
      for (int64_t r = 0; r < oh; ++r) {
        for (int64_t q = 0; q < ow; ++q) {
          double sum = bias ? (*bias)[m] : 0.0, scale = std::fabs(sum);
          for (int64_t c = 0; c < p.c; ++c) {
            for (int64_t a = 0; a < kh; ++a) {
              const int64_t ih = r * g.stride[0] - g.pad_begin[0] + a * g.dilation[0];
              if (ih < 0 || ih >= h) continue;
              for (int64_t b = 0; b < kw; ++b) {
                const int64_t iw = q * g.stride[1] - g.pad_begin[1] + b * g.dilation[1];
                if (iw < 0 || iw >= wd) continue;
                const double t =
                    static_cast<double>(x[((i * p.c + c) * h + ih) * wd + iw]) * w[((m * p.c + c) * kh + a) * kw + b];
                sum += t;
                scale += std::fabs(t);
              }
            }
          }
          const size_t at = static_cast<size_t>(((i * p.m + m) * oh + r) * ow + q);
          if (z) {
            sum += (*z)[at];
            scale += std::fabs((*z)[at]);
          }
          if (relu) sum = sum > 0 ? sum : (sum == sum ? 0.0 : sum);
          e.y[at] = sum;
          e.scale[at] = scale;
        }
      }
    }
  }
  return e;
}

// Within float rounding of the sums (a wrong tap or channel is off by about the scale itself); NaN and infinities
// where the double reference has them.
void ExpectClose(const std::vector<float>& got, const Expected& want, int64_t terms, const std::string& what) {
  ASSERT_EQ(got.size(), want.y.size()) << what;
  int failures = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double w = want.y[i], g = got[i];
    bool ok;
    if (std::isnan(w)) {
      ok = std::isnan(g);
    } else if (std::isinf(w)) {
      ok = g == w;
    } else {
      ok = std::fabs(g - w) <= 2.0 * static_cast<double>(terms + 2) * 6e-8 * want.scale[i] + 1e-30;
    }
    if (!ok && failures++ < 5) ADD_FAILURE() << what << ": element " << i << " is " << g << ", expected " << w;
  }
}

std::vector<float> Random(int64_t count, uint32_t seed, double lo = -1, double hi = 1) {
  const std::vector<double> r = RandomValues(DType::kFloat32, count, seed, lo, hi);
  return std::vector<float>(r.begin(), r.end());
}

bool KernelRunsHere() {
  const ConvCase c{"probe", 1, 8, 8, 3, 3, {3, 3}};
  return ops::BlockedConvAvx2Applies(ProblemOf(c), ops::ConvLayouts{8, 0, 8}, false);
}

// Runs the kernel on case `c` with X in layout `x_block` and checks it against the reference.
void CheckCase(const ConvCase& c, int64_t x_block, bool with_bias, bool with_z, bool relu, int threads, uint32_t seed,
               std::vector<float> x = {}) {
  const ops::ConvProblem p = ProblemOf(c);
  const int64_t oh = p.geo.out[0], ow = p.geo.out[1];
  const std::string what = StrCat(c.name, " x_block ", x_block, with_bias ? " bias" : "", with_z ? " z" : "",
                                  relu ? " relu" : "", " threads ", threads);
  const ops::ConvLayouts layouts{x_block, with_z ? 8 : 0, 8};
  ASSERT_TRUE(ops::BlockedConvAvx2Applies(p, layouts, with_z)) << what;
  if (x.empty()) x = Random(c.n * c.c * c.h * c.w, seed);
  const std::vector<float> w = Random(c.m * c.c * c.kernel[0] * c.kernel[1], seed + 1);
  const std::vector<float> bias = Random(c.m, seed + 2);
  const std::vector<float> z = Random(c.n * c.m * oh * ow, seed + 3);
  const Expected want = Reference(p, x, w, with_bias ? &bias : nullptr, with_z ? &z : nullptr, relu);
  const ops::BlockedConvAvx2Weights packed =
      ops::BlockedConvAvx2PackWeights(p, layouts, w.data(), with_bias ? bias.data() : nullptr);
  const std::vector<float> xin = x_block == 0 ? x : ToBlocked(x, c.n, c.c, c.h * c.w, 8);
  const std::vector<float> zb = ToBlocked(z, c.n, c.m, oh * ow, 8);
  // Filled with a value the kernel never writes, so that a position it skips shows.
  std::vector<float> y(static_cast<size_t>(c.n * CeilDiv(c.m, 8) * oh * ow * 8), 12345.0f);
  exec::ThreadPool pool(threads);
  ops::BlockedConvAvx2(p, layouts, xin.data(), packed, with_z ? zb.data() : nullptr, relu, y.data(), pool);
  ExpectClose(FromBlocked(y.data(), c.n, c.m, oh * ow, 8, what), want, c.c * c.kernel[0] * c.kernel[1], what);
}

TEST(BlockedConvAvx2, MatchesDoubleReference) {
  if (!KernelRunsHere()) GTEST_SKIP() << "this CPU has no AVX2 and FMA";
  uint32_t seed = 7;
  int variant = 0;
  for (const ConvCase& c : Cases()) {
    for (int64_t x_block : {0, 8}) {
      const ops::ConvProblem p = ProblemOf(c);
      if (!ops::BlockedConvAvx2Applies(p, ops::ConvLayouts{x_block, 0, 8}, false)) {
        // Only the short products of a few plain channels are left to oneDNN.
        EXPECT_LT((x_block == 0 ? c.c : CeilDiv(c.c, 8) * 8) * c.kernel[0] * c.kernel[1], 64)
            << c.name << " x_block " << x_block;
        continue;
      }
      for (int threads : {1, 2}) {
        // Bias, Z and ReLU in turn through their 8 combinations.
        ++variant;
        CheckCase(c, x_block, variant & 1, variant & 2, variant & 4, threads, seed += 10);
      }
    }
  }
}

TEST(BlockedConvAvx2, EveryEpilogueOnTheCnnLayer) {
  if (!KernelRunsHere()) GTEST_SKIP() << "this CPU has no AVX2 and FMA";
  const ConvCase c = Cases()[0];
  uint32_t seed = 500;
  for (int bits = 0; bits < 8; ++bits) CheckCase(c, 8, bits & 1, bits & 2, bits & 4, 1, seed += 10);
}

TEST(BlockedConvAvx2, NonFiniteInputsAndZeroPaddingLanes) {
  if (!KernelRunsHere()) GTEST_SKIP() << "this CPU has no AVX2 and FMA";
  // 5 output channels: three lanes of padding, whose weights are zero; an infinite input times those zeros must not
  // leave NaN there. The real lanes follow the reference: infinities, and NaN (also through ReLU).
  const ConvCase c{"c13_m5_k3_pad1_nonfinite", 1, 13, 5, 9, 11, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}};
  std::vector<float> x = Random(c.n * c.c * c.h * c.w, 900);
  x[17] = std::numeric_limits<float>::infinity();
  x[250] = -std::numeric_limits<float>::infinity();
  x[640] = std::numeric_limits<float>::quiet_NaN();
  for (bool relu : {false, true}) {
    CheckCase(c, 8, true, false, relu, 1, 901, x);
    CheckCase(c, 8, false, true, relu, 2, 905, x);
  }
}

TEST(BlockedConvAvx2, TakesOnlyWhatItRuns) {
  if (!KernelRunsHere()) GTEST_SKIP() << "this CPU has no AVX2 and FMA";
  const ConvCase base{"base", 1, 16, 16, 8, 8, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}};
  const ops::ConvLayouts blocked{8, 8, 8};
  EXPECT_TRUE(ops::BlockedConvAvx2Applies(ProblemOf(base), blocked, true));
  EXPECT_TRUE(ops::BlockedConvAvx2Applies(ProblemOf(base), ops::ConvLayouts{0, 0, 8}, false));
  // Y plain or in blocks of 16, X in blocks of 16, Z in another layout than Y: oneDNN's.
  EXPECT_FALSE(ops::BlockedConvAvx2Applies(ProblemOf(base), ops::ConvLayouts{8, 0, 0}, false));
  EXPECT_FALSE(ops::BlockedConvAvx2Applies(ProblemOf(base), ops::ConvLayouts{16, 16, 16}, false));
  EXPECT_FALSE(ops::BlockedConvAvx2Applies(ProblemOf(base), ops::ConvLayouts{8, 0, 8}, true));
  // Groups, a width stride of 3, other than 2 spatial dims.
  ops::ConvProblem p = ProblemOf(base);
  p.group = 2;
  EXPECT_FALSE(ops::BlockedConvAvx2Applies(p, blocked, true));
  ConvCase s3 = base;
  s3.strides = {1, 3};
  EXPECT_FALSE(ops::BlockedConvAvx2Applies(ProblemOf(s3), blocked, true));
  ops::WindowAttrs a;
  a.kernel_shape = {3};
  auto g1 = ops::ForwardGeometry(a, {8}, {3});
  ASSERT_TRUE(g1.ok());
  EXPECT_FALSE(ops::BlockedConvAvx2Applies(ops::ConvProblem{1, 16, 16, 1, *g1}, blocked, true));
  // Short products: 3 plain channels of a 3x3 kernel (27 steps), 5 blocked channels of a 1x2 (16 steps).
  const ConvCase stem{"stem", 1, 3, 16, 8, 8, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}};
  EXPECT_FALSE(ops::BlockedConvAvx2Applies(ProblemOf(stem), ops::ConvLayouts{0, 0, 8}, false));
  const ConvCase short_row{"short_row", 1, 5, 32, 8, 8, {1, 2}};
  EXPECT_FALSE(ops::BlockedConvAvx2Applies(ProblemOf(short_row), blocked, false));
  // 1x1 kernels, whatever the channels; more than 128 input channels.
  const ConvCase pointwise{"pointwise", 1, 64, 32, 8, 8, {1, 1}};
  EXPECT_FALSE(ops::BlockedConvAvx2Applies(ProblemOf(pointwise), blocked, false));
  ConvCase wide = base;
  wide.c = 128;
  EXPECT_TRUE(ops::BlockedConvAvx2Applies(ProblemOf(wide), blocked, false));
  wide.c = 129;
  EXPECT_FALSE(ops::BlockedConvAvx2Applies(ProblemOf(wide), blocked, false));
}

// The BlockedConv op on the AVX2 kernel: W and B as graph inputs (packed on every run: a second run with other
// weights must not reuse the first run's packing) and as initializers (packed once, same result on every run).
TEST(BlockedConvOp, Avx2KernelWithWeightsAsInputsAndInitializers) {
  if (!ops::OneDnnAvailable() || !KernelRunsHere()) GTEST_SKIP() << "BlockedConv needs oneDNN and AVX2 here";
  const ConvCase c = Cases()[0];
  const ops::ConvProblem p = ProblemOf(c);
  const int64_t oh = p.geo.out[0], ow = p.geo.out[1], s = c.h * c.w;
  const std::vector<float> x = Random(c.n * c.c * s, 1234);
  const std::vector<float> z = Random(c.n * c.m * oh * ow, 1235);
  const Dims xb_dims = {c.n, CeilDiv(c.c, 8), c.h, c.w, 8}, zb_dims = {c.n, CeilDiv(c.m, 8), oh, ow, 8};
  auto make = [&](const std::vector<float>& w, const std::vector<float>& b) {
    OpTester t = InternalOp(exec::kBlockedConvOp);
    t.Attr(ir::Attribute::Ints("kernel_shape", c.kernel));
    t.Attr(ir::Attribute::Ints("pads", c.pads));
    t.Attr(ir::Attribute::Int("x_block", 8));
    t.Attr(ir::Attribute::Int("z_block", 8));
    t.Attr(ir::Attribute::Int("y_block", 8));
    t.Attr(ir::Attribute::String("activation", "Relu"));
    t.Input(MakeTensor<float>(xb_dims, ToBlocked(x, c.n, c.c, s, 8)));
    t.Input(MakeTensor<float>({c.m, c.c, c.kernel[0], c.kernel[1]}, w));
    t.Input(MakeTensor<float>({c.m}, b));
    t.Input(MakeTensor<float>(zb_dims, ToBlocked(z, c.n, c.m, oh * ow, 8)));
    t.options.num_threads = 2;
    return t;
  };
  for (uint32_t seed : {10u, 20u}) {
    const std::vector<float> w = Random(c.m * c.c * 9, seed), b = Random(c.m, seed + 1);
    const Expected want = Reference(p, x, w, &b, &z, true);
    const std::string what = StrCat("weights from seed ", seed);
    // W and B as graph inputs.
    auto out = make(w, b).Run();
    ASSERT_TRUE(out.ok()) << what << ": " << out.status().ToString();
    ASSERT_EQ((*out)[0].dims(), zb_dims) << what;
    const std::vector<float> got((*out)[0].values<float>().begin(), (*out)[0].values<float>().end());
    ExpectClose(FromBlocked(got.data(), c.n, c.m, oh * ow, 8, what), want, c.c * 9, what + " (inputs)");
  }
  // W and B as initializers: two runs of one session.
  const std::vector<float> w = Random(c.m * c.c * 9, 30), b = Random(c.m, 31);
  const Expected want = Reference(p, x, w, &b, &z, true);
  OpTester t = make(w, b);
  ir::Model model = t.BuildModel();
  ir::Graph& g = *model.graph;
  std::vector<ir::Value*> params = {g.inputs()[1], g.inputs()[2]};
  for (ir::Value* v : params) {
    ir::Tensor value = *t.inputs[v == params[0] ? 1 : 2];
    g.RemoveInput(v);
    g.SetInitializer(v, std::move(value));
  }
  auto session = exec::Session::Create(std::move(model), t.options);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  std::vector<ir::Tensor> feeds = t.Feeds();
  feeds.erase(feeds.begin() + 1, feeds.begin() + 3);
  for (int run = 0; run < 2; ++run) {
    auto out = (*session)->Run(feeds);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    const std::vector<float> got((*out)[0].values<float>().begin(), (*out)[0].values<float>().end());
    ExpectClose(FromBlocked(got.data(), c.n, c.m, oh * ow, 8, "initializers"), want, c.c * 9,
                StrCat("initializers run ", run));
  }
}

}  // namespace
}  // namespace onnxamp::testing
