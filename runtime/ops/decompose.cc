// DecomposeContext: the nodes a decomposition adds, and the replacement of the node by them.
#include "runtime/ops/decompose.h"

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

ir::Value* DecomposeContext::Ints(const std::vector<int64_t>& values) {
  ir::Tensor t(DType::kInt64, {static_cast<int64_t>(values.size())});
  auto out = t.mutable_values<int64_t>();
  for (size_t i = 0; i < values.size(); ++i) out[i] = values[i];
  return Constant(std::move(t));
}

ir::Value* DecomposeContext::Scalar(DType t, double value) { return Constant(ScalarTensor(t, value)); }

// A reduction at the model's opset: `axes` an attribute before `axes_input_since`, an input from it; empty axes (all
// of them) left out.
ir::Value* DecomposeContext::EmitReduce(const std::string& op, int64_t axes_input_since, ir::Value* x,
                                        const std::vector<int64_t>& axes, bool keepdims) {
  std::vector<ir::Attribute> attrs = {ir::Attribute::Int("keepdims", keepdims ? 1 : 0)};
  std::vector<ir::Value*> inputs = {x};
  if (!axes.empty() && onnx_opset_ < axes_input_since) attrs.push_back(ir::Attribute::Ints("axes", axes));
  if (!axes.empty() && onnx_opset_ >= axes_input_since) inputs.push_back(Ints(axes));
  return Emit1(op, inputs, std::move(attrs), "", TypeOf(x));
}

ir::Value* DecomposeContext::EmitReduceMean(ir::Value* x, const std::vector<int64_t>& axes, bool keepdims) {
  return EmitReduce("ReduceMean", 18, x, axes, keepdims);
}

ir::Value* DecomposeContext::EmitReduceSum(ir::Value* x, const std::vector<int64_t>& axes, bool keepdims) {
  return EmitReduce("ReduceSum", 13, x, axes, keepdims);
}

ir::Value* DecomposeContext::EmitUnsqueeze(ir::Value* x, const std::vector<int64_t>& axes) {
  if (onnx_opset_ < 13) return Emit1("Unsqueeze", {x}, {ir::Attribute::Ints("axes", axes)}, "", TypeOf(x));
  return Emit1("Unsqueeze", {x, Ints(axes)}, {}, "", TypeOf(x));
}

StatusOr<DType> DecomposeContext::ComputeTypeFor(const ir::Value* x) const {
  const DType t = TypeOf(x);
  if (t == DType::kFloat64) return DType::kFloat64;
  if (t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16) return DType::kFloat32;
  return InvalidArgument("the element type of '", x ? x->name() : std::string(), "' is ",
                         t == DType::kUndefined ? std::string_view("unknown") : DTypeName(t),
                         "; the decomposition needs a float type");
}

ir::Value* DecomposeContext::CastTo(ir::Value* x, DType to) {
  if (TypeOf(x) == to) return x;
  return Emit1("Cast", {x}, {ir::Attribute::Int("to", static_cast<int64_t>(to))}, "", to);
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
  const std::string name = base_;
  g_.RemoveNode(&node_);
  for (size_t i = 0; i < ys.size(); ++i) {
    if (ys[i]) g_.AddNode("Identity", {outputs_[i]}, {ys[i]}, ys[i]->name());
  }
  return Status::Ok();
}

}  // namespace onnxamp::ops
