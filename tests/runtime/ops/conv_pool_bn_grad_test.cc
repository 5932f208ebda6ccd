// The com.onnxamp gradient kernels of Conv, pooling and batch normalization on their own: ConvGrad, MaxPoolGrad,
// AveragePoolGrad, BatchNormTraining and BatchNormalizationGrad against values worked out by hand on tiny cases,
// float32/float16/bfloat16 against float64 on the same (rounded) inputs, and their input checks. (The builders that
// emit them are checked against finite differences in tests/trainer/grad_conv_pool_bn_test.cc.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/ops/common/broadcast.h"
#include "runtime/ops/gradient_ops.h"
#include "tests/runtime/ops/linalg_test_util.h"

namespace onnxamp::testing {
namespace {

using Dims = std::vector<int64_t>;

ir::Tensor Doubles(const Dims& dims, const std::vector<double>& v) { return TensorOf(DType::kFloat64, dims, v); }
int64_t Count(const Dims& d) {
  int64_t n = 1;
  for (int64_t v : d) n *= v;
  return n;
}
ir::Tensor Int64s(const Dims& dims, const std::vector<int64_t>& v) { return MakeTensor<int64_t>(dims, v); }

std::vector<ir::Tensor> RunOk(const OpTester& t) {
  auto out = t.Run();
  EXPECT_TRUE(out.ok()) << out.status().message();
  return out.ok() ? *out : std::vector<ir::Tensor>{};
}

std::vector<double> Abs(std::vector<double> v) {
  for (double& x : v) x = std::abs(x);
  return v;
}

// ---- ConvGrad

OpTester ConvGrad1d(const std::vector<int64_t>& strides, const std::vector<int64_t>& pads) {
  OpTester t = InternalOp(ops::kConvGradOp);
  t.num_outputs = 3;
  if (!strides.empty()) t.Attr(ir::Attribute::Ints("strides", strides));
  if (!pads.empty()) t.Attr(ir::Attribute::Ints("pads", pads));
  // X = [1, 2, 3], W = [2, 3], dY = [1, 10].
  t.Input(Doubles({1, 1, 2}, {1, 10})).Input(Doubles({1, 1, 3}, {1, 2, 3})).Input(Doubles({1, 1, 2}, {2, 3}));
  return t;
}

TEST(ConvGradKernel, HandComputed) {
  // Y[o] = 2 x[o] + 3 x[o + 1]: dX = [1*2, 1*3 + 10*2, 10*3], dW = [1*1 + 10*2, 1*2 + 10*3], dB = 11.
  std::vector<ir::Tensor> out = RunOk(ConvGrad1d({}, {}));
  ASSERT_EQ(out.size(), 3u);
  ExpectClose(out[0], {2, 23, 30}, "dX");
  ExpectClose(out[1], {21, 32}, "dW");
  ExpectClose(out[2], {11}, "dB");
  // Stride 2, pads 1: Y[0] = 3 x[0] (tap 0 in the padding), Y[1] = 2 x[1] + 3 x[2].
  out = RunOk(ConvGrad1d({2}, {1, 1}));
  ASSERT_EQ(out.size(), 3u);
  ExpectClose(out[0], {3, 20, 30}, "dX stride 2");
  ExpectClose(out[1], {20, 31}, "dW stride 2");
  ExpectClose(out[2], {11}, "dB stride 2");
}

TEST(ConvGradKernel, OmittedOutputs) {
  OpTester t = ConvGrad1d({}, {});
  t.omit_outputs = {true, false, true};
  std::vector<ir::Tensor> out = RunOk(t);
  ASSERT_EQ(out.size(), 1u);
  ExpectClose(out[0], {21, 32}, "dW alone");
}

TEST(ConvGradKernel, Errors) {
  OpTester t = ConvGrad1d({}, {});
  t.inputs[0] = Doubles({1, 1, 3}, {1, 2, 3});
  op_test::ExpectRunError(t, "input 0 (dY) has shape [1,1,3], expected [1,1,2]");
  t = ConvGrad1d({}, {});
  t.inputs[2] = Doubles({1, 2, 2}, {1, 2, 3, 4});
  op_test::ExpectRunError(t, "channels but W");
  t = ConvGrad1d({}, {});
  t.Attr(ir::Attribute::Ints("strides", {0}));
  op_test::ExpectCreateError(t, "strides");
}

// A grouped, strided, dilated, padded 2-D ConvGrad on inputs rounded to `dtype`, in `dtype` and in float64.
class ConvGradTyped : public ::testing::TestWithParam<DType> {};

TEST_P(ConvGradTyped, AgreesWithFloat64) {
  const DType dtype = GetParam();
  const Dims x = {2, 4, 7, 6}, w = {6, 2, 3, 2}, dy = {2, 6, 3, 3};
  const std::vector<double> vdy = RandomValues(dtype, 2 * 6 * 3 * 3, 1), vx = RandomValues(dtype, 2 * 4 * 7 * 6, 2),
                            vw = RandomValues(dtype, 6 * 2 * 3 * 2, 3);
  auto tester = [&](DType t, bool abs) {
    OpTester op = InternalOp(ops::kConvGradOp);
    op.num_outputs = 3;
    op.Attr(ir::Attribute::Int("group", 2))
        .Attr(ir::Attribute::Ints("strides", {2, 2}))
        .Attr(ir::Attribute::Ints("dilations", {1, 2}))
        .Attr(ir::Attribute::Ints("pads", {1, 0, 0, 1}));
    op.Input(TensorOf(t, dy, abs ? Abs(vdy) : vdy))
        .Input(TensorOf(t, x, abs ? Abs(vx) : vx))
        .Input(TensorOf(t, w, abs ? Abs(vw) : vw));
    return op;
  };
  const std::vector<ir::Tensor> want = RunWith(tester(DType::kFloat64, false), ops::LinalgImpl::kReference);
  const std::vector<ir::Tensor> magnitude = RunWith(tester(DType::kFloat64, true), ops::LinalgImpl::kReference);
  ASSERT_EQ(want.size(), 3u);
  for (ops::LinalgImpl impl : AvailableImpls()) {
    const std::vector<ir::Tensor> got = RunWith(tester(dtype, false), impl);
    ASSERT_EQ(got.size(), 3u);
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(got[i].dtype(), dtype);
      ExpectNear(got[i], AsDoubles(want[i]), AsDoubles(magnitude[i]),
                 std::string(ops::LinalgImplName(impl)) + " ConvGrad output " + std::to_string(i));
    }
  }
}

// Each output on its own, in every type and implementation, equals the same output computed with the others: the
// fp16/bf16 kernels convert only the inputs the requested outputs read (dX: dY and W; dW: dY and X) into buffers kept
// between runs, so the runs go from a larger problem to a smaller one and back.
TEST_P(ConvGradTyped, EachOutputAloneAsWithTheOthers) {
  const DType dtype = GetParam();
  auto tester = [&](const Dims& x, const Dims& w, const Dims& dy, uint32_t seed, std::vector<bool> omit) {
    OpTester op = InternalOp(ops::kConvGradOp);
    op.num_outputs = 3;
    op.omit_outputs = std::move(omit);
    op.Attr(ir::Attribute::Ints("pads", {1, 1, 1, 1}));
    op.Input(TensorOf(dtype, dy, RandomValues(dtype, Count(dy), seed)))
        .Input(TensorOf(dtype, x, RandomValues(dtype, Count(x), seed + 1)))
        .Input(TensorOf(dtype, w, RandomValues(dtype, Count(w), seed + 2)));
    return op;
  };
  struct Case {
    Dims x, w, dy;
  };
  const std::vector<Case> cases = {{{2, 5, 9, 8}, {4, 5, 3, 3}, {2, 4, 9, 8}},
                                   {{1, 2, 4, 3}, {3, 2, 3, 3}, {1, 3, 4, 3}},
                                   {{3, 4, 6, 6}, {6, 4, 3, 3}, {3, 6, 6, 6}}};
  for (ops::LinalgImpl impl : AvailableImpls()) {
    std::vector<std::vector<ir::Tensor>> all;
    for (size_t i = 0; i < cases.size(); ++i) {
      all.push_back(RunWith(tester(cases[i].x, cases[i].w, cases[i].dy, 70 + 3 * i, {}), impl));
      ASSERT_EQ(all.back().size(), 3u);
    }
    // Output by output, case by case: a run never follows one of the same problem.
    for (size_t k = 0; k < 3; ++k) {
      for (size_t i = 0; i < cases.size(); ++i) {
        std::vector<bool> omit = {true, true, true};
        omit[k] = false;
        const Case& c = cases[i];
        const std::vector<ir::Tensor> alone = RunWith(tester(c.x, c.w, c.dy, 70 + 3 * i, omit), impl);
        ASSERT_EQ(alone.size(), 1u);
        ExpectClose(alone[0], AsDoubles(all[i][k]),
                    StrCat(ops::LinalgImplName(impl), " output ", k, " alone for X ", ops::ShapeToString(c.x)), {0, 0});
      }
    }
  }
}

// The im2col + GEMM implementations against the reference loop on shapes of every kind, in float64.
TEST(ConvGradKernel, ImplementationsAgree) {
  struct Case {
    Dims x, w;
    std::vector<ir::Attribute> attrs;
  };
  const std::vector<Case> cases = {
      {{2, 3, 9}, {4, 3, 3}, {ir::Attribute::Ints("strides", {2}), ir::Attribute::Ints("pads", {2, 1})}},
      {{3, 4, 6, 5}, {4, 1, 3, 3}, {ir::Attribute::Int("group", 4), ir::Attribute::String("auto_pad", "SAME_UPPER")}},
      {{1, 2, 5, 4, 6},
       {3, 2, 2, 3, 2},
       {ir::Attribute::Ints("dilations", {2, 1, 2}), ir::Attribute::Ints("pads", {1, 0, 0, 1, 2, 0})}},
      {{2, 3, 4, 4}, {5, 3, 1, 1}, {}},
      {{0, 3, 4, 4}, {5, 3, 3, 3}, {}},
  };
  uint32_t seed = 50;
  for (const Case& c : cases) {
    auto tester = [&](const Dims& dy) {
      OpTester op = InternalOp(ops::kConvGradOp);
      op.num_outputs = 3;
      for (const ir::Attribute& a : c.attrs) op.Attr(a);
      int64_t n = 1, nx = 1, nw = 1;
      for (int64_t d : dy) n *= d;
      for (int64_t d : c.x) nx *= d;
      for (int64_t d : c.w) nw *= d;
      op.Input(TensorOf(DType::kFloat64, dy, RandomValues(DType::kFloat64, n, seed)))
          .Input(TensorOf(DType::kFloat64, c.x, RandomValues(DType::kFloat64, nx, seed + 1)))
          .Input(TensorOf(DType::kFloat64, c.w, RandomValues(DType::kFloat64, nw, seed + 2)));
      return op;
    };
    // The forward gives dY's shape.
    OpTester conv;
    conv.op_type = "Conv";
    conv.opset = 17;
    for (const ir::Attribute& a : c.attrs) conv.Attr(a);
    conv.Input(ir::Tensor(DType::kFloat64, c.x)).Input(ir::Tensor(DType::kFloat64, c.w));
    const std::vector<ir::Tensor> y = RunOk(conv);
    ASSERT_EQ(y.size(), 1u);
    seed += 3;
    const std::vector<ir::Tensor> want = RunWith(tester(y[0].dims()), ops::LinalgImpl::kReference);
    ASSERT_EQ(want.size(), 3u);
    for (ops::LinalgImpl impl : AvailableImpls()) {
      const std::vector<ir::Tensor> got = RunWith(tester(y[0].dims()), impl);
      ASSERT_EQ(got.size(), 3u);
      for (size_t i = 0; i < 3; ++i) {
        ExpectClose(got[i], AsDoubles(want[i]),
                    std::string(ops::LinalgImplName(impl)) + " output " + std::to_string(i) + " for X " +
                        ops::ShapeToString(c.x),
                    {1e-12, 1e-12});
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, ConvGradTyped, ::testing::ValuesIn(op_test::FloatTypes()), op_test::DTypeParamName());

// ---- MaxPoolGrad and AveragePoolGrad

TEST(MaxPoolGradKernel, HandComputed) {
  OpTester t = InternalOp(ops::kMaxPoolGradOp);
  // Two windows chose element 2, one window lay in the padding (-1).
  t.Input(Doubles({1, 1, 3}, {5, 7, 9})).Input(Int64s({1, 1, 3}, {2, 2, -1})).Input(Int64s({3}, {1, 1, 4}));
  std::vector<ir::Tensor> out = RunOk(t);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].dims(), (Dims{1, 1, 4}));
  ExpectClose(out[0], {0, 0, 12, 0});
}

TEST(MaxPoolGradKernel, Errors) {
  OpTester t = InternalOp(ops::kMaxPoolGradOp);
  t.Input(Doubles({1, 1, 2}, {5, 7})).Input(Int64s({1, 1, 2}, {1, 4})).Input(Int64s({3}, {1, 1, 4}));
  op_test::ExpectRunError(t, "input 1 (Indices) element 1 is 4, outside X of shape [1,1,4]");
  t.inputs[1] = Int64s({1, 2}, {0, 1});
  op_test::ExpectRunError(t, "input 1 (Indices) must be an int64 tensor of dY's shape");
  t.inputs[1] = Int64s({1, 1, 2}, {0, 1});
  t.inputs[2] = Int64s({3}, {1, -1, 4});
  op_test::ExpectRunError(t, "input 2 (X_shape) holds a negative dim");
}

// On two threads MaxPoolGrad sums plane by plane: the same bits as on one thread when the Indices keep to their
// planes (MaxPool's, with ties sending several dY elements to one position and -1 for no input), and when some point
// into another plane (the serial order then), in every float type; a bad index is named the same way.
TEST(MaxPoolGradKernel, PlanesOnThreadsGiveTheSameSums) {
  const Dims y = {2, 3, 5, 6}, x = {2, 3, 9, 11};
  const int64_t y_plane = 5 * 6, x_plane = 9 * 11, ny = 2 * 3 * y_plane;
  std::vector<int64_t> own(static_cast<size_t>(ny)), mixed;
  for (int64_t i = 0; i < ny; ++i) {
    const int64_t plane = i / y_plane;
    own[static_cast<size_t>(i)] = i % 13 == 0 ? -1 : plane * x_plane + (i * 7) % 9;  // many ties, a few -1
  }
  mixed = own;
  mixed[40] = 3;                // plane 1's element into plane 0
  mixed[ny - 1] = x_plane + 2;  // the last plane's into plane 1
  for (DType dtype : op_test::FloatTypes()) {
    const std::vector<double> vdy = RandomValues(dtype, ny, 77);
    for (const std::vector<int64_t>* indices : {&own, &mixed}) {
      auto make = [&](int threads) {
        OpTester t = InternalOp(ops::kMaxPoolGradOp);
        t.options.num_threads = threads;
        t.Input(TensorOf(dtype, y, vdy)).Input(Int64s(y, *indices)).Input(Int64s({4}, x));
        return t;
      };
      const std::vector<ir::Tensor> one = RunOk(make(1)), two = RunOk(make(2));
      ASSERT_EQ(one.size(), 1u);
      ASSERT_EQ(two.size(), 1u);
      EXPECT_TRUE(two[0].SameContents(one[0]))
          << DTypeName(dtype) << (indices == &own ? " own planes" : " across planes");
    }
  }
  std::vector<int64_t> bad = own;
  bad[100] = 2 * 3 * x_plane;
  OpTester t = InternalOp(ops::kMaxPoolGradOp);
  t.options.num_threads = 2;
  t.Input(TensorOf(DType::kFloat32, y, RandomValues(DType::kFloat32, ny, 78)))
      .Input(Int64s(y, bad))
      .Input(Int64s({4}, x));
  op_test::ExpectRunError(t, "input 1 (Indices) element 100 is 594, outside X of shape [2,3,9,11]");
}

OpTester AveragePoolGrad1d(bool include_pad) {
  OpTester t = InternalOp(ops::kAveragePoolGradOp);
  t.Attr(ir::Attribute::Ints("kernel_shape", {2})).Attr(ir::Attribute::Ints("pads", {1, 1}));
  if (include_pad) t.Attr(ir::Attribute::Int("count_include_pad", 1));
  t.Input(Doubles({1, 1, 4}, {1, 2, 3, 4})).Input(Int64s({3}, {1, 1, 3}));
  return t;
}

TEST(AveragePoolGradKernel, HandComputed) {
  // Windows over x[-1..0], x[0..1], x[1..2], x[2..3] (x[-1], x[3] padding). Excluding the padding they average 1, 2,
  // 2 and 1 elements.
  std::vector<ir::Tensor> out = RunOk(AveragePoolGrad1d(false));
  ASSERT_EQ(out.size(), 1u);
  ExpectClose(out[0], {1.0 / 1 + 2.0 / 2, 2.0 / 2 + 3.0 / 2, 3.0 / 2 + 4.0 / 1}, "exclude pad");
  out = RunOk(AveragePoolGrad1d(true));
  ASSERT_EQ(out.size(), 1u);
  ExpectClose(out[0], {0.5 + 1.0, 1.0 + 1.5, 1.5 + 2.0}, "include pad");
}

TEST(AveragePoolGradKernel, Errors) {
  OpTester t = AveragePoolGrad1d(false);
  t.inputs[0] = Doubles({1, 1, 3}, {1, 2, 3});
  op_test::ExpectRunError(t, "input 0 (dY) has shape [1,1,3], expected [1,1,4]");
  t = AveragePoolGrad1d(false);
  t.inputs[1] = Int64s({4}, {1, 1, 3, 3});
  op_test::ExpectRunError(t, "input 1 (X_shape) [1,1,3,3] must be [N, C] and 1 spatial dims");
  t = AveragePoolGrad1d(false);
  t.attributes.clear();
  op_test::ExpectCreateError(t, "kernel_shape");
}

class PoolGradTyped : public ::testing::TestWithParam<DType> {};

TEST_P(PoolGradTyped, AgreesWithFloat64) {
  const DType dtype = GetParam();
  const Dims x = {2, 3, 7, 6}, y = {2, 3, 4, 3};
  const int64_t ny = 2 * 3 * 4 * 3;
  const std::vector<double> vdy = RandomValues(dtype, ny, 4);
  std::vector<int64_t> indices(static_cast<size_t>(ny));
  for (int64_t i = 0; i < ny; ++i) indices[static_cast<size_t>(i)] = (i * 37) % (2 * 3 * 7 * 6);
  auto max_grad = [&](DType t, bool abs) {
    OpTester op = InternalOp(ops::kMaxPoolGradOp);
    op.Input(TensorOf(t, y, abs ? Abs(vdy) : vdy)).Input(Int64s(y, indices)).Input(Int64s({4}, x));
    return op;
  };
  auto avg_grad = [&](DType t, bool abs) {
    OpTester op = InternalOp(ops::kAveragePoolGradOp);
    op.Attr(ir::Attribute::Ints("kernel_shape", {3, 3}))
        .Attr(ir::Attribute::Ints("strides", {2, 2}))
        .Attr(ir::Attribute::Ints("pads", {1, 1, 1, 0}))
        .Attr(ir::Attribute::Int("count_include_pad", 1));
    op.Input(TensorOf(t, y, abs ? Abs(vdy) : vdy)).Input(Int64s({4}, x));
    return op;
  };
  const std::vector<std::pair<std::string, std::function<OpTester(DType, bool)>>> kernels = {
      {"MaxPoolGrad", max_grad}, {"AveragePoolGrad", avg_grad}};
  for (const auto& [name, make] : kernels) {
    const std::vector<ir::Tensor> want = RunOk(make(DType::kFloat64, false));
    const std::vector<ir::Tensor> magnitude = RunOk(make(DType::kFloat64, true));
    const std::vector<ir::Tensor> got = RunOk(make(dtype, false));
    ASSERT_EQ(got.size(), 1u) << name;
    ASSERT_EQ(want.size(), 1u) << name;
    EXPECT_EQ(got[0].dtype(), dtype);
    ExpectNear(got[0], AsDoubles(want[0]), AsDoubles(magnitude[0]), name);
  }
}

INSTANTIATE_TEST_SUITE_P(Types, PoolGradTyped, ::testing::ValuesIn(op_test::FloatTypes()), op_test::DTypeParamName());

// ---- BatchNormTraining and BatchNormalizationGrad

TEST(BatchNormTrainingKernel, HandComputed) {
  // One channel of 1, 3, 5, 7 (N = 2, two positions) and one of 2, 2, 4, 4: means 4 and 3, biased variances 5 and 1,
  // unbiased 20/3 and 4/3. momentum 0.9 (PyTorch's 0.1): running = 0.9 * running + 0.1 * batch.
  OpTester t = InternalOp(ops::kBatchNormTrainingOp);
  t.num_outputs = 5;
  const double eps = 1e-3;
  t.Attr(ir::Attribute::Float("epsilon", static_cast<float>(eps))).Attr(ir::Attribute::Float("momentum", 0.9f));
  t.Input(Doubles({2, 2, 2}, {1, 3, 2, 2, 5, 7, 4, 4}))
      .Input(Doubles({2}, {2, -1}))
      .Input(Doubles({2}, {1, 0.5}))
      .Input(Doubles({2}, {1, -2}))
      .Input(Doubles({2}, {2, 3}));
  std::vector<ir::Tensor> out = RunOk(t);
  ASSERT_EQ(out.size(), 5u);
  const double e = static_cast<float>(eps);  // the attribute is a float
  const double a0 = 2 / std::sqrt(5 + e), a1 = -1 / std::sqrt(1 + e);
  ExpectClose(out[0],
              {(1 - 4) * a0 + 1, (3 - 4) * a0 + 1, (2 - 3) * a1 + 0.5, (2 - 3) * a1 + 0.5, (5 - 4) * a0 + 1,
               (7 - 4) * a0 + 1, (4 - 3) * a1 + 0.5, (4 - 3) * a1 + 0.5},
              "Y");
  const double m = 0.9f;  // the attribute is a float
  ExpectClose(out[1], {m * 1 + (1 - m) * 4, m * -2 + (1 - m) * 3}, "running_mean");
  ExpectClose(out[2], {m * 2 + (1 - m) * 20.0 / 3, m * 3 + (1 - m) * 4.0 / 3}, "running_var (unbiased batch variance)");
  EXPECT_EQ(out[3].dtype(), DType::kFloat32);
  EXPECT_EQ(out[4].dtype(), DType::kFloat32);
  ExpectClose(out[3], {4, 3}, "saved_mean");
  ExpectClose(out[4], {1 / std::sqrt(5 + e), 1 / std::sqrt(1 + e)}, "saved_inv_std (biased variance)");
}

TEST(BatchNormTrainingKernel, Errors) {
  OpTester t = InternalOp(ops::kBatchNormTrainingOp);
  t.num_outputs = 5;
  t.Input(Doubles({1, 2}, {1, 2}))
      .Input(Doubles({2}, {1, 1}))
      .Input(Doubles({2}, {0, 0}))
      .Input(Doubles({2}, {0, 0}))
      .Input(Doubles({2}, {1, 1}));
  op_test::ExpectRunError(t, "fewer than 2 values per channel");
  t.inputs[0] = Doubles({2, 2}, {1, 2, 3, 4});
  t.inputs[3] = Doubles({3}, {0, 0, 0});
  op_test::ExpectRunError(t, "input 3 (running_mean): expected 2 elements");
}

TEST(BatchNormalizationGradKernel, HandComputed) {
  // x = 1, 3, 5, 7 (one channel, X of rank 2), mean 4, inv_std s = 1/sqrt(5) rounded to float, scale 2, dY = e0:
  // dB = 1, dScale = -3 s, dX = 2 s (dY - 1/4 - x_hat * (-3 s) / 4) with x_hat = (x - 4) s.
  const double s = static_cast<float>(1 / std::sqrt(5.0));
  OpTester t = InternalOp(ops::kBatchNormalizationGradOp);
  t.num_outputs = 3;
  t.Input(Doubles({4, 1}, {1, 0, 0, 0}))
      .Input(Doubles({4, 1}, {1, 3, 5, 7}))
      .Input(Doubles({1}, {2}))
      .Input(MakeTensor<float>({1}, {4}))
      .Input(MakeTensor<float>({1}, {static_cast<float>(s)}));
  std::vector<ir::Tensor> out = RunOk(t);
  ASSERT_EQ(out.size(), 3u);
  std::vector<double> dx;
  const double dy[] = {1, 0, 0, 0}, x[] = {1, 3, 5, 7};
  for (int i = 0; i < 4; ++i) dx.push_back(2 * s * (dy[i] - 0.25 - (x[i] - 4) * s * (-3 * s) / 4));
  ExpectClose(out[0], dx, "dX");
  ExpectClose(out[1], {-3 * s}, "dScale");
  ExpectClose(out[2], {1}, "dB");
}

TEST(BatchNormalizationGradKernel, Errors) {
  OpTester t = InternalOp(ops::kBatchNormalizationGradOp);
  t.num_outputs = 3;
  t.Input(Doubles({2, 1}, {1, 0}))
      .Input(Doubles({2, 2}, {1, 3, 5, 7}))
      .Input(Doubles({2}, {2, 2}))
      .Input(Doubles({2}, {0, 0}))
      .Input(Doubles({2}, {1, 1}));
  op_test::ExpectRunError(t, "input 0 (dY) must have X's element type and shape");
  t.inputs[0] = Doubles({2, 2}, {1, 0, 0, 1});
  t.inputs[4] = Doubles({1}, {1});
  op_test::ExpectRunError(t, "input 4 (saved_inv_std): expected 2 elements");
}

class BatchNormGradTyped : public ::testing::TestWithParam<DType> {};

// Expects |got - want| <= rtol * max|want| + atol (cancellation makes elementwise relative errors meaningless).
void ExpectNearScaled(const ir::Tensor& got, const ir::Tensor& want, const std::string& what) {
  const std::vector<double> w = AsDoubles(want);
  double largest = 0;
  for (double v : w) largest = std::max(largest, std::abs(v));
  const Tolerance tol = ToleranceFor(got.dtype());
  ExpectClose(got, w, what, {0, tol.atol + 2 * tol.rtol * largest});
}

TEST_P(BatchNormGradTyped, AgreesWithFloat64) {
  const DType dtype = GetParam();
  const Dims x = {3, 4, 2, 3}, c = {4};
  const int64_t n = 3 * 4 * 2 * 3;
  const std::vector<double> vx = RandomValues(dtype, n, 5, -1, 2), vdy = RandomValues(dtype, n, 6);
  const std::vector<double> scale = RandomValues(dtype, 4, 7, 0.5, 1.5), bias = RandomValues(dtype, 4, 8);
  const std::vector<double> mean = RandomValues(dtype, 4, 9), var = RandomValues(dtype, 4, 10, 0.5, 2);
  auto training = [&](DType t) {
    OpTester op = InternalOp(ops::kBatchNormTrainingOp);
    op.num_outputs = 5;
    op.Attr(ir::Attribute::Float("momentum", 0.8f));
    op.Input(TensorOf(t, x, vx))
        .Input(TensorOf(t, c, scale))
        .Input(TensorOf(t, c, bias))
        .Input(TensorOf(t, c, mean))
        .Input(TensorOf(t, c, var));
    return op;
  };
  const std::vector<ir::Tensor> want = RunOk(training(DType::kFloat64));
  const std::vector<ir::Tensor> got = RunOk(training(dtype));
  ASSERT_EQ(want.size(), 5u);
  ASSERT_EQ(got.size(), 5u);
  const char* names[] = {"Y", "running_mean", "running_var", "saved_mean", "saved_inv_std"};
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(got[i].dtype(), i < 3 ? dtype : DType::kFloat32) << names[i];
    ExpectNearScaled(got[i], want[i], std::string("BatchNormTraining ") + names[i]);
  }
  // The backward pass from the float32 statistics the forward saved (the same in both runs up to their rounding).
  auto backward = [&](DType t) {
    OpTester op = InternalOp(ops::kBatchNormalizationGradOp);
    op.num_outputs = 3;
    op.Input(TensorOf(t, x, vdy)).Input(TensorOf(t, x, vx)).Input(TensorOf(t, c, scale)).Input(want[3]).Input(want[4]);
    return op;
  };
  const std::vector<ir::Tensor> want_grad = RunOk(backward(DType::kFloat64));
  const std::vector<ir::Tensor> got_grad = RunOk(backward(dtype));
  ASSERT_EQ(want_grad.size(), 3u);
  ASSERT_EQ(got_grad.size(), 3u);
  const char* grad_names[] = {"dX", "dScale", "dB"};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(got_grad[i].dtype(), dtype) << grad_names[i];
    ExpectNearScaled(got_grad[i], want_grad[i], std::string("BatchNormalizationGrad ") + grad_names[i]);
  }
}

INSTANTIATE_TEST_SUITE_P(Types, BatchNormGradTyped, ::testing::ValuesIn(op_test::FloatTypes()),
                         op_test::DTypeParamName());

}  // namespace
}  // namespace onnxamp::testing
