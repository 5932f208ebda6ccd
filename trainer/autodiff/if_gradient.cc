#include "trainer/autodiff/if_gradient.h"

#include <map>
#include <optional>
#include <unordered_set>

#include "runtime/executor/graph_optimizer.h"
#include "trainer/autodiff/autodiff.h"

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
  for (size_t k = 0; k < dys.size(); ++k) {
    if (!dys[k]) continue;
    ir::Graph& g = *m.graph;
    if (g.FindValue(dys[k]->name())) {
      return Internal("'", attribute, "' has a value named '", dys[k]->name(), "', the name of an incoming gradient");
    }
    ir::Value* in = g.CreateValue(dys[k]->name());
    CopyType(in, node.output(k), type_of);
    g.AddInput(in);
    request.output_gradients.emplace_back(g.outputs()[k]->name(), in->name());
  }
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
  std::unordered_set<std::string> read_below;  // names the branch's own subgraphs read
  for (const ir::Node* n : g.nodes()) {
    for (const ir::Graph* sub : n->subgraphs()) {
      for (std::string& name : sub->OuterScopeNames()) read_below.insert(std::move(name));
    }
  }
  for (ir::Value* v : std::vector<ir::Value*>(g.inputs())) {
    if (v->uses().empty() && !v->is_graph_output() && !read_below.count(v->name())) {
      g.RemoveInput(v);
      g.RemoveValue(v);
      continue;
    }
    g.DemoteInputToOuterScope(v);
  }
  for (ir::Value* v : g.values()) {
    if (!v->is_outer_scope()) ONNXAMP_RETURN_IF_ERROR(g.RenameValue(v, prefix + v->name()));
  }
  *uses_internal = m.OpsetVersion(exec::kInternalDomain) != 0;
  g.set_name(prefix.substr(0, prefix.size() - (prefix.empty() ? 0 : 1)));
  return std::move(m.graph);
}

}  // namespace onnxamp::trainer
