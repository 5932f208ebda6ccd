// Broadcasting: shape rules and errors, the merged-stride plan, and the fast span walker and binary loop checked
// against the plain per-element reference over many random shape pairs.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "runtime/executor/thread_pool.h"
#include "runtime/ops/common/broadcast.h"
#include "runtime/ops/common/elementwise.h"

namespace onnxamp::ops {
namespace {

using Dims = std::vector<int64_t>;

TEST(BroadcastShapes, Numpy) {
  EXPECT_EQ(*BroadcastShapes(Dims{2, 3}, Dims{3}), (Dims{2, 3}));
  EXPECT_EQ(*BroadcastShapes(Dims{2, 1, 4}, Dims{3, 1}), (Dims{2, 3, 4}));
  EXPECT_EQ(*BroadcastShapes(Dims{}, Dims{5}), (Dims{5}));
  EXPECT_EQ(*BroadcastShapes(Dims{1}, Dims{}), (Dims{1}));
  EXPECT_EQ(*BroadcastShapes(Dims{0, 3}, Dims{1, 3}), (Dims{0, 3}));
  EXPECT_EQ(*BroadcastShapes(std::vector<Dims>{{2, 1}, {1, 3}, {4, 1, 1}}), (Dims{4, 2, 3}));
}

TEST(BroadcastShapes, ErrorNamesBothShapes) {
  auto r = BroadcastShapes(Dims{2, 3}, Dims{4});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "shapes [2,3] and [4] cannot be broadcast: dim 3 vs 4 (axis -1)");
  auto n = BroadcastShapes(std::vector<Dims>{{5, 1}, {1, 2}, {3, 1}});
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().message(),
            "input 0 shape [5,1] and input 2 shape [3,1] cannot be broadcast: dim 5 vs 3 (axis -2)");
}

TEST(BroadcastShapes, Unidirectional) {
  EXPECT_TRUE(CheckUnidirectionalBroadcast(Dims{3, 1}, Dims{2, 3, 4}).ok());
  EXPECT_TRUE(CheckUnidirectionalBroadcast(Dims{}, Dims{2}).ok());
  Status st = CheckUnidirectionalBroadcast(Dims{3}, Dims{2, 4}, "slope");
  EXPECT_EQ(st.message(), "slope shape [3] cannot be broadcast to [2,4]: dim 3 vs 4 (axis -1)");
  st = CheckUnidirectionalBroadcast(Dims{1, 2, 4}, Dims{2, 4});
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("rank 3 is larger than 2"), std::string::npos) << st.message();
  // Unidirectional: the target may not grow.
  EXPECT_FALSE(CheckUnidirectionalBroadcast(Dims{4}, Dims{1}).ok());
}

TEST(BroadcastShapes, Legacy) {
  EXPECT_EQ(*LegacyBroadcastShape(Dims{2, 3, 4, 5}, Dims{5}, true, std::nullopt), (Dims{1, 1, 1, 5}));
  EXPECT_EQ(*LegacyBroadcastShape(Dims{2, 3, 4, 5}, Dims{3, 4}, true, 1), (Dims{1, 3, 4, 1}));
  EXPECT_EQ(*LegacyBroadcastShape(Dims{2, 3, 4, 5}, Dims{2}, true, 0), (Dims{2, 1, 1, 1}));
  EXPECT_EQ(*LegacyBroadcastShape(Dims{2, 3}, Dims{}, true, std::nullopt), (Dims{1, 1}));
  EXPECT_EQ(*LegacyBroadcastShape(Dims{2, 3}, Dims{2, 3}, false, std::nullopt), (Dims{2, 3}));
  EXPECT_FALSE(LegacyBroadcastShape(Dims{2, 3}, Dims{3}, false, std::nullopt).ok());
  EXPECT_FALSE(LegacyBroadcastShape(Dims{2, 3}, Dims{2}, true, std::nullopt).ok());
  EXPECT_FALSE(LegacyBroadcastShape(Dims{2, 3}, Dims{3}, true, 0).ok());
}

TEST(BroadcastPlan, MergesDims) {
  // Same shapes: one merged dim, contiguous.
  auto p = *BroadcastPlan::Make({{2, 3, 4}, {2, 3, 4}});
  EXPECT_EQ(p.dims(), (Dims{24}));
  EXPECT_TRUE(p.IsFull(0));
  EXPECT_TRUE(p.IsFull(1));
  // Scalar.
  p = *BroadcastPlan::Make({{2, 3, 4}, {}});
  EXPECT_EQ(p.dims(), (Dims{24}));
  EXPECT_TRUE(p.IsScalar(1));
  EXPECT_EQ(p.inner_stride(1), 0);
  // Row broadcast.
  p = *BroadcastPlan::Make({{2, 3, 4}, {4}});
  EXPECT_EQ(p.dims(), (Dims{6, 4}));
  EXPECT_EQ(p.stride(1, 0), 0);
  EXPECT_EQ(p.stride(1, 1), 1);
  // Per-channel [N, C, H, W] op [C, 1, 1].
  p = *BroadcastPlan::Make({{2, 3, 4, 5}, {3, 1, 1}});
  EXPECT_EQ(p.dims(), (Dims{2, 3, 20}));
  EXPECT_EQ(p.stride(0, 0), 60);
  EXPECT_EQ(p.stride(1, 0), 0);
  EXPECT_EQ(p.stride(1, 1), 1);
  EXPECT_EQ(p.stride(1, 2), 0);
  // Size-1 dims vanish; all-ones is a scalar output.
  p = *BroadcastPlan::Make({{1, 1}, {1}});
  EXPECT_EQ(p.dims(), (Dims{1}));
  EXPECT_EQ(p.output_dims(), (Dims{1, 1}));
  EXPECT_EQ(p.num_elements(), 1);
  // MakeTo keeps the target and checks inputs against it.
  p = *BroadcastPlan::MakeTo({2, 3}, {{3}});
  EXPECT_EQ(p.output_dims(), (Dims{2, 3}));
  auto bad = BroadcastPlan::MakeTo({2, 3}, {{2, 3}, {2}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "input 1 shape [2] cannot be broadcast to [2,3]: dim 2 vs 3 (axis -1)");
}

// A random shape pair that broadcasts: each dim of the output is split between the inputs as d/d, d/1, 1/d.
void RandomPair(std::mt19937& rng, Dims* a, Dims* b) {
  const int rank = std::uniform_int_distribution<int>(0, 5)(rng);
  a->clear();
  b->clear();
  for (int k = 0; k < rank; ++k) {
    const int64_t d = std::uniform_int_distribution<int>(1, 5)(rng);
    const int kind = std::uniform_int_distribution<int>(0, 3)(rng);
    a->push_back(kind == 1 ? 1 : d);
    b->push_back(kind == 2 ? 1 : d);
  }
  // Drop leading dims of one side sometimes (rank mismatch).
  Dims* s = (rng() & 1) ? a : b;
  const int drop = std::uniform_int_distribution<int>(0, static_cast<int>(s->size()))(rng);
  s->erase(s->begin(), s->begin() + drop);
}

TEST(BroadcastPlan, SpansMatchReferenceOffsets) {
  std::mt19937 rng(1234);
  for (int iter = 0; iter < 500; ++iter) {
    Dims a, b;
    RandomPair(rng, &a, &b);
    auto plan = BroadcastPlan::Make({a, b});
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    const int64_t n = plan->num_elements();
    // A random sub-range, to exercise partial first and last rows.
    const int64_t begin = n ? std::uniform_int_distribution<int64_t>(0, n - 1)(rng) : 0;
    const int64_t end = n ? std::uniform_int_distribution<int64_t>(begin, n)(rng) : 0;
    int64_t next = begin;
    ForEachBroadcastSpan(*plan, begin, end, [&](int64_t o, const int64_t* off, int64_t len) {
      ASSERT_EQ(o, next);
      ASSERT_GT(len, 0);
      for (int64_t j = 0; j < len; ++j) {
        ASSERT_EQ(off[0] + j * plan->inner_stride(0), BroadcastInputOffset(a, plan->output_dims(), o + j))
            << ShapeToString(a) << " " << ShapeToString(b) << " at " << o + j;
        ASSERT_EQ(off[1] + j * plan->inner_stride(1), BroadcastInputOffset(b, plan->output_dims(), o + j))
            << ShapeToString(a) << " " << ShapeToString(b) << " at " << o + j;
      }
      next = o + len;
    });
    EXPECT_EQ(next, end);
  }
}

TEST(BroadcastPlan, ManyInputsAndHighRank) {
  // Five inputs (heap-allocated offsets) over rank 10 (heap-allocated index).
  const Dims out = {2, 1, 3, 2, 1, 2, 3, 1, 2, 2};
  std::vector<Dims> ins = {out, {3, 1, 1, 2, 3, 1, 1, 1}, {2}, {}, {2, 1, 1, 1, 1, 1, 1, 1, 1, 2}};
  auto plan = *BroadcastPlan::Make(ins);
  ASSERT_EQ(plan.output_dims(), out);
  int64_t count = 0;
  ForEachBroadcastSpan(plan, 0, plan.num_elements(), [&](int64_t o, const int64_t* off, int64_t len) {
    for (int64_t j = 0; j < len; ++j) {
      for (size_t i = 0; i < ins.size(); ++i) {
        ASSERT_EQ(off[i] + j * plan.inner_stride(i), BroadcastInputOffset(ins[i], out, o + j));
      }
    }
    count += len;
  });
  EXPECT_EQ(count, plan.num_elements());
}

TEST(BinaryBroadcast, FastPathMatchesReference) {
  std::mt19937 rng(99);
  exec::ThreadPool pool(4);
  auto f = [](float x, float y) { return x * 2.0f - y; };
  for (int iter = 0; iter < 300; ++iter) {
    Dims a, b;
    RandomPair(rng, &a, &b);
    // Scale some shapes up so that the parallel path runs too.
    if (iter % 10 == 0) {
      if (a.size() < b.size()) std::swap(a, b);
      a.insert(a.begin(), 5000);
    }
    auto made = BroadcastPlan::Make({a, b});
    ASSERT_TRUE(made.ok()) << made.status().message();
    const BroadcastPlan& plan = *made;
    std::vector<float> va, vb;
    int64_t na = 1, nb = 1;
    for (int64_t d : a) na *= d;
    for (int64_t d : b) nb *= d;
    va.resize(na);
    vb.resize(nb);
    std::uniform_real_distribution<float> u(-1, 1);
    for (float& v : va) v = u(rng);
    for (float& v : vb) v = u(rng);
    std::vector<float> fast(plan.num_elements(), -7), ref(plan.num_elements(), -9);
    BinaryBroadcast(pool, plan, va.data(), vb.data(), fast.data(), f);
    BinaryBroadcastReference<float, float, float>(a, va.data(), b, vb.data(), plan.output_dims(), ref.data(), f);
    ASSERT_EQ(fast, ref) << ShapeToString(a) << " " << ShapeToString(b);
    // fp16 (bulk block conversions) and bf16 against the reference's element-by-element Load and Store.
    std::vector<Float16> ha(na), hb(nb), hfast(plan.num_elements()), href(plan.num_elements());
    for (int64_t i = 0; i < na; ++i) ha[i] = Float16(va[i]);
    for (int64_t i = 0; i < nb; ++i) hb[i] = Float16(vb[i]);
    BinaryBroadcast(pool, plan, ha.data(), hb.data(), hfast.data(), f);
    BinaryBroadcastReference<Float16, Float16, Float16>(a, ha.data(), b, hb.data(), plan.output_dims(), href.data(), f);
    for (int64_t i = 0; i < plan.num_elements(); ++i) ASSERT_EQ(hfast[i].bits, href[i].bits) << i;
    std::vector<BFloat16> ba(na), bb(nb), bfast(plan.num_elements()), bref(plan.num_elements());
    for (int64_t i = 0; i < na; ++i) ba[i] = BFloat16(va[i]);
    for (int64_t i = 0; i < nb; ++i) bb[i] = BFloat16(vb[i]);
    BinaryBroadcast(pool, plan, ba.data(), bb.data(), bfast.data(), f);
    BinaryBroadcastReference<BFloat16, BFloat16, BFloat16>(a, ba.data(), b, bb.data(), plan.output_dims(), bref.data(),
                                                           f);
    for (int64_t i = 0; i < plan.num_elements(); ++i) ASSERT_EQ(bfast[i].bits, bref[i].bits) << i;
  }
}

TEST(BinaryBroadcast, Float16StoresRoundedOnce) {
  // fp16 inputs are computed in float and rounded once: 1 + 2^-11 is a tie that rounds to even (1.0).
  exec::ThreadPool pool(1);
  auto plan = *BroadcastPlan::Make({{2}, {}});
  const Float16 a[2] = {Float16(1.0f), Float16(1.0009765625f)};
  const Float16 b[1] = {Float16(0.00048828125f)};
  Float16 out[2];
  BinaryBroadcast(pool, plan, a, b, out, [](float x, float y) { return x + y; });
  EXPECT_EQ(static_cast<float>(out[0]), 1.0f);
  EXPECT_EQ(static_cast<float>(out[1]), 1.001953125f);
}

}  // namespace
}  // namespace onnxamp::ops
