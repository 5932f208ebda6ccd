// StashRecurrentTraces (graph_optimizer.h): a training graph's RNN, GRU and LSTM nodes hand their traces to their
// RNNGrad nodes instead of having them recompute the forward.
#include <string>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/ir/model.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/rnn/rnn.h"

namespace onnxamp::exec {
namespace {

// Inputs 0-7 of a recurrent node or of its RNNGrad, omitted ones (and those past the end) null.
std::vector<const ir::Value*> ForwardInputs(const ir::Node* n) {
  std::vector<const ir::Value*> in;
  for (size_t k = 0; k < 8; ++k) in.push_back(n->input(k));
  return in;
}

// The forward node `grad` (an RNNGrad) differentiates: an RNN, GRU or LSTM of the default domain reading the same
// inputs with the same attributes and producing at most its 3 outputs; or null.
ir::Node* ForwardOf(const ir::Node* grad) {
  const ir::Value* x = grad->input(0);
  if (!x) return nullptr;
  const std::string op = grad->GetString("forward_op", "");
  const StatusOr<ops::rnn::Spec> want = ops::rnn::ParseSpec(*grad, op);
  if (!want.ok()) return nullptr;
  for (const ir::Use& use : x->uses()) {
    ir::Node* f = use.node;
    if (!ir::IsDefaultDomain(f->domain()) || f->op_type() != op || use.index != 0 || f->outputs().size() > 3) continue;
    if (ForwardInputs(f) != ForwardInputs(grad)) continue;
    const StatusOr<ops::rnn::Spec> spec = ops::rnn::ParseSpec(*f, op);
    if (spec.ok() && *spec == *want) return f;
  }
  return nullptr;
}

}  // namespace

Status StashRecurrentTraces(ir::Graph& graph, bool* changed) {
  *changed = false;
  std::vector<ir::Node*> grads;
  for (ir::Node* n : graph.nodes()) {
    if (n->domain() == kInternalDomain && n->op_type() == ops::kRnnGradOp && !n->input(ops::rnn::kTraceInput)) {
      grads.push_back(n);
    }
  }
  for (ir::Node* grad : grads) {
    ir::Node* f = ForwardOf(grad);
    if (!f) continue;
    ir::Value* trace = graph.CreateValue(graph.UniqueName((f->name().empty() ? f->op_type() : f->name()) + "_trace"));
    // The compute type, when X's type is declared (the kernels check it at run time either way).
    const ir::ValueType& x_type = f->input(0)->type();
    if (x_type.is_tensor() && x_type.elem_type() != DType::kUndefined) {
      trace->set_type(ir::ValueType::Tensor(x_type.elem_type() == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32));
    }
    // The node itself becomes the RNNTraining: its inputs, outputs, name and place stay.
    f->SetAttribute(ir::Attribute::String("forward_op", f->op_type()));
    f->set_op_type(ops::kRnnTrainingOp);
    f->set_domain(kInternalDomain);
    while (f->outputs().size() < ops::rnn::kTraceOutput) f->SetOutput(f->outputs().size(), nullptr);
    f->SetOutput(ops::rnn::kTraceOutput, trace);
    while (grad->inputs().size() < ops::rnn::kTraceInput) grad->AddInput(nullptr);
    grad->AddInput(trace);
    *changed = true;
  }
  return Status::Ok();
}

}  // namespace onnxamp::exec
