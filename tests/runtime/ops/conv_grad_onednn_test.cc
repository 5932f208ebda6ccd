// The float32 training kernels' fast paths against the reference loops: ConvGrad through oneDNN's backward-data and
// backward-weights primitives (every kind of shape, more images than one weight-gradient block, the same bits at
// every thread count and oneDNN threading mode, the tasks both gradients share), and MaxPool with its Indices output
// on windows inside the input and, vectorized on AVX2, on windows reaching the padding.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "runtime/ops/common/broadcast.h"
#include "runtime/ops/conv/conv_grad_onednn.h"
#include "runtime/ops/gradient_ops.h"
#include "tests/runtime/ops/linalg_test_util.h"

namespace onnxamp::testing {
namespace {

using Dims = std::vector<int64_t>;

int64_t Count(const Dims& d) {
  int64_t n = 1;
  for (int64_t v : d) n *= v;
  return n;
}

std::vector<double> Abs(std::vector<double> v) {
  for (double& x : v) x = std::abs(x);
  return v;
}

struct ConvCase {
  Dims x, w;
  std::vector<ir::Attribute> attrs;
};

std::vector<ConvCase> ConvCases() {
  return {
      // more images than a weight-gradient block, and a partial last block
      {{19, 3, 8, 8}, {5, 3, 3, 3}, {ir::Attribute::Ints("pads", {1, 1, 1, 1})}},
      {{9, 16, 9, 7},
       {8, 16, 3, 3},
       {ir::Attribute::Ints("strides", {2, 2}), ir::Attribute::Ints("pads", {1, 0, 2, 1})}},
      {{4, 4, 7, 6},
       {6, 2, 3, 2},
       {ir::Attribute::Int("group", 2), ir::Attribute::Ints("dilations", {1, 2}),
        ir::Attribute::Ints("pads", {1, 0, 0, 1})}},
      {{10, 8, 6, 6}, {16, 8, 1, 1}, {ir::Attribute::Ints("strides", {2, 2})}},
      {{3, 3, 11}, {4, 3, 3}, {ir::Attribute::Ints("strides", {2}), ir::Attribute::Ints("pads", {2, 1})}},
      {{2, 2, 4, 5, 3}, {3, 2, 2, 3, 2}, {ir::Attribute::Ints("pads", {1, 0, 0, 0, 1, 1})}},
  };
}

// dY's shape: the forward's output.
Dims ConvOutputDims(const ConvCase& c) {
  OpTester conv;
  conv.op_type = "Conv";
  conv.opset = 17;
  for (const ir::Attribute& a : c.attrs) conv.Attr(a);
  conv.Input(ir::Tensor(DType::kFloat64, c.x)).Input(ir::Tensor(DType::kFloat64, c.w));
  auto y = conv.Run();
  EXPECT_TRUE(y.ok()) << y.status().message();
  return y.ok() ? (*y)[0].dims() : Dims{};
}

TEST(ConvGradOneDnn, AgreesWithFloat64AndIsTheSameAtEveryThreadCount) {
  if (!ops::OneDnnAvailable()) GTEST_SKIP() << "oneDNN is not part of this build";
  uint32_t seed = 700;
  for (const ConvCase& c : ConvCases()) {
    const Dims dy = ConvOutputDims(c);
    ASSERT_FALSE(dy.empty());
    const std::string what = "X " + ops::ShapeToString(c.x) + " W " + ops::ShapeToString(c.w);
    const std::vector<double> vdy = RandomValues(DType::kFloat32, Count(dy), seed),
                              vx = RandomValues(DType::kFloat32, Count(c.x), seed + 1),
                              vw = RandomValues(DType::kFloat32, Count(c.w), seed + 2);
    seed += 3;
    auto tester = [&](DType t, bool abs, int threads) {
      OpTester op = InternalOp(ops::kConvGradOp);
      op.num_outputs = 3;
      op.options.num_threads = threads;
      for (const ir::Attribute& a : c.attrs) op.Attr(a);
      op.Input(TensorOf(t, dy, abs ? Abs(vdy) : vdy))
          .Input(TensorOf(t, c.x, abs ? Abs(vx) : vx))
          .Input(TensorOf(t, c.w, abs ? Abs(vw) : vw));
      return op;
    };
    const std::vector<ir::Tensor> want = RunWith(tester(DType::kFloat64, false, 1), ops::LinalgImpl::kReference);
    const std::vector<ir::Tensor> magnitude = RunWith(tester(DType::kFloat64, true, 1), ops::LinalgImpl::kReference);
    const std::vector<ir::Tensor> got = RunWith(tester(DType::kFloat32, false, 1), ops::LinalgImpl::kOneDnn);
    ASSERT_EQ(want.size(), 3u);
    ASSERT_EQ(got.size(), 3u);
    for (size_t i = 0; i < 3; ++i) {
      ExpectNear(got[i], AsDoubles(want[i]), AsDoubles(magnitude[i]), what + " output " + std::to_string(i));
    }
    for (ops::OneDnnThreading mode : {ops::OneDnnThreading::kShared, ops::OneDnnThreading::kSplit}) {
      ScopedOneDnnThreading scoped(mode);
      for (int threads : {1, 2, 3}) {
        const std::vector<ir::Tensor> again =
            RunWith(tester(DType::kFloat32, false, threads), ops::LinalgImpl::kOneDnn);
        ASSERT_EQ(again.size(), 3u);
        for (size_t i = 0; i < 3; ++i) {
          EXPECT_TRUE(again[i].SameContents(got[i]))
              << what << " output " << i << " with " << threads << " threads (" << ThreadingName(mode) << ")";
        }
      }
    }
  }
}

// Backward's tasks: the weight blocks are the same at every thread count (so are the sums), the data parts cover
// every image once, and both gradients share the threads: at one weight block, the data gradient takes the threads
// the block leaves free; when the blocks fill the threads, the data parts are a block's size.
TEST(ConvGradOneDnn, TasksShareTheThreadsBetweenBothGradients) {
  using Task = ops::OneDnnConvGrad::Task;
  const int64_t block = ops::OneDnnConvGrad::kImagesPerBlock;
  for (int64_t n = 0; n <= 5 * block + 3; ++n) {
    for (int threads = 1; threads <= 4; ++threads) {
      for (bool data : {false, true}) {
        for (bool weights : {false, true}) {
          const std::string what =
              StrCat("n ", n, ", ", threads, " threads", data ? ", data" : "", weights ? ", weights" : "");
          const std::vector<Task> tasks = ops::OneDnnConvGrad::Plan(n, data, weights, threads);
          int64_t next_block = 0, next_image = 0, blocks = 0;
          for (const Task& t : tasks) {
            if (t.kind == Task::kWeights) {
              ASSERT_EQ(next_image, 0) << what << ": weight blocks come first";
              EXPECT_EQ(t.first, next_block * block) << what;
              EXPECT_EQ(t.count, std::min(block, n - t.first)) << what;
              ++next_block;
              ++blocks;
            } else {
              EXPECT_EQ(t.first, next_image) << what;
              EXPECT_GT(t.count, 0) << what;
              next_image += t.count;
            }
          }
          EXPECT_EQ(blocks, weights ? (n + block - 1) / block : 0) << what;
          EXPECT_EQ(next_image, data ? n : 0) << what;
          if (n > 0 && data && weights && blocks < threads) {
            EXPECT_EQ(static_cast<int64_t>(tasks.size()), std::min<int64_t>(threads, blocks + n)) << what;
          }
          if (data && weights && blocks >= threads) {
            for (const Task& t : tasks) {
              if (t.kind == Task::kData) {
                EXPECT_LE(t.count, block) << what;
              }
            }
          }
        }
      }
    }
  }
  // ResNet-50 at batch 8 on two threads: the weight gradient on one, the data gradient on the other.
  const std::vector<Task> two = ops::OneDnnConvGrad::Plan(block, true, true, 2);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].kind, Task::kWeights);
  EXPECT_EQ(two[1].kind, Task::kData);
  EXPECT_EQ(two[1].count, block);
}

// The weight gradient sums fixed blocks of images: a batch of two blocks gives the gradient of its first block plus
// that of its second (up to the rounding of the two partial sums).
TEST(ConvGradOneDnn, WeightGradientSumsItsBlocks) {
  if (!ops::OneDnnAvailable()) GTEST_SKIP() << "oneDNN is not part of this build";
  const int64_t block = ops::OneDnnConvGrad::kImagesPerBlock;
  const Dims x = {2 * block, 2, 5, 5}, w = {3, 2, 3, 3}, dy = {2 * block, 3, 3, 3};
  const std::vector<double> vdy = RandomValues(DType::kFloat32, Count(dy), 90),
                            vx = RandomValues(DType::kFloat32, Count(x), 91),
                            vw = RandomValues(DType::kFloat32, Count(w), 92);
  auto grad = [&](int64_t first, int64_t images) {
    Dims xs = x, ys = dy;
    xs[0] = ys[0] = images;
    const int64_t xi = Count(x) / x[0], yi = Count(dy) / dy[0];
    OpTester op = InternalOp(ops::kConvGradOp);
    op.num_outputs = 3;
    op.omit_outputs = {true, false, true};
    op.Input(TensorOf(DType::kFloat32, ys,
                      std::vector<double>(vdy.begin() + first * yi, vdy.begin() + (first + images) * yi)))
        .Input(TensorOf(DType::kFloat32, xs,
                        std::vector<double>(vx.begin() + first * xi, vx.begin() + (first + images) * xi)))
        .Input(TensorOf(DType::kFloat32, w, vw));
    const std::vector<ir::Tensor> out = RunWith(op, ops::LinalgImpl::kOneDnn);
    EXPECT_EQ(out.size(), 1u);  // dW alone
    return out.size() == 1 ? AsDoubles(out[0]) : std::vector<double>{};
  };
  const std::vector<double> all = grad(0, 2 * block), a = grad(0, block), b = grad(block, block);
  ASSERT_EQ(all.size(), a.size());
  ASSERT_EQ(all.size(), b.size());
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(all[i], static_cast<double>(static_cast<float>(a[i]) + static_cast<float>(b[i]))) << "element " << i;
  }
}

// MaxPool with Indices in float32 on windows inside the input (the fast path) gives the reference loop's values and
// indices exactly, ties (the first one) and NaN (wins) included.
TEST(MaxPoolInterior, SameValuesAndIndicesAsTheReference) {
  struct Case {
    Dims x;
    Dims kernel, strides;
  };
  const std::vector<Case> cases = {
      {{2, 3, 8, 8}, {2, 2}, {2, 2}},
      {{1, 2, 9, 7}, {3, 3}, {2, 2}},  // overlapping windows, the last row and column unused
      {{2, 2, 5, 6}, {3, 2}, {1, 1}},
      {{1, 1, 4, 4}, {1, 1}, {1, 1}},
  };
  uint32_t seed = 40;
  for (const Case& c : cases) {
    std::vector<double> v = RandomValues(DType::kFloat32, Count(c.x), seed++);
    for (size_t i = 0; i < v.size(); i += 7) v[i] = std::round(v[i]);  // ties
    v[3] = std::numeric_limits<double>::quiet_NaN();
    v[v.size() / 2] = std::numeric_limits<double>::quiet_NaN();
    OpTester op = MakeTester("MaxPool", 12);
    op.num_outputs = 2;
    op.Attr(ir::Attribute::Ints("kernel_shape", c.kernel)).Attr(ir::Attribute::Ints("strides", c.strides));
    op.Input(TensorOf(DType::kFloat32, c.x, v));
    const std::vector<ir::Tensor> want = RunWith(op, ops::LinalgImpl::kReference);
    ASSERT_EQ(want.size(), 2u);
    for (ops::LinalgImpl impl : {ops::LinalgImpl::kPortable, ops::LinalgImpl::kOneDnn}) {
      if (impl == ops::LinalgImpl::kOneDnn && !ops::OneDnnAvailable()) continue;
      const std::vector<ir::Tensor> got = RunWith(op, impl);
      ASSERT_EQ(got.size(), 2u);
      EXPECT_TRUE(got[0].SameContents(want[0])) << ops::LinalgImplName(impl) << " X " << ops::ShapeToString(c.x);
      EXPECT_TRUE(got[1].SameContents(want[1])) << ops::LinalgImplName(impl) << " X " << ops::ShapeToString(c.x);
    }
  }
}

// MaxPool with Indices (training's) on windows that reach the padding too, where the CPU has AVX2 taken 8 outputs at
// a time: every output's maximum and index as the reference loop gives them, in float, fp16 and bf16, with ties
// (the first one), zeros of both signs, infinities, a region of -inf only, NaN (the first one wins) and ceil_mode.
TEST(MaxPoolWithIndices, PaddedWindowsAsTheReference) {
  struct Case {
    Dims x;
    Dims kernel, strides, pads;
    int64_t ceil_mode = 0;
    bool nan = false;
  };
  const std::vector<Case> cases = {
      {{1, 2, 23, 37}, {3, 3}, {2, 2}, {1, 1, 1, 1}},  // ResNet's stem pool
      {{1, 2, 23, 37}, {3, 3}, {2, 2}, {1, 1, 1, 1}, 0, true},
      {{2, 3, 20, 33}, {3, 3}, {1, 1}, {1, 1, 1, 1}},
      {{1, 2, 17, 41}, {2, 3}, {1, 2}, {0, 2, 1, 0}, 0, true},
      {{1, 1, 9, 30}, {2, 2}, {2, 2}, {0, 0, 0, 0}},
      {{1, 1, 10, 29}, {3, 3}, {3, 2}, {1, 1, 1, 1}, 1},
      {{1, 1, 6, 19}, {1, 1}, {1, 1}, {0, 0, 0, 0}},
      {{1, 1, 12, 25}, {4, 5}, {2, 1}, {2, 2, 2, 2}, 0, true},
      {{1, 1, 3, 8}, {3, 3}, {1, 1}, {1, 1, 1, 1}},  // no output row whose windows lie inside
  };
  uint32_t seed = 60;
  for (const Case& c : cases) {
    std::vector<double> v = RandomValues(DType::kFloat32, Count(c.x), seed++);
    for (size_t i = 0; i < v.size(); i += 5) v[i] = std::round(v[i] * 2);  // ties
    for (size_t i = 1; i < v.size(); i += 11) v[i] = (i % 2) ? 0.0 : -0.0;
    for (size_t i = 2; i < v.size(); i += 97) v[i] = (i % 2) ? INFINITY : -INFINITY;
    for (size_t i = 0; i < v.size() / 8; ++i) v[i] = -INFINITY;  // windows of -inf alone
    if (c.nan) {
      for (size_t i = 13; i < v.size(); i += 151) v[i] = std::numeric_limits<double>::quiet_NaN();
    }
    for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
      const std::string what =
          StrCat(DTypeName(dtype), " X ", ops::ShapeToString(c.x), " kernel ", ops::ShapeToString(c.kernel),
                 " strides ", ops::ShapeToString(c.strides), " pads ", ops::ShapeToString(c.pads));
      OpTester op = MakeTester("MaxPool", 12);
      op.num_outputs = 2;
      op.Attr(ir::Attribute::Ints("kernel_shape", c.kernel))
          .Attr(ir::Attribute::Ints("strides", c.strides))
          .Attr(ir::Attribute::Ints("pads", c.pads))
          .Attr(ir::Attribute::Int("ceil_mode", c.ceil_mode));
      op.Input(TensorOf(dtype, c.x, v));
      const std::vector<ir::Tensor> want = RunWith(op, ops::LinalgImpl::kReference);
      ASSERT_EQ(want.size(), 2u) << what;
      for (int threads : {1, 2}) {
        op.options.num_threads = threads;
        for (ops::LinalgImpl impl : {ops::LinalgImpl::kPortable, ops::LinalgImpl::kOneDnn}) {
          if (impl == ops::LinalgImpl::kOneDnn && !ops::OneDnnAvailable()) continue;
          const std::vector<ir::Tensor> got = RunWith(op, impl);
          ASSERT_EQ(got.size(), 2u) << what;
          EXPECT_TRUE(got[0].SameContents(want[0])) << ops::LinalgImplName(impl) << " " << what;
          EXPECT_TRUE(got[1].SameContents(want[1])) << ops::LinalgImplName(impl) << " " << what << " (indices)";
        }
      }
    }
  }
}

}  // namespace
}  // namespace onnxamp::testing
