#include "trainer/autodiff/subgraph_util.h"

#include <optional>

#include "runtime/executor/kernel.h"
#include "runtime/ops/op_info.h"
#include "trainer/autodiff/element_types.h"

namespace onnxamp::trainer::subgraph {

void CopyType(ir::Value* v, const ir::Value* from, const TypeOf& type_of) {
  const DType t = type_of(from);
  if (t == DType::kUndefined) return;
  std::optional<ir::Shape> shape;
  if (from->type().is_tensor() && from->type().shape()) shape = *from->type().shape();
  v->set_type(ir::ValueType::Tensor(t, shape));
}

void PromoteOuterReads(ir::Graph& g, const ir::Graph& outer, const TypeOf& type_of) {
  for (const std::string& name : g.OuterScopeNames()) {
    ir::Value* v = g.FindValue(name);
    if (v) {
      g.PromoteOuterScopeToInput(v);
    } else {
      v = g.CreateValue(name);
      g.AddInput(v);
    }
    if (const ir::Value* from = outer.FindValue(name)) CopyType(v, from, type_of);
  }
}

void RemoveDeadNodes(ir::Graph& g, std::unordered_set<ir::Node*>* only) {
  for (bool changed = true; changed;) {
    changed = false;
    std::unordered_set<const ir::Value*> read;
    for (const ir::Node* n : g.nodes()) {
      for (const ir::Value* v : g.ImplicitInputs(n)) read.insert(v);
    }
    std::vector<ir::Node*> dead;
    for (ir::Node* n : g.nodes()) {
      if (only && !only->count(n)) continue;
      bool live = false;
      for (const ir::Value* v : n->outputs()) live = live || (v && (read.count(v) || v->is_graph_output()));
      if (!live) dead.push_back(n);
    }
    for (ir::Node* n : dead) {
      std::vector<ir::Value*> outs = n->outputs();
      if (only) only->erase(n);
      g.RemoveNode(n);
      for (ir::Value* v : outs) {
        if (v && v->uses().empty() && !v->is_graph_output()) g.RemoveValue(v);
      }
      changed = true;
    }
  }
}

std::unordered_set<std::string> MayReach(const ir::Graph& g, const std::vector<std::string>& seeded) {
  const ElementTypes types = InferElementTypes(g);
  auto passes = [&](const ir::Value* v) {
    auto it = types.find(v);
    return it == types.end() || it->second == DType::kUndefined || IsDifferentiableType(it->second);
  };
  std::unordered_set<const ir::Value*> live;
  for (const std::string& name : seeded) live.insert(g.FindValue(name));
  StatusOr<std::vector<ir::Node*>> order = g.TopologicalOrder();
  if (order.ok()) {
    for (size_t k = order->size(); k-- > 0;) {
      const ir::Node* n = (*order)[k];
      bool reaches = false;
      for (const ir::Value* v : n->outputs()) reaches = reaches || (v && live.count(v) && passes(v));
      if (!reaches) continue;
      for (size_t i = 0; i < n->inputs().size(); ++i) {
        const ir::Value* v = n->input(i);
        if (v && passes(v) && ops::OpInfoRegistry::Global().TakesGradient(n->domain(), n->op_type(), i)) {
          live.insert(v);
        }
      }
      for (const ir::Value* v : g.SubgraphReads(n)) {
        if (passes(v)) live.insert(v);
      }
    }
  }
  std::unordered_set<std::string> out;
  for (const ir::Value* v : g.inputs()) {
    if (live.count(v)) out.insert(v->name());
  }
  return out;
}

ir::Value* ZerosLike(ir::Graph& g, ir::Value* x, DType type, const std::string& base) {
  ir::Value* shape = g.CreateValue(g.UniqueName(base + "_shape"));
  g.AddNode("Shape", {x}, {shape}, shape->name());
  ir::Value* zero = g.CreateValue(g.UniqueName(base + "_zeros"));
  ir::Node* fill = g.AddNode("ConstantOfShape", {shape}, {zero}, zero->name());
  fill->SetAttribute(ir::Attribute::TensorValue("value", ir::Tensor(type, {1})));
  zero->set_type(ir::ValueType::Tensor(type));
  return zero;
}

Status FinishSubgraph(ir::Graph& g, size_t formal_inputs, const std::string& prefix) {
  std::unordered_set<const ir::Value*> read_below;  // read by the graph's own subgraphs
  for (const ir::Node* n : g.nodes()) {
    for (const ir::Value* v : g.SubgraphReads(n)) read_below.insert(v);
  }
  const std::vector<ir::Value*> inputs = g.inputs();
  for (size_t k = formal_inputs; k < inputs.size(); ++k) {
    ir::Value* v = inputs[k];
    if (v->uses().empty() && !v->is_graph_output() && !read_below.count(v)) {
      g.RemoveInput(v);
      g.RemoveValue(v);
      continue;
    }
    g.DemoteInputToOuterScope(v);
  }
  // The executor seeds a node from its first output's name, which the prefix changes: random ops and nested
  // subgraphs keep the seeds of their forward twins, so that a recomputation draws what the forward drew.
  const ops::OpInfoRegistry& infos = ops::OpInfoRegistry::Global();
  for (ir::Node* n : g.nodes()) {
    const ops::OpInfo* info = infos.Find(n->domain(), n->op_type());
    if ((info && !info->deterministic) || !n->subgraphs().empty()) {
      n->SetAttribute(ir::Attribute::String("seed_from", exec::SeedName(*n)));
    }
  }
  for (ir::Value* v : g.values()) {
    if (!v->is_outer_scope()) ONNXAMP_RETURN_IF_ERROR(g.RenameValue(v, prefix + v->name()));
  }
  g.set_name(prefix.substr(0, prefix.size() - (prefix.empty() ? 0 : 1)));
  return Status::Ok();
}

}  // namespace onnxamp::trainer::subgraph
