// Update-types pass: every value's declared element type, and every attribute that names a dtype (Cast `to`,
// Random*/EyeLike/Bernoulli `dtype`), are made to agree with the plan.
#include "converter/passes/passes.h"

namespace onnxamp::converter {

Status UpdateTypesPass::Run(ir::Graph& graph, bool* changed) {
  bool any = false;
  for (ir::Value* v : graph.values()) {
    const ValuePlan* p = state_.FindValue(v);
    if (!p || !IsConvertible(p->actual)) continue;
    const ir::ValueType& type = v->type();
    if (type.is_tensor() && type.elem_type() != p->actual) {
      if (!IsConvertible(type.elem_type()) && type.elem_type() != DType::kUndefined) continue;
      ir::ValueType t = type;
      t.set_elem_type(p->actual);
      v->set_type(std::move(t));
      any = true;
    } else if (!type.defined() && v->producer() != nullptr && !v->is_graph_output()) {
      v->set_type(ir::ValueType::Tensor(p->actual));  // an untyped intermediate: record the planned type
    }
  }
  for (ir::Node* n : graph.nodes()) {
    const NodePlan* np = state_.FindNode(n);
    if (np && np->retype != DType::kUndefined && ir::IsDefaultDomain(n->domain())) {
      const auto code = static_cast<int64_t>(np->retype);
      if (n->op_type() == "Cast" && n->GetInt("to", 0) != code) {
        n->SetAttribute(ir::Attribute::Int("to", code));
        any = true;
      } else if (n->op_type() != "Cast" && n->op_type() != "Constant" && n->op_type() != "ConstantOfShape" &&
                 n->GetInt("dtype", 0) != code) {
        n->SetAttribute(ir::Attribute::Int("dtype", code));
        any = true;
      }
    }
    for (ir::Graph* sub : n->subgraphs()) {
      bool sub_changed = false;
      ONNXAMP_RETURN_IF_ERROR(Run(*sub, &sub_changed));
      any |= sub_changed;
    }
  }
  if (changed) *changed = any;
  return Status::Ok();
}

}  // namespace onnxamp::converter
