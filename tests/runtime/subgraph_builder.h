// Builds graphs with subgraphs by value name, for the control-flow tests (tests/runtime/control_flow_test.cc,
// tests/trainer/grad_if_test.cc): a name a graph does not define is read from outer scope.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/ir/graph.h"
#include "runtime/ir/tensor.h"

namespace onnxamp::testing {

// A new graph for a subgraph attribute.
inline std::unique_ptr<ir::Graph> Graph(const std::string& name) { return std::make_unique<ir::Graph>(name); }

// `t` named `name` (a session input, matched by name).
inline ir::Tensor Named(ir::Tensor t, const std::string& name) {
  t.set_name(name);
  return t;
}

class SubgraphBuilder {
 public:
  explicit SubgraphBuilder(ir::Graph* g) : g_(g) {}

  // The value `name` of this graph, or an outer-scope reference to it.
  ir::Value* V(const std::string& name) {
    if (ir::Value* v = g_->FindValue(name)) return v;
    return g_->CreateOuterScopeValue(name);
  }
  void In(const std::string& name, DType dtype, std::optional<std::vector<int64_t>> dims = std::nullopt) {
    ir::Value* v = g_->CreateValue(name);
    v->set_type(ir::ValueType::Tensor(dtype, Shape(dims)));
    g_->AddInput(v);
  }
  // A graph output; an outer-scope value (a branch returning an enclosing value) keeps the enclosing value's type.
  void Out(const std::string& name, DType dtype, std::optional<std::vector<int64_t>> dims = std::nullopt) {
    ir::Value* v = V(name);
    if (!v->is_outer_scope()) v->set_type(ir::ValueType::Tensor(dtype, Shape(dims)));
    g_->AddOutput(v);
  }
  void Init(const std::string& name, ir::Tensor t) { g_->SetInitializer(g_->CreateValue(name), std::move(t)); }
  // A node; "" among `ins` is an omitted input. The node is named after its first output.
  ir::Node* N(const std::string& op, const std::vector<std::string>& ins, const std::vector<std::string>& outs,
              std::vector<ir::Attribute> attrs = {}) {
    std::vector<ir::Value*> in, out;
    for (const std::string& s : ins) in.push_back(s.empty() ? nullptr : V(s));
    for (const std::string& s : outs) out.push_back(g_->CreateValue(s));
    ir::Node* n = g_->AddNode(op, in, out, outs[0]);
    for (ir::Attribute& a : attrs) n->SetAttribute(std::move(a));
    return n;
  }

 private:
  static std::optional<ir::Shape> Shape(const std::optional<std::vector<int64_t>>& dims) {
    if (!dims) return std::nullopt;
    ir::Shape s;
    for (int64_t d : *dims) s.push_back(ir::Dim::Value(d));
    return s;
  }
  ir::Graph* g_;
};

}  // namespace onnxamp::testing
