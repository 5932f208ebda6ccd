// Whole-graph gradient checks of the reference models (models/mlp.onnx, cnn.onnx, transformer.onnx) in float64: the
// model widened to float64 at the IR level, its trainable parameters (trainer::SelectParameters) made graph inputs,
// a random projection loss L = ReduceSum(output * R), the backward pass of trainer::BuildGradients, and a few
// elements of every parameter's gradient (always the largest one) compared with central differences of L. Where the
// single-node checks (grad_check.h) test each builder alone, this tests them composed: fan-out sums, broadcasting,
// reshapes, the element types autodiff infers through a real graph.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "converter/model_clone.h"
#include "importer/model_io.h"
#include "runtime/executor/session.h"
#include "trainer/autodiff/autodiff.h"
#include "trainer/graph/training_graph.h"

namespace onnxamp::trainer {
namespace {

constexpr int64_t kBatch = 2;

ir::Tensor Widen(const ir::Tensor& t) {
  ir::Tensor out(DType::kFloat64, t.dims());
  const auto in = t.values<float>();
  auto o = out.mutable_values<double>();
  for (size_t i = 0; i < in.size(); ++i) o[i] = static_cast<double>(in[i]);
  out.set_name(t.name());
  return out;
}

// The float64 copy of the model: every float32 initializer widened, every float32 tensor type (inputs, outputs,
// value_info, intermediates), Constant value, Cast target and LayerNormalization stash_type made float64. Integer
// values are left alone.
void WidenToFloat64(ir::Model& model) {
  ir::Graph& g = *model.graph;
  for (ir::Value* v : g.values()) {
    if (v->type().is_tensor() && v->type().elem_type() == DType::kFloat32) {
      ir::ValueType type = v->type();
      type.set_elem_type(DType::kFloat64);
      v->set_type(std::move(type));
    }
    if (v->initializer() && v->initializer()->dtype() == DType::kFloat32) {
      g.SetInitializer(v, Widen(*v->initializer()));
    }
  }
  for (ir::Node* n : g.nodes()) {
    ASSERT_TRUE(n->subgraphs().empty()) << n->Describe() << ": subgraphs are not widened";
    if (!ir::IsDefaultDomain(n->domain())) continue;
    if (n->op_type() == "Constant") {
      ir::Attribute* value = n->FindAttribute("value");
      if (value && value->t.dtype() == DType::kFloat32) value->t = Widen(value->t);
      ASSERT_EQ(n->FindAttribute("value_float"), nullptr) << n->Describe();
      ASSERT_EQ(n->FindAttribute("value_floats"), nullptr) << n->Describe();
    } else if (n->op_type() == "LayerNormalization") {
      // stash_type names the type of Mean and InvStdDev (default 1, float), which the gradient reads back: left at
      // float, the float64 backward is only as accurate as float32 (relative errors up to ~2e-6 in the
      // transformer's parameters before ln_f), which rtol 1e-5 cannot tell from a wrong gradient.
      if (n->GetInt("stash_type", 1) == static_cast<int64_t>(DType::kFloat32)) {
        n->SetAttribute(ir::Attribute::Int("stash_type", static_cast<int64_t>(DType::kFloat64)));
      }
    } else if (n->op_type() == "Cast") {
      if (n->GetInt("to", 0) == static_cast<int64_t>(DType::kFloat32)) {
        n->SetAttribute(ir::Attribute::Int("to", static_cast<int64_t>(DType::kFloat64)));
      }
    }
  }
}

// Uniform doubles in [-1, 1) from a fixed generator (no std:: distributions: the same values everywhere).
ir::Tensor RandomDoubles(const std::vector<int64_t>& dims, uint32_t seed) {
  ir::Tensor t(DType::kFloat64, dims);
  std::mt19937 gen(seed);
  for (double& v : t.mutable_values<double>()) v = static_cast<double>(gen() % 2000001) / 1000000.0 - 1.0;
  return t;
}

struct ModelCase {
  const char* file;
  int64_t int_high;  // integer inputs are drawn from [0, int_high)
  // Parameters whose gradient is zero in exact arithmetic: the attention's key bias adds q . b_k to every score of
  // a row, which the softmax removes.
  std::vector<std::string> zero_gradients;
  // The erf-form GELUs replaced by com.onnxamp Gelu first (UseFusedGelu, as training graphs do): how many.
  int fused_gelus = 0;
};

std::ostream& operator<<(std::ostream& os, const ModelCase& c) {
  return os << c.file << (c.fused_gelus ? " fused" : "");
}

class ModelGradCheck : public ::testing::TestWithParam<ModelCase> {};

TEST_P(ModelGradCheck, ParameterGradientsMatchCentralDifferences) {
  const ModelCase& c = GetParam();
  const auto start = std::chrono::steady_clock::now();
  StatusOr<ir::Model> loaded = importer::LoadModel(std::string(ONNXAMP_SOURCE_DIR) + "/models/" + c.file);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  ir::Model model = std::move(loaded).value();
  WidenToFloat64(model);
  if (::testing::Test::HasFatalFailure()) return;
  if (c.fused_gelus > 0) {
    ASSERT_EQ(UseFusedGelu(model), c.fused_gelus);
  }
  ir::Graph& g = *model.graph;
  ASSERT_EQ(g.outputs().size(), 1u);

  // The data inputs (random, batch kBatch), then the parameters as graph inputs fed their initial values.
  std::vector<ir::Tensor> feeds;
  uint32_t seed = 1;
  for (const ir::Value* in : g.inputs()) {
    if (in->initializer()) continue;
    ASSERT_TRUE(in->type().is_tensor() && in->type().shape()) << in->name();
    std::vector<int64_t> dims;
    for (const ir::Dim& d : *in->type().shape()) dims.push_back(d.is_value() ? d.value : kBatch);
    ir::Tensor t;
    if (in->type().elem_type() == DType::kFloat64) {
      t = RandomDoubles(dims, seed++);
    } else {
      ASSERT_EQ(in->type().elem_type(), DType::kInt64) << in->name();
      t = ir::Tensor(DType::kInt64, dims);
      std::mt19937 gen(seed++);
      for (int64_t& v : t.mutable_values<int64_t>()) v = static_cast<int64_t>(gen() % c.int_high);
    }
    t.set_name(in->name());
    feeds.push_back(std::move(t));
  }
  StatusOr<std::vector<std::string>> params = SelectParameters(model, "");
  ASSERT_TRUE(params.ok()) << params.status().message();
  ASSERT_FALSE(params->empty());
  std::vector<size_t> param_feed;  // index into feeds, per parameter
  for (const std::string& name : *params) {
    ir::Value* v = g.FindValue(name);
    ASSERT_NE(v, nullptr) << name;
    ASSERT_EQ(v->initializer()->dtype(), DType::kFloat64) << name;
    ir::Tensor value = *v->initializer();
    value.set_name(name);
    ir::Shape shape;
    for (int64_t d : value.dims()) shape.push_back(ir::Dim::Value(d));
    g.RemoveInitializer(v);
    v->set_type(ir::ValueType::Tensor(DType::kFloat64, shape));
    if (!v->is_graph_input()) g.AddInput(v);
    param_feed.push_back(feeds.size());
    feeds.push_back(std::move(value));
  }

  // One forward run for the output's shape, then loss = ReduceSum(output * R).
  exec::SessionOptions session_options;
  session_options.num_threads = 1;
  std::vector<int64_t> output_dims;
  {
    StatusOr<std::unique_ptr<exec::Session>> forward =
        exec::Session::Create(converter::CloneModel(model), session_options);
    ASSERT_TRUE(forward.ok()) << forward.status().message();
    StatusOr<std::vector<ir::Tensor>> out = (*forward)->Run(feeds);
    ASSERT_TRUE(out.ok()) << out.status().message();
    ASSERT_EQ((*out)[0].dtype(), DType::kFloat64);
    output_dims = (*out)[0].dims();
  }
  ir::Value* output = g.outputs()[0];
  ir::Value* r = g.CreateValue(g.UniqueName("grad_check.R"));
  r->set_type(ir::ValueType::Tensor(DType::kFloat64));
  g.SetInitializer(r, RandomDoubles(output_dims, 1000));
  ir::Value* projected = g.CreateValue(g.UniqueName("grad_check.projected"));
  g.AddNode("Mul", {output, r}, {projected}, "grad_check.project");
  ir::Value* loss = g.CreateValue(g.UniqueName("grad_check.loss"));
  loss->set_type(ir::ValueType::Tensor(DType::kFloat64, ir::Shape{}));
  g.AddNode("ReduceSum", {projected}, {loss}, "grad_check.sum")->SetAttribute(ir::Attribute::Int("keepdims", 0));
  g.AddOutput(loss);

  GradientRequest request;
  request.loss = loss->name();
  request.wrt = *params;
  StatusOr<GradientResult> grads = BuildGradients(model, request);
  ASSERT_TRUE(grads.ok()) << grads.status().message();
  exec::RunOptions analytic;
  for (size_t p = 0; p < params->size(); ++p) {
    ASSERT_FALSE(grads->gradients[p].empty()) << (*params)[p] << ": the loss does not depend on it";
    analytic.fetch.push_back(grads->gradients[p]);
  }
  StatusOr<std::unique_ptr<exec::Session>> session = exec::Session::Create(std::move(model), session_options);
  ASSERT_TRUE(session.ok()) << session.status().message();
  StatusOr<std::vector<ir::Tensor>> got = (*session)->Run(feeds, analytic);
  ASSERT_TRUE(got.ok()) << "backward: " << got.status().message();

  // Per parameter: the element with the largest analytic gradient and kPerParam - 1 more from a fixed generator.
  // The central difference cannot resolve less than one ulp of L over 2h (L's rounding differs between L(x + h) and
  // L(x - h)): the absolute tolerance is kAtol or a few of those quanta, whichever is larger (the transformer's
  // |L| ~ 81 has a quantum of 7e-9, and the difference of a zero gradient comes out as 2 quanta).
  constexpr int kPerParam = 4;
  constexpr double kStep = 1e-6, kRtol = 1e-5, kAtol = 1e-8, kMinAbs = 1e-8;
  exec::RunOptions loss_only;
  loss_only.fetch = {request.loss};
  auto loss_at = [&](const std::vector<ir::Tensor>& f) -> double {
    StatusOr<std::vector<ir::Tensor>> l = (*session)->Run(f, loss_only);
    EXPECT_TRUE(l.ok()) << l.status().message();
    return l.ok() ? (*l)[0].values<double>()[0] : std::nan("");
  };
  const double l0 = std::abs(loss_at(feeds));
  const double atol = std::max(kAtol, 8 * (std::nextafter(l0, INFINITY) - l0) / (2 * kStep));
  double max_rel = 0, max_abs_small = 0;  // relative error where rtol governs (|g| >= atol / rtol); absolute below
  int checked = 0, forward_runs = 0;
  for (size_t p = 0; p < params->size(); ++p) {
    const std::string& name = (*params)[p];
    const ir::Tensor& grad = (*got)[p];
    ASSERT_EQ(grad.dtype(), DType::kFloat64) << name;
    ASSERT_EQ(grad.dims(), feeds[param_feed[p]].dims()) << name;
    const auto a = grad.values<double>();
    const int64_t n = static_cast<int64_t>(a.size());
    int64_t largest = 0;
    for (int64_t j = 1; j < n; ++j) {
      if (std::abs(a[j]) > std::abs(a[largest])) largest = j;
    }
    if (std::find(c.zero_gradients.begin(), c.zero_gradients.end(), name) != c.zero_gradients.end()) {
      EXPECT_LE(std::abs(a[largest]), 1e-10)
          << c.file << ": " << name << " should have a zero gradient, element " << largest << " is " << a[largest];
    } else {
      EXPECT_GT(std::abs(a[largest]), kMinAbs)
          << c.file << ": " << name << ": the analytic gradient is (near) zero everywhere (largest: element " << largest
          << ", " << a[largest] << ")";
    }
    std::vector<int64_t> elements = {largest};
    std::mt19937 gen(static_cast<uint32_t>(7919 * (p + 1)));
    while (static_cast<int64_t>(elements.size()) < std::min<int64_t>(kPerParam, n)) {
      const int64_t j = static_cast<int64_t>(gen() % static_cast<uint32_t>(n));
      if (std::find(elements.begin(), elements.end(), j) == elements.end()) elements.push_back(j);
    }
    ir::Tensor& x = feeds[param_feed[p]];
    for (int64_t j : elements) {
      const double x0 = x.values<double>()[j];
      const double h = kStep * std::max(1.0, std::abs(x0));
      x.mutable_values<double>()[j] = x0 + h;
      const double plus = loss_at(feeds);
      x.mutable_values<double>()[j] = x0 - h;
      const double minus = loss_at(feeds);
      x.mutable_values<double>()[j] = x0;
      forward_runs += 2;
      ++checked;
      const double numeric = (plus - minus) / (2 * h);
      const double error = std::abs(numeric - a[j]);
      const double scale = std::max(std::abs(numeric), std::abs(a[j]));
      if (scale >= kAtol / kRtol) {
        max_rel = std::max(max_rel, error / scale);
      } else {
        max_abs_small = std::max(max_abs_small, error);
      }
      EXPECT_LE(error, atol + kRtol * scale)
          << c.file << ": d loss / d " << name << " element " << j << ": analytic " << a[j] << ", central difference "
          << numeric << " (absolute error " << error << ", relative " << error / scale << ")";
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "%s: %zu parameters, %d elements (%d forward runs); |L| %.3g, atol %.2g; max relative error %.3g (|g| >= %.0e), "
      "max absolute error %.3g below; %.2f s\n",
      c.file, params->size(), checked, forward_runs, l0, atol, max_rel, kAtol / kRtol, max_abs_small, seconds);
}

INSTANTIATE_TEST_SUITE_P(ReferenceModels, ModelGradCheck,
                         ::testing::Values(ModelCase{"mlp.onnx", 1, {}}, ModelCase{"cnn.onnx", 1, {}},
                                           ModelCase{"transformer.onnx", 128, {"attn.k.bias"}},
                                           ModelCase{"transformer.onnx", 128, {"attn.k.bias"}, 1}),
                         [](const ::testing::TestParamInfo<ModelCase>& info) {
                           std::string name = info.param.file;
                           return name.substr(0, name.find('.')) + (info.param.fused_gelus ? "_fused_gelu" : "");
                         });

}  // namespace
}  // namespace onnxamp::trainer
