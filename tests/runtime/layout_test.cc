// The graph optimizer's blocked-layout pass (UseBlockedLayout) and the Blocked* kernels: resnet-like graphs run
// with the pass against the same graphs unoptimized on the reference kernels (batch 1 and odd batches, channel
// counts that are and are not multiples of the block), and the rewritten graph is inspected: which values became
// blocked, and that values read outside a chain or that are graph outputs stay plain.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/session.h"
#include "runtime/ir/verify.h"
#include "runtime/ops/common/conv_onednn.h"
#include "tests/runtime/layout_test_util.h"
#include "tests/runtime/ops/linalg_test_util.h"
#include "tests/runtime/session_options_util.h"

namespace onnxamp::testing {
namespace {

bool LayoutPassRuns() { return ops::PreferredChannelBlock(ops::AvailableLinalgImpl(ops::LinalgImpl::kOneDnn)) != 0; }

// Runs `model` optimized (blocked layout on) and unoptimized (reference kernels) for each batch and compares all
// outputs; returns the optimized graph.
ir::Model CheckAgainstUnoptimized(const ir::Model& model, const std::vector<int64_t>& batches, int64_t c,
                                  int64_t hw = 12, int threads = 1) {
  std::unique_ptr<exec::Session> opt, plain;
  {
    auto s = exec::Session::Create(CopyModel(model), CpuSession(threads));
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (!s.ok()) return ir::Model();
    opt = std::move(s).value();
  }
  {
    auto s = exec::Session::Create(CopyModel(model),
                                   CpuSession(1, ops::LinalgImpl::kReference, exec::GraphOptimization::kNone));
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (!s.ok()) return ir::Model();
    plain = std::move(s).value();
  }
  EXPECT_TRUE(ir::Verify(opt->model()).ok());
  uint32_t seed = 5;
  for (int64_t n : batches) {
    ir::Tensor x = TensorOf(DType::kFloat32, {n, c, hw, hw}, RandomValues(DType::kFloat32, n * c * hw * hw, ++seed));
    x.set_name("X");
    auto got = opt->Run({x});
    auto want = plain->Run({x});
    EXPECT_TRUE(got.ok()) << "batch " << n << ": " << got.status().ToString();
    EXPECT_TRUE(want.ok()) << "batch " << n << ": " << want.status().ToString();
    if (!got.ok() || !want.ok()) continue;
    EXPECT_EQ(got->size(), want->size());
    if (got->size() != want->size()) continue;
    for (size_t i = 0; i < got->size(); ++i) {
      const ir::Tensor &a = (*got)[i], &b = (*want)[i];
      EXPECT_EQ(a.dims(), b.dims()) << "batch " << n << " output " << i;
      if (a.dims() != b.dims()) continue;
      const std::vector<double> va = AsDoubles(a), vb = AsDoubles(b);
      double scale = 0;
      for (double v : vb) scale = std::max(scale, std::abs(v));
      int failures = 0;
      for (size_t j = 0; j < va.size(); ++j) {
        if (!(std::abs(va[j] - vb[j]) <= 1e-5 * scale + 1e-6) && failures++ < 5) {
          ADD_FAILURE() << "batch " << n << " output " << i << " element " << j << ": " << va[j] << ", unoptimized "
                        << vb[j];
        }
      }
    }
  }
  return CopyModel(opt->model());
}

TEST(BlockedLayout, ResNetLikeMatchesUnoptimized) {
  const ir::Model model = ResNetLike(3, 16, 32);
  const ir::Model opt = CheckAgainstUnoptimized(model, {1, 3, 5}, 3);
  if (!LayoutPassRuns()) GTEST_SKIP() << "the blocked layout is not used on this CPU/build";
  // Every convolution and pooling is blocked; nothing reorders between them.
  EXPECT_EQ(Count(opt, exec::kBlockedConvOp), 6);
  EXPECT_EQ(Count(opt, exec::kFusedConvOp), 0);
  EXPECT_EQ(Count(opt, "Conv"), 0);
  EXPECT_EQ(Count(opt, exec::kBlockedMaxPoolOp), 1);
  EXPECT_EQ(Count(opt, exec::kBlockedGlobalAveragePoolOp), 1);
}

TEST(BlockedLayout, TwoThreadsMatchUnoptimized) { CheckAgainstUnoptimized(ResNetLike(3, 16, 32), {1, 4}, 3, 12, 2); }

TEST(BlockedLayout, ChannelsNotMultipleOfBlock) {
  CheckAgainstUnoptimized(ResNetLike(5, 20, 24), {1, 3}, 5);
  CheckAgainstUnoptimized(ResNetLike(17, 7, 9), {2}, 17);
}

TEST(BlockedLayout, AveragePoolInChain) {
  Builder b(8);
  ir::Value* a = b.Conv(b.x(), 16);
  ir::Value* p = b.Pool("AveragePool", a, 3, 2);
  b.Output(b.Head(b.Conv(p, 16)));
  const ir::Model opt = CheckAgainstUnoptimized(b.Take(), {1, 3}, 8, 13);
  if (!LayoutPassRuns()) GTEST_SKIP();
  EXPECT_EQ(Count(opt, exec::kBlockedAveragePoolOp), 1);
}

TEST(BlockedLayout, ValueReadOutsideTheChainStaysPlain) {
  Builder b(3);
  ir::Value* a = b.Conv(b.x(), 16);
  ir::Value* c = b.Conv(a, 16);
  ir::Value* neg = b.Node("Neg", {a});  // a is also read by a non-chain op
  b.Output(b.Head(c));
  b.Output(neg);
  const ir::Model opt = CheckAgainstUnoptimized(b.Take(), {1, 3}, 3);
  if (!LayoutPassRuns()) GTEST_SKIP();
  // The first convolution keeps its plain output (Neg reads it); the second writes blocked for the global pool.
  for (const ir::Node* n : opt.graph->nodes()) {
    if (n->op_type() == "Neg") {
      ASSERT_NE(n->input(0)->producer(), nullptr);
      EXPECT_EQ(n->input(0)->producer()->GetInt("y_block", 0), 0);
    }
  }
  EXPECT_EQ(Count(opt, exec::kBlockedConvOp), 1);
}

TEST(BlockedLayout, GraphOutputInsideChainStaysPlain) {
  Builder b(3);
  ir::Value* a = b.Conv(b.x(), 16);
  ir::Value* p = b.Pool("MaxPool", a, 2, 2);
  ir::Value* c = b.Conv(p, 16);
  b.Output(b.Head(c));
  b.Output(p);  // a pooling output in the middle of the chain is a graph output
  const ir::Model opt = CheckAgainstUnoptimized(b.Take(), {1, 3}, 3);
  if (!LayoutPassRuns()) GTEST_SKIP();
  EXPECT_EQ(Count(opt, "MaxPool"), 1);  // reads a plain input, writes the plain graph output
  for (const ir::Value* v : opt.graph->outputs()) {
    EXPECT_NE(v->type().shape() ? v->type().shape()->size() : 0, 5u) << v->name();
  }
}

TEST(BlockedLayout, BroadcastResidualFallsBack) {
  // Add(conv(GlobalAveragePool(a)), a): the convolution's output [N, C, 1, 1] broadcasts against a blocked Z.
  Builder b(4);
  ir::Value* a = b.Conv(b.x(), 16);
  ir::Value* g = b.Node("GlobalAveragePool", {a});
  ir::Value* y = b.Conv(g, 16, 1, 1, a);
  b.Output(b.Head(b.Conv(y, 16)));
  CheckAgainstUnoptimized(b.Take(), {1, 3}, 4);
}

TEST(BlockedLayout, PassRewritesTypesAndVerifies) {
  ir::Model model = ResNetLike(3, 20, 32);
  ir::Graph& g = *model.graph;
  bool changed = false;
  ASSERT_TRUE(exec::FoldConvBatchNorm(g, &changed).ok());
  ASSERT_TRUE(exec::FuseConvActivation(g, &changed).ok());
  ASSERT_TRUE(exec::UseBlockedLayout(g, 16, &changed).ok());
  EXPECT_TRUE(changed);
  EXPECT_TRUE(ir::Verify(g).ok());
  int blocked_values = 0;
  for (const ir::Node* n : g.nodes()) {
    if (n->op_type() != exec::kBlockedConvOp) continue;
    if (n->GetInt("y_block", 0) == 16) {
      const auto& shape = n->output(0)->type().shape();
      ASSERT_TRUE(shape.has_value());
      ASSERT_EQ(shape->size(), 5u);
      const int64_t m = n->input(1)->initializer()->dims()[0];
      EXPECT_EQ((*shape)[1], ir::Dim::Value((m + 15) / 16));
      EXPECT_EQ((*shape)[4], ir::Dim::Value(16));
      ++blocked_values;
    }
  }
  EXPECT_EQ(blocked_values, 6);
  // A second run finds nothing more to do.
  ASSERT_TRUE(exec::UseBlockedLayout(g, 16, &changed).ok());
  EXPECT_FALSE(changed);
  EXPECT_FALSE(exec::UseBlockedLayout(g, 4, &changed).ok());
}

TEST(BlockedLayout, DisabledLeavesFusedConvs) {
  if (!LayoutPassRuns()) GTEST_SKIP();
  exec::SessionOptions options;
  options.blocked_layout = false;
  ir::Model model = ResNetLike(3, 16, 32);
  ASSERT_TRUE(exec::OptimizeForInference(model, options).ok());
  EXPECT_EQ(Count(model, exec::kBlockedConvOp), 0);
  EXPECT_EQ(Count(model, exec::kFusedConvOp), 5);
}

TEST(BlockedLayout, CountIncludePadCeilModeAveragePoolIsLeftPlain) {
  Builder b(3);
  ir::Value* a = b.Conv(b.x(), 16);
  ir::Value* p = b.Pool("AveragePool", a, 3, 2);
  p->producer()->SetAttribute(ir::Attribute::Int("ceil_mode", 1));
  p->producer()->SetAttribute(ir::Attribute::Int("count_include_pad", 1));
  b.Output(b.Head(b.Conv(p, 16)));
  const ir::Model opt = CheckAgainstUnoptimized(b.Take(), {1, 3}, 3, 12);
  if (!LayoutPassRuns()) GTEST_SKIP();
  EXPECT_EQ(Count(opt, "AveragePool"), 1);
}

// Runs the float16 `model` with the blocked layout (ComputeHalfConvsInFloat, then UseBlockedLayout) and with it off
// (the float16 kernels, which compute in float and round each output to float16) and compares the outputs: the same
// roundings, so they differ only where a convolution's float sum in another order rounds to the neighbouring float16
// value. Returns the optimized graph.
ir::Model CheckHalfAgainstPlainLayout(const ir::Model& model, const std::vector<int64_t>& batches, int64_t c,
                                      int64_t hw, int threads) {
  exec::SessionOptions plain_options = CpuSession(threads);
  plain_options.blocked_layout = false;
  auto opt = exec::Session::Create(CopyModel(model), CpuSession(threads));
  auto plain = exec::Session::Create(CopyModel(model), plain_options);
  EXPECT_TRUE(opt.ok()) << opt.status().ToString();
  EXPECT_TRUE(plain.ok()) << plain.status().ToString();
  if (!opt.ok() || !plain.ok()) return ir::Model();
  EXPECT_TRUE(ir::Verify((*opt)->model()).ok());
  uint32_t seed = 40;
  for (int64_t n : batches) {
    ir::Tensor x = TensorOf(DType::kFloat16, {n, c, hw, hw}, RandomValues(DType::kFloat16, n * c * hw * hw, ++seed));
    x.set_name("X");
    auto got = (*opt)->Run({x});
    auto want = (*plain)->Run({x});
    EXPECT_TRUE(got.ok() && want.ok()) << "batch " << n;
    if (!got.ok() || !want.ok()) continue;
    for (size_t i = 0; i < got->size(); ++i) {
      EXPECT_EQ((*got)[i].dtype(), DType::kFloat16);
      EXPECT_EQ((*got)[i].name(), (*want)[i].name());
      EXPECT_EQ((*got)[i].dims(), (*want)[i].dims());
      const std::vector<double> va = AsDoubles((*got)[i]), vb = AsDoubles((*want)[i]);
      if (va.size() != vb.size()) continue;
      double scale = 0;
      for (double v : vb) scale = std::max(scale, std::abs(v));
      int failures = 0;
      for (size_t j = 0; j < va.size(); ++j) {
        if (!(std::abs(va[j] - vb[j]) <= 4e-3 * scale) && failures++ < 5) {
          ADD_FAILURE() << "batch " << n << " element " << j << ": " << va[j] << ", plain layout " << vb[j];
        }
      }
    }
  }
  return CopyModel((*opt)->model());
}

TEST(BlockedLayout, HalfChainsRunInFloatOnTheBlockedLayout) {
  const ir::Model model = ResNetLike(3, 16, 32, DType::kFloat16);
  const ir::Model opt = CheckHalfAgainstPlainLayout(model, {1, 3}, 3, 12, 1);
  CheckHalfAgainstPlainLayout(model, {4}, 3, 12, 2);
  CheckHalfAgainstPlainLayout(ResNetLike(5, 20, 24, DType::kFloat16), {2}, 5, 9, 1);
  if (!LayoutPassRuns()) GTEST_SKIP() << "the blocked layout is not used on this CPU/build";
  // Every convolution and the pools blocked, in float; one Cast in, one out (the global pool's mean to float16).
  EXPECT_EQ(Count(opt, exec::kBlockedConvOp), 6);
  EXPECT_EQ(Count(opt, exec::kBlockedMaxPoolOp), 1);
  EXPECT_EQ(Count(opt, exec::kBlockedGlobalAveragePoolOp), 1);
  EXPECT_EQ(Count(opt, "Cast"), 2);
  for (const ir::Node* n : opt.graph->nodes()) {
    if (n->op_type() == exec::kBlockedConvOp) {
      EXPECT_EQ(n->GetInt("round_to", 0), static_cast<int64_t>(DType::kFloat16)) << n->name();
      EXPECT_EQ(n->input(1)->initializer()->dtype(), DType::kFloat32) << n->name();
    }
    if (n->op_type() == "Gemm") EXPECT_EQ(n->input(1)->initializer()->dtype(), DType::kFloat16);
  }
}

TEST(BlockedLayout, HalfValuesReadOutsideAChainAndGraphOutputsStayHalf) {
  Builder b(3, DType::kFloat16);
  ir::Value* a = b.Conv(b.x(), 16);
  ir::Value* p = b.Pool("MaxPool", a, 2, 2);
  ir::Value* c = b.Conv(p, 16);
  ir::Value* neg = b.Node("Neg", {a});              // a float16 op reads the first convolution's output
  ir::Value* avg = b.Pool("AveragePool", c, 3, 1);  // stays float16, between two chains
  b.Output(b.Head(b.Conv(avg, 16)));
  b.Output(neg);
  b.Output(p);  // a pooling output inside the chain is a graph output
  const ir::Model opt = CheckHalfAgainstPlainLayout(b.Take(), {1, 2}, 3, 12, 1);
  if (!LayoutPassRuns()) GTEST_SKIP();
  for (const ir::Value* v : opt.graph->outputs()) {
    EXPECT_EQ(v->type().elem_type(), DType::kFloat16) << v->name();
  }
  for (const ir::Node* n : opt.graph->nodes()) {
    const ir::Node* producer = n->inputs().empty() ? nullptr : n->input(0)->producer();
    if (n->op_type() == "Neg") {
      // The first convolution touches no blocked value (its output is read by Neg and MaxPool, a graph output), so it
      // stays a float16 FusedConv.
      ASSERT_NE(producer, nullptr);
      EXPECT_EQ(producer->op_type(), exec::kFusedConvOp);
      EXPECT_EQ(producer->input(1)->initializer()->dtype(), DType::kFloat16);
    }
    if (n->op_type() == "AveragePool") {  // reads the second convolution's float output cast to float16
      ASSERT_NE(producer, nullptr);
      EXPECT_EQ(producer->op_type(), "Cast");
      EXPECT_EQ(producer->GetInt("to", 0), static_cast<int64_t>(DType::kFloat16));
    }
  }
  // Only the last convolution writes blocked (for the global pool); the second computes in float on the plain
  // layout (the float16 AveragePool reads it through a Cast).
  EXPECT_EQ(Count(opt, exec::kBlockedConvOp), 1);
  EXPECT_EQ(Count(opt, exec::kBlockedGlobalAveragePoolOp), 1);
}

TEST(BlockedLayout, RoundToAttribute) {
  // A float FusedConv with round_to = FLOAT16 writes its float output rounded to float16 values.
  Builder b(3);
  b.Output(b.Conv(b.x(), 8));
  ir::Model model = b.Take();
  exec::SessionOptions options = CpuSession(1);
  options.blocked_layout = false;
  ASSERT_TRUE(exec::OptimizeForInference(model, options).ok());
  ASSERT_EQ(Count(model, exec::kFusedConvOp), 1);
  ir::Tensor x = TensorOf(DType::kFloat32, {2, 3, 7, 7}, RandomValues(DType::kFloat32, 2 * 3 * 7 * 7, 3));
  x.set_name("X");
  auto plain = exec::Session::Create(CopyModel(model), options);
  ASSERT_TRUE(plain.ok());
  auto want = (*plain)->Run({x});
  ASSERT_TRUE(want.ok());
  for (ir::Node* n : model.graph->nodes()) {
    if (n->op_type() == exec::kFusedConvOp) {
      n->SetAttribute(ir::Attribute::Int("round_to", static_cast<int64_t>(DType::kFloat16)));
    }
  }
  auto rounding = exec::Session::Create(CopyModel(model), options);
  ASSERT_TRUE(rounding.ok()) << rounding.status().ToString();
  auto got = (*rounding)->Run({x});
  ASSERT_TRUE(got.ok());
  const std::span<const float> w = (*want)[0].values<float>(), g = (*got)[0].values<float>();
  ASSERT_EQ(w.size(), g.size());
  for (size_t i = 0; i < w.size(); ++i) ASSERT_EQ(g[i], static_cast<float>(Float16(w[i]))) << i;
  for (ir::Node* n : model.graph->nodes()) {
    if (n->op_type() == exec::kFusedConvOp) n->SetAttribute(ir::Attribute::Int("round_to", 1));
  }
  auto refused = exec::Session::Create(CopyModel(model), options);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().ToString().find("round_to"), std::string::npos) << refused.status().ToString();
}

}  // namespace
}  // namespace onnxamp::testing
