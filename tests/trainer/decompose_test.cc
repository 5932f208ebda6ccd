// Decompositions (runtime/ops/decompose.h) through DecomposeForGradients: a decomposed LayerNormalizationGrad or
// BatchNormalizationGrad computes what the fused kernel computes (float64, float32, and float16 for the former), only
// nodes on the differentiated path are decomposed, and the second derivatives the decompositions give (a gradient
// penalty through a LayerNormalization by ONNX's Gradient operator; through batch and running statistics) match
// central differences.
#include "trainer/autodiff/decompose.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "converter/model_clone.h"
#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/session.h"
#include "runtime/ops/common/broadcast.h"
#include "runtime/ops/gradient_ops.h"
#include "tests/runtime/ir_build_util.h"
#include "tests/runtime/op_tester.h"
#include "tests/trainer/grad_check.h"
#include "trainer/autodiff/autodiff.h"
#include "trainer/autodiff/gradient_op.h"

namespace onnxamp::trainer {
namespace {

using testing::Input;
using testing::MakeTensor;
using testing::Named;
using testing::Node1;
using testing::Values;
using testing::gradtest::RunModel;
using Dims = std::vector<int64_t>;

int64_t Count(const Dims& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// Values in [lo, hi) from a fixed linear congruential generator.
std::vector<double> Uniform(const Dims& dims, uint32_t seed, double lo = -1, double hi = 1) {
  std::vector<double> v;
  uint32_t s = seed;
  for (int64_t i = 0; i < Count(dims); ++i) {
    s = s * 1664525u + 1013904223u;
    v.push_back(lo + (hi - lo) * static_cast<double>(s >> 8) / (1u << 24));
  }
  return v;
}

int CountOps(const ir::Graph& g, const std::string& op) {
  int n = 0;
  for (const ir::Node* node : g.nodes()) n += node->op_type() == op;
  return n;
}

// A tensor of storage type T holding Uniform(dims, seed, lo, hi).
template <typename T>
ir::Tensor RandomTensor(const Dims& dims, uint32_t seed, double lo, double hi) {
  std::vector<ops::ComputeType<T>> v;
  for (double d : Uniform(dims, seed, lo, hi)) v.push_back(static_cast<ops::ComputeType<T>>(d));
  return MakeTensor<T>(dims, v);
}

// The decomposed model's outputs (`got`) against the fused kernel's (`want`): type, dims, and values within
// `tolerance` of the largest |want| element (at least 1).
template <typename T>
void ExpectOutputsClose(const std::vector<ir::Tensor>& want, const std::vector<ir::Tensor>& got,
                        const std::vector<std::string>& fetch, double tolerance, const std::string& what) {
  using C = ops::ComputeType<T>;
  ASSERT_EQ(want.size(), fetch.size()) << what;
  ASSERT_EQ(got.size(), fetch.size()) << what;
  for (size_t k = 0; k < fetch.size(); ++k) {
    EXPECT_EQ(got[k].dtype(), want[k].dtype()) << what << " " << fetch[k];
    EXPECT_EQ(got[k].dims(), want[k].dims()) << what << " " << fetch[k];
    const std::vector<C> a = Values<T>(want[k]), b = Values<T>(got[k]);
    ASSERT_EQ(a.size(), b.size());
    double largest = 0;
    for (C v : a) largest = std::max(largest, std::fabs(static_cast<double>(v)));
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_NEAR(static_cast<double>(b[i]), static_cast<double>(a[i]), tolerance * std::max(1.0, largest))
          << what << " " << fetch[k] << "[" << i << "]";
    }
  }
}

// The float64 inputs `names` (of `dims`) holding `values`, as session feeds.
std::vector<ir::Tensor> Feeds(const std::vector<std::string>& names, const std::vector<Dims>& dims,
                              const std::vector<std::vector<double>>& values) {
  std::vector<ir::Tensor> t;
  for (size_t i = 0; i < values.size(); ++i) t.push_back(Named(MakeTensor<double>(dims[i], values[i]), names[i]));
  return t;
}

// Checks `analytic` (p's gradient in each float64 feed named in `wrt`, in order) against central differences of
// output `p` of `model` (its Gradient nodes expanded here) at `feeds`; returns each input's largest |analytic| element.
std::vector<double> ExpectCentralDifferences(ir::Model model, const std::string& p,
                                             const std::vector<ir::Tensor>& feeds, const std::vector<std::string>& wrt,
                                             const std::vector<ir::Tensor>& analytic, const std::string& what) {
  std::vector<double> largest(wrt.size(), 0.0);
  StatusOr<int> expanded = ExpandGradientOps(model);
  EXPECT_TRUE(expanded.ok()) << what << ": " << expanded.status().message();
  auto session = exec::Session::Create(std::move(model));
  EXPECT_TRUE(session.ok()) << what << ": " << session.status().message();
  EXPECT_EQ(analytic.size(), wrt.size()) << what;
  if (!expanded.ok() || !session.ok() || analytic.size() != wrt.size()) return largest;
  auto penalty = [&](const std::vector<ir::Tensor>& f) {
    exec::RunOptions run;
    run.fetch = {p};
    return Values<double>((*(*session)->Run(f, run))[0])[0];
  };
  const double h = 1e-6;
  for (size_t k = 0; k < wrt.size(); ++k) {
    size_t feed = 0;
    while (feed < feeds.size() && feeds[feed].name() != wrt[k]) ++feed;
    EXPECT_LT(feed, feeds.size()) << what << ": no feed " << wrt[k];
    if (feed == feeds.size()) continue;
    const std::vector<double> got = Values<double>(analytic[k]);
    EXPECT_EQ(static_cast<int64_t>(got.size()), feeds[feed].num_elements()) << what << ": dp/d" << wrt[k];
    for (size_t i = 0; i < got.size() && static_cast<int64_t>(i) < feeds[feed].num_elements(); ++i) {
      std::vector<ir::Tensor> lo = feeds, hi = feeds;
      lo[feed].mutable_values<double>()[i] -= h;
      hi[feed].mutable_values<double>()[i] += h;
      const double want = (penalty(hi) - penalty(lo)) / (2 * h);
      EXPECT_NEAR(got[i], want, 1e-6 + 1e-6 * std::fabs(want)) << what << ": dp/d" << wrt[k] << "[" << i << "]";
      largest[k] = std::max(largest[k], std::fabs(got[i]));
    }
  }
  return largest;
}

struct LayerNormCase {
  int64_t axis;
  Dims x, scale;
};

const std::vector<LayerNormCase>& LayerNormCases() {
  static const std::vector<LayerNormCase> cases = {
      {-1, {3, 5}, {5}},
      {1, {2, 3, 4}, {3, 4}},
      {-2, {2, 3, 4}, {1, 4}},  // Scale broadcast inside the normalised dims
      {0, {2, 3}, {2, 3}},      // one row: every dim normalised
  };
  return cases;
}

std::string Name(const LayerNormCase& c) {
  return "axis " + std::to_string(c.axis) + " X " + ops::ShapeToString(c.x) + " Scale " + ops::ShapeToString(c.scale);
}

// dY, X, Scale -> LayerNormalization (statistics as outputs) -> LayerNormalizationGrad -> dx, dscale, db.
template <typename T>
void ExpectDecompositionMatchesKernel(const LayerNormCase& c, DType type, double tolerance, int64_t opset) {
  ir::Model m;
  m.opset_imports = {{"", opset}, {exec::kInternalDomain, 1}};
  ir::Graph& g = *m.graph;
  ir::Value* dy = Input(g, "dy", type, c.x);
  ir::Value* x = Input(g, "x", type, c.x);
  ir::Value* scale = Input(g, "scale", type, c.scale);
  ir::Value* y = g.CreateValue("y");
  ir::Value* mean = g.CreateValue("mean");
  ir::Value* inv_std = g.CreateValue("inv_std");
  ir::Node* ln = g.AddNode("LayerNormalization", {x, scale}, {y, mean, inv_std}, "ln");
  ln->SetAttribute(ir::Attribute::Int("axis", c.axis));
  ln->SetAttribute(ir::Attribute::Float("epsilon", 1e-3f));
  if (type == DType::kFloat64) ln->SetAttribute(ir::Attribute::Int("stash_type", 11));
  std::vector<ir::Value*> grads = {g.CreateValue("dx"), g.CreateValue("dscale"), g.CreateValue("db")};
  ir::Node* grad =
      g.AddNode(ops::kLayerNormalizationGradOp, {dy, x, scale, mean, inv_std}, grads, "ln_grad", exec::kInternalDomain);
  grad->SetAttribute(ir::Attribute::Int("axis", c.axis));
  grad->SetAttribute(ir::Attribute::Float("epsilon", 1e-3f));
  for (ir::Value* v : grads) {
    v->set_type(ir::ValueType::Tensor(type));
    g.AddOutput(v);
  }
  const std::vector<ir::Tensor> feeds = {Named(RandomTensor<T>(c.x, 1, -1, 1), "dy"),
                                         Named(RandomTensor<T>(c.x, 2, -2, 2), "x"),
                                         Named(RandomTensor<T>(c.scale, 3, 0.5, 1.5), "scale")};
  const std::vector<std::string> fetch = {"dx", "dscale", "db"};
  ir::Model decomposed = converter::CloneModel(m);
  StatusOr<int> n = DecomposeForGradients(decomposed, {"x"}, fetch);
  ASSERT_TRUE(n.ok()) << n.status().message();
  EXPECT_EQ(*n, 1) << Name(c);
  EXPECT_EQ(CountOps(*decomposed.graph, ops::kLayerNormalizationGradOp), 0);
  const std::vector<ir::Tensor> want = RunModel(std::move(m), feeds, fetch);
  const std::vector<ir::Tensor> got = RunModel(std::move(decomposed), feeds, fetch);
  ExpectOutputsClose<T>(want, got, fetch, tolerance,
                        Name(c) + " " + std::string(DTypeName(type)) + " opset " + std::to_string(opset));
}

TEST(Decompose, LayerNormalizationGradComputesWhatTheKernelComputes) {
  for (const LayerNormCase& c : LayerNormCases()) {
    for (int64_t opset : {17, 18}) {  // ReduceMean's axes an attribute, then an input
      ExpectDecompositionMatchesKernel<double>(c, DType::kFloat64, 1e-12, opset);
      ExpectDecompositionMatchesKernel<float>(c, DType::kFloat32, 1e-5, opset);
      // Both compute in float32; the outputs are rounded to float16 (a unit in the last place: 2^-10 of 1).
      ExpectDecompositionMatchesKernel<Float16>(c, DType::kFloat16, 2e-3, opset);
    }
  }
}

// Only a node a gradient flows through is decomposed: not one the targets do not depend on, nor one no wrt value
// reaches; and a node without the forward's epsilon (written before LayerNormalizationGrad carried it) is refused
// with an error naming it.
TEST(Decompose, OnlyNodesOnThePathAreDecomposed) {
  ir::Model m;
  m.opset_imports = {{"", 17}, {exec::kInternalDomain, 1}};
  ir::Graph& g = *m.graph;
  ir::Value* dy = Input(g, "dy", DType::kFloat32, {2, 3});
  ir::Value* x = Input(g, "x", DType::kFloat32, {2, 3});
  ir::Value* scale = Input(g, "scale", DType::kFloat32, {3});
  ir::Value* mean = g.CreateValue("mean");
  ir::Value* inv_std = g.CreateValue("inv_std");
  g.AddNode("LayerNormalization", {x, scale}, {g.CreateValue("y"), mean, inv_std}, "ln");
  ir::Value* dx = g.CreateValue("dx");
  ir::Node* grad =
      g.AddNode(ops::kLayerNormalizationGradOp, {dy, x, scale, mean, inv_std}, {dx}, "ln_grad", exec::kInternalDomain);
  grad->SetAttribute(ir::Attribute::Float("epsilon", 1e-5f));
  ir::Value* other = Node1(g, "Mul", {x, x}, "other");
  g.AddOutput(dx);
  g.AddOutput(other);
  {
    ir::Model c = converter::CloneModel(m);
    StatusOr<int> n = DecomposeForGradients(c, {"x"}, {"other"});  // dx is not a target
    ASSERT_TRUE(n.ok()) << n.status().message();
    EXPECT_EQ(*n, 0);
    n = DecomposeForGradients(c, {"scale"}, {"dx"});
    ASSERT_TRUE(n.ok()) << n.status().message();
    EXPECT_EQ(*n, 1);
  }
  {
    ir::Model c = converter::CloneModel(m);
    StatusOr<int> n = DecomposeForGradients(c, {}, {"dx"});  // nothing to differentiate with respect to
    ASSERT_TRUE(n.ok());
    EXPECT_EQ(*n, 0);
  }
  grad->RemoveAttribute("epsilon");
  StatusOr<int> n = DecomposeForGradients(m, {"dy"}, {"dx"});
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.status().message().find("node LayerNormalizationGrad 'ln_grad'"), std::string::npos)
      << n.status().message();
  EXPECT_NE(n.status().message().find("'epsilon'"), std::string::npos) << n.status().message();
}

// A gradient penalty through a LayerNormalization, by the Gradient operator: dx, dscale (and dbias) of
// sum(LayerNormalization(x, scale, bias) * k), p = the sum of their squares, and p's gradient in every input, checked
// against central differences of p in float64.
TEST(Decompose, LayerNormalizationSecondDerivativesMatchFiniteDifferences) {
  struct Case {
    LayerNormCase ln;
    std::optional<Dims> bias;
  };
  for (const Case& c : {Case{{-1, {3, 5}, {5}}, Dims{5}}, Case{{1, {2, 3, 4}, {3, 4}}, Dims{4}},
                        Case{{-2, {2, 3, 4}, {1, 4}}, std::nullopt}}) {
    const std::string what = Name(c.ln) + (c.bias ? " B " + ops::ShapeToString(*c.bias) : "");
    ir::Model m;
    m.opset_imports = {{"", 17}, {kGradientOpDomain, 1}};
    ir::Graph& g = *m.graph;
    std::vector<std::string> names = {"x", "scale"};
    std::vector<Dims> dims = {c.ln.x, c.ln.scale};
    if (c.bias) {
      names.push_back("bias");
      dims.push_back(*c.bias);
    }
    const size_t params = names.size();  // the inputs the first Gradient differentiates
    names.push_back("k");
    dims.push_back(c.ln.x);
    std::vector<ir::Value*> in;
    for (size_t i = 0; i < names.size(); ++i) in.push_back(Input(g, names[i], DType::kFloat64, dims[i]));
    std::vector<ir::Value*> ln_in(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(params));
    ir::Value* ln = g.CreateValue("ln");
    ir::Node* node = g.AddNode("LayerNormalization", ln_in, {ln}, "ln_node");
    node->SetAttribute(ir::Attribute::Int("axis", c.ln.axis));
    node->SetAttribute(ir::Attribute::Float("epsilon", 1e-2f));
    node->SetAttribute(ir::Attribute::Int("stash_type", 11));
    g.AddOutput(Node1(g, "Mul", {ln, in.back()}, "y"));
    // First: the gradients of sum(y) in x, scale (and bias), k held.
    std::vector<ir::Value*> first_out;
    std::vector<std::string> first_names;
    for (size_t i = 0; i < params; ++i) {
      first_names.push_back("d_" + names[i]);
      first_out.push_back(g.CreateValue(first_names.back()));
    }
    ir::Node* first = g.AddNode("Gradient", in, first_out, "first", kGradientOpDomain);
    first->SetAttribute(ir::Attribute::Strings("xs", std::vector<std::string>(names.begin(), names.begin() + params)));
    first->SetAttribute(ir::Attribute::Strings("zs", {"k"}));
    first->SetAttribute(ir::Attribute::String("y", "y"));
    ir::Value* p = nullptr;
    for (size_t i = 0; i < params; ++i) {
      ir::Value* sq = g.CreateValue("sq_" + names[i]);
      g.AddNode("ReduceSum", {Node1(g, "Mul", {first_out[i], first_out[i]}, "prod_" + names[i])}, {sq},
                "sum_" + names[i])
          ->SetAttribute(ir::Attribute::Int("keepdims", 0));
      p = p ? Node1(g, "Add", {p, sq}, "p_" + names[i]) : sq;
    }
    g.AddOutput(p);
    const std::string p_name = p->name();  // the expansion replaces the graph and its values
    ir::Model penalty_only = converter::CloneModel(m);
    // Second: p's gradient in every input.
    std::vector<ir::Value*> second_out;
    std::vector<std::string> fetch;
    for (const std::string& name : names) {
      fetch.push_back("dp_" + name);
      second_out.push_back(g.CreateValue(fetch.back()));
      g.AddOutput(second_out.back());
    }
    ir::Node* second = g.AddNode("Gradient", in, second_out, "second", kGradientOpDomain);
    second->SetAttribute(ir::Attribute::Strings("xs", names));
    second->SetAttribute(ir::Attribute::String("y", p_name));

    std::vector<std::vector<double>> values;
    for (size_t i = 0; i < names.size(); ++i) {
      values.push_back(Uniform(dims[i], 10 + static_cast<uint32_t>(i), names[i] == "scale" ? 0.5 : -1.5, 1.5));
    }
    StatusOr<int> expanded = ExpandGradientOps(m);
    ASSERT_TRUE(expanded.ok()) << what << ": " << expanded.status().message();
    EXPECT_EQ(*expanded, 2);
    // The penalty's own first derivatives stay on the fused kernel; its gradient reads the decomposition.
    EXPECT_EQ(CountOps(*m.graph, ops::kLayerNormalizationGradOp), 1) << what;
    const std::vector<ir::Tensor> analytic = RunModel(std::move(m), Feeds(names, dims, values), fetch);
    ASSERT_EQ(analytic.size(), names.size()) << what;

    const std::vector<double> largest =
        ExpectCentralDifferences(std::move(penalty_only), p_name, Feeds(names, dims, values), names, analytic, what);
    for (size_t k = 0; k < names.size(); ++k) {
      // The first derivatives do not depend on the bias (y is affine in it): p's gradient there is zero.
      if (names[k] == "bias") {
        EXPECT_LT(largest[k], 1e-12) << what;
      } else {
        EXPECT_GT(largest[k], 1e-3) << what << ": dp/d" << names[k];
      }
    }
  }
}

// ---- BatchNormalizationGrad

// BatchNormTraining(X, scale, B, running mean, running var) -> BatchNormalizationGrad(dY, X, scale, saved statistics)
// with batch statistics; or, `batch` false, BatchNormalizationGrad of the running statistics given as inputs (an
// inference-mode BatchNormalization's dScale and dB).
template <typename T>
ir::Model BatchNormGradModel(const Dims& x_dims, DType type, bool batch, int64_t opset) {
  ir::Model m;
  m.opset_imports = {{"", opset}, {exec::kInternalDomain, 1}};
  ir::Graph& g = *m.graph;
  const Dims c = {x_dims[1]};
  ir::Value* dy = Input(g, "dy", type, x_dims);
  ir::Value* x = Input(g, "x", type, x_dims);
  ir::Value* scale = Input(g, "scale", type, c);
  ir::Value* mean = nullptr;
  ir::Value* inv_std = nullptr;
  if (batch) {
    ir::Value* bias = Input(g, "bias", type, c);
    ir::Value* running_mean = Input(g, "running_mean", DType::kFloat32, c);
    ir::Value* running_var = Input(g, "running_var", DType::kFloat32, c);
    mean = g.CreateValue("saved_mean");
    inv_std = g.CreateValue("saved_inv_std");
    ir::Node* bn = g.AddNode(ops::kBatchNormTrainingOp, {x, scale, bias, running_mean, running_var},
                             {g.CreateValue("y"), g.CreateValue("new_mean"), g.CreateValue("new_var"), mean, inv_std},
                             "bn", exec::kInternalDomain);
    bn->SetAttribute(ir::Attribute::Float("epsilon", 1e-3f));
  } else {
    mean = Input(g, "mean", type, c);
    inv_std = Input(g, "inv_std", type, c);
  }
  std::vector<ir::Value*> grads = {g.CreateValue("dx"), g.CreateValue("dscale"), g.CreateValue("db")};
  ir::Node* grad =
      g.AddNode(ops::kBatchNormalizationGradOp, {dy, x, scale, mean, inv_std}, grads, "bn_grad", exec::kInternalDomain);
  if (batch) {
    grad->SetAttribute(ir::Attribute::Int("batch_statistics", 1));
    grad->SetAttribute(ir::Attribute::Float("epsilon", 1e-3f));
  }
  for (ir::Value* v : grads) {
    v->set_type(ir::ValueType::Tensor(type));
    g.AddOutput(v);
  }
  return m;
}

template <typename T>
std::vector<ir::Tensor> BatchNormFeeds(const Dims& x_dims, bool batch) {
  const Dims c = {x_dims[1]};
  std::vector<ir::Tensor> feeds = {Named(RandomTensor<T>(x_dims, 21, -1, 1), "dy"),
                                   Named(RandomTensor<T>(x_dims, 22, -2, 3), "x"),
                                   Named(RandomTensor<T>(c, 23, 0.5, 1.5), "scale")};
  if (batch) {
    feeds.push_back(Named(RandomTensor<T>(c, 24, -1, 1), "bias"));
    feeds.push_back(Named(MakeTensor<float>(c, std::vector<float>(c[0], 0.0f)), "running_mean"));
    feeds.push_back(Named(MakeTensor<float>(c, std::vector<float>(c[0], 1.0f)), "running_var"));
  } else {
    feeds.push_back(Named(RandomTensor<T>(c, 25, -0.5, 0.5), "mean"));
    feeds.push_back(Named(RandomTensor<T>(c, 26, 0.5, 2), "inv_std"));
  }
  return feeds;
}

template <typename T>
void ExpectBatchNormDecompositionMatchesKernel(const Dims& x_dims, DType type, bool batch, double tolerance,
                                               int64_t opset) {
  const std::string what = std::string(batch ? "batch" : "running") + " statistics X " + ops::ShapeToString(x_dims) +
                           " " + std::string(DTypeName(type)) + " opset " + std::to_string(opset);
  ir::Model m = BatchNormGradModel<T>(x_dims, type, batch, opset);
  const std::vector<std::string> fetch = {"dx", "dscale", "db"};
  ir::Model decomposed = converter::CloneModel(m);
  StatusOr<int> n = DecomposeForGradients(decomposed, {"x"}, fetch);
  ASSERT_TRUE(n.ok()) << n.status().message();
  EXPECT_EQ(*n, 1) << what;
  EXPECT_EQ(CountOps(*decomposed.graph, ops::kBatchNormalizationGradOp), 0);
  const std::vector<ir::Tensor> feeds = BatchNormFeeds<T>(x_dims, batch);
  const std::vector<ir::Tensor> want = RunModel(std::move(m), feeds, fetch);
  const std::vector<ir::Tensor> got = RunModel(std::move(decomposed), feeds, fetch);
  ExpectOutputsClose<T>(want, got, fetch, tolerance, what);
}

TEST(Decompose, BatchNormalizationGradComputesWhatTheKernelComputes) {
  for (const Dims& x : {Dims{4, 3}, Dims{2, 3, 4, 5}, Dims{3, 2, 5}}) {
    for (bool batch : {true, false}) {
      // Opset 7: the reductions take their axes as attributes.
      for (int64_t opset : {7, 17}) {
        // The kernel reads float32 saved statistics for float64 X; the decomposition computes them in float64.
        ExpectBatchNormDecompositionMatchesKernel<double>(x, DType::kFloat64, batch, batch ? 1e-6 : 1e-12, opset);
        ExpectBatchNormDecompositionMatchesKernel<float>(x, DType::kFloat32, batch, 1e-5, opset);
      }
    }
  }
}

// The second derivatives of a normalization's backward node (the only node of `m` on the path, with outputs dx,
// dscale and db) through its decomposition, in float64: p = the sum of the squares of the outputs, p's gradient in
// `wrt` against central differences of p computed by the decomposed model itself (the fused kernels may read float32
// statistics; the kernel-match tests above tie the decomposition to them).
void ExpectSquaredGradsSecondDerivatives(ir::Model m, const std::vector<ir::Tensor>& feeds,
                                         const std::vector<std::string>& wrt, const std::string& what,
                                         const std::vector<std::string>& outputs = {"dx", "dscale", "db"}) {
  ir::Graph& g = *m.graph;
  ir::Value* p = nullptr;
  for (const std::string& name : outputs) {
    ir::Value* v = g.FindValue(name);
    ir::Value* sq = g.CreateValue("sq_" + name);
    g.AddNode("ReduceSum", {Node1(g, "Mul", {v, v}, "prod_" + name)}, {sq}, "sum_" + name)
        ->SetAttribute(ir::Attribute::Int("keepdims", 0));
    p = p ? Node1(g, "Add", {p, sq}, "p_" + name) : sq;
  }
  g.AddOutput(p);
  const std::string p_name = p->name();
  StatusOr<int> n = DecomposeForGradients(m, wrt, {p_name});
  ASSERT_TRUE(n.ok()) << what << ": " << n.status().message();
  ASSERT_EQ(*n, 1) << what;
  ir::Model differentiated = converter::CloneModel(m);
  GradientRequest request;
  request.loss = p_name;
  request.wrt = wrt;
  StatusOr<GradientResult> grads = BuildGradients(differentiated, request);
  ASSERT_TRUE(grads.ok()) << what << ": " << grads.status().message();
  const std::vector<ir::Tensor> analytic = RunModel(std::move(differentiated), feeds, grads->gradients);
  const std::vector<double> largest = ExpectCentralDifferences(std::move(m), p_name, feeds, wrt, analytic, what);
  for (size_t k = 0; k < wrt.size(); ++k) EXPECT_GT(largest[k], 1e-3) << what << ": dp/d" << wrt[k];
}

// BatchNormalizationGrad's second derivatives, with batch and running statistics, at opsets 7 and 17; before opset 7
// (no numpy broadcasting) they are refused, naming the node.
TEST(Decompose, BatchNormalizationSecondDerivativesMatchFiniteDifferences) {
  ir::Model old = BatchNormGradModel<double>({4, 3}, DType::kFloat64, /*batch=*/true, 6);
  StatusOr<int> n = DecomposeForGradients(old, {"x"}, {"dx"});
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.status().message().find("node BatchNormalizationGrad 'bn_grad' lies on the path of a second derivative"),
            std::string::npos)
      << n.status().message();
  EXPECT_NE(n.status().message().find("the model's opset is 6"), std::string::npos) << n.status().message();
  for (const Dims& x_dims : {Dims{4, 3}, Dims{2, 3, 2, 3}}) {
    for (bool batch : {true, false}) {
      for (int64_t opset : {7, 17}) {
        ExpectSquaredGradsSecondDerivatives(BatchNormGradModel<double>(x_dims, DType::kFloat64, batch, opset),
                                            BatchNormFeeds<double>(x_dims, batch), {"dy", "x", "scale"},
                                            std::string(batch ? "batch" : "running") + " statistics X " +
                                                ops::ShapeToString(x_dims) + " opset " + std::to_string(opset));
      }
    }
  }
}

// ---- GroupNormalizationGrad (InstanceNormalization, GroupNormalization)

struct GroupNormCase {
  int64_t groups;  // 0: a group per channel (InstanceNormalization)
  bool per_channel;
  Dims x;
  int64_t opset;
};

std::string Name(const GroupNormCase& c) {
  return "num_groups " + std::to_string(c.groups) + (c.per_channel ? " per channel" : " per group") + " X " +
         ops::ShapeToString(c.x) + " opset " + std::to_string(c.opset);
}

template <typename T>
ir::Model GroupNormGradModel(const GroupNormCase& c, DType type) {
  ir::Model m;
  m.opset_imports = {{"", c.opset}, {exec::kInternalDomain, 1}};
  ir::Graph& g = *m.graph;
  const Dims scale = {c.per_channel ? c.x[1] : c.groups};
  std::vector<ir::Value*> grads = {g.CreateValue("dx"), g.CreateValue("dscale"), g.CreateValue("db")};
  ir::Node* n = g.AddNode(ops::kGroupNormalizationGradOp,
                          {Input(g, "dy", type, c.x), Input(g, "x", type, c.x), Input(g, "scale", type, scale)}, grads,
                          "gn_grad", exec::kInternalDomain);
  n->SetAttribute(ir::Attribute::Int("num_groups", c.groups));
  n->SetAttribute(ir::Attribute::Float("epsilon", 1e-3f));
  n->SetAttribute(ir::Attribute::Int("per_channel", c.per_channel ? 1 : 0));
  for (ir::Value* v : grads) {
    v->set_type(ir::ValueType::Tensor(type));
    g.AddOutput(v);
  }
  return m;
}

template <typename T>
std::vector<ir::Tensor> GroupNormFeeds(const GroupNormCase& c) {
  const Dims scale = {c.per_channel ? c.x[1] : c.groups};
  return {Named(RandomTensor<T>(c.x, 51, -1, 1), "dy"), Named(RandomTensor<T>(c.x, 52, -2, 3), "x"),
          Named(RandomTensor<T>(scale, 53, 0.5, 1.5), "scale")};
}

const std::vector<GroupNormCase>& GroupNormCases() {
  static const std::vector<GroupNormCase> cases = {
      {0, true, {2, 3, 4}, 17},     // InstanceNormalization
      {0, true, {2, 3, 2, 2}, 7},   // InstanceNormalization at opset 7: the reductions' axes as attributes
      {3, true, {2, 6, 2}, 21},     // GroupNormalization-21: scale per channel
      {2, false, {2, 4, 3}, 18},    // GroupNormalization-18: scale per group
      {1, true, {2, 4, 1, 3}, 21},  // one group: every channel together
  };
  return cases;
}

TEST(Decompose, GroupNormalizationGradComputesWhatTheKernelComputes) {
  for (const GroupNormCase& c : GroupNormCases()) {
    const std::vector<std::string> fetch = {"dx", "dscale", "db"};
    auto check = [&](auto tag, DType type, double tolerance) {
      using T = decltype(tag);
      ir::Model m = GroupNormGradModel<T>(c, type);
      ir::Model decomposed = converter::CloneModel(m);
      StatusOr<int> n = DecomposeForGradients(decomposed, {"x"}, fetch);
      ASSERT_TRUE(n.ok()) << Name(c) << ": " << n.status().message();
      EXPECT_EQ(*n, 1) << Name(c);
      const std::vector<ir::Tensor> feeds = GroupNormFeeds<T>(c);
      ExpectOutputsClose<T>(RunModel(std::move(m), feeds, fetch), RunModel(std::move(decomposed), feeds, fetch), fetch,
                            tolerance, Name(c) + " " + std::string(DTypeName(type)));
    };
    check(double{}, DType::kFloat64, 1e-12);
    check(float{}, DType::kFloat32, 1e-5);
  }
}

TEST(Decompose, GroupNormalizationSecondDerivativesMatchFiniteDifferences) {
  for (const GroupNormCase& c : GroupNormCases()) {
    ExpectSquaredGradsSecondDerivatives(GroupNormGradModel<double>(c, DType::kFloat64), GroupNormFeeds<double>(c),
                                        {"dy", "x", "scale"}, Name(c));
  }
}

// ---- MeanVarianceNormalizationGrad, LpNormalizationGrad

struct NormalizeCase {
  bool mvn;
  std::vector<ir::Attribute> attrs;
  Dims x;
  int64_t opset;
  std::string name;
};

std::vector<NormalizeCase> NormalizeCases() {
  using ir::Attribute;
  return {
      {true, {}, {2, 3, 2, 2}, 13, "MVN default axes"},
      {true, {Attribute::Ints("axes", {1})}, {2, 4, 3}, 18, "MVN axes [1] opset 18"},
      {true, {Attribute::Ints("axes", {-1})}, {3, 5}, 13, "MVN axes [-1]"},
      {false, {}, {3, 4}, 13, "LpNormalization p 2"},
      {false, {Attribute::Int("p", 1), Attribute::Int("axis", 1)}, {2, 3, 4}, 13, "LpNormalization p 1 axis 1"},
      {false, {Attribute::Int("axis", 0)}, {3, 2, 2}, 9, "LpNormalization axis 0 opset 9"},
  };
}

template <typename T>
ir::Model NormalizeGradModel(const NormalizeCase& c, DType type) {
  ir::Model m;
  m.opset_imports = {{"", c.opset}, {exec::kInternalDomain, 1}};
  ir::Graph& g = *m.graph;
  ir::Value* dx = g.CreateValue("dx");
  dx->set_type(ir::ValueType::Tensor(type));
  ir::Node* n =
      g.AddNode(c.mvn ? ops::kMeanVarianceNormalizationGradOp : ops::kLpNormalizationGradOp,
                {Input(g, "dy", type, c.x), Input(g, "x", type, c.x)}, {dx}, "norm_grad", exec::kInternalDomain);
  for (const ir::Attribute& a : c.attrs) n->SetAttribute(a);
  g.AddOutput(dx);
  return m;
}

template <typename T>
std::vector<ir::Tensor> NormalizeFeeds(const NormalizeCase& c) {
  return {Named(RandomTensor<T>(c.x, 61, -1, 1), "dy"), Named(RandomTensor<T>(c.x, 62, -2, 3), "x")};
}

TEST(Decompose, NormalizeGradsComputeWhatTheKernelsCompute) {
  for (const NormalizeCase& c : NormalizeCases()) {
    auto check = [&](auto tag, DType type, double tolerance) {
      using T = decltype(tag);
      ir::Model m = NormalizeGradModel<T>(c, type);
      ir::Model decomposed = converter::CloneModel(m);
      StatusOr<int> n = DecomposeForGradients(decomposed, {"x"}, {"dx"});
      ASSERT_TRUE(n.ok()) << c.name << ": " << n.status().message();
      EXPECT_EQ(*n, 1) << c.name;
      const std::vector<ir::Tensor> feeds = NormalizeFeeds<T>(c);
      ExpectOutputsClose<T>(RunModel(std::move(m), feeds, {"dx"}), RunModel(std::move(decomposed), feeds, {"dx"}),
                            {"dx"}, tolerance, c.name + " " + std::string(DTypeName(type)));
    };
    check(double{}, DType::kFloat64, 1e-12);
    check(float{}, DType::kFloat32, 1e-5);
  }
  // A zero vector (LpNormalization) and a constant slice (MeanVarianceNormalization): 0 and the first term alone, as
  // the kernels give.
  for (bool mvn : {true, false}) {
    NormalizeCase c{mvn, {ir::Attribute::Ints("axes", {1})}, {2, 3}, 13, mvn ? "MVN constant row" : "Lp zero row"};
    if (!mvn) c.attrs = {ir::Attribute::Int("axis", 1)};
    ir::Model m = NormalizeGradModel<double>(c, DType::kFloat64);
    ir::Model decomposed = converter::CloneModel(m);
    ASSERT_TRUE(DecomposeForGradients(decomposed, {"x"}, {"dx"}).ok());
    const std::vector<ir::Tensor> feeds = {Named(MakeTensor<double>({2, 3}, {0.5, -1, 2, 1, 1, 1}), "dy"),
                                           Named(MakeTensor<double>({2, 3}, {0, 0, 0, 1, 2, 4}), "x")};
    ExpectOutputsClose<double>(RunModel(std::move(m), feeds, {"dx"}), RunModel(std::move(decomposed), feeds, {"dx"}),
                               {"dx"}, 1e-12, c.name);
  }
}

TEST(Decompose, NormalizeSecondDerivativesMatchFiniteDifferences) {
  for (const NormalizeCase& c : NormalizeCases()) {
    ExpectSquaredGradsSecondDerivatives(NormalizeGradModel<double>(c, DType::kFloat64), NormalizeFeeds<double>(c),
                                        {"dy", "x"}, c.name, {"dx"});
  }
}

// ---- SoftmaxCrossEntropyLossGrad, NegativeLogLikelihoodLossGrad

struct LossCase {
  bool softmax;
  std::string reduction;
  bool weights;
  bool ignore;  // ignore_index 2, which some labels hold
  Dims x;       // [N, C] or [N, C, D]
};

std::string Name(const LossCase& c) {
  return std::string(c.softmax ? "SoftmaxCrossEntropyLossGrad" : "NegativeLogLikelihoodLossGrad") + " " + c.reduction +
         (c.weights ? " weights" : "") + (c.ignore ? " ignore_index" : "") + " X " + ops::ShapeToString(c.x);
}

// The loss gradient of `c` with values of type T (`type`) and labels of type L (`label_type`) against its
// decomposition. `all_ignored`: every label is ignore_index (a batch of padding; the mean divides by no weight).
template <typename T, typename L>
void ExpectLossDecompositionMatchesKernel(const LossCase& c, DType type, DType label_type, bool all_ignored,
                                          double tolerance) {
  const std::string what = Name(c) + " " + std::string(DTypeName(type)) + " labels " +
                           std::string(DTypeName(label_type)) + (all_ignored ? " all ignored" : "");
  const Dims& x_dims = c.x;
  Dims label_dims = {x_dims[0]};
  if (x_dims.size() == 3) label_dims.push_back(x_dims[2]);
  ir::Model m;
  m.opset_imports = {{"", 17}, {exec::kInternalDomain, 1}};
  ir::Graph& g = *m.graph;
  ir::Value* dloss = Input(g, "dloss", type, c.reduction == "none" ? label_dims : Dims{});
  std::vector<ir::Value*> in = {dloss, Input(g, "x", type, x_dims), Input(g, "labels", label_type, label_dims)};
  if (c.weights) in.push_back(Input(g, "weights", type, {x_dims[1]}));
  ir::Value* dx = g.CreateValue("dx");
  dx->set_type(ir::ValueType::Tensor(type));
  ir::Node* n = g.AddNode(c.softmax ? ops::kSoftmaxCrossEntropyLossGradOp : ops::kNegativeLogLikelihoodLossGradOp, in,
                          {dx}, "loss_grad", exec::kInternalDomain);
  n->SetAttribute(ir::Attribute::String("reduction", c.reduction));
  if (c.ignore) n->SetAttribute(ir::Attribute::Int("ignore_index", 2));
  g.AddOutput(dx);
  std::vector<L> labels;
  for (int64_t i = 0; i < Count(label_dims); ++i) {
    labels.push_back(static_cast<L>(all_ignored ? 2 : (i * 3 + 1) % x_dims[1]));  // 1 4 2 0 3 1
  }
  std::vector<ir::Tensor> feeds = {
      Named(RandomTensor<T>(c.reduction == "none" ? label_dims : Dims{}, 31, 0.5, 1.5), "dloss"),
      Named(RandomTensor<T>(x_dims, 32, -3, 0), "x"), Named(MakeTensor<L>(label_dims, labels), "labels")};
  if (c.weights) feeds.push_back(Named(RandomTensor<T>({x_dims[1]}, 33, 0.5, 2), "weights"));
  ir::Model decomposed = converter::CloneModel(m);
  StatusOr<int> count = DecomposeForGradients(decomposed, {"x", "dloss"}, {"dx"});
  ASSERT_TRUE(count.ok()) << what << ": " << count.status().message();
  EXPECT_EQ(*count, 1) << what;
  const std::vector<ir::Tensor> want = RunModel(std::move(m), feeds, {"dx"});
  const std::vector<ir::Tensor> got = RunModel(std::move(decomposed), feeds, {"dx"});
  ExpectOutputsClose<T>(want, got, {"dx"}, tolerance, what);
  if (all_ignored && got.size() == 1) {
    for (ops::ComputeType<T> v : Values<T>(got[0])) EXPECT_EQ(v, 0) << what;
  }
}

TEST(Decompose, LossGradsComputeWhatTheKernelsCompute) {
  for (bool softmax : {true, false}) {
    for (const char* reduction : {"none", "sum", "mean"}) {
      for (int variant = 0; variant < 4; ++variant) {
        for (const Dims& x_dims : {Dims{4, 5}, Dims{2, 5, 3}}) {
          const LossCase c{softmax, reduction, (variant & 1) != 0, (variant & 2) != 0, x_dims};
          ExpectLossDecompositionMatchesKernel<double, int64_t>(c, DType::kFloat64, DType::kInt64, false, 1e-12);
        }
      }
      // float32 values and int32 labels; a batch of nothing but ignored labels (0 where a mean would be 0 / 0).
      const LossCase c{softmax, reduction, true, true, {4, 5}};
      ExpectLossDecompositionMatchesKernel<float, int32_t>(c, DType::kFloat32, DType::kInt32, false, 1e-6);
      ExpectLossDecompositionMatchesKernel<double, int64_t>(c, DType::kFloat64, DType::kInt64, true, 0);
    }
  }
}

// Input-gradient regularisation (double backprop): dx = d loss / dx for loss = SoftmaxCrossEntropyLoss(x W, labels)
// (or NegativeLogLikelihoodLoss(LogSoftmax(x W))), with class weights and an ignored label, by a Gradient node; p =
// sum(dx^2); p's gradient in x and W against central differences in float64.
TEST(Decompose, LossSecondDerivativesMatchFiniteDifferences) {
  for (bool softmax : {true, false}) {
    for (const char* reduction : {"mean", "sum"}) {
      const std::string what =
          std::string(softmax ? "SoftmaxCrossEntropyLoss " : "NegativeLogLikelihoodLoss ") + reduction;
      ir::Model m;
      m.opset_imports = {{"", 17}, {kGradientOpDomain, 1}};
      ir::Graph& g = *m.graph;
      ir::Value* x = Input(g, "x", DType::kFloat64, {4, 3});
      ir::Value* w = Input(g, "W", DType::kFloat64, {3, 5});
      ir::Value* labels = g.CreateValue("labels");
      g.SetInitializer(labels, MakeTensor<int64_t>({4}, {1, 2, 4, 0}));
      ir::Value* weights = g.CreateValue("weights");
      g.SetInitializer(weights, MakeTensor<double>({5}, {1.0, 0.5, 2.0, 1.5, 0.75}));
      ir::Value* scores = Node1(g, "MatMul", {x, w}, "scores");
      ir::Value* input = softmax ? scores : Node1(g, "LogSoftmax", {scores}, "log_prob");
      ir::Value* loss = g.CreateValue("loss");
      ir::Node* l = g.AddNode(softmax ? "SoftmaxCrossEntropyLoss" : "NegativeLogLikelihoodLoss",
                              {input, labels, weights}, {loss}, "loss_node");
      l->SetAttribute(ir::Attribute::String("reduction", reduction));
      l->SetAttribute(ir::Attribute::Int("ignore_index", 2));
      ir::Value* dx = g.CreateValue("dx");
      ir::Node* first = g.AddNode("Gradient", {x, w}, {dx}, "first", kGradientOpDomain);
      first->SetAttribute(ir::Attribute::Strings("xs", {"x"}));
      first->SetAttribute(ir::Attribute::Strings("zs", {"W"}));
      first->SetAttribute(ir::Attribute::String("y", "loss"));
      ir::Value* p = g.CreateValue("p");
      g.AddNode("ReduceSum", {Node1(g, "Mul", {dx, dx}, "dx2")}, {p}, "penalty")
          ->SetAttribute(ir::Attribute::Int("keepdims", 0));
      g.AddOutput(p);
      ir::Model penalty_only = converter::CloneModel(m);
      std::vector<ir::Value*> second_out = {g.CreateValue("dp_dx"), g.CreateValue("dp_dW")};
      for (ir::Value* v : second_out) g.AddOutput(v);
      ir::Node* second = g.AddNode("Gradient", {x, w}, second_out, "second", kGradientOpDomain);
      second->SetAttribute(ir::Attribute::Strings("xs", {"x", "W"}));
      second->SetAttribute(ir::Attribute::String("y", "p"));
      const std::vector<Dims> dims = {{4, 3}, {3, 5}};
      const std::vector<std::string> names = {"x", "W"};
      std::vector<std::vector<double>> values = {Uniform(dims[0], 41, -1.5, 1.5), Uniform(dims[1], 42, -1.5, 1.5)};
      StatusOr<int> expanded = ExpandGradientOps(m);
      ASSERT_TRUE(expanded.ok()) << what << ": " << expanded.status().message();
      const std::vector<ir::Tensor> analytic = RunModel(std::move(m), Feeds(names, dims, values), {"dp_dx", "dp_dW"});
      ASSERT_EQ(analytic.size(), 2u) << what;
      const std::vector<double> largest =
          ExpectCentralDifferences(std::move(penalty_only), "p", Feeds(names, dims, values), names, analytic, what);
      for (size_t k = 0; k < 2; ++k) {
        EXPECT_GT(largest[k], 1e-3) << what << ": dp/d" << names[k];
      }
    }
  }
}

}  // namespace
}  // namespace onnxamp::trainer
