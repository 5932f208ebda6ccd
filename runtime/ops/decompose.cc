// DecomposeContext: the nodes a decomposition adds, and the replacement of the node by them.
#include "runtime/ops/decompose.h"

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>

#include "runtime/ops/gradient.h"

namespace onnxamp::ops {

DecomposeContext::DecomposeContext(ir::Graph& g, ir::Node& node, int64_t onnx_opset,
                                   std::function<DType(const ir::Value*)> type_of)
    : g_(g),
      node_(node),
      onnx_opset_(onnx_opset),
      type_of_(std::move(type_of)),
      outputs_(node.outputs().size(), nullptr),
      base_(node.name().empty() ? node.op_type() : node.name()) {}

DType DecomposeContext::TypeOf(const ir::Value* v) const {
  if (!v) return DType::kUndefined;
  if (v->type().is_tensor() && v->type().elem_type() != DType::kUndefined) return v->type().elem_type();
  return type_of_ ? type_of_(v) : DType::kUndefined;
}

std::vector<ir::Value*> DecomposeContext::Emit(const std::string& op_type, const std::vector<ir::Value*>& inputs,
                                               size_t num_outputs, std::vector<ir::Attribute> attributes,
                                               const std::string& domain, DType output_type) {
  // Named as its first output, a name no value had, so that node names stay unique too (the graph keeps only value
  // names unique; the converter keeps nodes in FP32 by name).
  const std::string name = g_.UniqueName(base_ + "/" + op_type);
  std::vector<ir::Value*> outs;
  for (size_t i = 0; i < num_outputs; ++i) {
    ir::Value* v = g_.CreateValue(i == 0 ? name : g_.UniqueName(name + "_out" + std::to_string(i)));
    if (output_type != DType::kUndefined) v->set_type(ir::ValueType::Tensor(output_type));
    outs.push_back(v);
  }
  ir::Node* n = g_.AddNode(op_type, inputs, outs, name, domain);
  for (ir::Attribute& a : attributes) n->SetAttribute(std::move(a));
  added_.insert(n);
  return outs;
}

ir::Value* DecomposeContext::Constant(ir::Tensor value) {
  ir::Value* v = g_.CreateValue(g_.UniqueName(base_ + "_const"));
  ir::Shape shape;
  for (int64_t d : value.dims()) shape.push_back(ir::Dim::Value(d));
  v->set_type(ir::ValueType::Tensor(value.dtype(), shape));
  g_.SetInitializer(v, std::move(value));
  return v;
}

StatusOr<DType> DecomposeContext::ComputeTypeFor(const ir::Value* x) const {
  const DType t = TypeOf(x);
  if (t == DType::kFloat64) return DType::kFloat64;
  if (t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16) return DType::kFloat32;
  return InvalidArgument("the element type of '", x ? x->name() : std::string(), "' is ",
                         t == DType::kUndefined ? std::string_view("unknown") : DTypeName(t),
                         "; the decomposition needs a float type");
}

void DecomposeContext::SetY(size_t i, ir::Value* v) {
  if (i < outputs_.size()) outputs_[i] = v;
}

Status DecomposeContext::Finish() {
  for (size_t i = 0; i < outputs_.size(); ++i) {
    if (node_.output(i) && !outputs_[i]) {
      return Internal("the decomposition of ", node_.Describe(), " gave output ", i, " no value");
    }
  }
  const std::vector<ir::Value*> ys = node_.outputs();
  g_.RemoveNode(&node_);
  for (size_t i = 0; i < ys.size(); ++i) {
    if (!ys[i]) continue;
    ir::Value* v = outputs_[i];
    ir::Node* producer = v->producer();
    const bool own = producer && added_.count(producer) && v->uses().empty() && !v->is_graph_output() &&
                     std::count(outputs_.begin(), outputs_.end(), v) == 1;
    if (!own) {
      g_.AddNode("Identity", {v}, {ys[i]}, ys[i]->name());
      continue;
    }
    producer->SetOutput(static_cast<size_t>(v->producer_index()), ys[i]);
    g_.RemoveValue(v);
  }
  return Status::Ok();
}

}  // namespace onnxamp::ops
