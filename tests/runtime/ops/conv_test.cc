// Conv kernel: a hand-computed case, then 1-D/2-D/3-D convolutions with groups (depthwise included), strides,
// dilations, asymmetric pads and every auto_pad mode, with and without bias, per element type against a
// double-precision convolution written here, under every implementation (reference, im2col + GEMM, oneDNN); one
// session rerun with new values; and errors.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "runtime/ops/common/broadcast.h"
#include "tests/runtime/ops/linalg_test_util.h"

namespace onnxamp::testing {
namespace {

using Dims = std::vector<int64_t>;

struct ConvCase {
  std::string name;
  Dims x;  // [N, C, spatial...]
  int64_t m;
  Dims kernel;
  int64_t group = 1;
  Dims strides = {}, dilations = {}, pads = {};  // empty: defaults
  std::string auto_pad = {};                     // empty: not set
  bool bias = true;
};

int64_t Count(const Dims& d) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  return n;
}

// The convolution in double, with the output size and padding worked out from the ONNX formulas.
struct Expected {
  Dims dims;
  std::vector<double> values, magnitude;
};

Expected ConvDouble(const ConvCase& c, const std::vector<double>& x, const std::vector<double>& w,
                    const std::vector<double>& b) {
  const size_t nsp = c.kernel.size();
  const int64_t n = c.x[0], ch = c.x[1], cg = ch / c.group, mg = c.m / c.group;
  Dims in(c.x.begin() + 2, c.x.end()), out(nsp), pb(nsp, 0), s(nsp, 1), d(nsp, 1);
  for (size_t i = 0; i < nsp; ++i) {
    if (!c.strides.empty()) s[i] = c.strides[i];
    if (!c.dilations.empty()) d[i] = c.dilations[i];
    const int64_t keff = (c.kernel[i] - 1) * d[i] + 1;
    if (c.auto_pad == "SAME_UPPER" || c.auto_pad == "SAME_LOWER") {
      out[i] = (in[i] + s[i] - 1) / s[i];
      const int64_t total = std::max<int64_t>(0, (out[i] - 1) * s[i] + keff - in[i]);
      pb[i] = c.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
    } else if (c.auto_pad == "VALID") {
      out[i] = (in[i] - keff) / s[i] + 1;
    } else {
      const int64_t b0 = c.pads.empty() ? 0 : c.pads[i], e0 = c.pads.empty() ? 0 : c.pads[i + nsp];
      pb[i] = b0;
      out[i] = (in[i] + b0 + e0 - keff) / s[i] + 1;
    }
  }
  Expected e;
  e.dims = {n, c.m};
  e.dims.insert(e.dims.end(), out.begin(), out.end());
  const int64_t out_size = Count(out), in_size = Count(in), k_size = Count(c.kernel);
  Dims o(nsp), k(nsp);
  for (int64_t img = 0; img < n; ++img) {
    for (int64_t oc = 0; oc < c.m; ++oc) {
      for (int64_t oi = 0; oi < out_size; ++oi) {
        for (int64_t r = oi, i = static_cast<int64_t>(nsp) - 1; i >= 0; --i) {
          o[i] = r % out[i];
          r /= out[i];
        }
        double sum = c.bias ? b[oc] : 0, mag = std::abs(sum);
        for (int64_t ic = 0; ic < cg; ++ic) {
          for (int64_t ki = 0; ki < k_size; ++ki) {
            for (int64_t r = ki, i = static_cast<int64_t>(nsp) - 1; i >= 0; --i) {
              k[i] = r % c.kernel[i];
              r /= c.kernel[i];
            }
            int64_t off = 0;
            bool inside = true;
            for (size_t i = 0; i < nsp; ++i) {
              const int64_t pos = o[i] * s[i] - pb[i] + k[i] * d[i];
              inside = inside && pos >= 0 && pos < in[i];
              off = off * in[i] + pos;
            }
            if (!inside) continue;
            const int64_t chan = (oc / mg) * cg + ic;
            const double t = x[(img * ch + chan) * in_size + off] * w[(oc * cg + ic) * k_size + ki];
            sum += t;
            mag += std::abs(t);
          }
        }
        e.values.push_back(sum);
        e.magnitude.push_back(mag);
      }
    }
  }
  return e;
}

OpTester ConvTester(DType dtype, const ConvCase& c, const std::vector<double>& x, const std::vector<double>& w,
                    const std::vector<double>& b) {
  OpTester t = MakeTester("Conv", 11);
  if (c.group != 1) t.Attr(ir::Attribute::Int("group", c.group));
  if (!c.strides.empty()) t.Attr(ir::Attribute::Ints("strides", c.strides));
  if (!c.dilations.empty()) t.Attr(ir::Attribute::Ints("dilations", c.dilations));
  if (!c.pads.empty()) t.Attr(ir::Attribute::Ints("pads", c.pads));
  if (!c.auto_pad.empty()) t.Attr(ir::Attribute::String("auto_pad", c.auto_pad));
  t.Attr(ir::Attribute::Ints("kernel_shape", c.kernel));
  Dims w_dims = {c.m, c.x[1] / c.group};
  w_dims.insert(w_dims.end(), c.kernel.begin(), c.kernel.end());
  t.Input(TensorOf(dtype, c.x, x)).Input(TensorOf(dtype, w_dims, w));
  if (c.bias) t.Input(TensorOf(dtype, {c.m}, b));
  return t;
}

TEST(Conv, HandComputed) {
  // 3x3 input 1..9, 2x2 kernel of ones, bias 1: sums of each 2x2 block plus 1.
  ConvCase c{"hand", {1, 1, 3, 3}, 1, {2, 2}};
  for (ops::LinalgImpl impl : AvailableImpls()) {
    auto out = RunWith(ConvTester(DType::kFloat32, c, {1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 1, 1}, {1}), impl);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].dims(), (Dims{1, 1, 2, 2}));
    EXPECT_EQ(Values<float>(out[0]), (std::vector<float>{13, 17, 25, 29})) << ops::LinalgImplName(impl);
  }
}

const std::vector<ConvCase>& Cases() {
  static const std::vector<ConvCase> cases = {
      {"1d", {2, 3, 17}, 4, {3}},
      {"1d_stride_dilation_pads", {1, 2, 20}, 3, {3}, 1, {2}, {2}, {1, 2}},
      {"2d", {2, 3, 9, 11}, 5, {3, 3}},
      {"2d_no_bias", {1, 4, 7, 6}, 2, {2, 3}, 1, {}, {}, {}, "", false},
      {"2d_stride_asym_pads", {2, 3, 10, 9}, 4, {3, 2}, 1, {2, 3}, {}, {1, 0, 2, 1}},
      {"2d_dilated", {1, 2, 12, 12}, 3, {3, 3}, 1, {}, {2, 3}, {2, 2, 2, 2}},
      {"2d_groups", {2, 6, 8, 7}, 4, {3, 3}, 2, {1, 1}, {}, {1, 1, 1, 1}},
      {"2d_depthwise", {1, 8, 9, 9}, 8, {3, 3}, 8, {2, 2}, {}, {1, 1, 1, 1}},
      {"2d_depthwise_multiplier", {1, 3, 7, 8}, 6, {3, 3}, 3},
      {"2d_same_upper", {1, 3, 7, 8}, 4, {4, 3}, 1, {2, 3}, {}, {}, "SAME_UPPER"},
      {"2d_same_lower", {1, 3, 7, 8}, 4, {4, 3}, 1, {2, 1}, {}, {}, "SAME_LOWER"},
      {"2d_valid", {1, 2, 9, 10}, 3, {3, 4}, 1, {2, 2}, {}, {}, "VALID"},
      {"2d_1x1", {2, 16, 5, 5}, 8, {1, 1}},
      {"2d_1x1_strided", {2, 16, 6, 5}, 8, {1, 1}, 1, {2, 2}},
      {"2d_wide", {1, 32, 14, 14}, 40, {3, 3}, 1, {}, {}, {1, 1, 1, 1}},
      {"3d", {1, 2, 5, 6, 7}, 3, {2, 3, 2}, 1, {1, 2, 1}, {}, {1, 0, 1, 0, 1, 1}},
      {"3d_groups_dilated", {2, 4, 6, 6, 5}, 4, {2, 2, 2}, 2, {}, {2, 1, 2}},
      {"4d", {1, 2, 4, 3, 4, 3}, 2, {2, 2, 2, 2}, 1, {}, {}, {0, 1, 0, 1, 1, 0, 1, 0}},
  };
  return cases;
}

class ConvTyped : public ::testing::TestWithParam<DType> {};

TEST_P(ConvTyped, ShapesAgainstDouble) {
  const DType dtype = GetParam();
  uint32_t seed = 1;
  for (const ConvCase& c : Cases()) {
    Dims w_dims = {c.m, c.x[1] / c.group};
    w_dims.insert(w_dims.end(), c.kernel.begin(), c.kernel.end());
    const auto x = RandomValues(dtype, Count(c.x), seed++), w = RandomValues(dtype, Count(w_dims), seed++);
    const auto b = RandomValues(dtype, c.m, seed++);
    const Expected want = ConvDouble(c, x, w, b);
    for (ops::LinalgImpl impl : AvailableImpls()) {
      OpTester t = ConvTester(dtype, c, x, w, b);
      t.options.num_threads = 2;
      auto out = RunWith(t, impl);
      ASSERT_EQ(out.size(), 1u) << c.name;
      EXPECT_EQ(out[0].dims(), want.dims) << c.name;
      ExpectNear(out[0], want.values, want.magnitude, StrCat(c.name, " ", ops::LinalgImplName(impl)));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, ConvTyped,
                         ::testing::Values(DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64),
                         DTypeParamName);

// Problems big enough to be split over the threads: by images, by output channels (fewer images than threads),
// and by groups.
TEST(Conv, SplitsAcrossThreads) {
  const std::vector<ConvCase> cases = {
      {"by_images", {5, 16, 20, 20}, 24, {3, 3}, 1, {}, {}, {1, 1, 1, 1}},
      {"by_channels", {1, 32, 20, 21}, 60, {3, 3}, 1, {1, 2}, {}, {1, 1, 1, 1}},
      {"by_groups", {2, 48, 20, 20}, 48, {3, 3}, 6, {}, {}, {0, 1, 2, 1}},
      {"depthwise", {1, 64, 33, 33}, 64, {3, 3}, 64, {}, {}, {1, 1, 1, 1}},
  };
  uint32_t seed = 50;
  for (const ConvCase& c : cases) {
    Dims w_dims = {c.m, c.x[1] / c.group};
    w_dims.insert(w_dims.end(), c.kernel.begin(), c.kernel.end());
    const auto x = RandomValues(DType::kFloat32, Count(c.x), seed++),
               w = RandomValues(DType::kFloat32, Count(w_dims), seed++);
    const auto b = RandomValues(DType::kFloat32, c.m, seed++);
    const Expected want = ConvDouble(c, x, w, b);
    for (ops::LinalgImpl impl : {ops::LinalgImpl::kPortable, ops::LinalgImpl::kOneDnn}) {
      for (ops::OneDnnThreading mode : {ops::OneDnnThreading::kShared, ops::OneDnnThreading::kSplit}) {
        ScopedOneDnnThreading threading(mode);
        OpTester t = ConvTester(DType::kFloat32, c, x, w, b);
        t.options.num_threads = 4;
        auto out = RunWith(t, impl);
        ASSERT_EQ(out.size(), 1u) << c.name;
        ExpectNear(out[0], want.values, want.magnitude,
                   StrCat(c.name, " ", ops::LinalgImplName(impl), " ", ThreadingName(mode)));
      }
    }
  }
}

// One session run several times with new X, W and B values each time (W and B are graph inputs, so not packed
// once): the kernel keeps its checked problem and oneDNN's memory objects between runs and must point them at
// each run's data. A run whose data come back to the first run's must give the first run's results again.
TEST(Conv, RerunsWithNewValues) {
  const ConvCase c{"rerun", {2, 16, 9, 11}, 32, {3, 3}, 1, {1, 2}, {}, {1, 0, 1, 2}};
  Dims w_dims = {c.m, c.x[1] / c.group};
  w_dims.insert(w_dims.end(), c.kernel.begin(), c.kernel.end());
  for (ops::LinalgImpl impl : AvailableImpls()) {
    for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
      OpTester t = ConvTester(dtype, c, RandomValues(dtype, Count(c.x), 1), RandomValues(dtype, Count(w_dims), 2),
                              RandomValues(dtype, c.m, 3));
      t.options.kernels.linalg = impl;
      auto session = exec::Session::Create(t.BuildModel(), t.options);
      ASSERT_TRUE(session.ok()) << session.status().ToString();
      for (uint32_t seed : {10u, 20u, 30u, 10u}) {
        const auto x = RandomValues(dtype, Count(c.x), seed), w = RandomValues(dtype, Count(w_dims), seed + 1);
        const auto b = RandomValues(dtype, c.m, seed + 2);
        std::vector<ir::Tensor> feeds = {TensorOf(dtype, c.x, x), TensorOf(dtype, w_dims, w),
                                         TensorOf(dtype, {c.m}, b)};
        for (size_t i = 0; i < feeds.size(); ++i) feeds[i].set_name("in" + std::to_string(i));
        auto out = (*session)->Run(feeds);
        ASSERT_TRUE(out.ok()) << out.status().ToString();
        const Expected want = ConvDouble(c, x, w, b);
        ExpectNear((*out)[0], want.values, want.magnitude,
                   StrCat(ops::LinalgImplName(impl), " ", DTypeName(dtype), " run with seed ", seed));
      }
    }
  }
}

TEST(Conv, EmptyBatch) {
  ConvCase c{"empty", {0, 2, 5, 5}, 3, {3, 3}};
  for (ops::LinalgImpl impl : AvailableImpls()) {
    auto out = RunWith(ConvTester(DType::kFloat32, c, {}, std::vector<double>(18, 1), {0, 0, 0}), impl);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].dims(), (Dims{0, 3, 3, 3}));
  }
}

Status RunStatus(const OpTester& t) {
  auto r = t.Run();
  return r.ok() ? Status::Ok() : r.status();
}

void ExpectError(const OpTester& t, const std::string& text) {
  const Status st = RunStatus(t);
  ASSERT_FALSE(st.ok()) << "expected an error containing: " << text;
  EXPECT_NE(st.message().find(text), std::string::npos) << st.message();
}

TEST(Conv, Errors) {
  ConvCase c{"e", {1, 4, 5, 5}, 2, {3, 3}};
  {
    OpTester t = ConvTester(DType::kFloat32, c, {}, {}, {});
    t.inputs[1] = TensorOf(DType::kFloat32, {2, 3, 3, 3}, {});
    ExpectError(t, "input X [1,4,5,5] has 4 channels but W [2,3,3,3] with group 1 expects 3");
  }
  {
    ConvCase g = c;
    g.group = 2;
    g.m = 3;
    ExpectError(ConvTester(DType::kFloat32, g, {}, {}, {}), "has 3 output channels, not a multiple of group 2");
  }
  {
    OpTester t = ConvTester(DType::kFloat32, c, {}, {}, {});
    t.attributes.back() = ir::Attribute::Ints("kernel_shape", {2, 2});
    ExpectError(t, "attribute 'kernel_shape' [2,2] disagrees with W's spatial dims [3,3]");
  }
  {
    OpTester t = ConvTester(DType::kFloat32, c, {}, {}, {});
    t.inputs[2] = TensorOf(DType::kFloat32, {3}, {});
    ExpectError(t, "input B has shape [3], expected [2]");
  }
  {
    ConvCase big = c;
    big.kernel = {7, 3};
    ExpectError(ConvTester(DType::kFloat32, big, {}, {}, {}), "spatial dimension 0: the window (kernel 7");
  }
  {
    ConvCase bad = c;
    bad.auto_pad = "SAME";
    ExpectError(ConvTester(DType::kFloat32, bad, {}, {}, {}),
                "attribute 'auto_pad' is 'SAME', expected one of NOTSET, VALID, SAME_UPPER, SAME_LOWER");
  }
  {
    ConvCase bad = c;
    bad.strides = {1, 0};
    ExpectError(ConvTester(DType::kFloat32, bad, {}, {}, {}), "attribute 'strides' must hold values >= 1");
  }
  {
    ConvCase bad = c;
    bad.pads = {1, 1, 1};
    ExpectError(ConvTester(DType::kFloat32, bad, {}, {}, {}), "attribute 'pads' has an odd number of values");
  }
  {
    OpTester t = ConvTester(DType::kFloat32, c, {}, {}, {});
    t.inputs[0] = TensorOf(DType::kFloat32, {4, 5}, {});
    ExpectError(t, "input X must have rank >= 3");
  }
  {
    OpTester t = ConvTester(DType::kFloat32, c, {}, {}, {});
    t.inputs[1] = TensorOf(DType::kFloat16, {2, 4, 3, 3}, {});
    ExpectError(t, "input W has element type float16, expected float");
  }
}

}  // namespace
}  // namespace onnxamp::testing
