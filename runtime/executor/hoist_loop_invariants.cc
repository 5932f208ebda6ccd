// HoistLoopInvariants: body nodes that compute the same tensor in every iteration, moved in front of the loop
// (hoist_loop_invariants.h).
#include "runtime/executor/hoist_loop_invariants.h"

#include <string>
#include <unordered_set>
#include <vector>

namespace onnxamp::exec {
namespace {

// Pure ops that cannot fail on the values a valid model gives them. Einsum: the autodiff writes the transposes of a
// MatMul's gradient as one-input Einsums where the rank is not known.
bool IsHoistableOp(const ir::Node& n) {
  static const std::unordered_set<std::string> ops = {
      "Cast",    "CastLike", "Transpose", "Einsum", "Neg", "Abs",   "Exp",  "Log",   "Sqrt", "Reciprocal", "Relu",
      "Sigmoid", "Tanh",     "Erf",       "Sin",    "Cos", "Floor", "Ceil", "Round", "Sign", "Not"};
  return ir::IsDefaultDomain(n.domain()) && ops.count(n.op_type()) > 0 && n.subgraphs().empty() && !n.outputs().empty();
}

// The names the subgraphs of `body`'s nodes read from outer scope.
std::unordered_set<std::string> NamesReadBelow(const ir::Graph& body) {
  std::unordered_set<std::string> names;
  for (const ir::Node* n : body.nodes()) {
    for (const ir::Graph* sub : n->subgraphs()) {
      for (const std::string& name : sub->OuterScopeNames()) names.insert(name);
    }
  }
  return names;
}

// `v` (a value of an enclosing graph of `g`, or of `g`) as `g` reads it.
ir::Value* ReadIn(ir::Graph& g, const std::string& name) {
  if (ir::Value* v = g.FindValue(name)) return v;
  return g.CreateOuterScopeValue(name);
}

// Moves the invariant nodes of `loop`'s body into `g`, in front of `loop`.
StatusOr<bool> HoistFrom(ir::Graph& g, ir::Node* loop, ir::Graph& body) {
  ONNXAMP_ASSIGN_OR_RETURN(std::vector<ir::Node*> order, body.TopologicalOrder());
  const std::unordered_set<std::string> read_below = NamesReadBelow(body);
  std::unordered_set<const ir::Value*> invariant;
  for (ir::Value* v : body.values()) {
    if (v->is_outer_scope()) invariant.insert(v);
  }
  struct Move {
    ir::Node* node;
    std::vector<std::string> names;  // the outputs' names in `g`
  };
  std::vector<Move> moves;
  std::unordered_set<std::string> taken;  // names the moves so far give values of `g`
  for (ir::Node* n : order) {
    if (!IsHoistableOp(*n)) continue;
    bool ok = true;
    for (const ir::Value* in : n->inputs()) ok = ok && (!in || invariant.count(in));
    Move move{n, {}};
    for (const ir::Value* out : n->outputs()) {
      if (!ok) break;
      if (!out || out->is_graph_output()) {
        ok = false;
        break;
      }
      std::string name = out->name();
      if (g.ResolveValue(name) || taken.count(name)) {
        // Another value of that name in an enclosing graph: a new name, which the body's subgraphs do not know.
        if (read_below.count(name)) {
          ok = false;
          break;
        }
        name = g.UniqueName(name + "_hoisted");  // unused anywhere in the model
        for (int k = 1; taken.count(name); ++k) name = g.UniqueName(StrCat(out->name(), "_hoisted_", k));
      }
      move.names.push_back(name);
    }
    if (!ok) continue;
    for (const ir::Value* out : n->outputs()) invariant.insert(out);
    for (const std::string& name : move.names) taken.insert(name);
    moves.push_back(std::move(move));
  }
  for (const Move& m : moves) {
    ir::Node* n = m.node;
    std::vector<ir::Value*> inputs;
    for (const ir::Value* in : n->inputs()) inputs.push_back(in ? ReadIn(g, in->name()) : nullptr);
    std::vector<ir::Value*> outputs;
    for (size_t i = 0; i < n->outputs().size(); ++i) {
      ir::Value* v = g.CreateValue(m.names[i]);
      v->set_type(n->output(i)->type());
      outputs.push_back(v);
    }
    ir::Node* moved = g.InsertNode(loop, n->op_type(), inputs, outputs, n->name(), n->domain());
    for (const ir::Attribute& a : n->attributes()) moved->SetAttribute(a);
    const std::vector<ir::Value*> old_outputs = n->outputs();
    body.RemoveNode(n);
    // The body now reads each output from outer scope, under the name it has in `g`.
    for (size_t i = 0; i < old_outputs.size(); ++i) {
      ir::Value* old = old_outputs[i];
      const std::vector<ir::Use> uses = old->uses();
      const bool same_name = m.names[i] == old->name();
      // Under its own name the reference can only be made once `old` is gone: first under a name of its own (renaming
      // `old` instead would rename what the body's subgraphs read).
      ir::Value* ref =
          same_name ? body.CreateOuterScopeValue(body.UniqueName(old->name() + "_outer")) : ReadIn(body, m.names[i]);
      for (const ir::Use& u : uses) u.node->SetInput(static_cast<size_t>(u.index), ref);
      body.RemoveValueInfo(old);
      body.RemoveValue(old);
      if (same_name) ONNXAMP_RETURN_IF_ERROR(body.RenameValue(ref, m.names[i]));
      if (ref->uses().empty() && !read_below.count(m.names[i])) body.RemoveValue(ref);
    }
  }
  return !moves.empty();
}

}  // namespace

Status HoistLoopInvariants(ir::Graph& graph, bool* changed) {
  bool any = false;
  std::vector<ir::Node*> nodes;
  for (ir::Node* n : graph.nodes()) nodes.push_back(n);
  for (ir::Node* n : nodes) {
    // Inner loops first: what they hoist into this node's subgraphs may move further out below.
    for (ir::Graph* sub : n->subgraphs()) {
      bool c = false;
      ONNXAMP_RETURN_IF_ERROR(HoistLoopInvariants(*sub, &c));
      any = any || c;
    }
    const bool loop = ir::IsDefaultDomain(n->domain()) && (n->op_type() == "Loop" || n->op_type() == "Scan");
    if (!loop || n->subgraphs().size() != 1) continue;
    ONNXAMP_ASSIGN_OR_RETURN(bool moved, HoistFrom(graph, n, *n->subgraphs()[0]));
    any = any || moved;
  }
  *changed = any;
  return Status::Ok();
}

}  // namespace onnxamp::exec
