// BlockedMaxPool's AVX2 kernel (runtime/ops/layout/blocked_pool_avx2.h) against the reference MaxPool kernel: 1-D,
// 2-D and 3-D windows with strides, pads, dilations, ceil_mode and auto_pad, blocks of 8 and 16, channel counts that
// are and are not multiples of the block, NaN and infinities in the input, one and two threads; directly and through
// the BlockedMaxPool op. Windows that lie wholly in the padding are left to the general path.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/thread_pool.h"
#include "runtime/ops/common/conv_geometry.h"
#include "runtime/ops/common/conv_onednn.h"
#include "runtime/ops/layout/blocked_pool_avx2.h"
#include "tests/runtime/ops/blocked_test_util.h"
#include "tests/runtime/ops/linalg_test_util.h"

namespace onnxamp::testing {
namespace {

using Dims = std::vector<int64_t>;

struct BlockedPoolCase {
  std::string name;
  Dims x;  // plain [N, C, spatial...]
  Dims kernel;
  Dims strides = {}, dilations = {}, pads = {};
  std::string auto_pad = {};
  bool ceil_mode = false;
};

std::vector<BlockedPoolCase> Cases() {
  return {
      {"cnn_stem_2x2_s2", {2, 16, 32, 32}, {2, 2}, {2, 2}},
      {"c5_k3_s2_pad1_ceil", {3, 5, 9, 11}, {3, 3}, {2, 2}, {}, {1, 1, 1, 1}, {}, true},
      {"c20_k3_dilation2_asymmetric_pads", {1, 20, 13, 12}, {3, 3}, {1, 1}, {2, 2}, {2, 1, 2, 1}},
      {"k1x5_s3x1_dilation1x2", {1, 8, 10, 15}, {1, 5}, {3, 1}, {1, 2}, {0, 2, 0, 2}},
      {"k3_s2_same_upper", {2, 8, 7, 9}, {3, 3}, {2, 2}, {}, {}, "SAME_UPPER"},
      {"k2_s2_same_lower", {2, 9, 7, 9}, {2, 2}, {2, 2}, {}, {}, "SAME_LOWER"},
      {"k4_s3_ceil_past_end", {1, 16, 10, 11}, {4, 4}, {3, 3}, {}, {0, 1, 2, 0}, {}, true},
      {"1d_k4_s3_pad_ceil", {2, 9, 17}, {4}, {3}, {}, {2, 1}, {}, true},
      {"1d_k3_dilation3", {1, 17, 20}, {3}, {1}, {3}},
      {"3d_k2x3x2", {1, 12, 5, 6, 7}, {2, 3, 2}, {1, 2, 2}, {}, {1, 0, 1, 1, 1, 0}},
      {"3d_k3_s2_ceil", {2, 3, 6, 5, 7}, {3, 3, 3}, {2, 2, 2}, {}, {1, 1, 1, 0, 0, 0}, {}, true},
      {"big_k3_s2_pad1", {4, 24, 40, 40}, {3, 3}, {2, 2}, {}, {1, 1, 1, 1}},
  };
}

int64_t Count(const Dims& d) {
  int64_t n = 1;
  for (int64_t v : d) n *= v;
  return n;
}

// Random values in [-100, 100) with a few NaNs and infinities at seeded places.
std::vector<float> Inputs(int64_t count, uint32_t seed) {
  const std::vector<double> r = RandomValues(DType::kFloat32, count, seed, -100, 100);
  std::vector<float> x(r.begin(), r.end());
  for (int64_t i = seed % 13; i < count; i += 211) x[i] = std::numeric_limits<float>::quiet_NaN();
  for (int64_t i = seed % 7; i < count; i += 157) x[i] = -std::numeric_limits<float>::infinity();
  for (int64_t i = seed % 5 + 40; i < count; i += 397) x[i] = std::numeric_limits<float>::infinity();
  return x;
}

ops::WindowAttrs AttrsOf(const BlockedPoolCase& c) {
  ops::WindowAttrs a;
  a.kernel_shape = c.kernel;
  a.strides = c.strides;
  a.dilations = c.dilations;
  a.pads = c.pads;
  if (c.auto_pad == "SAME_UPPER") a.auto_pad = ops::AutoPad::kSameUpper;
  if (c.auto_pad == "SAME_LOWER") a.auto_pad = ops::AutoPad::kSameLower;
  return a;
}

void AddPoolAttrs(const BlockedPoolCase& c, OpTester& t) {
  t.Attr(ir::Attribute::Ints("kernel_shape", c.kernel));
  if (!c.strides.empty()) t.Attr(ir::Attribute::Ints("strides", c.strides));
  if (!c.dilations.empty()) t.Attr(ir::Attribute::Ints("dilations", c.dilations));
  if (!c.pads.empty()) t.Attr(ir::Attribute::Ints("pads", c.pads));
  if (!c.auto_pad.empty()) t.Attr(ir::Attribute::String("auto_pad", c.auto_pad));
  if (c.ceil_mode) t.Attr(ir::Attribute::Int("ceil_mode", 1));
}

// The reference MaxPool kernel's output for plain x.
ir::Tensor ReferenceMaxPool(const BlockedPoolCase& c, const std::vector<float>& x) {
  OpTester t = MakeTester("MaxPool", 19);
  AddPoolAttrs(c, t);
  t.Input(MakeTensor<float>(c.x, x));
  auto out = RunWith(t, ops::LinalgImpl::kReference);
  return out.empty() ? ir::Tensor() : std::move(out[0]);
}

// Equal values, or NaN in both.
void ExpectSame(const std::vector<float>& got, const ir::Tensor& want, const std::string& what) {
  const std::vector<float> w = Values<float>(want);
  ASSERT_EQ(got.size(), w.size()) << what;
  int failures = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const bool same = std::isnan(w[i]) ? std::isnan(got[i]) : got[i] == w[i];
    if (!same && failures++ < 5)
      ADD_FAILURE() << what << ": element " << i << " is " << got[i] << ", expected " << w[i];
  }
}

bool KernelRunsHere() {
  ops::WindowGeometry g;
  g.in = g.out = g.kernel = g.stride = g.dilation = {1};
  g.pad_begin = g.pad_end = {0};
  return ops::BlockedMaxPoolAvx2Applies(g, 8);
}

TEST(BlockedMaxPoolAvx2, MatchesReferenceMaxPool) {
  if (!KernelRunsHere()) GTEST_SKIP() << "this CPU has no AVX2";
  uint32_t seed = 11;
  for (const BlockedPoolCase& c : Cases()) {
    const std::vector<float> x = Inputs(Count(c.x), ++seed);
    const ir::Tensor want = ReferenceMaxPool(c, x);
    ASSERT_GE(want.rank(), 3) << c.name;
    const Dims in(c.x.begin() + 2, c.x.end());
    auto g = ops::ForwardGeometry(AttrsOf(c), in, c.kernel, c.ceil_mode);
    ASSERT_TRUE(g.ok()) << c.name << ": " << g.status().ToString();
    EXPECT_EQ(Dims(want.dims().begin() + 2, want.dims().end()), g->out) << c.name;
    const int64_t n = c.x[0], ch = c.x[1];
    for (int64_t block : {8, 16}) {
      ASSERT_TRUE(ops::BlockedMaxPoolAvx2Applies(*g, block)) << c.name;
      const std::vector<float> xb = ToBlocked(x, n, ch, g->in_size(), block);
      for (int threads : {1, 2}) {
        exec::ThreadPool pool(threads);
        const std::string what = StrCat(c.name, " block ", block, " threads ", threads);
        // Filled with a value the kernel never writes, so that a skipped position shows.
        std::vector<float> yb(static_cast<size_t>(n * CeilDiv(ch, block) * g->out_size() * block), 12345.0f);
        ops::BlockedMaxPoolAvx2(*g, n, CeilDiv(ch, block), block, xb.data(), yb.data(), pool);
        ExpectSame(FromBlocked(yb.data(), n, ch, g->out_size(), block, what), want, what);
      }
    }
  }
}

TEST(BlockedMaxPoolAvx2, WindowsInsideThePaddingAreLeftToTheGeneralPath) {
  // pads begin 3 with a kernel of 2: the first output row's window holds no input position.
  BlockedPoolCase c{"empty_window", {1, 8, 4, 4}, {2, 2}, {1, 1}, {}, {3, 0, 0, 0}};
  auto g = ops::ForwardGeometry(AttrsOf(c), {4, 4}, c.kernel, false);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_FALSE(ops::BlockedMaxPoolAvx2Applies(*g, 8));
  // Blocks other than 8 and 16, and more than 3 spatial dims, are not taken either.
  g = ops::ForwardGeometry(ops::WindowAttrs{}, {4, 4}, {2, 2}, false);
  ASSERT_TRUE(g.ok());
  EXPECT_FALSE(ops::BlockedMaxPoolAvx2Applies(*g, 4));
  g = ops::ForwardGeometry(ops::WindowAttrs{}, {3, 3, 3, 3}, {2, 2, 2, 2}, false);
  ASSERT_TRUE(g.ok());
  EXPECT_FALSE(ops::BlockedMaxPoolAvx2Applies(*g, 8));
}

// The BlockedMaxPool op (which takes the AVX2 kernel where it applies) against the reference MaxPool kernel.
TEST(BlockedMaxPoolOp, MatchesReferenceMaxPool) {
  if (!ops::OneDnnAvailable() || !KernelRunsHere()) GTEST_SKIP() << "BlockedMaxPool needs oneDNN and AVX2 here";
  uint32_t seed = 101;
  for (const BlockedPoolCase& c : Cases()) {
    const std::vector<float> x = Inputs(Count(c.x), ++seed);
    const ir::Tensor want = ReferenceMaxPool(c, x);
    ASSERT_GE(want.rank(), 3) << c.name;
    const int64_t n = c.x[0], ch = c.x[1], in_size = Count(Dims(c.x.begin() + 2, c.x.end()));
    const int64_t out_size = Count(Dims(want.dims().begin() + 2, want.dims().end()));
    for (int64_t block : {8, 16}) {
      OpTester t = InternalOp(exec::kBlockedMaxPoolOp);
      AddPoolAttrs(c, t);
      t.Attr(ir::Attribute::Int("block", block));
      Dims xb_dims = c.x;
      xb_dims[1] = CeilDiv(ch, block);
      xb_dims.push_back(block);
      t.Input(MakeTensor<float>(xb_dims, ToBlocked(x, n, ch, in_size, block)));
      t.options.num_threads = 2;
      const std::string what = StrCat(c.name, " block ", block);
      auto out = t.Run();
      ASSERT_TRUE(out.ok()) << what << ": " << out.status().ToString();
      Dims yb_dims = want.dims();
      yb_dims[1] = CeilDiv(ch, block);
      yb_dims.push_back(block);
      ASSERT_EQ((*out)[0].dims(), yb_dims) << what;
      ExpectSame(FromBlocked((*out)[0].values<float>().data(), n, ch, out_size, block, what), want, what);
    }
  }
}

}  // namespace
}  // namespace onnxamp::testing
