// The analytic gradients of one node (an OpTester) for hand-computed expectations at points where central
// differences do not apply (ties, kinks): loss = sum(out0 * W) for a given W, the backward pass built by
// trainer::BuildGradients, the gradients of `wrt` (input indices) fetched as float64.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "runtime/executor/session.h"
#include "tests/runtime/op_tester.h"
#include "trainer/autodiff/autodiff.h"

namespace onnxamp::testing::gradtest {

inline StatusOr<std::vector<std::vector<double>>> AnalyticGradients(const OpTester& t, const ir::Tensor& w,
                                                                    const std::vector<int>& wrt) {
  ir::Model model = t.BuildModel();
  ir::Graph& g = *model.graph;
  ir::Value* weights = g.CreateValue("W");
  weights->set_type(ir::ValueType::Tensor(w.dtype()));
  g.SetInitializer(weights, w);
  ir::Value* p = g.CreateValue("P");
  g.AddNode("Mul", {g.outputs()[0], weights}, {p}, "project");
  ir::Value* loss = g.CreateValue("loss");
  loss->set_type(ir::ValueType::Tensor(w.dtype(), ir::Shape{}));
  g.AddNode("ReduceSum", {p}, {loss}, "sum")->SetAttribute(ir::Attribute::Int("keepdims", 0));
  g.AddOutput(loss);
  trainer::GradientRequest request;
  request.loss = "loss";
  for (int i : wrt) request.wrt.push_back("in" + std::to_string(i));
  ONNXAMP_ASSIGN_OR_RETURN(trainer::GradientResult grads, trainer::BuildGradients(model, request));
  exec::SessionOptions options = t.options;
  options.num_threads = 1;
  ONNXAMP_ASSIGN_OR_RETURN(std::unique_ptr<exec::Session> session, exec::Session::Create(std::move(model), options));
  exec::RunOptions run;
  for (const std::string& name : grads.gradients) {
    if (name.empty()) return InvalidArgument("the loss does not depend on an input asked for");
    run.fetch.push_back(name);
  }
  ONNXAMP_ASSIGN_OR_RETURN(std::vector<ir::Tensor> got, session->Run(t.Feeds(), run));
  std::vector<std::vector<double>> result;
  for (const ir::Tensor& r : got) result.push_back(Values<double>(r));
  return result;
}

}  // namespace onnxamp::testing::gradtest
