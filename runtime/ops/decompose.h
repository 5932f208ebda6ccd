// Decompositions: a backward op rewritten as ops that compute the same outputs and all have gradient builders, so
// that the autodiff can differentiate it (second derivatives) without a builder of its own. A normalization's second
// derivative is a long formula; its decomposition is a few lines, checked against the fused kernel, and the formula
// then comes from the builders of the ops it is made of. The autodiff decomposes a node only when a gradient has to
// flow through it (trainer/autodiff/decompose.h); the fused kernel serves every other use.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "runtime/common/dtype.h"
#include "runtime/common/status.h"
#include "runtime/ir/attribute.h"
#include "runtime/ir/graph.h"
#include "runtime/ir/tensor.h"

namespace onnxamp::ops {

// What a decomposition sees of one node, and the nodes it adds to the node's graph (values named after the node).
class DecomposeContext {
 public:
  // `type_of`: the element type of a value of the graph (declared or inferred); kUndefined when unknown.
  DecomposeContext(ir::Graph& g, ir::Node& node, int64_t onnx_opset, std::function<DType(const ir::Value*)> type_of);

  const ir::Node& node() const { return node_; }
  // Input i / output i (null when omitted or past the end).
  ir::Value* X(size_t i) const { return node_.input(i); }
  ir::Value* Y(size_t i) const { return node_.output(i); }
  // The model's ONNX opset: the ops emitted have that version's signature.
  int64_t onnx_opset() const { return onnx_opset_; }
  // The element type of a value of the graph, or of one Emit created with a type.
  DType TypeOf(const ir::Value* v) const;

  std::vector<ir::Value*> Emit(const std::string& op_type, const std::vector<ir::Value*>& inputs, size_t num_outputs,
                               std::vector<ir::Attribute> attributes = {}, const std::string& domain = "",
                               DType output_type = DType::kUndefined);
  ir::Value* Emit1(const std::string& op_type, const std::vector<ir::Value*>& inputs,
                   std::vector<ir::Attribute> attributes = {}, const std::string& domain = "",
                   DType output_type = DType::kUndefined) {
    return Emit(op_type, inputs, 1, std::move(attributes), domain, output_type)[0];
  }
  // A constant (an initializer of the graph).
  ir::Value* Constant(ir::Tensor value);
  ir::Value* Ints(const std::vector<int64_t>& values);
  ir::Value* Scalar(DType t, double value);
  // ReduceMean(x, axes, keepdims) at the model's opset (axes as an attribute before 18, as an input from 18).
  ir::Value* EmitReduceMean(ir::Value* x, const std::vector<int64_t>& axes, bool keepdims);
  // ReduceSum(x, axes, keepdims) at the model's opset (axes as an attribute before 13, as an input from 13). Empty
  // axes: over every dim.
  ir::Value* EmitReduceSum(ir::Value* x, const std::vector<int64_t>& axes, bool keepdims);
  // Unsqueeze(x, axes) at the model's opset (axes as an attribute before 13, as an input from 13).
  ir::Value* EmitUnsqueeze(ir::Value* x, const std::vector<int64_t>& axes);
  // The type to compute in for float input `x`: float64 for float64, float32 for the others (16-bit types computed as
  // the fused kernels compute them); an error naming x's type when it is not a float type or unknown.
  StatusOr<DType> ComputeTypeFor(const ir::Value* x) const;
  // x as type `to`: x itself when it has that type already, else a Cast.
  ir::Value* CastTo(ir::Value* x, DType to);

  // The value that output i of the node is: set one for each output the node has.
  void SetY(size_t i, ir::Value* v);
  // Replaces the node by what was emitted: an Identity writes each output from the value SetY gave it, so that the
  // output keeps its name, its uses and its place among the graph's outputs. Fails (the graph then holds unused
  // nodes, and the node) when an output has no value.
  Status Finish();

 private:
  ir::Value* EmitReduce(const std::string& op, int64_t axes_input_since, ir::Value* x, const std::vector<int64_t>& axes,
                        bool keepdims);

  ir::Graph& g_;
  ir::Node& node_;
  const int64_t onnx_opset_;
  std::function<DType(const ir::Value*)> type_of_;
  std::vector<ir::Value*> outputs_;
  std::string base_;
};

// Emits the node's outputs through DecomposeContext and sets each with SetY. Errors name what the decomposition
// cannot handle (a missing attribute, an unknown type) and are reported with the node.
using Decomposition = Status (*)(DecomposeContext& ctx);

}  // namespace onnxamp::ops
