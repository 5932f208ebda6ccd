// CUDA kernels of LRN, LpNormalization, MeanVarianceNormalization and Hardmax and of the com.onnxamp gradients
// LRNGrad, LpNormalizationGrad and MeanVarianceNormalizationGrad against their CPU reference kernels: every float
// type, odd sizes, size-1 dims, empty tensors, every attribute variant (LRN's odd and even sizes, windows wider than
// the channels, alpha / beta / bias; LpNormalization's p and axes, negative ones included, and zero vectors;
// MeanVarianceNormalization's axes lists and constant slices; Hardmax's axis before and from opset 13, ties and NaN),
// rows long enough for the warp and block groups, and the errors the CPU kernels give. Skipped without a CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "runtime/ops/common/reduce_norm.h"
#include "runtime/ops/gradient_ops.h"
#include "tests/cuda/cuda_op_test_util.h"
#include "tests/cuda/elementwise_test_util.h"
#include "tests/runtime/ops/reduce_test_util.h"

namespace onnxamp::testing {
namespace {

using cuda_ew::ExpectSameCreateError;
using cuda_ew::ExpectSameRunError;
using ir::Attribute;
using ops::reduce::DimsToString;

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

ir::Tensor Random(DType dtype, const std::vector<int64_t>& dims, uint32_t seed, double lo = -2, double hi = 2) {
  return TensorOf(dtype, dims, RandomValues(Count(dims), seed, lo, hi));
}

std::string Name(DType dtype) { return std::string(DTypeName(dtype)); }

// A forward node (`op` at `opset`) or its com.onnxamp gradient (`grad_op`, inputs dY then X) on x.
OpTester ForwardOrGrad(bool grad, const std::string& op, int64_t opset, const char* grad_op, DType dtype,
                       const std::vector<int64_t>& dims, const ir::Tensor& x, uint32_t seed) {
  if (!grad) return Op(op, opset).Input(x);
  return InternalOp(grad_op).Input(Random(dtype, dims, seed + 101)).Input(x);
}

class CudaNormMoreTest : public ::testing::TestWithParam<DType> {};

// ---- LRN, LRNGrad ------------------------------------------------------------------------------------------------

struct LrnAttrs {
  int64_t size;
  float alpha, beta, bias;  // alpha < 0: the defaults, none written
};

void CheckLrn(DType dtype, bool grad) {
  const std::vector<std::vector<int64_t>> shapes = {{2, 5, 3, 3},     {1, 7},       {3, 4, 5}, {2, 1, 4, 4},
                                                    {1, 17, 2, 3, 2}, {0, 3, 2, 2}, {2, 3, 0}};
  const std::vector<LrnAttrs> attrs = {{1, -1, 0, 0},         {2, -1, 0, 0},       {3, -1, 0, 0},
                                       {4, 0.5f, 0.6f, 2.0f}, {5, 1e-3f, 1.0f, 1}, {8, 2.0f, 0.75f, 0.5f},
                                       {25, 0.1f, 1.5f, 1}};
  uint32_t seed = 1;
  for (const auto& dims : shapes) {
    for (const LrnAttrs& a : attrs) {
      ++seed;
      OpTester t = ForwardOrGrad(grad, "LRN", 13, ops::kLrnGradOp, dtype, dims, Random(dtype, dims, seed), seed);
      t.Attr(Attribute::Int("size", a.size));
      if (a.alpha >= 0) {
        t.Attr(Attribute::Float("alpha", a.alpha)).Attr(Attribute::Float("beta", a.beta));
        t.Attr(Attribute::Float("bias", a.bias));
      }
      ExpectCudaMatchesCpu(t, std::string(grad ? "LRNGrad " : "LRN ") + DimsToString(dims) + " size " +
                                  std::to_string(a.size) + " alpha " + std::to_string(a.alpha) + " " + Name(dtype));
    }
  }
}

TEST_P(CudaNormMoreTest, LrnMatchesCpu) {
  ONNXAMP_REQUIRE_CUDA();
  CheckLrn(GetParam(), false);
}

TEST_P(CudaNormMoreTest, LrnGradMatchesCpu) {
  ONNXAMP_REQUIRE_CUDA();
  CheckLrn(GetParam(), true);
}

TEST_P(CudaNormMoreTest, LrnOlderOpsetMatchesCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dtype = GetParam();
  OpTester t = Op("LRN", 1).Input(Random(dtype, {2, 6, 5}, 7));
  t.Attr(Attribute::Int("size", 3));
  ExpectCudaMatchesCpu(t, "LRN-1 " + Name(dtype));
}

// ---- LpNormalization, LpNormalizationGrad ------------------------------------------------------------------------

// x with every `every`-th vector along `axis` (normalised to [0, rank)) set to zeros.
ir::Tensor WithZeroVectors(DType dtype, const std::vector<int64_t>& dims, int64_t axis, uint32_t seed, int every) {
  std::vector<double> v = RandomValues(Count(dims), seed, -2, 2);
  int64_t inner = 1;
  for (size_t d = static_cast<size_t>(axis) + 1; d < dims.size(); ++d) inner *= dims[d];
  const int64_t n = dims[static_cast<size_t>(axis)];
  for (size_t i = 0; i < v.size(); ++i) {
    const int64_t p = static_cast<int64_t>(i);
    const int64_t vector = p / (n * inner) * inner + p % inner;  // (outer, inner) index of element i's vector
    if (vector % every == 0) v[i] = 0;
  }
  return TensorOf(dtype, dims, v);
}

void CheckLpNorm(DType dtype, bool grad) {
  struct Case {
    std::vector<int64_t> dims;
    std::vector<int64_t> axes;  // axis values to try; 99: the default (no attribute, -1)
  };
  const std::vector<Case> cases = {
      {{3, 5, 7}, {99, 0, 1, 2, -1, -2, -3}},
      {{2, 33, 3}, {1, -1}},
      {{4, 130}, {99, 0}},     // rows of 130: a warp per row
      {{2, 3000}, {-1}},       // long rows: the whole block
      {{3, 4096}, {0}},        // many groups along a kept inner dim: one thread each
      {{1, 1, 5}, {0, 1, 2}},  // size-1 axes
      {{7}, {0}},
      {{0, 4}, {1, 0}},
      {{3, 0}, {-1, 0}},
  };
  uint32_t seed = 100;
  for (const Case& c : cases) {
    for (int64_t axis : c.axes) {
      for (int64_t p : {0, 1, 2}) {  // 0: the default p, none written
        ++seed;
        const int64_t rank = static_cast<int64_t>(c.dims.size());
        const int64_t norm_axis = axis == 99 ? rank - 1 : (axis < 0 ? axis + rank : axis);
        const ir::Tensor x = WithZeroVectors(dtype, c.dims, norm_axis, seed, 3);
        OpTester t = ForwardOrGrad(grad, "LpNormalization", 17, ops::kLpNormalizationGradOp, dtype, c.dims, x, seed);
        if (axis != 99) t.Attr(Attribute::Int("axis", axis));
        if (p != 0) t.Attr(Attribute::Int("p", p));
        ExpectCudaMatchesCpu(t, std::string(grad ? "LpNormalizationGrad " : "LpNormalization ") + DimsToString(c.dims) +
                                    " axis " + std::to_string(axis) + " p " + std::to_string(p) + " " + Name(dtype));
      }
    }
  }
}

TEST_P(CudaNormMoreTest, LpNormalizationMatchesCpu) {
  ONNXAMP_REQUIRE_CUDA();
  CheckLpNorm(GetParam(), false);
}

TEST_P(CudaNormMoreTest, LpNormalizationGradMatchesCpu) {
  ONNXAMP_REQUIRE_CUDA();
  CheckLpNorm(GetParam(), true);
}

// ---- MeanVarianceNormalization, MeanVarianceNormalizationGrad ----------------------------------------------------

void CheckMvn(DType dtype, bool grad) {
  struct Case {
    std::vector<int64_t> dims;
    std::vector<std::vector<int64_t>> axes;  // {99}: the default (no attribute)
  };
  const std::vector<Case> cases = {
      {{2, 3, 4, 5}, {{99}, {0, 2, 3}, {1}, {-1}, {0, 1, 2, 3}, {}, {2, 3}, {0, -1}, {-3, -2}}},
      {{3, 5, 1, 7}, {{99}, {1, 3}, {2}}},
      {{1, 3, 40, 50}, {{99}, {1}}},  // 2000 values per group: a warp; axis 1 alone: groups along the kept inner dims
      {{2, 2, 64, 48}, {{2, 3}}},     // 3072 values per group: the whole block
      {{5, 7, 3}, {{0}, {1, 2}, {-1}, {}}},
      {{9}, {{0}, {}}},
      {{}, {{}}},  // a scalar over every (no) axis: one group of one value
      {{0, 3, 2, 2}, {{99}, {1}}},
      {{2, 3, 0, 2}, {{99}}},
  };
  uint32_t seed = 300;
  for (const Case& c : cases) {
    for (const auto& axes : c.axes) {
      ++seed;
      OpTester t = ForwardOrGrad(grad, "MeanVarianceNormalization", 13, ops::kMeanVarianceNormalizationGradOp, dtype,
                                 c.dims, Random(dtype, c.dims, seed), seed);
      const bool by_default = axes.size() == 1 && axes[0] == 99;
      if (!by_default) t.Attr(Attribute::Ints("axes", axes));
      ExpectCudaMatchesCpu(t, std::string(grad ? "MeanVarianceNormalizationGrad " : "MeanVarianceNormalization ") +
                                  DimsToString(c.dims) + " axes " + (by_default ? "default" : DimsToString(axes)) +
                                  " " + Name(dtype));
    }
  }
}

TEST_P(CudaNormMoreTest, MeanVarianceNormalizationMatchesCpu) {
  ONNXAMP_REQUIRE_CUDA();
  CheckMvn(GetParam(), false);
}

TEST_P(CudaNormMoreTest, MeanVarianceNormalizationGradMatchesCpu) {
  ONNXAMP_REQUIRE_CUDA();
  CheckMvn(GetParam(), true);
}

// Constant slices: the standard deviation is 0, the output (X - mean) / 1e-9 is 0 and the gradient's second term 0.
TEST_P(CudaNormMoreTest, MeanVarianceNormalizationConstantSlicesMatchCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dtype = GetParam();
  const std::vector<int64_t> dims = {2, 3, 2, 5};
  std::vector<double> v = RandomValues(Count(dims), 5, -2, 2);
  for (size_t i = 0; i < 10; ++i) v[i] = 1.5;  // channel 0 of sample 0: constant over axes {2, 3}
  const ir::Tensor x = TensorOf(dtype, dims, v);
  for (bool grad : {false, true}) {
    OpTester t =
        ForwardOrGrad(grad, "MeanVarianceNormalization", 13, ops::kMeanVarianceNormalizationGradOp, dtype, dims, x, 9);
    t.Attr(Attribute::Ints("axes", {2, 3}));
    ExpectCudaMatchesCpu(t, std::string(grad ? "MeanVarianceNormalizationGrad" : "MeanVarianceNormalization") +
                                " constant slice " + Name(dtype));
  }
}

// ---- Hardmax -----------------------------------------------------------------------------------------------------

// Whole numbers in [-3, 3] (rows full of ties), with NaN at about one in `nan_every` positions (none for 0).
ir::Tensor TiesAndNans(DType dtype, const std::vector<int64_t>& dims, uint32_t seed, int nan_every) {
  std::vector<double> v = RandomValues(Count(dims), seed, -3, 3);
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = std::round(v[i]);
    if (nan_every > 0 && i % static_cast<size_t>(nan_every) == 3) v[i] = kNan;
  }
  return TensorOf(dtype, dims, v);
}

TEST_P(CudaNormMoreTest, HardmaxMatchesCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dtype = GetParam();
  struct Case {
    std::vector<int64_t> dims;
    std::vector<int64_t> axes;  // 99: the default (1 before opset 13, -1 from 13)
  };
  const std::vector<Case> cases = {
      {{3, 4, 5}, {99, 0, 1, 2, -1, -2, -3}},
      {{2, 70}, {99, 1, -1}},  // a warp per row
      {{1, 3000}, {-1}},       // the whole block
      {{4, 1, 6}, {99, 1, 2}},
      {{6}, {99, 0}},
      {{0, 3}, {99, 1}},
      {{2, 0}, {99, 0}},
  };
  const Tolerance exact{0, 0};
  uint32_t seed = 500;
  for (int64_t opset : {1, 11, 13, 18}) {
    for (const Case& c : cases) {
      for (int64_t axis : c.axes) {
        for (int nan_every : {0, 7}) {
          ++seed;
          OpTester t = Op("Hardmax", opset).Input(TiesAndNans(dtype, c.dims, seed, nan_every));
          if (axis != 99) t.Attr(Attribute::Int("axis", axis));
          ExpectCudaMatchesCpu(t,
                               "Hardmax-" + std::to_string(opset) + " " + DimsToString(c.dims) + " axis " +
                                   std::to_string(axis) + " nan every " + std::to_string(nan_every) + " " + Name(dtype),
                               exact);
        }
      }
    }
  }
  // Before opset 13 the axis may equal the rank (rows of one element: all ones).
  OpTester t = Op("Hardmax", 11).Input(TiesAndNans(dtype, {2, 3}, 1, 0));
  t.Attr(Attribute::Int("axis", 2));
  ExpectCudaMatchesCpu(t, "Hardmax-11 axis = rank " + Name(dtype), exact);
}

// A row whose first element is NaN, a row with two NaN, rows of -inf, +inf ties and -0/+0 ties.
TEST_P(CudaNormMoreTest, HardmaxNanAndTiesMatchCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const DType dtype = GetParam();
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> v = {kNan, 5, 7,   1, 2,    kNan, 3, kNan, -inf, -inf, -inf, -inf,
                                 inf,  1, inf, 0, -0.0, 0,    0, -0.0, 2,    2,    1,    2};
  for (int64_t opset : {11, 13}) {
    OpTester t = Op("Hardmax", opset).Input(TensorOf(dtype, {6, 4}, v));
    ExpectCudaMatchesCpu(t, "Hardmax-" + std::to_string(opset) + " NaN and ties " + Name(dtype), Tolerance{0, 0});
  }
}

INSTANTIATE_TEST_SUITE_P(Types, CudaNormMoreTest, ::testing::ValuesIn(FloatTypes()), DTypeParamName());

// ---- errors ------------------------------------------------------------------------------------------------------

TEST(CudaNormMoreErrorsTest, RefusedAsOnTheCpu) {
  ONNXAMP_REQUIRE_CUDA();
  const ir::Tensor x4 = Random(DType::kFloat32, {2, 3, 4, 5}, 1);
  const ir::Tensor x1 = Random(DType::kFloat32, {5}, 2);
  // LRN: size missing, zero or negative (at creation), X of rank < 2, dY not matching X (at run time).
  ExpectSameCreateError(Op("LRN", 13).Input(x4));
  for (int64_t size : {0, -2}) ExpectSameCreateError(Op("LRN", 13).Input(x4).Attr(Attribute::Int("size", size)));
  ExpectSameCreateError(InternalOp(ops::kLrnGradOp).Input(x4).Input(x4));
  ExpectSameRunError(Op("LRN", 13).Input(x1).Attr(Attribute::Int("size", 3)));
  ExpectSameRunError(InternalOp(ops::kLrnGradOp).Input(x1).Input(x1).Attr(Attribute::Int("size", 3)));
  ExpectSameRunError(InternalOp(ops::kLrnGradOp)
                         .Input(Random(DType::kFloat32, {2, 3, 4, 4}, 3))
                         .Input(x4)
                         .Attr(Attribute::Int("size", 3)));
  // LpNormalization: p other than 1 or 2 (creation), axis outside the rank and dY not matching X (run time).
  for (int64_t p : {0, 3}) {
    ExpectSameCreateError(Op("LpNormalization", 17).Input(x4).Attr(Attribute::Int("p", p)));
    ExpectSameCreateError(InternalOp(ops::kLpNormalizationGradOp).Input(x4).Input(x4).Attr(Attribute::Int("p", p)));
  }
  ExpectSameCreateError(Op("LpNormalization", 17).Input(x4).Attr(Attribute::Float("axis", 1.0f)));
  for (int64_t axis : {4, -5}) {
    ExpectSameRunError(Op("LpNormalization", 17).Input(x4).Attr(Attribute::Int("axis", axis)));
    ExpectSameRunError(InternalOp(ops::kLpNormalizationGradOp).Input(x4).Input(x4).Attr(Attribute::Int("axis", axis)));
  }
  ExpectSameRunError(InternalOp(ops::kLpNormalizationGradOp).Input(Random(DType::kFloat32, {2, 3, 4, 4}, 4)).Input(x4));
  // MeanVarianceNormalization: axes not ints (creation), an axis outside the rank (also the default [0, 2, 3] on a
  // rank-2 input) and dY not matching X (run time).
  ExpectSameCreateError(Op("MeanVarianceNormalization", 13).Input(x4).Attr(Attribute::Int("axes", 1)));
  ExpectSameRunError(Op("MeanVarianceNormalization", 13).Input(x4).Attr(Attribute::Ints("axes", {0, 4})));
  ExpectSameRunError(Op("MeanVarianceNormalization", 13).Input(x4).Attr(Attribute::Ints("axes", {-5})));
  ExpectSameRunError(Op("MeanVarianceNormalization", 13).Input(Random(DType::kFloat32, {3, 4}, 5)));
  ExpectSameRunError(
      InternalOp(ops::kMeanVarianceNormalizationGradOp).Input(x4).Input(x4).Attr(Attribute::Ints("axes", {1, 7})));
  ExpectSameRunError(
      InternalOp(ops::kMeanVarianceNormalizationGradOp).Input(Random(DType::kFloat32, {2, 3, 4, 4}, 6)).Input(x4));
  // Hardmax: the axis outside the declared rank (creation), before and from opset 13.
  for (int64_t opset : {11, 13}) {
    for (int64_t axis : {5, -5}) {
      ExpectSameCreateError(Op("Hardmax", opset).Input(x4).Attr(Attribute::Int("axis", axis)));
    }
  }
  ExpectSameCreateError(Op("Hardmax", 13).Input(x4).Attr(Attribute::Int("axis", 4)));
}

}  // namespace
}  // namespace onnxamp::testing
