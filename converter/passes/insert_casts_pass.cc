// Insert-casts pass: a Cast wherever a node input (or a graph output) needs another float type than its value
// has; one Cast per (value, type) and graph, shared by every consumer, in the graph of the consumers.
#include "converter/passes/passes.h"

namespace onnxamp::converter {

namespace {

// Sequences, maps and optionals never get a tensor Cast (their element types are not converted).
bool MayCast(const ir::Value* v) {
  const ir::ValueType& t = ConversionState::Resolve(v)->type();
  return !t.defined() || t.is_tensor();
}

}  // namespace

ir::Value* InsertCastsPass::CastOf(ir::Graph& graph, ir::Value* v, DType to, ir::Node* before) {
  auto key = std::make_pair(static_cast<const ir::Value*>(v), to);
  if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  ir::Value* out = graph.CreateValue(graph.UniqueName(v->name() + "_" + ShortName(to)));
  const ir::Value* src = ConversionState::Resolve(v);
  out->set_type(ir::ValueType::Tensor(to, src->type().is_tensor() ? src->type().shape() : std::nullopt));
  ir::Node* cast = graph.InsertNode(before, "Cast", {v}, {out}, out->name());
  cast->SetAttribute(ir::Attribute::Int("to", static_cast<int64_t>(to)));
  state_.values[out] = ValuePlan{to, to, to, false};
  if (state_.report) ++state_.report->casts_inserted;
  cache_.emplace(key, out);
  return out;
}

Status InsertCastsPass::CastOutputs(ir::Graph& graph, bool* changed) {
  const bool top = graph.parent_node() == nullptr;
  for (size_t i = 0; i < graph.outputs().size(); ++i) {
    ir::Value* v = graph.outputs()[i];
    const DType req = state_.OutputRequired(graph, i);
    const DType act = state_.ActualType(v);
    if (req == act || !IsConvertible(req) || !IsConvertible(act) || !MayCast(v)) continue;
    auto key = std::make_pair(static_cast<const ir::Value*>(v), req);
    if (auto it = cache_.find(key); it != cache_.end() && it->second->is_graph_output()) {
      graph.SetOutput(i, it->second);
      continue;
    }
    const bool renamable = top && v->producer() && !v->is_graph_input() && !v->initializer() && !v->is_outer_scope();
    if (renamable) {
      // The Cast takes over the output's name so that the model's interface keeps its names.
      const std::string name = v->name();
      ONNXAMP_RETURN_IF_ERROR(graph.RenameValue(v, graph.UniqueName(name + "_" + ShortName(act))));
      ir::Value* out = graph.CreateValue(name);
      out->set_type(ir::ValueType::Tensor(req, v->type().is_tensor() ? v->type().shape() : std::nullopt));
      out->set_doc_string(v->doc_string());
      ir::Node* cast = graph.InsertNode(nullptr, "Cast", {v}, {out}, graph.UniqueName(name + "_cast"));
      cast->SetAttribute(ir::Attribute::Int("to", static_cast<int64_t>(req)));
      state_.values[out] = ValuePlan{req, req, req, false};
      if (state_.report) ++state_.report->casts_inserted;
      for (size_t j = i; j < graph.outputs().size(); ++j) {
        if (graph.outputs()[j] == v) graph.SetOutput(j, out);
      }
      cache_.emplace(key, out);
    } else {
      if (top && state_.report) {
        state_.report->warnings.push_back("graph output '" + v->name() + "' is also an input or initializer: its " +
                                          ShortName(req) + " copy is named differently");
      }
      graph.SetOutput(i, CastOf(graph, v, req, nullptr));
    }
    *changed = true;
  }
  return Status::Ok();
}

Status InsertCastsPass::Run(ir::Graph& graph, bool* changed) {
  bool any = false;
  std::vector<ir::Node*> nodes;
  for (ir::Node* n : graph.nodes()) nodes.push_back(n);
  for (ir::Node* n : nodes) {
    const NodePlan* np = state_.FindNode(n);
    if (np) {
      for (size_t i = 0; i < n->inputs().size() && i < np->required.size(); ++i) {
        ir::Value* v = n->input(i);
        const DType req = np->required[i];
        if (!v || !IsConvertible(req)) continue;
        const DType act = state_.ActualType(v);
        if (act == req || !IsConvertible(act) || !MayCast(v)) continue;
        n->SetInput(i, CastOf(graph, v, req, n));
        any = true;
      }
    }
    for (ir::Graph* sub : n->subgraphs()) {
      bool sub_changed = false;
      ONNXAMP_RETURN_IF_ERROR(Run(*sub, &sub_changed));
      any |= sub_changed;
    }
  }
  ONNXAMP_RETURN_IF_ERROR(CastOutputs(graph, &any));
  if (changed) *changed = any;
  return Status::Ok();
}

}  // namespace onnxamp::converter
