// Normalisation kernel tests: BatchNormalization (inference, training at opsets 9 and 14, spatial = 0 at opset 7,
// mixed parameter types), LayerNormalization (axes, optional outputs, broadcast scale), GroupNormalization (per-group
// scale at 18, per-channel at 21) and InstanceNormalization, against double references per float type; several
// threads; errors.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tests/runtime/ops/reduce_test_util.h"

namespace onnxamp::testing {
namespace {

using ir::Attribute;

// Mean and population variance of x[begin + j * stride] for j in the given runs (each `run` long, `count` runs
// spaced `gap` apart).
void Moments(const std::vector<double>& x, int64_t begin, int64_t runs, int64_t gap, int64_t run, double* mean,
             double* var) {
  double s = 0, q = 0;
  for (int64_t r = 0; r < runs; ++r) {
    for (int64_t j = 0; j < run; ++j) s += x[begin + r * gap + j];
  }
  const double n = static_cast<double>(runs * run);
  *mean = s / n;
  for (int64_t r = 0; r < runs; ++r) {
    for (int64_t j = 0; j < run; ++j) q += (x[begin + r * gap + j] - *mean) * (x[begin + r * gap + j] - *mean);
  }
  *var = q / n;
}

// --- BatchNormalization -----------------------------------------------------------------------------------------

struct BnParams {
  std::vector<double> scale, bias, mean, var;
};

BnParams RandomBn(DType dtype, int64_t c) {
  BnParams p{Rounded(dtype, RandomValues(c, 1, 0.5, 1.5)), Rounded(dtype, RandomValues(c, 2)),
             Rounded(dtype, RandomValues(c, 3)), Rounded(dtype, RandomValues(c, 4, 0.5, 2))};
  return p;
}

std::vector<double> ReferenceBn(const std::vector<double>& x, int64_t n, int64_t c, int64_t s, const BnParams& p,
                                const std::vector<double>& mean, const std::vector<double>& var, double eps) {
  std::vector<double> y(x.size());
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t ch = 0; ch < c; ++ch) {
      for (int64_t j = 0; j < s; ++j) {
        const int64_t e = (i * c + ch) * s + j;
        y[e] = p.scale[ch] * (x[e] - mean[ch]) / std::sqrt(var[ch] + eps) + p.bias[ch];
      }
    }
  }
  return y;
}

class BatchNormTest : public ::testing::TestWithParam<DType> {};

TEST_P(BatchNormTest, InferenceMatchesReference) {
  const DType dtype = GetParam();
  const int64_t n = 2, c = 3, s = 20;
  const std::vector<double> x = Rounded(dtype, RandomValues(n * c * s, 7));
  const BnParams p = RandomBn(dtype, c);
  for (int64_t opset : {7, 9, 14, 15}) {
    OpTester t = Op("BatchNormalization", opset);
    t.Input(TensorOf(dtype, {n, c, 4, 5}, x))
        .Input(TensorOf(dtype, {c}, p.scale))
        .Input(TensorOf(dtype, {c}, p.bias))
        .Input(TensorOf(dtype, {c}, p.mean))
        .Input(TensorOf(dtype, {c}, p.var))
        .Attr(Attribute::Float("epsilon", 1e-3f));
    std::vector<ir::Tensor> out = RunOk(t);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].dims(), (std::vector<int64_t>{n, c, 4, 5}));
    ExpectClose(out[0], ReferenceBn(x, n, c, s, p, p.mean, p.var, static_cast<double>(1e-3f)),
                "opset " + std::to_string(opset));
  }
}

TEST_P(BatchNormTest, TrainingModeUpdatesRunningStatistics) {
  const DType dtype = GetParam();
  const int64_t n = 3, c = 2, s = 6;
  const std::vector<double> x = Rounded(dtype, RandomValues(n * c * s, 8));
  const BnParams p = RandomBn(dtype, c);
  const double mom = static_cast<double>(0.8f), eps = static_cast<double>(1e-5f);
  std::vector<double> bm(c), bv(c), rm(c), rv(c);
  for (int64_t ch = 0; ch < c; ++ch) {
    Moments(x, ch * s, n, c * s, s, &bm[ch], &bv[ch]);
    rm[ch] = p.mean[ch] * mom + bm[ch] * (1 - mom);
    rv[ch] = p.var[ch] * mom + bv[ch] * (1 - mom);
  }
  const std::vector<double> y = ReferenceBn(x, n, c, s, p, bm, bv, eps);
  // Opset 14+: training_mode = 1, outputs Y, running_mean, running_var.
  OpTester t = Op("BatchNormalization", 15);
  t.num_outputs = 3;
  t.Input(TensorOf(dtype, {n, c, s}, x))
      .Input(TensorOf(dtype, {c}, p.scale))
      .Input(TensorOf(dtype, {c}, p.bias))
      .Input(TensorOf(dtype, {c}, p.mean))
      .Input(TensorOf(dtype, {c}, p.var))
      .Attr(Attribute::Float("momentum", 0.8f))
      .Attr(Attribute::Int("training_mode", 1));
  std::vector<ir::Tensor> out = RunOk(t);
  ASSERT_EQ(out.size(), 3u);
  ExpectClose(out[0], y, "Y");
  ExpectClose(out[1], rm, "running_mean");
  ExpectClose(out[2], rv, "running_var");
  // Before opset 14, requesting outputs beyond Y selects training: mean, var, saved_mean, saved_var.
  OpTester old = t;
  old.opset = 9;
  old.attributes.pop_back();
  old.num_outputs = 5;
  out = RunOk(old);
  ASSERT_EQ(out.size(), 5u);
  ExpectClose(out[0], y, "Y (opset 9)");
  ExpectClose(out[1], rm, "mean (opset 9)");
  ExpectClose(out[2], rv, "var (opset 9)");
  ExpectClose(out[3], bm, "saved_mean (opset 9)");
  ExpectClose(out[4], bv, "saved_var (opset 9)");
}

INSTANTIATE_TEST_SUITE_P(Types, BatchNormTest, ::testing::ValuesIn(FloatTypes()), DTypeParamName());

TEST(BatchNormHandTest, HandComputedAndMixedTypes) {
  // Channel 0: mean 1.5, std 0.5; channel 1: mean 3.5, std 0.5, scale 2, bias 1.
  const std::vector<double> scale = {1, 2}, bias = {0, 1}, mean = {1.5, 3.5}, var = {0.25, 0.25};
  for (DType x_type : {DType::kFloat32, DType::kFloat16}) {
    OpTester t = Op("BatchNormalization", 15);  // opset 15: parameters may have another float type than X
    t.Input(TensorOf(x_type, {1, 2, 2}, {1, 2, 3, 4}))
        .Input(TensorOf(DType::kFloat32, {2}, scale))
        .Input(TensorOf(DType::kFloat32, {2}, bias))
        .Input(TensorOf(DType::kFloat64, {2}, mean))
        .Input(TensorOf(DType::kFloat64, {2}, var))
        .Attr(Attribute::Float("epsilon", 0));
    std::vector<ir::Tensor> out = RunOk(t);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].dtype(), x_type);
    ExpectClose(out[0], {-1, 1, -1, 3});
  }
}

TEST(BatchNormHandTest, SpatialZeroHasParametersPerPosition) {
  // X [2, 2, 2]: each (channel, position) has its own parameters at opset 7 with spatial = 0.
  const std::vector<double> x = {1, 2, 3, 4, 5, 6, 7, 8};
  OpTester t = Op("BatchNormalization", 7);
  t.Input(TensorOf(DType::kFloat32, {2, 2, 2}, x))
      .Input(TensorOf(DType::kFloat32, {2, 2}, {1, 2, 3, 4}))
      .Input(TensorOf(DType::kFloat32, {2, 2}, {0, 0, 0, 1}))
      .Input(TensorOf(DType::kFloat32, {2, 2}, {1, 2, 3, 4}))
      .Input(TensorOf(DType::kFloat32, {2, 2}, {1, 1, 1, 1}))
      .Attr(Attribute::Int("spatial", 0))
      .Attr(Attribute::Float("epsilon", 0));
  // y = scale * (x - mean) + bias per position.
  ExpectClose(RunOk(t)[0], {0, 0, 0, 1, 4, 8, 12, 17});
}

TEST(BatchNormHandTest, LargeOnSeveralThreads) {
  const int64_t n = 4, c = 16, s = 1024;
  const std::vector<double> x = RandomValues(n * c * s, 12);
  const BnParams p = RandomBn(DType::kFloat64, c);
  OpTester t = Op("BatchNormalization", 14);
  t.options.num_threads = 4;
  t.num_outputs = 3;
  t.Input(TensorOf(DType::kFloat32, {n, c, s}, x))
      .Input(TensorOf(DType::kFloat32, {c}, p.scale))
      .Input(TensorOf(DType::kFloat32, {c}, p.bias))
      .Input(TensorOf(DType::kFloat32, {c}, p.mean))
      .Input(TensorOf(DType::kFloat32, {c}, p.var))
      .Attr(Attribute::Int("training_mode", 1));
  const std::vector<double> xr = Rounded(DType::kFloat32, x);
  const BnParams pr{Rounded(DType::kFloat32, p.scale), Rounded(DType::kFloat32, p.bias),
                    Rounded(DType::kFloat32, p.mean), Rounded(DType::kFloat32, p.var)};
  std::vector<double> bm(c), bv(c);
  for (int64_t ch = 0; ch < c; ++ch) Moments(xr, ch * s, n, c * s, s, &bm[ch], &bv[ch]);
  ExpectClose(RunOk(t)[0], ReferenceBn(xr, n, c, s, pr, bm, bv, static_cast<double>(1e-5f)), "Y", {1e-4, 1e-5});
}

TEST(BatchNormHandTest, Errors) {
  auto base = [](int64_t opset, int64_t c_param) {
    OpTester t = Op("BatchNormalization", opset);
    t.Input(TensorOf(DType::kFloat32, {2, 3, 2}, {}));
    for (int i = 0; i < 4; ++i) t.Input(TensorOf(DType::kFloat32, {c_param}, {1, 1, 1, 1}));
    return t;
  };
  OpTester size = base(15, 4);
  ExpectRunError(size, "input 1 (scale): expected 3 elements, got shape [4]");
  OpTester extra = base(15, 3);
  extra.num_outputs = 3;
  ExpectCreateError(extra, "outputs running_mean and running_var exist only with attribute 'training_mode' = 1");
  OpTester mode = base(14, 3);
  mode.Attr(Attribute::Int("training_mode", 2));
  ExpectCreateError(mode, "attribute 'training_mode' must be 0 or 1, got 2");
  OpTester rank = Op("BatchNormalization", 15);
  rank.Input(TensorOf(DType::kFloat32, {3}, {}));
  for (int i = 0; i < 4; ++i) rank.Input(TensorOf(DType::kFloat32, {3}, {}));
  ExpectRunError(rank, "input 0 (X): expected rank >= 2 ([N, C, ...]), got shape [3]");
}

// --- LayerNormalization -----------------------------------------------------------------------------------------

// Rows = prod(dims[:axis]); scale/bias given per normalised element (already broadcast).
void ReferenceLayerNorm(const std::vector<double>& x, int64_t rows, int64_t cols, const std::vector<double>& scale,
                        const std::vector<double>& bias, double eps, std::vector<double>* y, std::vector<double>* mean,
                        std::vector<double>* inv) {
  y->assign(x.size(), 0);
  mean->assign(rows, 0);
  inv->assign(rows, 0);
  for (int64_t r = 0; r < rows; ++r) {
    double m, v;
    Moments(x, r * cols, 1, 0, cols, &m, &v);
    (*mean)[r] = m;
    (*inv)[r] = 1 / std::sqrt(v + eps);
    for (int64_t j = 0; j < cols; ++j) (*y)[r * cols + j] = (x[r * cols + j] - m) * (*inv)[r] * scale[j] + bias[j];
  }
}

class LayerNormTest : public ::testing::TestWithParam<DType> {};

TEST_P(LayerNormTest, EveryAxisWithStatistics) {
  const DType dtype = GetParam();
  const std::vector<int64_t> dims = {2, 3, 5};
  const std::vector<double> x = Rounded(dtype, RandomValues(30, 14, -3, 3));
  for (int64_t axis : {0, 1, 2, -1, -2}) {
    const int64_t a = (axis + 3) % 3;
    int64_t rows = 1, cols = 1;
    std::vector<int64_t> param_dims, stat_dims = dims;
    for (int64_t d = 0; d < 3; ++d) {
      if (d < a) rows *= dims[d];
      if (d >= a) {
        cols *= dims[d];
        param_dims.push_back(dims[d]);
        stat_dims[d] = 1;
      }
    }
    const std::vector<double> scale = Rounded(dtype, RandomValues(cols, 15, 0.5, 1.5));
    const std::vector<double> bias = Rounded(dtype, RandomValues(cols, 16));
    OpTester t = Op("LayerNormalization", 17);
    t.num_outputs = 3;
    t.Input(TensorOf(dtype, dims, x))
        .Input(TensorOf(dtype, param_dims, scale))
        .Input(TensorOf(dtype, param_dims, bias))
        .Attr(Attribute::Int("axis", axis))
        .Attr(Attribute::Float("epsilon", 1e-2f));
    std::vector<double> y, mean, inv;
    ReferenceLayerNorm(x, rows, cols, scale, bias, static_cast<double>(1e-2f), &y, &mean, &inv);
    std::vector<ir::Tensor> out = RunOk(t);
    ASSERT_EQ(out.size(), 3u);
    const std::string what = "axis " + std::to_string(axis);
    ExpectClose(out[0], y, what);
    EXPECT_EQ(out[1].dims(), stat_dims) << what;
    EXPECT_EQ(out[1].dtype(), DType::kFloat32) << what;  // stash_type 1
    ExpectClose(out[1], mean, what + " Mean");
    ExpectClose(out[2], inv, what + " InvStdDev");
  }
}

TEST_P(LayerNormTest, BroadcastScaleNoBiasSeveralThreads) {
  const DType dtype = GetParam();
  const int64_t rows = 600, cols = 96;
  const std::vector<double> x = Rounded(dtype, RandomValues(rows * cols, 17));
  const std::vector<double> s = Rounded(dtype, RandomValues(cols / 2, 18, 0.5, 1.5));
  // Scale [1, 48] broadcasts along the 2 of X [600, 2, 48] (axis 1).
  std::vector<double> scale;
  for (int k = 0; k < 2; ++k) scale.insert(scale.end(), s.begin(), s.end());
  OpTester t = Op("LayerNormalization", 17);
  t.options.num_threads = 4;
  t.Input(TensorOf(dtype, {rows, 2, cols / 2}, x))
      .Input(TensorOf(dtype, {1, cols / 2}, s))
      .Attr(Attribute::Int("axis", 1));
  std::vector<double> y, mean, inv;
  ReferenceLayerNorm(x, rows, cols, scale, std::vector<double>(cols, 0.0), static_cast<double>(1e-5f), &y, &mean, &inv);
  ExpectClose(RunOk(t)[0], y);
}

INSTANTIATE_TEST_SUITE_P(Types, LayerNormTest, ::testing::ValuesIn(FloatTypes()), DTypeParamName());

TEST(LayerNormHandTest, Errors) {
  OpTester t = Op("LayerNormalization", 17);
  t.Input(TensorOf(DType::kFloat32, {2, 3}, {})).Input(TensorOf(DType::kFloat32, {4}, {}));
  ExpectRunError(t, "input 1 (Scale): shape [4] does not broadcast to the normalised shape [3]");
  OpTester stash = Op("LayerNormalization", 17);
  stash.Input(TensorOf(DType::kFloat32, {2, 3}, {})).Input(TensorOf(DType::kFloat32, {3}, {}));
  stash.Attr(Attribute::Int("stash_type", 7));
  ExpectCreateError(stash, "attribute 'stash_type' must be a float type code (1, 10, 11, 16), got 7");
  OpTester axis = Op("LayerNormalization", 17);
  axis.Input(TensorOf(DType::kFloat32, {2, 3}, {})).Input(TensorOf(DType::kFloat32, {3}, {}));
  axis.Attr(Attribute::Int("axis", 2));
  ExpectCreateError(axis, "attribute 'axis': axis 2 is out of range for rank 2");
}

// --- GroupNormalization and InstanceNormalization ---------------------------------------------------------------

// x [n, c, s] in `groups` groups; scale/bias per channel.
std::vector<double> ReferenceGroupNorm(const std::vector<double>& x, int64_t n, int64_t c, int64_t s, int64_t groups,
                                       const std::vector<double>& scale, const std::vector<double>& bias, double eps) {
  std::vector<double> y(x.size());
  const int64_t cpg = c / groups;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t begin = (i * c + g * cpg) * s;
      double m, v;
      Moments(x, begin, 1, 0, cpg * s, &m, &v);
      for (int64_t ch = g * cpg; ch < (g + 1) * cpg; ++ch) {
        for (int64_t j = 0; j < s; ++j) {
          const int64_t e = (i * c + ch) * s + j;
          y[e] = (x[e] - m) / std::sqrt(v + eps) * scale[ch] + bias[ch];
        }
      }
    }
  }
  return y;
}

class GroupNormTest : public ::testing::TestWithParam<DType> {};

TEST_P(GroupNormTest, PerGroupAtOpset18PerChannelAtOpset21) {
  const DType dtype = GetParam();
  const int64_t n = 2, c = 6, s = 10, groups = 3;
  const std::vector<double> x = Rounded(dtype, RandomValues(n * c * s, 19));
  for (int64_t opset : {18, 21}) {
    const int64_t count = opset >= 21 ? c : groups;
    const std::vector<double> scale = Rounded(dtype, RandomValues(count, 20, 0.5, 1.5));
    const std::vector<double> bias = Rounded(dtype, RandomValues(count, 21));
    std::vector<double> sc(c), bc(c);
    for (int64_t ch = 0; ch < c; ++ch) {
      sc[ch] = scale[opset >= 21 ? ch : ch / (c / groups)];
      bc[ch] = bias[opset >= 21 ? ch : ch / (c / groups)];
    }
    OpTester t = Op("GroupNormalization", opset);
    t.Input(TensorOf(dtype, {n, c, 2, 5}, x))
        .Input(TensorOf(dtype, {count}, scale))
        .Input(TensorOf(dtype, {count}, bias))
        .Attr(Attribute::Int("num_groups", groups));
    ExpectClose(RunOk(t)[0], ReferenceGroupNorm(x, n, c, s, groups, sc, bc, static_cast<double>(1e-5f)),
                "opset " + std::to_string(opset));
  }
}

TEST_P(GroupNormTest, InstanceNormMatchesReference) {
  const DType dtype = GetParam();
  const int64_t n = 3, c = 4, s = 12;
  const std::vector<double> x = Rounded(dtype, RandomValues(n * c * s, 22));
  const std::vector<double> scale = Rounded(dtype, RandomValues(c, 23, 0.5, 1.5));
  const std::vector<double> bias = Rounded(dtype, RandomValues(c, 24));
  OpTester t = Op("InstanceNormalization", 6);
  t.Input(TensorOf(dtype, {n, c, 3, 4}, x))
      .Input(TensorOf(dtype, {c}, scale))
      .Input(TensorOf(dtype, {c}, bias))
      .Attr(Attribute::Float("epsilon", 1e-2f));
  ExpectClose(RunOk(t)[0], ReferenceGroupNorm(x, n, c, s, c, scale, bias, static_cast<double>(1e-2f)));
}

INSTANTIATE_TEST_SUITE_P(Types, GroupNormTest, ::testing::ValuesIn(FloatTypes()), DTypeParamName());

TEST(GroupNormHandTest, LargeOnSeveralThreads) {
  const int64_t n = 4, c = 32, s = 300, groups = 8;
  const std::vector<double> x = Rounded(DType::kFloat32, RandomValues(n * c * s, 27));
  const std::vector<double> scale = Rounded(DType::kFloat32, RandomValues(c, 28, 0.5, 1.5));
  const std::vector<double> bias = Rounded(DType::kFloat32, RandomValues(c, 29));
  OpTester t = Op("GroupNormalization", 21);
  t.options.num_threads = 4;
  t.Input(TensorOf(DType::kFloat32, {n, c, s}, x))
      .Input(TensorOf(DType::kFloat32, {c}, scale))
      .Input(TensorOf(DType::kFloat32, {c}, bias))
      .Attr(Attribute::Int("num_groups", groups));
  ExpectClose(RunOk(t)[0], ReferenceGroupNorm(x, n, c, s, groups, scale, bias, static_cast<double>(1e-5f)), "",
              {1e-4, 1e-5});
}

TEST(GroupNormHandTest, InstanceNormHandComputedAndErrors) {
  OpTester in = Op("InstanceNormalization", 6);
  in.Input(TensorOf(DType::kFloat32, {1, 2, 2}, {1, 3, 10, 10}))
      .Input(TensorOf(DType::kFloat32, {2}, {2, 1}))
      .Input(TensorOf(DType::kFloat32, {2}, {0, 5}))
      .Attr(Attribute::Float("epsilon", 0));
  ExpectClose(RunOk(in)[0], {-2, 2, NAN, NAN});  // channel 1 has zero variance and epsilon 0
  OpTester groups = Op("GroupNormalization", 21);
  groups.Input(TensorOf(DType::kFloat32, {1, 6, 2}, {}))
      .Input(TensorOf(DType::kFloat32, {6}, {}))
      .Input(TensorOf(DType::kFloat32, {6}, {}))
      .Attr(Attribute::Int("num_groups", 4));
  ExpectRunError(groups, "input 0 (X): channel count 6 is not a multiple of attribute 'num_groups' 4");
  OpTester per_group = Op("GroupNormalization", 18);
  per_group.Input(TensorOf(DType::kFloat32, {1, 6, 2}, {}))
      .Input(TensorOf(DType::kFloat32, {6}, {}))
      .Input(TensorOf(DType::kFloat32, {6}, {}))
      .Attr(Attribute::Int("num_groups", 2));
  ExpectRunError(per_group, "input 1 (scale): expected 2 elements, got shape [6]");
  OpTester missing = Op("GroupNormalization", 18);
  missing.Input(TensorOf(DType::kFloat32, {1, 6, 2}, {}));
  ExpectCreateError(missing, "attribute 'num_groups' must be given and positive, got 0");
}

}  // namespace
}  // namespace onnxamp::testing
