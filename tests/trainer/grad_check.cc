// The finite-difference gradient check (see grad_check.h).
#include "tests/trainer/grad_check.h"

#include <algorithm>
#include <memory>
#include <random>

#include "runtime/ir/verify.h"
#include "trainer/autodiff/autodiff.h"

namespace onnxamp::testing {
namespace {

// Uniform values in [-1, 1) from a fixed generator (the projection weights).
ir::Tensor RandomDoubles(const std::vector<int64_t>& dims, uint32_t seed) {
  ir::Tensor t(DType::kFloat64, dims);
  std::mt19937 gen(seed);
  for (double& v : t.mutable_values<double>()) v = static_cast<double>(gen() % 2000001) / 1000000.0 - 1.0;
  return t;
}

double Scalar(const ir::Tensor& t) { return t.values<double>()[0]; }

}  // namespace

void ExpectGradientsMatchFiniteDifferences(const OpTester& t, const std::string& what,
                                           const GradCheckOptions& options) {
  StatusOr<std::vector<ir::Tensor>> forward = t.Run();
  ASSERT_TRUE(forward.ok()) << what << ": forward: " << forward.status().message();

  // The model: the node, then loss = sum_k ReduceSum(out_k * R_k) over its float64 outputs.
  ir::Model model = t.BuildModel();
  if (!t.domain.empty()) model.SetOpsetVersion("", options.onnx_opset);
  ir::Graph& g = *model.graph;
  std::vector<ir::Value*> outs;
  for (ir::Value* v : g.outputs()) outs.push_back(v);
  ir::Value* loss = nullptr;
  for (size_t k = 0; k < outs.size(); ++k) {
    if (std::find(options.skip_outputs.begin(), options.skip_outputs.end(), static_cast<int>(k)) !=
        options.skip_outputs.end()) {
      continue;
    }
    const ir::Tensor& y = (*forward)[k];
    if (y.dtype() != DType::kFloat64) continue;
    ir::Value* r = g.CreateValue("R" + std::to_string(k));
    r->set_type(ir::ValueType::Tensor(DType::kFloat64));
    g.SetInitializer(r, RandomDoubles(y.dims(), options.seed + static_cast<uint32_t>(k)));
    ir::Value* p = g.CreateValue("P" + std::to_string(k));
    g.AddNode("Mul", {outs[k], r}, {p}, "project" + std::to_string(k));
    ir::Value* s = g.CreateValue("S" + std::to_string(k));
    s->set_type(ir::ValueType::Tensor(DType::kFloat64, ir::Shape{}));
    g.AddNode("ReduceSum", {p}, {s}, "sum" + std::to_string(k))->SetAttribute(ir::Attribute::Int("keepdims", 0));
    if (!loss) {
      loss = s;
    } else {
      ir::Value* total = g.CreateValue("T" + std::to_string(k));
      total->set_type(ir::ValueType::Tensor(DType::kFloat64, ir::Shape{}));
      g.AddNode("Add", {loss, s}, {total}, "total" + std::to_string(k));
      loss = total;
    }
  }
  ASSERT_NE(loss, nullptr) << what << ": the node has no float64 output to differentiate";
  g.AddOutput(loss);

  std::vector<int> wrt = options.wrt;
  if (wrt.empty()) {
    for (size_t i = 0; i < t.inputs.size(); ++i) {
      if (t.inputs[i] && t.inputs[i]->dtype() == DType::kFloat64) wrt.push_back(static_cast<int>(i));
    }
  }
  trainer::GradientRequest request;
  request.loss = loss->name();
  for (int i : wrt) request.wrt.push_back("in" + std::to_string(i));
  StatusOr<trainer::GradientResult> grads = trainer::BuildGradients(model, request);
  ASSERT_TRUE(grads.ok()) << what << ": " << grads.status().message();

  exec::SessionOptions session_options = t.options;
  session_options.num_threads = 1;
  StatusOr<std::unique_ptr<exec::Session>> session = exec::Session::Create(std::move(model), session_options);
  ASSERT_TRUE(session.ok()) << what << ": " << session.status().message();
  const std::vector<ir::Tensor> feeds = t.Feeds();
  exec::RunOptions analytic;
  for (size_t w = 0; w < wrt.size(); ++w) {
    ASSERT_FALSE(grads->gradients[w].empty()) << what << ": the loss does not depend on input " << wrt[w];
    analytic.fetch.push_back(grads->gradients[w]);
  }
  StatusOr<std::vector<ir::Tensor>> got = (*session)->Run(feeds, analytic);
  ASSERT_TRUE(got.ok()) << what << ": backward: " << got.status().message();

  exec::RunOptions loss_only;
  loss_only.fetch = {request.loss};
  for (size_t w = 0; w < wrt.size(); ++w) {
    const int i = wrt[w];
    const ir::Tensor& grad = (*got)[w];
    const std::string where = what + ": d/d input " + std::to_string(i);
    ASSERT_EQ(grad.dtype(), DType::kFloat64) << where;
    ASSERT_EQ(grad.dims(), t.inputs[i]->dims()) << where;
    const auto a = grad.values<double>();
    std::vector<ir::Tensor> shifted = feeds;
    ir::Tensor* x = nullptr;
    for (ir::Tensor& f : shifted) {
      if (f.name() == "in" + std::to_string(i)) x = &f;
    }
    ASSERT_NE(x, nullptr);
    int reported = 0;
    double largest = 0;
    for (int64_t j = 0; j < x->num_elements(); ++j) {
      const double x0 = x->values<double>()[j];
      const double h = options.step * std::max(1.0, std::abs(x0));
      x->mutable_values<double>()[j] = x0 + h;
      StatusOr<std::vector<ir::Tensor>> plus = (*session)->Run(shifted, loss_only);
      x->mutable_values<double>()[j] = x0 - h;
      StatusOr<std::vector<ir::Tensor>> minus = (*session)->Run(shifted, loss_only);
      x->mutable_values<double>()[j] = x0;
      ASSERT_TRUE(plus.ok() && minus.ok()) << where;
      const double numeric = (Scalar((*plus)[0]) - Scalar((*minus)[0])) / (2 * h);
      largest = std::max(largest, std::abs(a[j]));
      const double tol = options.atol + options.rtol * std::max(std::abs(numeric), std::abs(a[j]));
      if (std::abs(numeric - a[j]) > tol && reported++ < 5) {
        ADD_FAILURE() << where << " element " << j << ": analytic " << a[j] << ", central difference " << numeric;
      }
    }
    EXPECT_GT(largest, options.min_abs) << where << ": the analytic gradient is (near) zero everywhere";
  }
}

namespace gradtest {

std::vector<ir::Tensor> RunModel(ir::Model m, const std::vector<ir::Tensor>& feeds,
                                 const std::vector<std::string>& fetch) {
  Status verified = ir::Verify(m);
  EXPECT_TRUE(verified.ok()) << verified.message();
  StatusOr<std::unique_ptr<exec::Session>> session = exec::Session::Create(std::move(m));
  EXPECT_TRUE(session.ok()) << session.status().message();
  if (!session.ok()) return {};
  exec::RunOptions run;
  run.fetch = fetch;
  StatusOr<std::vector<ir::Tensor>> out = (*session)->Run(feeds, run);
  EXPECT_TRUE(out.ok()) << out.status().message();
  return out.ok() ? *out : std::vector<ir::Tensor>{};
}

namespace {

// `t`'s model with the loss "loss", the sum of its first output (of that output's declared type; else of the first
// input's, when float32; else float64).
ir::Model WithSumLoss(const OpTester& t) {
  ir::Model m = t.BuildModel();
  if (!t.domain.empty()) m.SetOpsetVersion("", 17);
  ir::Graph& g = *m.graph;
  ir::Value* s = g.CreateValue("loss");
  const ir::ValueType& out = g.outputs()[0]->type();
  const bool typed = out.is_tensor() && out.elem_type() != DType::kUndefined;
  const bool float32 = !t.inputs.empty() && t.inputs[0] && t.inputs[0]->dtype() == DType::kFloat32;
  const DType type = typed ? out.elem_type() : float32 ? DType::kFloat32 : DType::kFloat64;
  s->set_type(ir::ValueType::Tensor(type, ir::Shape{}));
  g.AddNode("ReduceSum", {g.outputs()[0]}, {s}, "sum")->SetAttribute(ir::Attribute::Int("keepdims", 0));
  g.AddOutput(s);
  return m;
}

StatusOr<trainer::GradientResult> SumLossGradients(ir::Model& m, const std::vector<std::string>& wrt) {
  trainer::GradientRequest request;
  request.loss = "loss";
  request.wrt = wrt;
  return trainer::BuildGradients(m, request);
}

}  // namespace

std::string GradientError(const OpTester& t, const std::vector<std::string>& wrt) {
  ir::Model m = WithSumLoss(t);
  StatusOr<trainer::GradientResult> r = SumLossGradients(m, wrt);
  return r.ok() ? std::string() : std::string(r.status().message());
}

std::vector<std::string> GradientNames(const OpTester& t, const std::vector<std::string>& wrt) {
  ir::Model m = WithSumLoss(t);
  StatusOr<trainer::GradientResult> r = SumLossGradients(m, wrt);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? r->gradients : std::vector<std::string>{};
}

ir::Model SumLossGradientModel(const OpTester& t, const std::vector<std::string>& wrt,
                               std::vector<std::string>* gradients) {
  ir::Model m = WithSumLoss(t);
  StatusOr<trainer::GradientResult> r = SumLossGradients(m, wrt);
  EXPECT_TRUE(r.ok()) << r.status().message();
  if (r.ok()) *gradients = r->gradients;
  return m;
}

std::vector<std::string> EmittedOps(const OpTester& t, const std::vector<std::string>& wrt) {
  ir::Model m = WithSumLoss(t);
  const size_t before = m.graph->num_nodes();
  StatusOr<trainer::GradientResult> r = SumLossGradients(m, wrt);
  EXPECT_TRUE(r.ok()) << r.status().message();
  std::vector<std::string> ops;
  size_t k = 0;
  for (ir::Node* n : m.graph->nodes()) {
    if (k++ >= before) ops.push_back(n->op_type());
  }
  return ops;
}

}  // namespace gradtest

}  // namespace onnxamp::testing
