// Session graph optimizations: Conv + BatchNormalization folding and Conv [+ Add] [+ Relu] fusion. Each fused model
// is run against the same model with optimization off, per element type and implementation, on random inputs; the
// optimized graph is inspected to check that a fusion fired, or did not where it would be wrong (training-mode or
// non-constant BatchNormalization, a Conv output with other readers or that is a graph output). The fused kernel's
// cached primitives and weights are exercised by running one session on several input shapes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/ir/verify.h"
#include "runtime/ops/common/broadcast.h"
#include "tests/runtime/ops/linalg_test_util.h"
#include "tests/runtime/session_options_util.h"

namespace onnxamp::testing {
namespace {

using Dims = std::vector<int64_t>;

// What follows the Conv in the test model.
struct Pattern {
  std::string name;
  bool conv_bias = true;
  bool batch_norm = true;
  bool add = false;      // Add(conv, z) with a second graph input z
  bool z_first = false;  // Add(z, conv) instead
  Dims z_dims = {};      // z's shape when it broadcasts (empty: the conv's output shape)
  bool relu = true;
};

// Builds X [N, C, H, W] -> Conv(W [M, C, 3, 3], pads 1) [-> BatchNormalization] [-> Add(Z)] [-> Relu] -> Y, weights
// and BatchNormalization parameters as initializers, with symbolic N, H and W (so that one session runs several
// shapes). `opset` is the default domain's.
class ModelBuilder {
 public:
  ModelBuilder(DType dtype, int64_t c, int64_t m, int64_t opset = 17) : dtype_(dtype), c_(c), m_(m) {
    model_.opset_imports = {{"", opset}};
  }

  ir::Model Build(const Pattern& p) {
    ir::Graph& g = *model_.graph;
    ir::Value* x = Input("X", c_);
    std::vector<ir::Value*> conv_in = {x, Constant("W", {m_, c_, 3, 3}, 1)};
    if (p.conv_bias) conv_in.push_back(Constant("B", {m_}, 2));
    ir::Value* cur = g.CreateValue("conv_out");
    ir::Node* conv = g.AddNode("Conv", conv_in, {cur}, "conv");
    conv->SetAttribute(ir::Attribute::Ints("pads", {1, 1, 1, 1}));
    conv->SetAttribute(ir::Attribute::Ints("kernel_shape", {3, 3}));
    if (p.batch_norm) {
      ir::Value* out = g.CreateValue("bn_out");
      ir::Node* bn = g.AddNode("BatchNormalization",
                               {cur, Constant("scale", {m_}, 3, 0.5, 1.5), Constant("beta", {m_}, 4),
                                Constant("mean", {m_}, 5), Constant("var", {m_}, 6, 0.25, 2.0)},
                               {out}, "bn");
      bn->SetAttribute(ir::Attribute::Float("epsilon", 1e-3f));
      bn_ = bn;
      cur = out;
    }
    if (p.add) {
      ir::Value* z = p.z_dims.empty() ? Input("Z", m_) : FixedInput("Z", p.z_dims);
      ir::Value* out = g.CreateValue("add_out");
      g.AddNode("Add", p.z_first ? std::vector<ir::Value*>{z, cur} : std::vector<ir::Value*>{cur, z}, {out}, "add");
      cur = out;
    }
    if (p.relu) {
      ir::Value* out = g.CreateValue("relu_out");
      g.AddNode("Relu", {cur}, {out}, "relu");
      cur = out;
    }
    g.AddOutput(cur);
    return std::move(model_);
  }

  ir::Node* bn() const { return bn_; }
  ir::Model& model() { return model_; }

 private:
  ir::Value* Input(const std::string& name, int64_t channels) {
    ir::Value* v = model_.graph->CreateValue(name);
    v->set_type(ir::ValueType::Tensor(
        dtype_, ir::Shape{ir::Dim::Param("N"), ir::Dim::Value(channels), ir::Dim::Param("H"), ir::Dim::Param("W")}));
    model_.graph->AddInput(v);
    return v;
  }
  ir::Value* FixedInput(const std::string& name, const Dims& dims) {
    ir::Value* v = model_.graph->CreateValue(name);
    ir::Shape shape;
    for (int64_t d : dims) shape.push_back(ir::Dim::Value(d));
    v->set_type(ir::ValueType::Tensor(dtype_, shape));
    model_.graph->AddInput(v);
    return v;
  }
  ir::Value* Constant(const std::string& name, Dims dims, uint32_t seed, double lo = -1, double hi = 1) {
    ir::Value* v = model_.graph->CreateValue(name);
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    ir::Shape shape;
    for (int64_t d : dims) shape.push_back(ir::Dim::Value(d));
    v->set_type(ir::ValueType::Tensor(dtype_, shape));
    model_.graph->SetInitializer(v, TensorOf(dtype_, dims, RandomValues(dtype_, n, seed * 7919u, lo, hi)));
    return v;
  }

  DType dtype_;
  int64_t c_, m_;
  ir::Model model_;
  ir::Node* bn_ = nullptr;
};

ir::Model CopyModel(const ir::Model& m) {
  ir::Model c;
  c.opset_imports = m.opset_imports;
  c.graph = m.graph->Clone();
  return c;
}

// The op types of a graph's nodes, in order.
std::vector<std::string> OpTypes(const ir::Model& m) {
  std::vector<std::string> ops;
  for (const ir::Node* n : m.graph->nodes()) ops.push_back(n->op_type());
  return ops;
}

const ir::Node* FindOp(const ir::Model& m, const std::string& op) {
  for (const ir::Node* n : m.graph->nodes()) {
    if (n->op_type() == op) return n;
  }
  return nullptr;
}

std::vector<ir::Tensor> Feeds(DType dtype, const ir::Model& m, int64_t n, int64_t h, int64_t w, uint32_t seed) {
  std::vector<ir::Tensor> feeds;
  for (const ir::Value* v : m.graph->inputs()) {
    if (v->initializer()) continue;
    Dims dims;
    for (const ir::Dim& d : *v->type().shape()) {
      dims.push_back(d.is_value() ? d.value : d.param == "N" ? n : d.param == "H" ? h : w);
    }
    int64_t count = 1;
    for (int64_t d : dims) count *= d;
    ir::Tensor t = TensorOf(dtype, dims, RandomValues(dtype, count, seed++));
    t.set_name(v->name());
    feeds.push_back(std::move(t));
  }
  return feeds;
}

// |got - want| <= tol * max|want| + atol elementwise: the fused model differs from the unfused one by rounding
// (folded weights rounded to the element type, one rounding instead of several, another summation order).
void ExpectSameUpToRounding(const ir::Tensor& got, const ir::Tensor& want, const std::string& what) {
  ASSERT_EQ(got.dims(), want.dims()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  const std::vector<double> a = AsDoubles(got), b = AsDoubles(want);
  double scale = 0;
  for (double v : b) scale = std::max(scale, std::abs(v));
  const double rel = got.dtype() == DType::kFloat64   ? 1e-12
                     : got.dtype() == DType::kFloat32 ? 1e-5
                     : got.dtype() == DType::kFloat16 ? 1e-2
                                                      : 5e-2;
  int failures = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!(std::abs(a[i] - b[i]) <= rel * scale + 1e-6) && failures++ < 5) {
      ADD_FAILURE() << what << ": element " << i << " is " << a[i] << ", unfused " << b[i] << " (scale " << scale
                    << ")";
    }
  }
}

// Runs `model` optimized and unoptimized on each shape and compares; returns the optimized graph.
ir::Model CheckAgainstUnfused(DType dtype, const ir::Model& model, const std::vector<Dims>& shapes,
                              const std::string& what, int threads = 1,
                              ops::LinalgImpl impl = ops::LinalgImpl::kOneDnn) {
  std::unique_ptr<exec::Session> fused, plain;
  {
    auto s = exec::Session::Create(CopyModel(model), CpuSession(threads, impl));
    EXPECT_TRUE(s.ok()) << what << ": " << s.status().ToString();
    if (!s.ok()) return ir::Model();
    fused = std::move(s).value();
  }
  {
    auto s = exec::Session::Create(CopyModel(model),
                                   CpuSession(1, ops::LinalgImpl::kReference, exec::GraphOptimization::kNone));
    EXPECT_TRUE(s.ok()) << what << ": " << s.status().ToString();
    if (!s.ok()) return ir::Model();
    plain = std::move(s).value();
  }
  uint32_t seed = 100;
  for (const Dims& shape : shapes) {
    const std::vector<ir::Tensor> feeds = Feeds(dtype, model, shape[0], shape[1], shape[2], seed += 10);
    auto got = fused->Run(feeds);
    auto want = plain->Run(feeds);
    EXPECT_TRUE(got.ok()) << what << ": " << got.status().ToString();
    EXPECT_TRUE(want.ok()) << what << ": " << want.status().ToString();
    if (!got.ok() || !want.ok()) break;
    ExpectSameUpToRounding((*got)[0], (*want)[0], StrCat(what, " shape ", ops::ShapeToString(shape)));
  }
  EXPECT_TRUE(ir::Verify(fused->model()).ok()) << what;
  return CopyModel(fused->model());
}

struct FusionParam {
  DType dtype;
  ops::LinalgImpl impl;
};

class FusionTyped : public ::testing::TestWithParam<FusionParam> {};

const std::vector<Pattern>& Patterns() {
  static const std::vector<Pattern> patterns = {
      {"conv_bn_relu"},
      {"conv_nobias_bn_relu", false},
      {"conv_bn", true, true, false, false, {}, false},
      {"conv_relu", true, false},
      {"conv_bn_add_relu", true, true, true},
      {"conv_bn_add_first_relu", true, true, true, true},
      {"conv_add", true, false, true, false, {}, false},
      {"conv_bn_add_broadcast_relu", true, true, true, false, {1, 6, 1, 1}},
  };
  return patterns;
}

// Every pattern fuses completely and gives the unfused results, on three shapes run by one session (the second
// shape differs from the first, the third repeats the first: primitives and packed weights made once are reused).
TEST_P(FusionTyped, FusedMatchesUnfused) {
  const auto [dtype, impl] = GetParam();
  for (const Pattern& p : Patterns()) {
    ModelBuilder builder(dtype, 5, 6);
    const ir::Model model = builder.Build(p);
    const std::vector<Dims> shapes = {{2, 7, 9}, {1, 12, 5}, {2, 7, 9}, {3, 4, 4}};
    const ir::Model optimized = CheckAgainstUnfused(dtype, model, shapes, p.name, 1, impl);
    // Conv + BatchNormalization alone folds into a Conv; anything with a sum or an activation becomes FusedConv.
    const std::string want = p.add || p.relu ? exec::kFusedConvOp : "Conv";
    EXPECT_EQ(OpTypes(optimized), std::vector<std::string>{want}) << p.name;
  }
}

std::string FusionParamName(const ::testing::TestParamInfo<FusionParam>& info) {
  return StrCat(DTypeName(info.param.dtype), "_", ops::LinalgImplName(info.param.impl));
}

std::vector<FusionParam> FusionParams() {
  std::vector<FusionParam> params;
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64}) {
    for (ops::LinalgImpl impl : AvailableImpls()) params.push_back({t, impl});
  }
  return params;
}

INSTANTIATE_TEST_SUITE_P(Types, FusionTyped, ::testing::ValuesIn(FusionParams()), FusionParamName);

// Problems large enough for oneDNN to split over four threads (by images, or by output-channel blocks, where the
// residual's slice must follow the output's), in both threading modes.
TEST(Fusion, SplitsAcrossThreads) {
  for (ops::OneDnnThreading mode : {ops::OneDnnThreading::kShared, ops::OneDnnThreading::kSplit}) {
    ScopedOneDnnThreading threading(mode);
    ModelBuilder builder(DType::kFloat32, 16, 32);
    const ir::Model model = builder.Build(Pattern{"conv_bn_add_relu", true, true, true});
    CheckAgainstUnfused(DType::kFloat32, model, {{4, 24, 24}, {1, 40, 40}, {4, 24, 24}},
                        StrCat("threads ", ThreadingName(mode)), 4);
  }
}

// A NaN in the input reaches the fused ReLU's output where the unfused Relu keeps it (oneDNN's ReLU post-op would
// turn it into 0), under every implementation and element type, with a sum and without, whole and split over threads.
TEST(Fusion, FusedReluKeepsNaNAsRelu) {
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64}) {
    for (const Pattern& p : {Pattern{"conv_relu", true, false}, Pattern{"conv_bn_add_relu", true, true, true}}) {
      ModelBuilder builder(dtype, 16, 32);
      const ir::Model model = builder.Build(p);
      std::vector<ir::Tensor> feeds = Feeds(dtype, model, 4, 12, 12, 700);
      ASSERT_EQ(feeds[0].name(), "X");
      std::vector<double> x = AsDoubles(feeds[0]);
      x[5 * 144 + 40] = std::nan("");        // image 0, channel 5
      x[3 * 16 * 144 + 100] = std::nan("");  // image 3, channel 0
      feeds[0] = TensorOf(dtype, feeds[0].dims(), x);
      feeds[0].set_name("X");
      auto plain = exec::Session::Create(CopyModel(model),
                                         CpuSession(1, ops::LinalgImpl::kReference, exec::GraphOptimization::kNone));
      ASSERT_TRUE(plain.ok()) << plain.status().ToString();
      auto want = (*plain)->Run(feeds);
      ASSERT_TRUE(want.ok()) << want.status().ToString();
      const std::vector<double> w = AsDoubles((*want)[0]);
      const int64_t nans = std::count_if(w.begin(), w.end(), [](double v) { return std::isnan(v); });
      ASSERT_GT(nans, 0) << p.name;
      for (ops::LinalgImpl impl : AvailableImpls()) {
        for (int threads : {1, 4}) {
          const std::string what =
              StrCat(p.name, " ", DTypeName(dtype), " ", ops::LinalgImplName(impl), " threads ", threads);
          auto fused = exec::Session::Create(CopyModel(model), CpuSession(threads, impl));
          ASSERT_TRUE(fused.ok()) << what << ": " << fused.status().ToString();
          ASSERT_EQ(OpTypes((*fused)->model()), std::vector<std::string>{exec::kFusedConvOp}) << what;
          auto got = (*fused)->Run(feeds);
          ASSERT_TRUE(got.ok()) << what << ": " << got.status().ToString();
          const std::vector<double> g = AsDoubles((*got)[0]);
          ASSERT_EQ(g.size(), w.size()) << what;
          int failures = 0;
          for (size_t i = 0; i < g.size(); ++i) {
            if (std::isnan(g[i]) != std::isnan(w[i]) && failures++ < 5) {
              ADD_FAILURE() << what << ": element " << i << " is " << g[i] << ", unfused " << w[i];
            }
          }
        }
      }
    }
  }
}

TEST(Fusion, ConvBatchNormOnlyFoldsToConv) {
  // Without an activation or a sum, folding leaves a plain Conv (nothing to fuse).
  ModelBuilder builder(DType::kFloat32, 3, 4);
  Pattern p{"conv_bn", true, true, false, false, {}, false};
  const ir::Model optimized = CheckAgainstUnfused(DType::kFloat32, builder.Build(p), {{1, 6, 6}}, "conv_bn");
  EXPECT_EQ(OpTypes(optimized), std::vector<std::string>{"Conv"});
  // The replaced weights and statistics are gone; the folded ones took their place.
  EXPECT_EQ(optimized.graph->initializers().size(), 2u);
}

TEST(Fusion, UserModelIsUntouched) {
  ModelBuilder builder(DType::kFloat32, 3, 4);
  const ir::Model model = builder.Build(Pattern{"conv_bn_relu"});
  ir::Model copy = CopyModel(model);
  auto s = exec::Session::Create(std::move(copy));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(OpTypes(model), (std::vector<std::string>{"Conv", "BatchNormalization", "Relu"}));
  EXPECT_EQ(OpTypes((*s)->model()), std::vector<std::string>{exec::kFusedConvOp});
  // Inputs and outputs keep their names.
  EXPECT_EQ((*s)->outputs()[0].name, "relu_out");
}

// Where folding or fusing would be wrong, the graph keeps its nodes (and still gives the unfused results).
TEST(Fusion, DoesNotFireWhenWrong) {
  const DType f32 = DType::kFloat32;
  {
    // BatchNormalization in training mode (opset 15) normalises with the batch's statistics: no fold.
    ModelBuilder builder(f32, 3, 4, 15);
    ir::Model model = builder.Build(Pattern{"training"});
    builder.bn()->SetAttribute(ir::Attribute::Int("training_mode", 1));
    auto s = exec::Session::Create(CopyModel(model));
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    EXPECT_NE(FindOp((*s)->model(), "BatchNormalization"), nullptr);
  }
  {
    // BatchNormalization parameters that a graph input can override are not constants: no fold.
    ModelBuilder builder(f32, 3, 4);
    ir::Model model = builder.Build(Pattern{"overridable"});
    model.graph->AddInput(model.graph->FindValue("mean"));
    const ir::Model optimized = CheckAgainstUnfused(f32, model, {{1, 5, 5}}, "overridable mean");
    EXPECT_NE(FindOp(optimized, "BatchNormalization"), nullptr);
    // The Relu still fuses? No: the BatchNormalization sits between Conv and Relu.
    EXPECT_EQ(FindOp(optimized, exec::kFusedConvOp), nullptr);
  }
  {
    // Weights from a graph input: no fold, but the Relu after the BatchNormalization is not a Conv's either.
    ModelBuilder builder(f32, 3, 4);
    ir::Model model = builder.Build(Pattern{"input_weights"});
    model.graph->AddInput(model.graph->FindValue("W"));
    const ir::Model optimized = CheckAgainstUnfused(f32, model, {{1, 5, 5}}, "input weights");
    EXPECT_NE(FindOp(optimized, "BatchNormalization"), nullptr);
  }
  {
    // A Conv output read by another node as well: neither fold nor fuse (its value must stay as it is).
    ModelBuilder builder(f32, 3, 4);
    ir::Model model = builder.Build(Pattern{"shared"});
    ir::Graph& g = *model.graph;
    ir::Value* extra = g.CreateValue("conv_copy");
    g.AddNode("Identity", {g.FindValue("conv_out")}, {extra}, "copy");
    g.AddOutput(extra);
    const ir::Model optimized = CheckAgainstUnfused(f32, model, {{1, 5, 5}}, "shared conv output");
    EXPECT_EQ(OpTypes(optimized), (std::vector<std::string>{"Conv", "BatchNormalization", "Relu", "Identity"}));
  }
  {
    // A Conv output that is a graph output: no fusion.
    ModelBuilder builder(f32, 3, 4);
    ir::Model model = builder.Build(Pattern{"conv_relu_out", true, false});
    model.graph->AddOutput(model.graph->FindValue("conv_out"));
    const ir::Model optimized = CheckAgainstUnfused(f32, model, {{1, 5, 5}}, "conv output is a graph output");
    EXPECT_EQ(OpTypes(optimized), (std::vector<std::string>{"Conv", "Relu"}));
  }
  {
    // An Add output read twice: the Conv + Add fuse, the Relu stays.
    ModelBuilder builder(f32, 3, 4);
    ir::Model model = builder.Build(Pattern{"add_shared", true, false, true});
    model.graph->AddOutput(model.graph->FindValue("add_out"));
    const ir::Model optimized = CheckAgainstUnfused(f32, model, {{1, 5, 5}}, "add output is a graph output");
    EXPECT_EQ(OpTypes(optimized), (std::vector<std::string>{exec::kFusedConvOp, "Relu"}));
  }
}

TEST(Fusion, OldOpsetBatchNormWithSpatialZeroIsNotFolded) {
  // Opset 7: spatial = 0 means per-position parameters, which a Conv bias cannot express.
  ModelBuilder builder(DType::kFloat32, 3, 4, 7);
  ir::Model model = builder.Build(Pattern{"spatial0", true, true, false, false, {}, false});
  builder.bn()->SetAttribute(ir::Attribute::Int("spatial", 0));
  ir::Graph& g = *model.graph;
  bool changed = true;
  ASSERT_TRUE(exec::FoldConvBatchNorm(g, &changed).ok());
  EXPECT_FALSE(changed);
  EXPECT_EQ(OpTypes(model), (std::vector<std::string>{"Conv", "BatchNormalization"}));
}

// Opset 6: Add(conv, Z [M], broadcast 1, axis 1) adds Z per channel (legacy broadcast from an axis), which FusedConv's
// numpy broadcast would align with the width instead: the Add is not fused, the session computes the model's Add
// (before, the fused node failed: "shapes [1,4,8,8] and [4] cannot be broadcast"). Without `axis` the legacy
// broadcast aligns trailing dims, as numpy's, and fuses.
TEST(Fusion, AddBroadcastFromAnAxisIsNotFused) {
  for (const bool with_axis : {true, false}) {
    SCOPED_TRACE(with_axis ? "axis 1" : "no axis");
    ModelBuilder builder(DType::kFloat32, 3, 4, 6);
    ir::Model model = builder.Build(
        Pattern{"legacy", true, false, true, false, with_axis ? Dims{4} : Dims{1, 4, 1, 1}, /*relu=*/true});
    for (ir::Node* n : model.graph->nodes()) {
      if (n->op_type() != "Add") continue;
      n->SetAttribute(ir::Attribute::Int("broadcast", 1));
      if (with_axis) n->SetAttribute(ir::Attribute::Int("axis", 1));
    }
    const ir::Model optimized = CheckAgainstUnfused(DType::kFloat32, model, {{1, 8, 8}, {2, 5, 6}}, "legacy add");
    EXPECT_EQ(OpTypes(optimized), with_axis ? (std::vector<std::string>{"Conv", "Add", "Relu"})
                                            : std::vector<std::string>{exec::kFusedConvOp});
  }
}

TEST(Fusion, PassesReportChanges) {
  ModelBuilder builder(DType::kFloat32, 3, 4);
  ir::Model model = builder.Build(Pattern{"conv_bn_relu"});
  bool changed = false;
  ASSERT_TRUE(exec::FoldConvBatchNorm(*model.graph, &changed).ok());
  EXPECT_TRUE(changed);
  ASSERT_TRUE(ir::Verify(*model.graph).ok());
  EXPECT_EQ(OpTypes(model), (std::vector<std::string>{"Conv", "Relu"}));
  ASSERT_TRUE(exec::FuseConvActivation(*model.graph, &changed).ok());
  EXPECT_TRUE(changed);
  EXPECT_EQ(OpTypes(model), std::vector<std::string>{exec::kFusedConvOp});
  ASSERT_TRUE(exec::FuseConvActivation(*model.graph, &changed).ok());
  EXPECT_FALSE(changed);
}

TEST(Fusion, BadActivationIsRefused) {
  ModelBuilder builder(DType::kFloat32, 3, 4);
  ir::Model model = builder.Build(Pattern{"conv_relu", true, false});
  ASSERT_TRUE(exec::OptimizeForInference(model, exec::SessionOptions{}).ok());
  ir::Node* fused = *model.graph->nodes().begin();
  ASSERT_EQ(fused->op_type(), exec::kFusedConvOp);
  fused->SetAttribute(ir::Attribute::String("activation", "Tanh"));
  auto s =
      exec::Session::Create(std::move(model), CpuSession(0, ops::LinalgImpl::kOneDnn, exec::GraphOptimization::kNone));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("attribute 'activation' is 'Tanh', expected 'Relu' or empty"), std::string::npos)
      << s.status().message();
}

}  // namespace
}  // namespace onnxamp::testing
