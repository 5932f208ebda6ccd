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
#include "trainer/autodiff/subgraph_util.h"

namespace onnxamp::trainer {

using subgraph::CopyType;

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
    subgraph::PromoteOuterReads(g, outer, type_of);
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
  const std::unordered_set<std::string> may_reach = subgraph::MayReach(*m.graph, seeded);
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
    ir::Value* zero = subgraph::ZerosLike(g, x, type_of(r), r->name() + "_zero_grad");
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
  subgraph::RemoveDeadNodes(g);
  ONNXAMP_RETURN_IF_ERROR(subgraph::FinishSubgraph(g, 0, prefix));
  *uses_internal = m.OpsetVersion(exec::kInternalDomain) != 0;
  return std::move(m.graph);
}

}  // namespace onnxamp::trainer
