// ConvTranspose kernel: a hand-computed case, then 1-D/2-D/3-D cases with strides, dilations, pads,
// output_padding, output_shape, auto_pad and groups, per element type against a double-precision scatter written
// here (the kernels gather), under every implementation; and errors.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tests/runtime/ops/linalg_test_util.h"

namespace onnxamp::testing {
namespace {

using Dims = std::vector<int64_t>;

struct Case {
  std::string name;
  Dims x;     // [N, C, spatial...]
  int64_t m;  // output channels
  Dims kernel;
  int64_t group = 1;
  Dims strides = {}, dilations = {}, pads = {}, output_padding = {}, output_shape = {};
  std::string auto_pad = {};
  bool bias = true;
};

int64_t Count(const Dims& d) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  return n;
}

int64_t FloorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

struct Expected {
  Dims dims;
  std::vector<double> values, magnitude;
};

// Every input element scattered through the kernel: y[o = i*s - pad_begin + k*d] += x[i] * w[k].
Expected ConvTransposeDouble(const Case& c, const std::vector<double>& x, const std::vector<double>& w,
                             const std::vector<double>& b) {
  const size_t nsp = c.kernel.size();
  const int64_t n = c.x[0], ch = c.x[1], cg = ch / c.group, mg = c.m / c.group;
  Dims in(c.x.begin() + 2, c.x.end()), out(nsp), pb(nsp, 0), s(nsp, 1), d(nsp, 1);
  for (size_t i = 0; i < nsp; ++i) {
    if (!c.strides.empty()) s[i] = c.strides[i];
    if (!c.dilations.empty()) d[i] = c.dilations[i];
    const int64_t op = c.output_padding.empty() ? 0 : c.output_padding[i];
    const int64_t full = s[i] * (in[i] - 1) + op + (c.kernel[i] - 1) * d[i] + 1;
    if (!c.output_shape.empty() || c.auto_pad == "SAME_UPPER" || c.auto_pad == "SAME_LOWER") {
      out[i] = c.output_shape.empty() ? in[i] * s[i] : c.output_shape[i];
      const int64_t total = full - out[i];
      pb[i] = c.auto_pad == "SAME_UPPER" ? FloorDiv(total, 2) : total - FloorDiv(total, 2);
    } else {
      pb[i] = c.pads.empty() ? 0 : c.pads[i];
      out[i] = full - pb[i] - (c.pads.empty() ? 0 : c.pads[i + nsp]);
    }
  }
  Expected e;
  e.dims = {n, c.m};
  e.dims.insert(e.dims.end(), out.begin(), out.end());
  const int64_t out_size = Count(out), in_size = Count(in), k_size = Count(c.kernel);
  e.values.assign(static_cast<size_t>(n * c.m * out_size), 0);
  e.magnitude.assign(e.values.size(), 0);
  for (int64_t img = 0; img < n; ++img) {
    for (int64_t oc = 0; oc < c.m; ++oc) {
      for (int64_t oi = 0; oi < out_size; ++oi) {
        e.values[(img * c.m + oc) * out_size + oi] = c.bias ? b[oc] : 0;
        e.magnitude[(img * c.m + oc) * out_size + oi] = c.bias ? std::abs(b[oc]) : 0;
      }
    }
    for (int64_t ic = 0; ic < ch; ++ic) {
      const int64_t grp = ic / cg;
      for (int64_t ii = 0; ii < in_size; ++ii) {
        for (int64_t ki = 0; ki < k_size; ++ki) {
          int64_t off = 0, ri = ii, rk = ki;
          Dims pos(nsp);
          bool inside = true;
          for (int64_t dd = static_cast<int64_t>(nsp) - 1; dd >= 0; --dd) {
            const int64_t iv = ri % in[dd], kv = rk % c.kernel[dd];
            ri /= in[dd];
            rk /= c.kernel[dd];
            pos[dd] = iv * s[dd] - pb[dd] + kv * d[dd];
            inside = inside && pos[dd] >= 0 && pos[dd] < out[dd];
          }
          if (!inside) continue;
          for (size_t dd = 0; dd < nsp; ++dd) off = off * out[dd] + pos[dd];
          for (int64_t om = 0; om < mg; ++om) {
            const double t = x[(img * ch + ic) * in_size + ii] * w[(ic * mg + om) * k_size + ki];
            const size_t at = static_cast<size_t>((img * c.m + grp * mg + om) * out_size + off);
            e.values[at] += t;
            e.magnitude[at] += std::abs(t);
          }
        }
      }
    }
  }
  return e;
}

OpTester Tester(DType dtype, const Case& c, const std::vector<double>& x, const std::vector<double>& w,
                const std::vector<double>& b) {
  OpTester t = MakeTester("ConvTranspose", 11);
  if (c.group != 1) t.Attr(ir::Attribute::Int("group", c.group));
  if (!c.strides.empty()) t.Attr(ir::Attribute::Ints("strides", c.strides));
  if (!c.dilations.empty()) t.Attr(ir::Attribute::Ints("dilations", c.dilations));
  if (!c.pads.empty()) t.Attr(ir::Attribute::Ints("pads", c.pads));
  if (!c.output_padding.empty()) t.Attr(ir::Attribute::Ints("output_padding", c.output_padding));
  if (!c.output_shape.empty()) t.Attr(ir::Attribute::Ints("output_shape", c.output_shape));
  if (!c.auto_pad.empty()) t.Attr(ir::Attribute::String("auto_pad", c.auto_pad));
  Dims w_dims = {c.x[1], c.m / c.group};
  w_dims.insert(w_dims.end(), c.kernel.begin(), c.kernel.end());
  t.Input(TensorOf(dtype, c.x, x)).Input(TensorOf(dtype, w_dims, w));
  if (c.bias) t.Input(TensorOf(dtype, {c.m}, b));
  return t;
}

TEST(ConvTranspose, HandComputed) {
  // x = [[1, 2]] (1x2), kernel [[1, 1]] (1x2), stride 2 -> [1, 1, 2, 2]; bias 0.5.
  Case c{"hand", {1, 1, 1, 2}, 1, {1, 2}, 1, {1, 2}};
  for (ops::LinalgImpl impl : AvailableImpls()) {
    auto out = RunWith(Tester(DType::kFloat32, c, {1, 2}, {1, 1}, {0.5}), impl);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].dims(), (Dims{1, 1, 1, 4}));
    EXPECT_EQ(Values<float>(out[0]), (std::vector<float>{1.5, 1.5, 2.5, 2.5})) << ops::LinalgImplName(impl);
  }
}

const std::vector<Case>& Cases() {
  static const std::vector<Case> cases = {
      {"1d", {2, 3, 7}, 2, {3}},
      {"1d_stride_pads", {1, 2, 6}, 3, {4}, 1, {3}, {}, {1, 2}},
      {"2d", {2, 3, 5, 4}, 4, {3, 3}},
      {"2d_no_bias", {1, 2, 4, 4}, 3, {2, 2}, 1, {}, {}, {}, {}, {}, "", false},
      {"2d_strides_output_padding", {1, 2, 4, 5}, 3, {3, 3}, 1, {2, 3}, {}, {1, 0, 0, 1}, {1, 2}},
      {"2d_dilations", {1, 2, 5, 5}, 2, {2, 3}, 1, {1, 2}, {2, 2}, {0, 1, 1, 0}},
      {"2d_groups", {2, 4, 5, 3}, 6, {3, 2}, 2, {2, 1}},
      {"2d_output_shape_larger", {1, 1, 3, 3}, 2, {3, 3}, 1, {3, 2}, {}, {}, {}, {10, 8}},
      {"2d_output_shape_smaller", {1, 2, 3, 4}, 2, {3, 3}, 1, {2, 2}, {}, {}, {}, {5, 6}},
      {"2d_same_upper", {1, 2, 3, 4}, 2, {3, 3}, 1, {2, 2}, {}, {}, {}, {}, "SAME_UPPER"},
      {"2d_same_lower", {1, 2, 3, 4}, 2, {3, 3}, 1, {2, 2}, {}, {}, {}, {}, "SAME_LOWER"},
      {"3d", {1, 2, 3, 4, 3}, 3, {2, 2, 3}, 1, {2, 1, 2}, {}, {0, 1, 1, 1, 0, 0}},
  };
  return cases;
}

class ConvTransposeTyped : public ::testing::TestWithParam<DType> {};

TEST_P(ConvTransposeTyped, ShapesAgainstDouble) {
  const DType dtype = GetParam();
  uint32_t seed = 1;
  for (const Case& c : Cases()) {
    Dims w_dims = {c.x[1], c.m / c.group};
    w_dims.insert(w_dims.end(), c.kernel.begin(), c.kernel.end());
    const auto x = RandomValues(dtype, Count(c.x), seed++), w = RandomValues(dtype, Count(w_dims), seed++);
    const auto b = RandomValues(dtype, c.m, seed++);
    const Expected want = ConvTransposeDouble(c, x, w, b);
    for (ops::LinalgImpl impl : AvailableImpls()) {
      auto out = RunWith(Tester(dtype, c, x, w, b), impl);
      ASSERT_EQ(out.size(), 1u) << c.name;
      EXPECT_EQ(out[0].dims(), want.dims) << c.name;
      ExpectNear(out[0], want.values, want.magnitude, StrCat(c.name, " ", ops::LinalgImplName(impl)));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, ConvTransposeTyped,
                         ::testing::Values(DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64),
                         DTypeParamName);

TEST(ConvTranspose, Errors) {
  Case c{"e", {1, 4, 3, 3}, 2, {3, 3}};
  {
    OpTester t = Tester(DType::kFloat32, c, {}, {}, {});
    t.inputs[1] = TensorOf(DType::kFloat32, {3, 2, 3, 3}, {});
    auto r = t.Run();
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("input X [1,4,3,3] has 4 channels but W [3,2,3,3] expects 3"),
              std::string::npos)
        << r.status().message();
  }
  {
    Case bad = c;
    bad.strides = {2, 2};
    bad.output_padding = {2, 0};
    auto r = Tester(DType::kFloat32, bad, {}, {}, {}).Run();
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("attribute 'output_padding' (2 in spatial dimension 0) must be smaller"),
              std::string::npos)
        << r.status().message();
  }
  {
    Case bad = c;
    bad.output_shape = {4, 4, 4};
    auto r = Tester(DType::kFloat32, bad, {}, {}, {}).Run();
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("attribute 'output_shape' has 3 values"), std::string::npos)
        << r.status().message();
  }
  {
    Case bad = c;
    bad.pads = {3, 3, 3, 3};
    auto r = Tester(DType::kFloat32, bad, {}, {}, {}).Run();
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("is negative (pads larger than the output)"), std::string::npos)
        << r.status().message();
  }
}

}  // namespace
}  // namespace onnxamp::testing
