// Convert-initializers pass: initializers and Constant/ConstantOfShape values take the float type their
// consumers need: in place when all agree, else one copy per precision. Clamps and flushes are reported.
#include <map>

#include "converter/passes/passes.h"

namespace onnxamp::converter {

namespace {

TensorConversion* NewEntry(ConversionState& state, const std::string& name) {
  if (!state.report) return nullptr;
  state.report->tensors.push_back(TensorConversion{});
  state.report->tensors.back().name = name;
  return &state.report->tensors.back();
}

ir::ValueType WithElem(const ir::ValueType& type, DType t, const std::vector<int64_t>& dims) {
  if (type.is_tensor()) {
    ir::ValueType out = type;
    out.set_elem_type(t);
    return out;
  }
  ir::Shape shape;
  for (int64_t d : dims) shape.push_back(ir::Dim::Value(d));
  return ir::ValueType::Tensor(t, shape);
}

bool IsDefaultDomainConstant(const ir::Node* n) {
  return ir::IsDefaultDomain(n->domain()) && (n->op_type() == "Constant" || n->op_type() == "ConstantOfShape");
}

}  // namespace

Status ConvertInitializersPass::ConvertConstantNode(ir::Node* node, DType to, bool* changed) {
  ir::Attribute* value = node->FindAttribute("value");
  ir::Tensor src;
  if (value && value->type() == ir::AttrType::kTensor) {
    src = value->t;
  } else if (const ir::Attribute* vf = node->FindAttribute("value_float")) {
    src = ir::Tensor(DType::kFloat32, {});
    src.mutable_values<float>()[0] = vf->f;
  } else if (const ir::Attribute* vfs = node->FindAttribute("value_floats")) {
    src = ir::Tensor(DType::kFloat32, {static_cast<int64_t>(vfs->floats.size())});
    std::copy(vfs->floats.begin(), vfs->floats.end(), src.mutable_values<float>().begin());
  } else if (node->op_type() == "ConstantOfShape") {
    src = ir::Tensor(DType::kFloat32, {1});  // the default value: a float zero
  } else {
    return Internal(node->Describe(), ": no float value to convert");
  }
  if (src.dtype() == to) return Status::Ok();
  TensorConversion* entry = NewEntry(state_, node->output(0)->name());
  ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor converted, ConvertTensorData(src, to, entry));
  node->RemoveAttribute("value_float");
  node->RemoveAttribute("value_floats");
  node->SetAttribute(ir::Attribute::TensorValue("value", std::move(converted)));
  if (state_.report) ++state_.report->initializers_converted;
  *changed = true;
  return Status::Ok();
}

Status ConvertInitializersPass::Run(ir::Graph& graph, bool* changed) {
  bool any = false;
  // Constant sources whose consumers all want another type.
  for (ir::Node* n : graph.nodes()) {
    const NodePlan* np = state_.FindNode(n);
    if (np && np->retype != DType::kUndefined && IsDefaultDomainConstant(n)) {
      ONNXAMP_RETURN_IF_ERROR(ConvertConstantNode(n, np->retype, &any));
    }
  }
  const std::vector<ir::Value*> inits = graph.initializers();  // copy: the loop adds initializers
  for (ir::Value* v : inits) {
    const ir::Tensor& t = *v->initializer();
    if (!IsConvertible(t.dtype())) continue;
    ValuePlan* vp = state_.FindValue(v);
    if (!vp) continue;
    if (v->is_graph_input()) {  // a graph input with a default: follows the input's type
      if (vp->actual != t.dtype() && IsConvertible(vp->actual)) {
        ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor c, ConvertTensorData(t, vp->actual, NewEntry(state_, v->name())));
        graph.SetInitializer(v, std::move(c));
        any = true;
      }
      continue;
    }
    // Group the uses by the type they need; uses that take the value as it is stay on the original.
    std::map<DType, std::vector<ir::Use>> wanted;
    bool keep_original = state_.implicitly_used.count(v) > 0;
    for (const ir::Use& u : v->uses()) {
      const NodePlan* cp = state_.FindNode(u.node);
      const DType req =
          cp && u.index < static_cast<int>(cp->required.size()) ? cp->required[u.index] : DType::kUndefined;
      if (req == DType::kUndefined || req == t.dtype() || !IsConvertible(req)) {
        keep_original = true;
      } else {
        wanted[req].push_back(u);
      }
    }
    for (size_t i = 0; i < graph.outputs().size(); ++i) {
      if (graph.outputs()[i] != v) continue;
      const DType req = state_.OutputRequired(graph, i);
      if (req == t.dtype() || !IsConvertible(req)) {
        keep_original = true;
      } else {
        wanted[req];  // no node use; the output Cast comes from the insert-casts pass unless retyped here
      }
    }
    if (wanted.empty()) continue;
    if (!keep_original && wanted.size() == 1) {
      const DType to = wanted.begin()->first;
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor c, ConvertTensorData(t, to, NewEntry(state_, v->name())));
      const std::vector<int64_t> dims = c.dims();
      graph.SetInitializer(v, std::move(c));
      v->set_type(WithElem(v->type(), to, dims));
      vp->actual = vp->prop = to;
      if (state_.report) ++state_.report->initializers_converted;
      any = true;
      continue;
    }
    // Used in several precisions: the original stays for its FP32 users, a converted copy serves the others.
    for (auto& [to, uses] : wanted) {
      if (uses.empty()) continue;
      TensorConversion* entry = NewEntry(state_, v->name());
      if (entry) entry->duplicated = true;
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor c, ConvertTensorData(t, to, entry));
      ir::Value* copy = graph.CreateValue(graph.UniqueName(v->name() + "_" + ShortName(to)));
      c.set_name(copy->name());
      c.set_external(std::nullopt);
      const std::vector<int64_t> dims = c.dims();
      graph.SetInitializer(copy, std::move(c));
      copy->set_type(WithElem(v->type(), to, dims));
      state_.values[copy] = ValuePlan{to, to, to, false};
      for (const ir::Use& u : uses) u.node->SetInput(u.index, copy);
      if (state_.report) ++state_.report->initializers_converted;
      any = true;
    }
  }
  for (ir::Node* n : graph.nodes()) {
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
