// Structural verifier: definitions, use lists, cycles, initializer types; independent of ONNX's checker.
#include "runtime/ir/verify.h"

#include <set>

namespace onnxamp::ir {
namespace {

class Verifier {
 public:
  explicit Verifier(std::vector<Finding>* out) : out_(out) {}

  void Error(std::string where, std::string message) {
    out_->push_back({std::move(where), std::move(message), Finding::Severity::kError});
  }
  void Warning(std::string where, std::string message) {
    out_->push_back({std::move(where), std::move(message), Finding::Severity::kWarning});
  }

  void VerifyGraph(const Graph& g, const std::string& path);

 private:
  void VerifyInitializerType(const Value& v, const std::string& where);

  std::vector<Finding>* out_;
};

std::string GraphPath(const Graph& g, const std::string& parent_path) {
  std::string name = g.name().empty() ? "(unnamed)" : g.name();
  return parent_path.empty() ? StrCat("graph '", name, "'") : StrCat(parent_path, " / subgraph '", name, "'");
}

bool IsDefinedLocally(const Value& v) {
  return v.producer() != nullptr || v.is_graph_input() || v.initializer() != nullptr ||
         v.sparse_initializer() != nullptr;
}

void Verifier::VerifyInitializerType(const Value& v, const std::string& where) {
  const ValueType& t = v.type();
  const Tensor* init = v.initializer();
  if (!init || !t.defined()) return;
  if (!t.is_tensor()) {
    Error(where, StrCat("declared type ", t.ToString(), " but the initializer is a tensor"));
    return;
  }
  if (t.elem_type() != DType::kUndefined && t.elem_type() != init->dtype()) {
    Error(where, StrCat("declared element type ", DTypeName(t.elem_type()), " but the initializer holds ",
                        DTypeName(init->dtype())));
  }
  if (!t.shape()) return;
  const Shape& shape = *t.shape();
  if (shape.size() != init->dims().size()) {
    Error(where, StrCat("declared rank ", shape.size(), " ", ShapeToString(shape), " but the initializer has rank ",
                        init->dims().size()));
    return;
  }
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i].is_value() && shape[i].value != init->dims()[i]) {
      Error(where, StrCat("declared dim ", i, " = ", shape[i].value, " but the initializer has ", init->dims()[i]));
    }
  }
}

void Verifier::VerifyGraph(const Graph& g, const std::string& parent_path) {
  const std::string path = GraphPath(g, parent_path);

  // Values: how each is defined, and whether producers and uses agree with the nodes.
  for (const Value* v : g.values()) {
    const std::string where = StrCat(path, " value '", v->name(), "'");
    if (v->is_outer_scope()) {
      if (IsDefinedLocally(*v)) {
        Error(where, "is an outer-scope reference but is also defined in this graph");
      }
      if (!g.parent() || !g.parent()->ResolveValue(v->name())) {
        Error(where, "is used but not defined in this graph or any enclosing graph");
      }
    }
    if (v->producer()) {
      if (v->producer()->graph() != &g || v->producer()->output(v->producer_index()) != v) {
        Error(where, "IR invariant broken: producer does not list this value as its output");
      }
      if (v->is_graph_input()) {
        Error(where, StrCat("is produced by node ", v->producer()->Describe(), " and is also a graph input"));
      }
      if (v->initializer() || v->sparse_initializer()) {
        Error(where, StrCat("is produced by node ", v->producer()->Describe(), " and is also an initializer"));
      }
    }
    if (v->initializer() && v->sparse_initializer()) Error(where, "is both a dense and a sparse initializer");
    for (const Use& u : v->uses()) {
      if (!u.node || u.node->graph() != &g || u.node->input(static_cast<size_t>(u.index)) != v) {
        Error(where, "IR invariant broken: a use does not match its node's input");
      }
    }
    VerifyInitializerType(*v, where);
  }

  // Nodes: inputs defined, outputs unique.
  std::set<const Value*> produced;
  for (const Node* n : g.nodes()) {
    const std::string where = StrCat(path, " node ", n->Describe());
    if (n->op_type().empty()) Error(where, "has an empty op_type");
    for (size_t i = 0; i < n->inputs().size(); ++i) {
      const Value* v = n->input(i);
      if (!v) continue;
      if (v->graph() != &g) {
        Error(where, StrCat("input ", i, " '", v->name(), "' belongs to another graph"));
        continue;
      }
      if (!v->is_outer_scope() && !IsDefinedLocally(*v)) {
        Error(where, StrCat("input ", i, " '", v->name(), "' is not produced by any node, graph input or initializer"));
      }
    }
    for (size_t i = 0; i < n->outputs().size(); ++i) {
      const Value* v = n->output(i);
      if (!v) continue;
      if (v->producer() != n) {
        Error(where, StrCat("IR invariant broken: output ", i, " '", v->name(), "' names another producer"));
      }
      if (!produced.insert(v).second) Error(where, StrCat("produces '", v->name(), "' twice"));
    }
  }

  for (size_t i = 0; i < g.outputs().size(); ++i) {
    const Value* v = g.outputs()[i];
    if (!v->is_outer_scope() && !IsDefinedLocally(*v)) {
      Error(StrCat(path, " output ", i, " '", v->name(), "'"),
            "is not produced by any node, graph input or initializer");
    }
  }

  StatusOr<std::vector<Node*>> order = g.TopologicalOrder();
  if (!order.ok()) Error(path, order.status().message());

  for (const Node* n : g.nodes())
    for (const Graph* sub : n->subgraphs()) VerifyGraph(*sub, StrCat(path, " node ", n->Describe()));
}

Status FirstError(const std::vector<Finding>& findings) {
  for (const Finding& f : findings)
    if (f.is_error()) return InvalidArgument(f.ToString());
  return Status::Ok();
}

// Domains used by nodes of `g` and its subgraphs.
void CollectDomains(const Graph& g, std::set<std::string>* out) {
  for (const Node* n : g.nodes()) {
    out->insert(IsDefaultDomain(n->domain()) ? "" : n->domain());
    for (const Graph* sub : n->subgraphs()) CollectDomains(*sub, out);
  }
}

}  // namespace

std::vector<Finding> VerifyAll(const Graph& graph) {
  std::vector<Finding> findings;
  Verifier(&findings).VerifyGraph(graph, "");
  return findings;
}

std::vector<Finding> VerifyAll(const Model& model) {
  std::vector<Finding> findings;
  Verifier verifier(&findings);
  std::set<std::string> imported;
  for (const OpsetImport& op : model.opset_imports) {
    const std::string domain = IsDefaultDomain(op.domain) ? "" : op.domain;
    const std::string shown = domain.empty() ? "ai.onnx" : domain;
    if (!imported.insert(domain).second) verifier.Error("opset_import", StrCat("domain '", shown, "' imported twice"));
    if (op.version < 1) {
      verifier.Error("opset_import", StrCat("domain '", shown, "' has invalid version ", op.version));
    }
  }
  if (!model.graph) {
    verifier.Error("model", "has no graph");
    return findings;
  }
  verifier.VerifyGraph(*model.graph, "");
  std::set<std::string> local_function_domains;
  for (const Function& f : model.functions) {
    local_function_domains.insert(f.domain);
    if (f.body) verifier.VerifyGraph(*f.body, StrCat("function '", f.domain, ":", f.name, "'"));
  }
  std::set<std::string> used;
  CollectDomains(*model.graph, &used);
  for (const std::string& d : used) {
    if (!imported.count(d) && !local_function_domains.count(d)) {
      verifier.Warning("opset_import",
                       StrCat("nodes use domain '", d.empty() ? "ai.onnx" : d, "' which the model does not import"));
    }
  }
  return findings;
}

Status Verify(const Graph& graph) { return FirstError(VerifyAll(graph)); }
Status Verify(const Model& model) { return FirstError(VerifyAll(model)); }

}  // namespace onnxamp::ir
