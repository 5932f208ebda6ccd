// The channels-last layout pass (UseChannelsLastLayout) and the CPU kernels of the ChannelsLast* ops: graphs
// rewritten by the pass run on the CPU against the same graphs unoptimized on the reference kernels (fp32 and fp16,
// batch 1 and odd batches, odd channel counts, 1-D/2-D/3-D), the rewritten graph is inspected (which nodes changed,
// where the Transposes went, the permuted weights), and each op is checked on its own against the plain op.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/session.h"
#include "runtime/ir/verify.h"
#include "tests/runtime/layout_test_util.h"
#include "tests/runtime/op_tester.h"
#include "tests/runtime/ops/linalg_test_util.h"
#include "tests/runtime/session_options_util.h"

namespace onnxamp::testing {
namespace {

// The session optimizer's passes, then the channels-last pass for `dtypes` (as a CUDA session does).
ir::Model Rewrite(const ir::Model& model, const std::vector<DType>& dtypes, bool* changed) {
  ir::Model m = CopyModel(model);
  bool c = false;
  EXPECT_TRUE(exec::FoldConvBatchNorm(*m.graph, &c).ok());
  EXPECT_TRUE(exec::FuseConvActivation(*m.graph, &c).ok());
  EXPECT_TRUE(exec::UseChannelsLastLayout(*m.graph, dtypes, changed).ok());
  m.SetOpsetVersion(exec::kInternalDomain, 1);
  const Status verified = ir::Verify(m);
  EXPECT_TRUE(verified.ok()) << verified.ToString();
  return m;
}

// Runs the rewritten `model` (as it is: no further optimization) and the original on the reference kernels for each
// batch and compares every output, with a tolerance for `dtype`.
void ExpectSameResults(const ir::Model& rewritten, const ir::Model& original, DType dtype, int64_t c,
                       const std::vector<int64_t>& batches, const std::vector<int64_t>& spatial) {
  auto opt = exec::Session::Create(CopyModel(rewritten),
                                   CpuSession(0, ops::LinalgImpl::kOneDnn, exec::GraphOptimization::kNone));
  ASSERT_TRUE(opt.ok()) << opt.status().ToString();
  std::unique_ptr<exec::Session> plain;
  {
    auto s = exec::Session::Create(CopyModel(original),
                                   CpuSession(0, ops::LinalgImpl::kReference, exec::GraphOptimization::kNone));
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    plain = std::move(s).value();
  }
  const double rel = dtype == DType::kFloat32 ? 1e-5 : 2e-2;
  uint32_t seed = 11;
  for (int64_t n : batches) {
    std::vector<int64_t> dims = {n, c};
    dims.insert(dims.end(), spatial.begin(), spatial.end());
    int64_t count = 1;
    for (int64_t d : dims) count *= d;
    ir::Tensor x = TensorOf(dtype, dims, RandomValues(dtype, count, ++seed));
    x.set_name("X");
    auto got = (*opt)->Run({x});
    auto want = plain->Run({x});
    ASSERT_TRUE(got.ok()) << "batch " << n << ": " << got.status().ToString();
    ASSERT_TRUE(want.ok()) << "batch " << n << ": " << want.status().ToString();
    ASSERT_EQ(got->size(), want->size());
    for (size_t i = 0; i < got->size(); ++i) {
      const ir::Tensor &a = (*got)[i], &b = (*want)[i];
      ASSERT_EQ(a.dims(), b.dims()) << "batch " << n << " output " << i;
      ASSERT_EQ(a.dtype(), b.dtype());
      const std::vector<double> va = AsDoubles(a), vb = AsDoubles(b);
      double scale = 0;
      for (double v : vb) scale = std::max(scale, std::abs(v));
      int failures = 0;
      for (size_t j = 0; j < va.size(); ++j) {
        if (!(std::abs(va[j] - vb[j]) <= rel * scale + 1e-6) && failures++ < 5) {
          ADD_FAILURE() << "batch " << n << " output " << i << " element " << j << ": " << va[j] << ", plain " << vb[j];
        }
      }
    }
  }
}

const ir::Node* Producer(const ir::Value* v) { return v ? v->producer() : nullptr; }

TEST(ChannelsLastLayout, ResNetLikeFp32) {
  const ir::Model model = ResNetLike(3, 16, 32);
  bool changed = false;
  const ir::Model cl = Rewrite(model, {DType::kFloat32}, &changed);
  EXPECT_TRUE(changed);
  // Every convolution and pooling switches; one Transpose enters the chain (X) and none leaves it (the global pool
  // writes the plain [N, C, 1, 1]).
  EXPECT_EQ(Count(cl, exec::kChannelsLastConvOp), 6);
  EXPECT_EQ(Count(cl, exec::kFusedConvOp), 0);
  EXPECT_EQ(Count(cl, exec::kChannelsLastMaxPoolOp), 1);
  EXPECT_EQ(Count(cl, exec::kChannelsLastGlobalAveragePoolOp), 1);
  EXPECT_EQ(Count(cl, "Transpose"), 1);
  ExpectSameResults(cl, model, DType::kFloat32, 3, {1, 3}, {12, 12});
}

TEST(ChannelsLastLayout, ResNetLikeFp16OddChannels) {
  const ir::Model model = ResNetLike(5, 7, 17, DType::kFloat16);
  bool changed = false;
  const ir::Model cl = Rewrite(model, {DType::kFloat16, DType::kBFloat16}, &changed);
  EXPECT_TRUE(changed);
  EXPECT_EQ(Count(cl, exec::kChannelsLastConvOp), 6);
  ExpectSameResults(cl, model, DType::kFloat16, 5, {1, 2}, {11, 9});
}

TEST(ChannelsLastLayout, OtherElementTypesAreLeftAlone) {
  bool changed = true;
  const ir::Model cl = Rewrite(ResNetLike(3, 16, 32), {DType::kFloat16, DType::kBFloat16}, &changed);
  EXPECT_FALSE(changed);
  EXPECT_EQ(Count(cl, exec::kChannelsLastConvOp), 0);
  EXPECT_EQ(Count(cl, "Transpose"), 0);
}

TEST(ChannelsLastLayout, WeightsArePermutedOnce) {
  const ir::Model model = ResNetLike(3, 4, 6);
  bool changed = false;
  const ir::Model cl = Rewrite(model, {DType::kFloat32}, &changed);
  for (const ir::Node* n : cl.graph->nodes()) {
    if (n->op_type() != exec::kChannelsLastConvOp) continue;
    const ir::Tensor* w = n->input(1)->initializer();
    ASSERT_NE(w, nullptr) << n->Describe();
    ASSERT_EQ(w->rank(), 4u);
    // [M, kH, kW, C/g]: the first convolution reads the 3 channels of X.
    if (Producer(n->input(0)) && Producer(n->input(0))->op_type() == "Transpose") {
      EXPECT_EQ(w->dims()[3], 3);
    }
    EXPECT_EQ(w->dims()[1], w->dims()[2]);  // square kernels
  }
  // The plain weights are gone: each initializer of a convolution is read.
  for (const ir::Value* v : cl.graph->initializers()) EXPECT_FALSE(v->uses().empty()) << v->name();
}

TEST(ChannelsLastLayout, ValueReadOutsideTheChainLeavesThroughOneTranspose) {
  Builder b(3);
  ir::Value* a = b.Conv(b.x(), 16);
  ir::Value* c = b.Conv(a, 16);
  ir::Value* neg = b.Node("Neg", {c});  // c is also read by an op outside the chain
  ir::Value* d = b.Conv(c, 16);
  b.Output(b.Head(d));
  b.Output(neg);
  const ir::Model model = b.Take();
  bool changed = false;
  const ir::Model cl = Rewrite(model, {DType::kFloat32}, &changed);
  // X enters through a Transpose; the second convolution writes a channels-last value that the third reads as it
  // is and that a Transpose turns into the plain c for Neg.
  EXPECT_EQ(Count(cl, exec::kChannelsLastConvOp), 3);
  EXPECT_EQ(Count(cl, "Transpose"), 2);
  for (const ir::Node* n : cl.graph->nodes()) {
    if (n->op_type() == "Neg") {
      ASSERT_NE(Producer(n->input(0)), nullptr);
      EXPECT_EQ(Producer(n->input(0))->op_type(), "Transpose");
    }
  }
  ExpectSameResults(cl, model, DType::kFloat32, 3, {1, 3}, {10, 10});
}

TEST(ChannelsLastLayout, ChainEndingInAPlainConvolution) {
  Builder b(3);
  ir::Value* a = b.Conv(b.x(), 5);
  ir::Value* c = b.Conv(a, 5);
  b.Output(b.Node("Neg", {c}));
  const ir::Model model = b.Take();
  bool changed = false;
  const ir::Model cl = Rewrite(model, {DType::kFloat32}, &changed);
  // The first convolution's output is read only by the second: both switch, the second's output leaves.
  EXPECT_EQ(Count(cl, exec::kChannelsLastConvOp), 2);
  EXPECT_EQ(Count(cl, "Transpose"), 2);
  ExpectSameResults(cl, model, DType::kFloat32, 3, {2}, {9, 6});
}

TEST(ChannelsLastLayout, GraphOutputsKeepTheirNamesAndLayout) {
  Builder b(3);
  ir::Value* a = b.Conv(b.x(), 8);
  ir::Value* p = b.Pool("MaxPool", a, 2, 2);
  ir::Value* c = b.Conv(p, 8, 3, 1, nullptr, false);
  b.Output(b.Head(c));
  b.Output(p);  // a pooling output in the middle of the chain is a graph output
  b.Output(c);  // and a convolution's
  const ir::Model model = b.Take();
  bool changed = false;
  const ir::Model cl = Rewrite(model, {DType::kFloat32}, &changed);
  ASSERT_EQ(cl.graph->outputs().size(), model.graph->outputs().size());
  for (size_t i = 0; i < cl.graph->outputs().size(); ++i) {
    EXPECT_EQ(cl.graph->outputs()[i]->name(), model.graph->outputs()[i]->name());
  }
  EXPECT_EQ(Count(cl, "MaxPool"), 1);  // its output must be plain
  ExpectSameResults(cl, model, DType::kFloat32, 3, {1, 2}, {12, 12});
}

TEST(ChannelsLastLayout, AveragePoolsWithEveryAttribute) {
  Builder b(6);
  ir::Value* a = b.Conv(b.x(), 9);
  ir::Value* p = b.Pool("AveragePool", a, 3, 2);
  p->producer()->SetAttribute(ir::Attribute::Int("ceil_mode", 1));
  p->producer()->SetAttribute(ir::Attribute::Int("count_include_pad", 1));
  p->producer()->SetAttribute(ir::Attribute::Ints("pads", {1, 0, 1, 2}));
  ir::Value* q = b.Pool("MaxPool", b.Conv(p, 9), 2, 1);
  q->producer()->SetAttribute(ir::Attribute::Ints("dilations", {2, 1}));
  b.Output(b.Head(b.Conv(q, 5)));
  const ir::Model model = b.Take();
  bool changed = false;
  const ir::Model cl = Rewrite(model, {DType::kFloat32}, &changed);
  EXPECT_EQ(Count(cl, exec::kChannelsLastAveragePoolOp), 1);
  EXPECT_EQ(Count(cl, exec::kChannelsLastMaxPoolOp), 1);
  ExpectSameResults(cl, model, DType::kFloat32, 6, {1, 3}, {13, 11});
}

TEST(ChannelsLastLayout, ResidualFromTheGraphInputEntersOnce) {
  // Z = X itself (a plain value of known rank): one Transpose of X serves both the first convolution and the Z.
  Builder b(8);
  ir::Value* a = b.Conv(b.x(), 8);
  ir::Value* r = b.Conv(a, 8, 3, 1, b.x());
  b.Output(b.Head(r));
  const ir::Model model = b.Take();
  bool changed = false;
  const ir::Model cl = Rewrite(model, {DType::kFloat32}, &changed);
  EXPECT_EQ(Count(cl, exec::kChannelsLastConvOp), 2);
  EXPECT_EQ(Count(cl, "Transpose"), 1);
  ExpectSameResults(cl, model, DType::kFloat32, 8, {1, 2}, {7, 9});
}

TEST(ChannelsLastLayout, ResidualOfUnknownRankStaysPlain) {
  // Z comes from an op whose output rank the graph does not say: the convolution adding it is left as it is, and
  // the chain before it ends there.
  Builder b(4);
  ir::Value* a = b.Conv(b.Conv(b.x(), 4), 4);
  ir::Value* z = b.Node("Neg", {b.x()});
  ir::Value* r = b.Conv(a, 4, 3, 1, z);
  b.Output(b.Head(r));
  const ir::Model model = b.Take();
  bool changed = false;
  const ir::Model cl = Rewrite(model, {DType::kFloat32}, &changed);
  EXPECT_EQ(Count(cl, exec::kChannelsLastConvOp), 2);
  EXPECT_EQ(Count(cl, exec::kFusedConvOp), 1);
  ExpectSameResults(cl, model, DType::kFloat32, 4, {2}, {6, 6});
}

// A chain of two convolutions (and a max pool) over `spatial` dims, from X [N, C, spatial...] with static shape;
// with `share` (group 1) the second convolution reads the first one's weights.
ir::Model Chain(int64_t c, const std::vector<int64_t>& spatial, int64_t group, bool share = false) {
  ir::Model model;
  model.opset_imports = {{"", 17}};
  ir::Graph& g = *model.graph;
  ir::Shape shape = {ir::Dim::Param("N"), ir::Dim::Value(c)};
  for (int64_t s : spatial) shape.push_back(ir::Dim::Value(s));
  ir::Value* x = g.CreateValue("X");
  x->set_type(ir::ValueType::Tensor(DType::kFloat32, shape));
  g.AddInput(x);
  uint32_t seed = 3;
  const size_t nsp = spatial.size();
  ir::Value* last_w = nullptr;
  auto conv = [&](ir::Value* in, int64_t m, int64_t groups) {
    std::vector<int64_t> w_dims = {m, c / groups};
    for (size_t d = 0; d < nsp; ++d) w_dims.push_back(d == 0 ? 3 : 2);
    int64_t count = 1;
    for (int64_t d : w_dims) count *= d;
    ir::Value* w = share ? last_w : nullptr;
    if (!w) {
      w = g.CreateValue(g.UniqueName("w"));
      g.SetInitializer(w, TensorOf(DType::kFloat32, w_dims, RandomValues(DType::kFloat32, count, ++seed)));
    }
    last_w = w;
    ir::Value* y = g.CreateValue(g.UniqueName("conv"));
    ir::Node* n = g.AddNode("Conv", {in, w}, {y}, g.UniqueName("conv"));
    n->SetAttribute(ir::Attribute::Int("group", groups));
    std::vector<int64_t> pads(2 * nsp, 1);
    pads[0] = 0;  // asymmetric
    n->SetAttribute(ir::Attribute::Ints("pads", pads));
    n->SetAttribute(ir::Attribute::Ints("strides", std::vector<int64_t>(nsp, 1)));
    return y;
  };
  ir::Value* a = conv(x, c, group);
  ir::Value* p = g.CreateValue("pool");
  ir::Node* pool = g.AddNode("MaxPool", {a}, {p}, "pool");
  pool->SetAttribute(ir::Attribute::Ints("kernel_shape", std::vector<int64_t>(nsp, 2)));
  ir::Value* y = conv(p, c, 1);
  ir::Value* out = g.CreateValue("Y");
  g.AddNode("Relu", {y}, {out}, "relu");
  out->set_type(ir::ValueType::Tensor(DType::kFloat32));
  g.AddOutput(out);
  return model;
}

TEST(ChannelsLastLayout, OneTwoAndThreeSpatialDimsWithGroups) {
  struct Case {
    std::vector<int64_t> spatial;
    int64_t c, group;
  };
  for (const Case& k : {Case{{17}, 6, 3}, Case{{9, 7}, 8, 8}, Case{{5, 6, 4}, 4, 2}}) {
    const ir::Model model = Chain(k.c, k.spatial, k.group);
    bool changed = false;
    const ir::Model cl = Rewrite(model, {DType::kFloat32}, &changed);
    EXPECT_TRUE(changed);
    // The Relu is fused into the second convolution, whose output is the graph output: it leaves the chain
    // through a Transpose, as X enters it through one.
    EXPECT_EQ(Count(cl, exec::kChannelsLastConvOp), 2) << k.spatial.size() << "-D";
    EXPECT_EQ(Count(cl, "Transpose"), 2) << k.spatial.size() << "-D";
    EXPECT_EQ(Count(cl, exec::kChannelsLastMaxPoolOp), 1) << k.spatial.size() << "-D";
    ExpectSameResults(cl, model, DType::kFloat32, k.c, {1, 3}, k.spatial);
  }
}

TEST(ChannelsLastLayout, SharedWeightsGetOneCopy) {
  const ir::Model model = Chain(4, {8, 8}, 1, /*share=*/true);
  bool changed = false;
  const ir::Model cl = Rewrite(model, {DType::kFloat32}, &changed);
  std::vector<const ir::Value*> weights;
  for (const ir::Node* n : cl.graph->nodes()) {
    if (n->op_type() == exec::kChannelsLastConvOp) weights.push_back(n->input(1));
  }
  ASSERT_EQ(weights.size(), 2u);
  EXPECT_EQ(weights[0], weights[1]);
  EXPECT_EQ(cl.graph->initializers().size(), 1u);  // the plain weights are gone
  ExpectSameResults(cl, model, DType::kFloat32, 4, {2}, {8, 8});
}

TEST(ChannelsLastLayout, GraphsWithSubgraphsAreLeftAlone) {
  ir::Model model = ResNetLike(3, 8, 8);
  ir::Graph& g = *model.graph;
  auto body = std::make_unique<ir::Graph>("body");
  ir::Value* o = body->CreateValue("o");
  body->AddNode("Constant", {}, {o})
      ->SetAttribute(ir::Attribute::TensorValue("value", TensorOf(DType::kFloat32, {}, {1.0})));
  body->AddOutput(o);
  ir::Value* cond = g.CreateValue("cond");
  g.SetInitializer(cond, TensorOf(DType::kBool, {}, {1.0}));
  ir::Value* if_out = g.CreateValue("if_out");
  ir::Node* n = g.AddNode("If", {cond}, {if_out});
  n->SetAttribute(ir::Attribute::GraphValue("then_branch", std::move(body)));
  bool changed = true;
  ASSERT_TRUE(exec::UseChannelsLastLayout(g, {DType::kFloat32}, &changed).ok());
  EXPECT_FALSE(changed);
}

TEST(ChannelsLastLayout, ASecondRunChangesNothing) {
  bool changed = false;
  ir::Model cl = Rewrite(ResNetLike(3, 8, 8), {DType::kFloat32}, &changed);
  ASSERT_TRUE(changed);
  ASSERT_TRUE(exec::UseChannelsLastLayout(*cl.graph, {DType::kFloat32}, &changed).ok());
  EXPECT_FALSE(changed);
}

// ---- the ops on their own -------------------------------------------------------------------------------------

OpTester Plain(const std::string& op) {
  OpTester t;
  t.op_type = op;
  return t;
}

// `t` [N, C, spatial...] as [N, spatial..., C].
ir::Tensor ToLast(const ir::Tensor& t) {
  std::vector<int64_t> perm = {0};
  for (int64_t d = 2; d < static_cast<int64_t>(t.rank()); ++d) perm.push_back(d);
  perm.push_back(1);
  std::vector<int64_t> dims;
  for (int64_t d : perm) dims.push_back(t.dims()[static_cast<size_t>(d)]);
  const std::vector<double> v = AsDoubles(t);
  std::vector<double> out(v.size());
  const std::vector<int64_t> in_strides = [&] {
    std::vector<int64_t> s(t.rank(), 1);
    for (size_t i = t.rank() - 1; i-- > 0;) s[i] = s[i + 1] * t.dims()[i + 1];
    return s;
  }();
  for (size_t o = 0; o < out.size(); ++o) {
    int64_t rest = static_cast<int64_t>(o), src = 0;
    for (size_t k = dims.size(); k-- > 0;) {
      src += (rest % dims[k]) * in_strides[static_cast<size_t>(perm[k])];
      rest /= dims[k];
    }
    out[o] = v[static_cast<size_t>(src)];
  }
  return TensorOf(t.dtype(), dims, out);
}

TEST(ChannelsLastOps, ConvMatchesFusedConv) {
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64}) {
    const ir::Tensor x = TensorOf(dtype, {2, 6, 7, 5}, RandomValues(dtype, 2 * 6 * 7 * 5, 1));
    const ir::Tensor w = TensorOf(dtype, {4, 3, 3, 2}, RandomValues(dtype, 4 * 3 * 3 * 2, 2));
    const ir::Tensor bias = TensorOf(dtype, {4}, RandomValues(dtype, 4, 3));
    const ir::Tensor z = TensorOf(dtype, {2, 4, 3, 5}, RandomValues(dtype, 2 * 4 * 3 * 5, 4));
    auto attrs = [](OpTester& t) {
      t.Attr(ir::Attribute::Int("group", 2));
      t.Attr(ir::Attribute::Ints("pads", {1, 0, 0, 1}));
      t.Attr(ir::Attribute::Ints("strides", {2, 1}));
      t.Attr(ir::Attribute::String("activation", "Relu"));
    };
    OpTester plain = InternalOp(exec::kFusedConvOp);
    attrs(plain);
    plain.Input(x).Input(w).Input(bias).Input(z);
    OpTester last = InternalOp(exec::kChannelsLastConvOp);
    attrs(last);
    last.Input(ToLast(x)).Input(ToLast(w)).Input(bias).Input(ToLast(z));
    auto want = plain.Run();
    auto got = last.Run();
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ExpectClose((*got)[0], AsDoubles(ToLast((*want)[0])));
  }
}

TEST(ChannelsLastOps, PoolsMatchThePlainOps) {
  const ir::Tensor x = TensorOf(DType::kFloat32, {3, 5, 9, 8}, RandomValues(DType::kFloat32, 3 * 5 * 9 * 8, 9));
  for (const auto& [op, last_op] : {std::pair<std::string, std::string>{"MaxPool", exec::kChannelsLastMaxPoolOp},
                                    {"AveragePool", exec::kChannelsLastAveragePoolOp}}) {
    auto attrs = [](OpTester& t) {
      t.Attr(ir::Attribute::Ints("kernel_shape", {3, 2}));
      t.Attr(ir::Attribute::Ints("strides", {2, 2}));
      t.Attr(ir::Attribute::Ints("pads", {1, 0, 1, 1}));
      t.Attr(ir::Attribute::Int("ceil_mode", 1));
    };
    OpTester plain = Plain(op);
    attrs(plain);
    plain.Input(x);
    OpTester last = InternalOp(last_op);
    attrs(last);
    last.Input(ToLast(x));
    auto want = plain.Run();
    auto got = last.Run();
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    ASSERT_TRUE(got.ok()) << op << ": " << got.status().ToString();
    ExpectClose((*got)[0], AsDoubles(ToLast((*want)[0])));
  }
  OpTester plain = Plain("GlobalAveragePool");
  plain.Input(x);
  OpTester last = InternalOp(exec::kChannelsLastGlobalAveragePoolOp);
  last.Input(ToLast(x));
  auto want = plain.Run();
  auto got = last.Run();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ((*got)[0].dims(), (std::vector<int64_t>{3, 5, 1, 1}));
  ExpectClose((*got)[0], AsDoubles((*want)[0]));
}

TEST(ChannelsLastOps, BadInputsAreRefused) {
  OpTester rank2 = InternalOp(exec::kChannelsLastMaxPoolOp);
  rank2.Attr(ir::Attribute::Ints("kernel_shape", {2}));
  rank2.Input(TensorOf(DType::kFloat32, {4, 4}, std::vector<double>(16, 1.0)));
  auto r = rank2.Run();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("channels-last"), std::string::npos) << r.status().message();

  OpTester z_rank = InternalOp(exec::kChannelsLastConvOp);
  z_rank.Input(TensorOf(DType::kFloat32, {1, 4, 4, 2}, std::vector<double>(32, 1.0)))
      .Input(TensorOf(DType::kFloat32, {2, 1, 1, 2}, std::vector<double>(4, 1.0)))
      .OmittedInput()
      .Input(TensorOf(DType::kFloat32, {2}, {1, 2}));
  auto z = z_rank.Run();
  ASSERT_FALSE(z.ok());
  EXPECT_NE(z.status().message().find("input Z"), std::string::npos) << z.status().message();
}

}  // namespace
}  // namespace onnxamp::testing
