// Fold-casts pass: removes Casts that change nothing (to the type the input already has) and lossless round
// trips (fp16 -> fp32 -> fp16); never a narrowing pair such as fp32 -> fp16 -> fp32, which rounds values.
#include <unordered_set>

#include "converter/passes/passes.h"

namespace onnxamp::converter {

namespace {

DType ElemType(const ir::Value* v) {
  v = ConversionState::Resolve(v);
  if (v && v->type().is_tensor() && v->type().elem_type() != DType::kUndefined) return v->type().elem_type();
  // An untyped Cast output has the Cast's type.
  const ir::Node* p = v ? v->producer() : nullptr;
  if (p && p->op_type() == "Cast" && ir::IsDefaultDomain(p->domain())) {
    return DTypeFromCode(p->GetInt("to", 0)).value_or(DType::kUndefined);
  }
  return DType::kUndefined;
}

// True when every value of `narrow` survives a trip through `wide` unchanged.
bool Holds(DType wide, DType narrow) {
  if (wide == narrow) return true;
  if (narrow == DType::kFloat16 || narrow == DType::kBFloat16) {
    return wide == DType::kFloat32 || wide == DType::kFloat64;
  }
  return narrow == DType::kFloat32 && wide == DType::kFloat64;
}

// Points every use of `from` at `to`. `from` must not be a graph output nor read by a subgraph.
void ReplaceUses(ir::Value* from, ir::Value* to) {
  const std::vector<ir::Use> uses = from->uses();
  for (const ir::Use& u : uses) u.node->SetInput(u.index, to);
}

}  // namespace

Status FoldCastsPass::Run(ir::Graph& graph, bool* changed) {
  bool any = false;
  std::unordered_set<const ir::Value*> pinned;  // graph outputs and values subgraphs read by name
  for (ir::Value* v : graph.outputs()) pinned.insert(v);
  std::vector<ir::Node*> nodes;
  for (ir::Node* n : graph.nodes()) {
    nodes.push_back(n);
    if (n->subgraphs().empty()) continue;
    for (ir::Value* v : graph.ImplicitInputs(n)) pinned.insert(v);
  }
  std::unordered_set<ir::Node*> removed;
  auto is_cast = [](const ir::Node* n) {
    return n && n->op_type() == "Cast" && ir::IsDefaultDomain(n->domain()) && n->inputs().size() == 1 && n->input(0) &&
           n->outputs().size() == 1 && n->output(0);
  };
  auto to_of = [](const ir::Node* n) { return DTypeFromCode(n->GetInt("to", 0)).value_or(DType::kUndefined); };
  for (ir::Node* n : nodes) {
    if (removed.count(n) || !is_cast(n)) continue;
    ir::Value* in = n->input(0);
    ir::Value* out = n->output(0);
    if (pinned.count(out)) continue;
    const DType to = to_of(n);
    const DType in_type = ElemType(in);
    if (in_type == DType::kUndefined || to == DType::kUndefined) continue;
    ir::Value* replacement = nullptr;
    if (in_type == to) {
      // A no-op Cast(to=FLOAT) of a graph input that --keep-io-types keeps in FP32 stays: folded, its consumers would
      // read the input itself, which a second conversion plans in the low type, so that converting twice would differ.
      const bool kept_input = in->is_graph_input() && !in->initializer() && graph.parent_node() == nullptr && state_ &&
                              state_->options.keep_io_types;
      if (kept_input) continue;
      replacement = in;  // no-op Cast
    } else if (ir::Node* prev = in->producer(); is_cast(prev) && !removed.count(prev)) {
      // Cast(Cast(x, wide), narrow) where x already is `narrow` and `wide` holds it: x itself.
      ir::Value* x = prev->input(0);
      if (ElemType(x) == to && to_of(prev) == in_type && Holds(in_type, to)) replacement = x;
    }
    if (!replacement) continue;
    ReplaceUses(out, replacement);
    graph.RemoveNode(n);
    graph.RemoveValueInfo(out);
    graph.RemoveValue(out);
    removed.insert(n);
    ++folded_;
    any = true;
    // The first Cast of a folded pair may now be dead.
    if (ir::Node* prev = in->producer(); is_cast(prev) && in->uses().empty() && !pinned.count(in)) {
      graph.RemoveNode(prev);
      graph.RemoveValueInfo(in);
      graph.RemoveValue(in);
      removed.insert(prev);
      ++folded_;
    }
  }
  for (ir::Node* n : graph.nodes()) {
    for (ir::Graph* sub : n->subgraphs()) {
      bool sub_changed = false;
      ONNXAMP_RETURN_IF_ERROR(Run(*sub, &sub_changed));
      any |= sub_changed;
    }
  }
  if (state_ && state_->report) state_->report->casts_folded = folded_;
  if (changed) *changed = any;
  return Status::Ok();
}

}  // namespace onnxamp::converter
