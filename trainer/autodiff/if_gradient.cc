#include "trainer/autodiff/if_gradient.h"

#include <algorithm>
#include <map>
#include <optional>
#include <unordered_set>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/op_info.h"
#include "trainer/autodiff/autodiff.h"
#include "trainer/autodiff/element_types.h"

namespace onnxamp::trainer {
namespace {

// `from`'s element type (by `type_of`) and declared shape, on `v`.
void CopyType(ir::Value* v, const ir::Value* from, const std::function<DType(const ir::Value*)>& type_of) {
  const DType t = type_of(from);
  if (t == DType::kUndefined) return;
  std::optional<ir::Shape> shape;
  if (from->type().is_tensor() && from->type().shape()) shape = *from->type().shape();
  v->set_type(ir::ValueType::Tensor(t, shape));
}

// Removes the nodes none of whose outputs is read (by a node or a subgraph) or a graph output, repeatedly: the forward
// nodes whose results only the forward outputs needed.
void RemoveDeadNodes(ir::Graph& g) {
  for (bool changed = true; changed;) {
    changed = false;
    std::unordered_set<const ir::Value*> read;
    for (const ir::Node* n : g.nodes()) {
      for (const ir::Value* v : g.ImplicitInputs(n)) read.insert(v);
    }
    std::vector<ir::Node*> dead;
    for (ir::Node* n : g.nodes()) {
      bool live = false;
      for (const ir::Value* v : n->outputs()) live = live || (v && (read.count(v) || v->is_graph_output()));
      if (!live) dead.push_back(n);
    }
    for (ir::Node* n : dead) {
      std::vector<ir::Value*> outs = n->outputs();
      g.RemoveNode(n);
      for (ir::Value* v : outs) {
        if (v && v->uses().empty() && !v->is_graph_output()) g.RemoveValue(v);
      }
      changed = true;
    }
  }
}

// The names of the inputs of `g` from which one of `seeded` (outputs) is reached through values of floating or unknown
// type: the inputs whose gradient the branch's autodiff must find (an integer path, such as a shape, stops it).
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
      for (const ir::Value* v : g.ImplicitInputs(n)) {
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

}  // namespace

StatusOr<std::unique_ptr<ir::Graph>> IfBranchGradient(const ir::Model& model, const ir::Node& node,
                                                      const std::string& attribute,
                                                      const std::vector<ir::Value*>& reads,
                                                      const std::vector<ir::Value*>& dys,
                                                      const std::function<DType(const ir::Value*)>& type_of,
                                                      const std::string& prefix, bool* uses_internal) {
  const ir::Attribute* attr = node.FindAttribute(attribute);
  if (!attr || attr->type() != ir::AttrType::kGraph || !attr->g) {
    return InvalidArgument("attribute '", attribute, "' (a graph) is missing");
  }
  if (!attr->g->inputs().empty()) {
    return InvalidArgument("'", attribute, "' takes ", attr->g->inputs().size(), " inputs; an If branch takes none");
  }
  const ir::Graph& outer = *node.graph();
  // The branch as a model of its own: what it reads from outside are inputs, and so are the incoming gradients.
  ir::Model m;
  m.ir_version = model.ir_version;
  m.opset_imports = model.opset_imports;
  m.graph = attr->g->Clone();
  {
    ir::Graph& g = *m.graph;
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
    if (g.outputs().size() != node.outputs().size()) {
      return InvalidArgument("'", attribute, "' has ", g.outputs().size(), " outputs, the node ",
                             node.outputs().size());
    }
    for (size_t k = 0; k < g.outputs().size(); ++k) {
      ir::Value* o = g.outputs()[k];
      if ((!o->type().is_tensor() || o->type().elem_type() == DType::kUndefined) && !o->is_graph_input()) {
        CopyType(o, node.output(k), type_of);
      }
    }
  }
  GradientRequest request;
  std::vector<std::string> seeded;
  for (size_t k = 0; k < dys.size(); ++k) {
    if (!dys[k]) continue;
    ir::Graph& g = *m.graph;
    ir::Value* in = g.FindValue(dys[k]->name());
    if (!in) {
      in = g.CreateValue(dys[k]->name());
      CopyType(in, node.output(k), type_of);
      g.AddInput(in);
    } else if (!in->is_graph_input() || std::none_of(request.output_gradients.begin(), request.output_gradients.end(),
                                                     [&](const auto& p) { return p.second == in->name(); })) {
      // Not the input made for an earlier output with the same incoming gradient (Add passes one dY to both).
      return Internal("'", attribute, "' has a value named '", dys[k]->name(), "', the name of an incoming gradient");
    }
    request.output_gradients.emplace_back(g.outputs()[k]->name(), in->name());
    seeded.push_back(g.outputs()[k]->name());
  }
  const std::unordered_set<std::string> may_reach = MayReach(*m.graph, seeded);
  for (const ir::Value* r : reads) {
    const ir::Value* v = m.graph->FindValue(r->name());
    if (v && v->is_graph_input()) request.wrt.push_back(r->name());
  }
  std::map<std::string, std::string> grad_of;  // read -> its gradient in the branch
  if (!request.wrt.empty()) {
    ONNXAMP_ASSIGN_OR_RETURN(GradientResult result, BuildGradients(m, request));
    for (size_t j = 0; j < request.wrt.size(); ++j) grad_of[request.wrt[j]] = result.gradients[j];
  }

  ir::Graph& g = *m.graph;
  std::vector<ir::Value*> grads;
  for (const ir::Value* r : reads) {
    auto it = grad_of.find(r->name());
    if (it != grad_of.end() && !it->second.empty()) {
      grads.push_back(g.FindValue(it->second));
      continue;
    }
    if (may_reach.count(r->name())) {
      return InvalidArgument("the gradient of '", r->name(), "' through '", attribute,
                             "' cannot be traced: a value on its path has no known floating type");
    }
    // A read this branch does not differentiate: zeros of its shape and type.
    ir::Value* x = g.FindValue(r->name());
    if (!x) {
      x = g.CreateValue(r->name());
      CopyType(x, r, type_of);
      g.AddInput(x);
    }
    ir::Value* shape = g.CreateValue(g.UniqueName(r->name() + "_shape"));
    g.AddNode("Shape", {x}, {shape}, shape->name());
    ir::Value* zero = g.CreateValue(g.UniqueName(r->name() + "_zero_grad"));
    ir::Node* fill = g.AddNode("ConstantOfShape", {shape}, {zero}, zero->name());
    fill->SetAttribute(ir::Attribute::TensorValue("value", ir::Tensor(type_of(r), {1})));
    grads.push_back(zero);
  }
  while (!g.outputs().empty()) g.RemoveOutput(g.outputs().size() - 1);
  for (size_t j = 0; j < reads.size(); ++j) {
    // Every output its own value (a branch may not list one value twice where the node has two outputs).
    ir::Value* out = grads[j];
    if (out->is_graph_output() || out->is_graph_input()) {
      ir::Value* copy = g.CreateValue(g.UniqueName(reads[j]->name() + "_grad"));
      g.AddNode("Identity", {out}, {copy}, copy->name());
      out = copy;
    }
    CopyType(out, reads[j], type_of);
    g.AddOutput(out);
  }
  RemoveDeadNodes(g);
  // Back to a subgraph: the inputs are read from the enclosing graph by name; the branch's own values get the prefix.
  std::unordered_set<const ir::Value*> read_below;  // read by the branch's own subgraphs
  for (const ir::Node* n : g.nodes()) {
    for (const ir::Value* v : g.SubgraphReads(n)) read_below.insert(v);
  }
  for (ir::Value* v : std::vector<ir::Value*>(g.inputs())) {
    if (v->uses().empty() && !v->is_graph_output() && !read_below.count(v)) {
      g.RemoveInput(v);
      g.RemoveValue(v);
      continue;
    }
    g.DemoteInputToOuterScope(v);
  }
  // Random ops and nested subgraphs keep the seeds they have in the forward branch (the executor seeds a node from
  // its first output's name, which the prefix changes), so that the recomputation draws what the forward drew.
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
  *uses_internal = m.OpsetVersion(exec::kInternalDomain) != 0;
  g.set_name(prefix.substr(0, prefix.size() - (prefix.empty() ? 0 : 1)));
  return std::move(m.graph);
}

}  // namespace onnxamp::trainer
