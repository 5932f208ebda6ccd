// Pooling kernels: MaxPool (with Indices in both storage orders) and AveragePool (count_include_pad) by hand, then
// 1-D/2-D/3-D windows with strides, pads, dilations, ceil_mode and auto_pad per element type against a double
// reference written here, under every implementation; GlobalAveragePool/GlobalMaxPool; errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "tests/runtime/ops/linalg_test_util.h"

namespace onnxamp::testing {
namespace {

using Dims = std::vector<int64_t>;

struct PoolCase {
  std::string name;
  Dims x;
  Dims kernel;
  Dims strides = {}, dilations = {}, pads = {};
  std::string auto_pad = {};
  bool ceil_mode = false;
};

int64_t Count(const Dims& d) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  return n;
}

struct Expected {
  Dims dims;
  std::vector<double> values;
  std::vector<int64_t> indices;  // max only, row-major
};

// kind: 0 max, 1 average excluding pads, 2 average including pads.
Expected PoolDouble(const PoolCase& c, int kind, const std::vector<double>& x) {
  const size_t nsp = c.kernel.size();
  Dims in(c.x.begin() + 2, c.x.end()), out(nsp), pb(nsp, 0), pe(nsp, 0), s(nsp, 1), d(nsp, 1);
  for (size_t i = 0; i < nsp; ++i) {
    if (!c.strides.empty()) s[i] = c.strides[i];
    if (!c.dilations.empty()) d[i] = c.dilations[i];
    const int64_t keff = (c.kernel[i] - 1) * d[i] + 1;
    if (c.auto_pad == "SAME_UPPER" || c.auto_pad == "SAME_LOWER") {
      out[i] = (in[i] + s[i] - 1) / s[i];
      const int64_t total = std::max<int64_t>(0, (out[i] - 1) * s[i] + keff - in[i]);
      pb[i] = c.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      pe[i] = total - pb[i];
    } else {
      if (!c.pads.empty()) {
        pb[i] = c.pads[i];
        pe[i] = c.pads[i + nsp];
      }
      const int64_t span = in[i] + pb[i] + pe[i] - keff;
      out[i] = (c.ceil_mode ? (span + s[i] - 1) / s[i] : span / s[i]) + 1;
      if (c.ceil_mode && (out[i] - 1) * s[i] >= in[i] + pb[i]) --out[i];
    }
  }
  Expected e;
  e.dims = {c.x[0], c.x[1]};
  e.dims.insert(e.dims.end(), out.begin(), out.end());
  const int64_t planes = c.x[0] * c.x[1], in_size = Count(in), out_size = Count(out), k_size = Count(c.kernel);
  for (int64_t p = 0; p < planes; ++p) {
    for (int64_t oi = 0; oi < out_size; ++oi) {
      Dims o(nsp);
      for (int64_t r = oi, i = static_cast<int64_t>(nsp) - 1; i >= 0; --i) {
        o[i] = r % out[i];
        r /= out[i];
      }
      double best = -std::numeric_limits<double>::infinity(), sum = 0;
      int64_t best_at = -1, count = 0;
      for (int64_t ki = 0; ki < k_size; ++ki) {
        int64_t off = 0;
        bool inside = true, in_padded = true;
        for (int64_t r = ki, i = static_cast<int64_t>(nsp) - 1, scale = 1; i >= 0; --i) {
          const int64_t pos = o[i] * s[i] - pb[i] + (r % c.kernel[i]) * d[i];
          r /= c.kernel[i];
          inside = inside && pos >= 0 && pos < in[i];
          in_padded = in_padded && pos < in[i] + pe[i];
          off += pos * scale;
          scale *= in[i];
        }
        if (kind == 2 && in_padded) ++count;
        if (!inside) continue;
        const double v = x[p * in_size + off];
        if (kind == 1) ++count;
        sum += v;
        if (v > best) {
          best = v;
          best_at = p * in_size + off;
        }
      }
      e.values.push_back(kind == 0 ? best : sum / count);
      e.indices.push_back(best_at);
    }
  }
  return e;
}

OpTester PoolTester(const std::string& op, DType dtype, const PoolCase& c, const std::vector<double>& x,
                    int64_t opset = 19) {
  OpTester t = MakeTester(op, opset);
  t.Attr(ir::Attribute::Ints("kernel_shape", c.kernel));
  if (!c.strides.empty()) t.Attr(ir::Attribute::Ints("strides", c.strides));
  if (!c.dilations.empty()) t.Attr(ir::Attribute::Ints("dilations", c.dilations));
  if (!c.pads.empty()) t.Attr(ir::Attribute::Ints("pads", c.pads));
  if (!c.auto_pad.empty()) t.Attr(ir::Attribute::String("auto_pad", c.auto_pad));
  if (c.ceil_mode) t.Attr(ir::Attribute::Int("ceil_mode", 1));
  t.Input(TensorOf(dtype, c.x, x));
  return t;
}

TEST(MaxPool, HandComputedWithIndices) {
  // 1x1x3x4 input; 2x2 windows, stride 2, pads end 1 on H.
  const std::vector<double> x = {1, 9, 2, 3, 4, 5, 8, 7, 6, 0, 11, 10};
  PoolCase c{"hand", {1, 1, 3, 4}, {2, 2}, {2, 2}, {}, {0, 0, 1, 0}};
  for (ops::LinalgImpl impl : AvailableImpls()) {
    for (int64_t order : {0, 1}) {
      OpTester t = PoolTester("MaxPool", DType::kFloat32, c, x);
      t.Attr(ir::Attribute::Int("storage_order", order));
      t.num_outputs = 2;
      auto out = RunWith(t, impl);
      ASSERT_EQ(out.size(), 2u);
      EXPECT_EQ(out[0].dims(), (Dims{1, 1, 2, 2}));
      EXPECT_EQ(Values<float>(out[0]), (std::vector<float>{9, 8, 6, 11}));
      // Row-major offsets 1, 6, 8, 10; column-major (h + w * 3) 3, 7, 2, 8.
      const std::vector<int64_t> want =
          order == 0 ? std::vector<int64_t>{1, 6, 8, 10} : std::vector<int64_t>{3, 7, 2, 8};
      EXPECT_EQ(std::vector<int64_t>(out[1].values<int64_t>().begin(), out[1].values<int64_t>().end()), want)
          << ops::LinalgImplName(impl) << " storage_order " << order;
    }
  }
}

TEST(AveragePool, CountIncludePad) {
  // 1x1x2x2 input of ones, 2x2 window, pads 1 everywhere, stride 2: each window covers one input element.
  PoolCase c{"pad", {1, 1, 2, 2}, {2, 2}, {2, 2}, {}, {1, 1, 1, 1}};
  for (ops::LinalgImpl impl : AvailableImpls()) {
    auto exclude = RunWith(PoolTester("AveragePool", DType::kFloat32, c, {4, 8, 12, 16}), impl);
    ASSERT_EQ(exclude.size(), 1u);
    EXPECT_EQ(Values<float>(exclude[0]), (std::vector<float>{4, 8, 12, 16})) << ops::LinalgImplName(impl);
    OpTester t = PoolTester("AveragePool", DType::kFloat32, c, {4, 8, 12, 16});
    t.Attr(ir::Attribute::Int("count_include_pad", 1));
    auto include = RunWith(t, impl);
    ASSERT_EQ(include.size(), 1u);
    EXPECT_EQ(Values<float>(include[0]), (std::vector<float>{1, 2, 3, 4})) << ops::LinalgImplName(impl);
  }
}

const std::vector<PoolCase>& Cases() {
  static const std::vector<PoolCase> cases = {
      {"1d", {2, 3, 11}, {3}},
      {"1d_stride_pads_dilation", {1, 2, 13}, {3}, {2}, {2}, {1, 2}},
      {"2d", {2, 3, 8, 9}, {2, 2}, {2, 2}},
      {"2d_odd", {1, 2, 7, 9}, {3, 2}, {2, 3}, {}, {1, 0, 1, 1}},
      {"2d_ceil", {1, 2, 7, 8}, {3, 3}, {2, 2}, {}, {}, "", true},
      {"2d_ceil_pads", {1, 2, 6, 7}, {2, 3}, {2, 2}, {}, {1, 1, 0, 1}, "", true},
      {"2d_dilated", {1, 2, 10, 9}, {3, 2}, {1, 2}, {2, 3}, {2, 1, 2, 1}},
      {"2d_same_upper", {1, 2, 7, 6}, {3, 2}, {2, 2}, {}, {}, "SAME_UPPER"},
      {"2d_same_lower", {1, 2, 7, 6}, {3, 2}, {2, 1}, {}, {}, "SAME_LOWER"},
      {"2d_valid", {1, 2, 7, 6}, {3, 2}, {2, 2}, {}, {}, "VALID"},
      {"3d", {1, 2, 5, 6, 4}, {2, 3, 2}, {2, 1, 2}, {}, {0, 1, 1, 1, 0, 0}},
      {"4d", {1, 1, 4, 3, 4, 3}, {2, 2, 2, 2}, {2, 1, 2, 1}},
      // Rows wide enough for the vectorized interior max pool: 8 outputs at a time and a tail.
      {"2d_wide_s2", {1, 3, 12, 37}, {3, 2}, {2, 2}},
      {"2d_wide_s1", {2, 2, 9, 29}, {2, 3}, {1, 1}},
      {"2d_wide_s3", {1, 2, 7, 40}, {2, 3}, {2, 3}},
  };
  return cases;
}

class PoolTyped : public ::testing::TestWithParam<DType> {};

TEST_P(PoolTyped, MaxAndAverageAgainstDouble) {
  const DType dtype = GetParam();
  const bool is_float = dtype != DType::kInt8 && dtype != DType::kUint8;
  uint32_t seed = 1;
  for (const PoolCase& c : Cases()) {
    const auto x = RandomValues(dtype, Count(c.x), seed++, dtype == DType::kUint8 ? 0 : -100, 100);
    for (int kind = 0; kind < (is_float ? 3 : 1); ++kind) {
      const Expected want = PoolDouble(c, kind, x);
      for (ops::LinalgImpl impl : AvailableImpls()) {
        for (bool with_indices : {false, true}) {
          if (kind != 0 && with_indices) continue;
          OpTester t = PoolTester(kind == 0 ? "MaxPool" : "AveragePool", dtype, c, x);
          if (kind == 2) t.Attr(ir::Attribute::Int("count_include_pad", 1));
          if (with_indices) t.num_outputs = 2;
          t.options.num_threads = 2;
          auto out = RunWith(t, impl);
          const std::string what = StrCat(c.name, " kind ", kind, " ", ops::LinalgImplName(impl));
          ASSERT_EQ(out.size(), with_indices ? 2u : 1u) << what;
          EXPECT_EQ(out[0].dims(), want.dims) << what;
          std::vector<double> expect = want.values;
          for (double& v : expect) v = RoundTo(dtype, v);
          ExpectNear(out[0], kind == 0 ? expect : want.values, {}, what);
          if (with_indices) {
            EXPECT_EQ(std::vector<int64_t>(out[1].values<int64_t>().begin(), out[1].values<int64_t>().end()),
                      want.indices)
                << what;
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, PoolTyped,
                         ::testing::Values(DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64,
                                           DType::kInt8, DType::kUint8),
                         DTypeParamName);

// NaN and infinities in wide rows: every implementation's MaxPool gives the reference kernel's result (NaN wherever a
// window holds one), with and without Indices.
TEST(MaxPool, NanAndInfinitiesAsTheReference) {
  for (const PoolCase& c : {Cases()[12], Cases()[13], Cases()[14]}) {
    for (DType dtype : {DType::kFloat32, DType::kFloat16}) {
      std::vector<double> x = RandomValues(dtype, Count(c.x), 77, -100, 100);
      for (size_t i = 3; i < x.size(); i += 29) x[i] = std::numeric_limits<double>::quiet_NaN();
      for (size_t i = 11; i < x.size(); i += 41) x[i] = std::numeric_limits<double>::infinity();
      for (size_t i = 5; i < x.size(); i += 23) x[i] = -std::numeric_limits<double>::infinity();
      const std::vector<double> want =
          AsDoubles(RunWith(PoolTester("MaxPool", dtype, c, x), ops::LinalgImpl::kReference)[0]);
      for (ops::LinalgImpl impl : AvailableImpls()) {
        for (bool with_indices : {false, true}) {
          OpTester t = PoolTester("MaxPool", dtype, c, x);
          if (with_indices) t.num_outputs = 2;
          const std::vector<double> got = AsDoubles(RunWith(t, impl)[0]);
          ASSERT_EQ(got.size(), want.size());
          int failures = 0;
          for (size_t i = 0; i < got.size(); ++i) {
            const bool same = std::isnan(want[i]) ? std::isnan(got[i]) : got[i] == want[i];
            if (!same && failures++ < 5)
              ADD_FAILURE() << c.name << " " << DTypeName(dtype) << " " << ops::LinalgImplName(impl)
                            << (with_indices ? " indices" : "") << ": element " << i << " is " << got[i]
                            << ", expected " << want[i];
          }
        }
      }
    }
  }
}

// Enough planes to be split over the threads.
TEST(Pool, SplitsAcrossThreads) {
  PoolCase c{"big", {3, 30, 50, 41}, {3, 3}, {1, 1}, {}, {1, 1, 1, 1}};
  const auto x = RandomValues(DType::kFloat32, Count(c.x), 77);
  for (int kind = 0; kind < 3; ++kind) {
    const Expected want = PoolDouble(c, kind, x);
    for (ops::LinalgImpl impl : {ops::LinalgImpl::kPortable, ops::LinalgImpl::kOneDnn}) {
      for (ops::OneDnnThreading mode : {ops::OneDnnThreading::kShared, ops::OneDnnThreading::kSplit}) {
        ScopedOneDnnThreading threading(mode);
        OpTester t = PoolTester(kind == 0 ? "MaxPool" : "AveragePool", DType::kFloat32, c, x);
        if (kind == 2) t.Attr(ir::Attribute::Int("count_include_pad", 1));
        t.options.num_threads = 4;
        auto out = RunWith(t, impl);
        ASSERT_EQ(out.size(), 1u);
        ExpectNear(out[0], want.values, {},
                   StrCat("kind ", kind, " ", ops::LinalgImplName(impl), " ", ThreadingName(mode)));
      }
    }
  }
}

class GlobalPoolTyped : public ::testing::TestWithParam<DType> {};

TEST_P(GlobalPoolTyped, AgainstDouble) {
  const DType dtype = GetParam();
  const std::vector<Dims> shapes = {{2, 3, 5}, {2, 3, 7, 9}, {1, 4, 3, 5, 6}, {3, 2, 33, 35}};
  uint32_t seed = 9;
  for (const Dims& shape : shapes) {
    const auto x = RandomValues(dtype, Count(shape), seed++);
    const int64_t planes = shape[0] * shape[1], size = Count(shape) / planes;
    std::vector<double> mean, max;
    for (int64_t p = 0; p < planes; ++p) {
      double s = 0, m = -INFINITY;
      for (int64_t i = 0; i < size; ++i) {
        s += x[p * size + i];
        m = std::max(m, x[p * size + i]);
      }
      mean.push_back(s / size);
      max.push_back(m);
    }
    Dims out_dims = shape;
    for (size_t d = 2; d < out_dims.size(); ++d) out_dims[d] = 1;
    for (ops::LinalgImpl impl : AvailableImpls()) {
      for (const char* op : {"GlobalAveragePool", "GlobalMaxPool"}) {
        OpTester t = MakeTester(op, 1);
        t.Input(TensorOf(dtype, shape, x));
        auto out = RunWith(t, impl);
        ASSERT_EQ(out.size(), 1u);
        EXPECT_EQ(out[0].dims(), out_dims);
        ExpectNear(out[0], std::string(op) == "GlobalMaxPool" ? max : mean, {},
                   StrCat(op, " ", ops::LinalgImplName(impl)));
      }
    }
  }
}

// NaN and infinities in planes longer than the blocks the fp16/bf16 planes are converted in (256): GlobalMaxPool gives
// NaN for a plane with a NaN anywhere (first, in a later block, in the tail), GlobalAveragePool NaN or the infinity.
TEST_P(GlobalPoolTyped, NanAndInfinitiesAcrossBlocks) {
  const DType dtype = GetParam();
  const Dims shape = {1, 5, 27, 23};  // 621 values a plane: two blocks of 256 and a tail of 109
  const int64_t size = 27 * 23;
  std::vector<double> x = RandomValues(dtype, Count(shape), 31);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  x[0 * size + 0] = nan;          // plane 0: the first value
  x[1 * size + 300] = nan;        // plane 1: in the second block
  x[2 * size + size - 1] = nan;   // plane 2: the tail's last value
  x[3 * size + 511] = INFINITY;   // plane 3: +inf at a block's end
  x[4 * size + 256] = -INFINITY;  // plane 4: -inf at a block's start
  for (ops::LinalgImpl impl : AvailableImpls()) {
    OpTester mx = MakeTester("GlobalMaxPool", 1);
    mx.Input(TensorOf(dtype, shape, x));
    auto out = RunWith(mx, impl);
    ASSERT_EQ(out.size(), 1u);
    std::vector<double> got = AsDoubles(out[0]);
    for (int p = 0; p < 3; ++p) EXPECT_TRUE(std::isnan(got[p])) << "GlobalMaxPool plane " << p;
    EXPECT_EQ(got[3], INFINITY);
    EXPECT_TRUE(std::isfinite(got[4]));
    OpTester avg = MakeTester("GlobalAveragePool", 1);
    avg.Input(TensorOf(dtype, shape, x));
    out = RunWith(avg, impl);
    ASSERT_EQ(out.size(), 1u);
    got = AsDoubles(out[0]);
    for (int p = 0; p < 3; ++p) EXPECT_TRUE(std::isnan(got[p])) << "GlobalAveragePool plane " << p;
    EXPECT_EQ(got[3], INFINITY);
    EXPECT_EQ(got[4], -INFINITY);
  }
}

INSTANTIATE_TEST_SUITE_P(Types, GlobalPoolTyped,
                         ::testing::Values(DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64),
                         DTypeParamName);

TEST(Pool, Errors) {
  {
    OpTester t = MakeTester("MaxPool", 12);
    t.Input(TensorOf(DType::kFloat32, {1, 1, 4, 4}, {}));
    auto r = t.Run();
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("attribute 'kernel_shape' is required"), std::string::npos)
        << r.status().message();
  }
  {
    PoolCase c{"rank", {1, 1, 4, 4}, {2}};
    auto r = PoolTester("AveragePool", DType::kFloat32, c, {}).Run();
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("attribute 'kernel_shape' [2] has 1 dims but input X [1,1,4,4] has 2"),
              std::string::npos)
        << r.status().message();
  }
  {
    PoolCase c{"order", {1, 1, 4, 4}, {2, 2}};
    OpTester t = PoolTester("MaxPool", DType::kFloat32, c, {});
    t.Attr(ir::Attribute::Int("storage_order", 2));
    auto r = t.Run();
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("attribute 'storage_order' must be 0 or 1, got 2"), std::string::npos)
        << r.status().message();
  }
  {
    PoolCase c{"big", {1, 1, 2, 2}, {3, 3}};
    auto r = PoolTester("MaxPool", DType::kFloat32, c, {}).Run();
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("is larger than the input (2) plus padding (0 + 0)"), std::string::npos)
        << r.status().message();
  }
  {
    OpTester t = MakeTester("AveragePool", 19);
    t.Attr(ir::Attribute::Ints("kernel_shape", {2, 2}));
    t.Input(TensorOf(DType::kInt8, {1, 1, 2, 2}, {}));
    auto r = t.Run();
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("does not support input 0 of type int8"), std::string::npos)
        << r.status().message();
  }
}

}  // namespace
}  // namespace onnxamp::testing
