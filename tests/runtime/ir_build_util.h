// Shared by the tests that write small graphs node by node (runtime, CUDA, autodiff, the Gradient operator).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "runtime/ir/graph.h"
#include "runtime/ir/tensor.h"

namespace onnxamp::testing {

// A graph input of type `t` and static shape `dims`.
inline ir::Value* Input(ir::Graph& g, const std::string& name, DType t, std::vector<int64_t> dims) {
  ir::Value* v = g.CreateValue(name);
  ir::Shape shape;
  for (int64_t d : dims) shape.push_back(ir::Dim::Value(d));
  v->set_type(ir::ValueType::Tensor(t, shape));
  g.AddInput(v);
  return v;
}

// A one-output node `op` writing a new value `out` (the node is named `out`_node).
inline ir::Value* Node1(ir::Graph& g, const std::string& op, std::vector<ir::Value*> in, const std::string& out) {
  ir::Value* v = g.CreateValue(out);
  g.AddNode(op, std::move(in), {v}, out + "_node");
  return v;
}

// `t` named `name`: a session input.
inline ir::Tensor Named(ir::Tensor t, const std::string& name) {
  t.set_name(name);
  return t;
}

}  // namespace onnxamp::testing
