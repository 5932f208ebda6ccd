// Placement decisions for device sessions: deterministic ops, and the shape subgraphs kept on the host.
#include "runtime/executor/placement.h"

#include <algorithm>
#include <string>
#include <string_view>
#include <unordered_map>

#include "runtime/ops/op_info.h"

namespace onnxamp::exec {

bool IsDeterministic(const ir::Node& node) {
  const ops::OpInfo* info = ops::OpInfoRegistry::Global().Find(node.domain(), node.op_type());
  return info == nullptr || info->deterministic;
}

namespace {

bool IntegerOrBool(DType t) { return IsInteger(t) || t == DType::kBool; }

// Whether each node's outputs are integer or bool tensors: the declared type when the model gives one, else what the
// op makes of its inputs (Shape and Size give int64, Cast its `to`, most ops the type of their inputs). Models often
// declare no types for intermediate values, and shape subgraphs must be found in them too.
class IntegerValues {
 public:
  explicit IntegerValues(const std::function<bool(const ir::Value*)>& host_constant) : host_constant_(host_constant) {}

  bool Get(const ir::Value* v) const {
    if (v->type().is_tensor() && v->type().elem_type() != DType::kUndefined)
      return IntegerOrBool(v->type().elem_type());
    if (host_constant_(v)) return true;
    auto it = inferred_.find(v);
    return it != inferred_.end() && it->second;
  }

  // Records the outputs of `node`; its inputs' producers were recorded before (topological order).
  void Add(const ir::Node& node) {
    const bool integer = Infer(node);
    for (const ir::Value* v : node.outputs()) {
      if (v) inferred_[v] = integer;
    }
  }

 private:
  bool Infer(const ir::Node& node) const {
    const std::string& op = node.op_type();
    if (!node.domain().empty() && node.domain() != "ai.onnx") return false;
    if (op == "Shape" || op == "Size") return true;
    if (op == "Cast") return IntegerOrBool(static_cast<DType>(node.GetInt("to", 0)));
    if (op == "CastLike") return node.input(1) && Get(node.input(1));
    if (op == "ConstantOfShape") {
      const ir::Attribute* value = node.FindAttribute("value");
      return value && IntegerOrBool(value->t.dtype());
    }
    // Ops whose output type is an attribute (or float) whatever their inputs are.
    static constexpr std::string_view kTypedByAttribute[] = {"EyeLike",     "RandomNormalLike", "RandomUniformLike",
                                                             "Multinomial", "Bernoulli",        "Constant"};
    for (std::string_view t : kTypedByAttribute) {
      if (op == t) return false;
    }
    bool any = false;
    for (const ir::Value* v : node.inputs()) {
      if (!v) continue;
      if (!Get(v)) return false;
      any = true;
    }
    return any;
  }

  const std::function<bool(const ir::Value*)>& host_constant_;
  std::unordered_map<const ir::Value*, bool> inferred_;
};

}  // namespace

std::vector<bool> FindHostShapeNodes(const std::vector<NodePlacement>& nodes,
                                     const std::function<bool(const ir::Value*)>& host_constant) {
  std::unordered_map<const ir::Node*, size_t> index;
  for (size_t i = 0; i < nodes.size(); ++i) index[nodes[i].node] = i;
  // Start from every candidate and drop the ones that break a condition until none does: what is left is the
  // largest set closed under both conditions (inputs from the host, readers on the host).
  std::vector<bool> host(nodes.size(), false);
  IntegerValues integer(host_constant);
  for (size_t i = 0; i < nodes.size(); ++i) {
    const NodePlacement& p = nodes[i];
    integer.Add(*p.node);
    if (!p.on_device || p.outputs_on_host || !p.has_cpu_kernel || p.node->outputs().empty()) continue;
    bool ok = true;
    for (const ir::Value* v : p.node->outputs()) ok = ok && (v == nullptr || integer.Get(v));
    host[i] = ok;
  }
  // A value is on the host when a host-side node (a CPU node, a device node with host outputs, or a member of the
  // set) produces it, or it is a host constant.
  auto value_on_host = [&](const ir::Value* v) {
    if (host_constant(v)) return true;
    if (!v->producer()) return false;  // graph input: copied to the device
    auto it = index.find(v->producer());
    if (it == index.end()) return false;
    const NodePlacement& p = nodes[it->second];
    return !p.on_device || p.outputs_on_host || host[it->second];
  };
  // A use is on the host when its node runs on the host or reads that input on the host.
  auto use_on_host = [&](const ir::Use& use) {
    auto it = index.find(use.node);
    if (it == index.end()) return false;  // a folded node or one outside the list: keep it simple
    const NodePlacement& p = nodes[it->second];
    if (!p.on_device || host[it->second]) return true;
    return p.host_inputs && std::find(p.host_inputs->begin(), p.host_inputs->end(), use.index) != p.host_inputs->end();
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (!host[i]) continue;
      bool keep = true;
      for (const ir::Value* v : nodes[i].node->inputs()) keep = keep && (v == nullptr || value_on_host(v));
      for (const ir::Value* v : nodes[i].node->outputs()) {
        if (!v) continue;
        for (const ir::Use& use : v->uses()) keep = keep && use_on_host(use);
      }
      if (!keep) {
        host[i] = false;
        changed = true;
      }
    }
  }
  return host;
}

}  // namespace onnxamp::exec
