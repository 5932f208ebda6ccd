// ExpandGradientOps: per Gradient node, a model of its own (the slice of the main graph between the node's xs/zs and
// its y, cut at those names), differentiated by BuildGradients with y's gradient seeded with ones, then renamed into
// the main graph's namespace and copied into it: the backward nodes always, the forward nodes too when the Gradient
// node evaluates at inputs other than the values xs and zs name.
#include "trainer/autodiff/gradient_op.h"

#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "converter/model_clone.h"
#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/gradient.h"
#include "runtime/ops/op_info.h"
#include "trainer/autodiff/autodiff.h"
#include "trainer/autodiff/element_types.h"
#include "trainer/autodiff/subgraph_util.h"

namespace onnxamp::trainer {
namespace {

bool IsGradientNode(const ir::Node& n) { return n.op_type() == "Gradient" && n.domain() == kGradientOpDomain; }

// Set on the node being expanded while the model is copied, so that the copy can tell it from other Gradient nodes.
constexpr char kExpandingMark[] = "onnxamp_expanding";

bool GraphHoldsGradient(const ir::Graph& g) {
  for (const ir::Node* n : g.nodes()) {
    if (IsGradientNode(*n)) return true;
    for (const ir::Graph* sub : n->subgraphs()) {
      if (GraphHoldsGradient(*sub)) return true;
    }
  }
  return false;
}

// What the expansions added to the main graph.
struct Added {
  std::vector<ir::Node*> nodes;
  std::vector<ir::Value*> initializers;                    // constants of the backward passes
  std::vector<std::pair<ir::Node*, size_t>> twin_outputs;  // optional outputs added to the graph's own nodes
};

// Appends Shape(like) -> ConstantOfShape(value) writing `out` (a value of g without a producer).
void AddFill(ir::Graph& g, ir::Value* like, ir::Value* out, DType type, float value, const std::string& node_name,
             Added& added) {
  ir::Value* shape = g.CreateValue(g.UniqueName(out->name() + "_shape"));
  added.nodes.push_back(g.AddNode("Shape", {like}, {shape}, node_name + "_shape"));
  ir::Node* fill = g.AddNode("ConstantOfShape", {shape}, {out}, node_name);
  added.nodes.push_back(fill);
  fill->SetAttribute(ir::Attribute::TensorValue("value", ops::ScalarTensor(type, value, {1})));
  if (!out->type().is_tensor()) out->set_type(ir::ValueType::Tensor(type));
}

// Removes the nodes of `added` that nothing reads (the gradients of skipped outputs, a recomputed forward part the
// backward pass does not read), then the constants and the optional outputs of the graph's own nodes that only they
// read. The graph's own nodes stay.
void RemoveDeadAdded(ir::Graph& g, const Added& added) {
  std::unordered_set<ir::Node*> candidates(added.nodes.begin(), added.nodes.end());
  subgraph::RemoveDeadNodes(g, &candidates);
  std::unordered_set<const ir::Value*> read;  // by a node or its subgraphs
  for (const ir::Node* n : g.nodes()) {
    for (const ir::Value* v : g.ImplicitInputs(n)) read.insert(v);
  }
  auto unread = [&](const ir::Value* v) { return v && !read.count(v) && !v->is_graph_output(); };
  for (ir::Value* v : added.initializers) {
    if (!unread(v)) continue;
    g.RemoveInitializer(v);
    g.RemoveValue(v);
  }
  for (const auto& [twin, j] : added.twin_outputs) {
    ir::Value* v = twin->output(j);
    if (!unread(v)) continue;
    twin->SetOutput(j, nullptr);
    g.RemoveValue(v);
  }
}

struct GradientSpec {
  std::vector<std::string> xs;
  std::vector<std::string> zs;
  std::string y;
  // xs followed by zs: the names the node's inputs give values to, in input order.
  std::vector<std::string> leaves() const {
    std::vector<std::string> all = xs;
    all.insert(all.end(), zs.begin(), zs.end());
    return all;
  }
};

StatusOr<GradientSpec> ReadSpec(const ir::Node& node, const ir::Graph& g) {
  GradientSpec spec;
  const ir::Attribute* xs = node.FindAttribute("xs");
  if (!xs || xs->type() != ir::AttrType::kStrings || xs->strings.empty()) {
    return InvalidArgument("attribute 'xs' must be a non-empty list of value names");
  }
  spec.xs = xs->strings;
  if (const ir::Attribute* zs = node.FindAttribute("zs")) {
    if (zs->type() != ir::AttrType::kStrings) return InvalidArgument("attribute 'zs' must be a list of value names");
    spec.zs = zs->strings;
  }
  const ir::Attribute* y = node.FindAttribute("y");
  if (!y || y->type() != ir::AttrType::kString || y->s.empty()) {
    return InvalidArgument("attribute 'y' must name the value to differentiate");
  }
  spec.y = y->s;
  if (!g.FindValue(spec.y)) return NotFound("y '", spec.y, "' is not a value of the graph");
  const std::vector<std::string> leaves = spec.leaves();
  std::unordered_set<std::string> seen;
  for (size_t i = 0; i < leaves.size(); ++i) {
    const char* attr = i < spec.xs.size() ? "xs" : "zs";
    if (leaves[i].empty()) return InvalidArgument("attribute '", attr, "' holds an empty name");
    if (!g.FindValue(leaves[i])) return NotFound(attr, " names '", leaves[i], "', which is not a value of the graph");
    if (!seen.insert(leaves[i]).second) return InvalidArgument("'", leaves[i], "' is named twice in xs and zs");
  }
  if (node.inputs().size() != leaves.size()) {
    return InvalidArgument("has ", node.inputs().size(), " inputs; it takes one per name in xs and zs (", leaves.size(),
                           ")");
  }
  for (size_t i = 0; i < leaves.size(); ++i) {
    if (!node.input(i)) return InvalidArgument("input ", i, " (the value of '", leaves[i], "') is empty");
  }
  if (node.outputs().size() > spec.xs.size()) {
    return InvalidArgument("has ", node.outputs().size(), " outputs; it has one per name in xs (", spec.xs.size(), ")");
  }
  return spec;
}

// Expands Gradient node `node` of model.graph (removed at the end) and returns "", or leaves the model as it was and
// returns the description of the unexpanded Gradient node that y depends on (to be expanded first).
StatusOr<std::string> Expand(ir::Model& model, ir::Node* node, const ElementTypes& main_types, Added& added) {
  ir::Graph& main = *model.graph;
  ONNXAMP_ASSIGN_OR_RETURN(GradientSpec spec, ReadSpec(*node, main));
  const std::vector<std::string> leaves = spec.leaves();
  // The backward pass reads the graph's own forward values when the node evaluates at the values xs and zs name.
  bool reuse = true;
  for (size_t i = 0; i < leaves.size(); ++i) reuse = reuse && node->input(i)->name() == leaves[i];

  // ---- The differentiated function: a copy of the model, cut at xs and zs, reduced to what y depends on.
  node->SetAttribute(ir::Attribute::Int(kExpandingMark, 1));
  ir::Model fn = converter::CloneModel(model);
  node->RemoveAttribute(kExpandingMark);
  ir::Graph& f = *fn.graph;
  auto main_type = [&](const ir::Value* v) {
    const ir::Value* m = main.FindValue(v->name());
    auto it = m ? main_types.find(m) : main_types.end();
    return it == main_types.end() ? DType::kUndefined : it->second;
  };
  // The values the producers of computed leaves write instead of them, each to its leaf's name.
  std::unordered_map<std::string, std::string> cut;
  for (const std::string& name : leaves) {
    ir::Value* v = f.FindValue(name);
    // A computed value becomes an input: its producer writes a fresh value instead, so that the name, its uses and
    // what subgraphs read of it by name all stay.
    if (ir::Node* producer = v->producer()) {
      ir::Value* instead = f.CreateValue(f.UniqueName(name + "_cut"));
      producer->SetOutput(static_cast<size_t>(v->producer_index()), instead);
      cut[instead->name()] = name;
    }
    if (v->initializer()) f.RemoveInitializer(v);
    if (!v->is_graph_input()) f.AddInput(v);
    subgraph::CopyType(v, main.FindValue(name), main_type);
  }
  while (!f.outputs().empty()) f.RemoveOutput(f.outputs().size() - 1);
  ir::Value* fy = f.FindValue(spec.y);
  f.AddOutput(fy);
  subgraph::RemoveDeadNodes(f);
  for (const ir::Node* n : f.nodes()) {
    if (!IsGradientNode(*n)) continue;
    if (n->FindAttribute(kExpandingMark)) return InvalidArgument("y '", spec.y, "' depends on this node's own outputs");
    return n->Describe();
  }
  const ElementTypes fn_types = InferElementTypes(f);
  const auto y_type_it = fn_types.find(fy);
  const DType y_type = y_type_it == fn_types.end() ? DType::kUndefined : y_type_it->second;
  if (!IsDifferentiableType(y_type)) {
    return InvalidArgument("y '", spec.y, "' is not a floating tensor (",
                           y_type == DType::kUndefined ? "its type is unknown" : DTypeName(y_type), ")");
  }
  std::unordered_set<std::string> forward_names;  // every name of the function before its backward pass
  for (const ir::Value* v : f.values()) forward_names.insert(v->name());
  ir::Value* seed = f.CreateValue(f.UniqueName(spec.y + "_grad_seed"));
  seed->set_type(ir::ValueType::Tensor(y_type));
  f.AddInput(seed);
  const std::string seed_name = seed->name();

  GradientRequest request;
  request.wrt = spec.xs;
  request.output_gradients = {{spec.y, seed_name}};
  ONNXAMP_ASSIGN_OR_RETURN(GradientResult grads, BuildGradients(fn, request));
  ir::Graph& b = *fn.graph;  // BuildGradients replaced the graph

  // ---- Names in the main graph: the values it has keep theirs; everything else gets a fresh one.
  std::unordered_map<std::string, std::string> target;
  std::unordered_set<std::string> taken;
  auto fresh = [&](const std::string& base) {
    std::string name = main.UniqueName(base);
    for (int k = 1; taken.count(name); ++k) name = main.UniqueName(StrCat(base, "_", k));
    taken.insert(name);
    return name;
  };
  const std::unordered_set<std::string> leaf_set(leaves.begin(), leaves.end());
  std::unordered_map<std::string, size_t> gradient_output;  // a gradient's name -> its output index of the node
  for (size_t i = 0; i < grads.gradients.size() && i < node->outputs().size(); ++i) {
    if (!grads.gradients[i].empty() && node->output(i) && !node->output(i)->name().empty()) {
      gradient_output[grads.gradients[i]] = i;
    }
  }
  for (const ir::Value* v : b.values()) {
    const std::string& name = v->name();
    std::string to;
    if (auto it = gradient_output.find(name); it != gradient_output.end()) {
      to = node->output(it->second)->name();
    } else if (name == seed_name || !forward_names.count(name) || cut.count(name)) {
      to = fresh(name);
    } else if (leaf_set.count(name)) {
      to = reuse ? name : fresh(name);
    } else if (v->is_graph_input() || v->initializer() || v->sparse_initializer()) {
      to = name;  // a graph input or initializer of the main graph: a constant of the function
    } else {
      to = reuse ? name : fresh(name);
    }
    target[name] = to;
    taken.insert(to);
  }
  // Renamed in two rounds, through names neither graph has, so that no rename meets a name still in use.
  std::vector<std::pair<ir::Value*, std::string>> renames;
  for (ir::Value* v : b.values()) {
    if (target[v->name()] != v->name()) renames.emplace_back(v, target[v->name()]);
  }
  for (auto& [v, to] : renames) {
    std::string tmp = b.UniqueName("gradient_op_tmp");
    for (int k = 1; main.FindValue(tmp) || taken.count(tmp); ++k) tmp = b.UniqueName(StrCat("gradient_op_tmp_", k));
    ONNXAMP_RETURN_IF_ERROR(b.RenameValue(v, tmp));
  }
  for (auto& [v, to] : renames) ONNXAMP_RETURN_IF_ERROR(b.RenameValue(v, to));
  // Names in `b` now are names in the main graph; a forward value's original name maps to its current one.
  auto now = [&](const std::string& original) { return target.at(original); };
  std::unordered_map<std::string, std::string> original_of;
  for (const auto& [original, to] : target) original_of[to] = original;
  // Reading the graph's own forward values, a value a leaf's producer writes instead of the leaf is the leaf.
  std::unordered_map<std::string, std::string> alias;
  if (reuse) {
    for (const auto& [original, leaf] : cut) {
      if (target.count(original)) alias[target.at(original)] = leaf;
    }
  }

  // ---- Into the main graph. Nothing below fails.
  const std::vector<ir::Value*> node_inputs = node->inputs();
  const std::vector<ir::Value*> node_outputs = node->outputs();
  const std::string base = node->name().empty() ? std::string("Gradient") : node->name();
  const std::string node_prefix = base + "/";
  main.RemoveNode(node);
  auto value_for = [&](const ir::Value* v) {
    if (auto it = alias.find(v->name()); it != alias.end()) return main.FindValue(it->second);
    if (ir::Value* m = main.FindValue(v->name())) return m;
    ir::Value* m = main.CreateValue(v->name());
    // Evaluated at other inputs, values may have other shapes than the graph declares for their forward twins.
    if (reuse || !v->type().is_tensor()) {
      m->set_type(v->type());
    } else {
      m->set_type(ir::ValueType::Tensor(v->type().elem_type()));
    }
    if (v->initializer()) {
      main.SetInitializer(m, *v->initializer());
      added.initializers.push_back(m);
    }
    return m;
  };
  if (!reuse) {
    for (size_t i = 0; i < leaves.size(); ++i) {
      ir::Value* at = value_for(b.FindValue(now(leaves[i])));
      added.nodes.push_back(main.AddNode("Identity", {node_inputs[i]}, {at}, node_prefix + leaves[i]));
    }
  }
  ir::Value* main_seed = value_for(b.FindValue(now(seed_name)));
  StatusOr<std::vector<ir::Node*>> order = b.TopologicalOrder();
  ONNXAMP_CHECK(order.ok(), "the differentiated graph has a cycle: ", order.status().message());
  for (const ir::Node* n : *order) {
    // A forward node: one whose outputs the function had before its backward pass.
    const ir::Value* first = nullptr;  // its first output the main graph has
    bool forward = false;
    for (const ir::Value* out : n->outputs()) {
      if (!out) continue;
      const std::string& original = original_of.at(out->name());
      forward = forward || forward_names.count(original);
      if (!first && !cut.count(original) && main.FindValue(out->name())) first = out;
    }
    if (forward && reuse && first) {
      // The main graph computes this node already; the backward pass may have asked it for an optional output more
      // (BuildGradients' ForwardOutput: a Dropout mask, LayerNormalization's statistics).
      ir::Node* twin = main.FindValue(first->name())->producer();
      ONNXAMP_CHECK(twin, "forward value '", first->name(), "' has no producer in the main graph");
      for (size_t j = 0; j < n->outputs().size(); ++j) {
        const ir::Value* out = n->output(j);
        if (!out || main.FindValue(out->name()) || cut.count(original_of.at(out->name()))) continue;
        while (twin->outputs().size() < j) twin->SetOutput(twin->outputs().size(), nullptr);
        twin->SetOutput(j, value_for(out));
        added.twin_outputs.emplace_back(twin, j);
      }
      continue;
    }
    std::vector<ir::Value*> ins;
    for (const ir::Value* in : n->inputs()) ins.push_back(in ? value_for(in) : nullptr);
    std::vector<ir::Value*> outs;
    for (const ir::Value* out : n->outputs()) outs.push_back(out ? value_for(out) : nullptr);
    ir::Node* c = main.AddNode(n->op_type(), std::move(ins), std::move(outs),
                               n->name().empty() ? std::string() : node_prefix + n->name(), n->domain());
    for (const ir::Attribute& a : n->attributes()) c->SetAttribute(a);
    // The executor seeds a random op, and the nodes of a subgraph, from the node's first output name. A forward node
    // computed again keeps its twin's seed: it draws what the graph's own node draws, and what the backward nodes
    // (DropoutGrad, a backward If or Loop) expect by that name.
    if (forward && !c->FindAttribute("seed_from")) {
      const ops::OpInfo* info = ops::OpInfoRegistry::Global().Find(c->domain(), c->op_type());
      if ((info && !info->deterministic) || !c->subgraphs().empty()) {
        for (const ir::Value* out : n->outputs()) {
          if (!out) continue;
          c->SetAttribute(ir::Attribute::String("seed_from", original_of.at(out->name())));
          break;
        }
      }
    }
    added.nodes.push_back(c);
  }
  // y's gradient: ones shaped like y (at the evaluated point).
  AddFill(main, main.FindValue(now(spec.y)), main_seed, y_type, 1.0f, node_prefix + "seed", added);
  for (size_t i = 0; i < node_outputs.size(); ++i) {
    ir::Value* out = node_outputs[i];
    if (!out) continue;
    if (!out->type().is_tensor() && !grads.gradients[i].empty()) {
      const ir::Value* g = b.FindValue(out->name());
      if (g && g->type().is_tensor()) out->set_type(ir::ValueType::Tensor(g->type().elem_type()));
    }
    if (out->producer()) continue;
    // A gradient y does not depend on: zeros shaped like the input.
    const ir::Value* x = b.FindValue(now(spec.xs[i]));
    const DType t = x && x->type().is_tensor() ? x->type().elem_type() : DType::kUndefined;
    AddFill(main, node_inputs[i], out, IsDifferentiableType(t) ? t : y_type, 0.0f, node_prefix + "zeros_" + spec.xs[i],
            added);
  }
  if (model.OpsetVersion(exec::kInternalDomain) == 0 && fn.OpsetVersion(exec::kInternalDomain) != 0) {
    model.SetOpsetVersion(exec::kInternalDomain, fn.OpsetVersion(exec::kInternalDomain));
  }
  return std::string();
}

}  // namespace

bool HasGradientOps(const ir::Model& model) {
  if (model.graph && GraphHoldsGradient(*model.graph)) return true;
  for (const ir::Function& f : model.functions) {
    if (f.body && GraphHoldsGradient(*f.body)) return true;
  }
  return false;
}

StatusOr<int> ExpandGradientOps(ir::Model& model) {
  if (!HasGradientOps(model)) return 0;
  ir::Model work = converter::CloneModel(model);
  ir::Graph& g = *work.graph;
  for (const ir::Node* n : g.nodes()) {
    for (const ir::Graph* sub : n->subgraphs()) {
      if (GraphHoldsGradient(*sub)) {
        return Unimplemented("a Gradient node inside a subgraph (of ", n->Describe(),
                             "): only the main graph's Gradient nodes are expanded");
      }
    }
  }
  for (const ir::Function& f : work.functions) {
    if (f.body && GraphHoldsGradient(*f.body)) {
      return Unimplemented("a Gradient node inside function ", f.domain.empty() ? "" : f.domain + ":", f.name,
                           ": only the main graph's Gradient nodes are expanded");
    }
  }
  // In topological order, and a node whose y depends on another one's outputs (a second derivative: a link by name,
  // which the order of the graph's edges does not see) after that one.
  ONNXAMP_ASSIGN_OR_RETURN(std::vector<ir::Node*> order, g.TopologicalOrder());
  std::vector<ir::Node*> pending;
  for (ir::Node* n : order) {
    if (IsGradientNode(*n)) pending.push_back(n);
  }
  int expanded = 0;
  Added added;
  while (!pending.empty()) {
    std::vector<ir::Node*> later;
    std::vector<std::string> blockers;
    for (ir::Node* n : pending) {
      const std::string what = n->Describe();
      StatusOr<std::string> blocker = Expand(work, n, InferElementTypes(g), added);
      if (!blocker.ok()) return blocker.status().WithContext(what);
      if (blocker->empty()) {
        ++expanded;
      } else {
        later.push_back(n);
        blockers.push_back(*blocker);
      }
    }
    if (later.size() == pending.size()) {
      return InvalidArgument(later[0]->Describe(), ": y '", later[0]->GetString("y", ""), "' depends on Gradient node ",
                             blockers[0], ", whose y depends on this node's outputs in turn");
    }
    pending = std::move(later);
  }
  RemoveDeadAdded(g, added);
  ONNXAMP_RETURN_IF_ERROR(g.SortTopologically());
  model = std::move(work);
  return expanded;
}

}  // namespace onnxamp::trainer
