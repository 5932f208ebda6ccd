// Decompositions: a backward op rewritten as ops that compute the same outputs and all have gradient builders, so
// that the autodiff can differentiate it (second derivatives) without a builder of its own. A normalization's second
// derivative is a long formula; its decomposition is a few lines, checked against the fused kernel, and the formula
// then comes from the builders of the ops it is made of. The autodiff decomposes a node only when a gradient has to
// flow through it (trainer/autodiff/decompose.h); the fused kernel serves every other use.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_set>
#include <vector>

#include "runtime/common/dtype.h"
#include "runtime/common/status.h"
#include "runtime/ir/attribute.h"
#include "runtime/ir/graph.h"
#include "runtime/ir/tensor.h"
#include "runtime/ops/gradient.h"

namespace onnxamp::ops {

// What a decomposition sees of one node, and the nodes it adds to the node's graph (values named after the node).
class DecomposeContext : public NodeEmitter {
 public:
  // `type_of`: the element type of a value of the graph (declared or inferred); kUndefined when unknown.
  DecomposeContext(ir::Graph& g, ir::Node& node, int64_t onnx_opset, std::function<DType(const ir::Value*)> type_of);

  const ir::Node& node() const { return node_; }
  // Input i / output i (null when omitted or past the end).
  ir::Value* X(size_t i) const { return node_.input(i); }
  ir::Value* Y(size_t i) const { return node_.output(i); }

  int64_t onnx_opset() const override { return onnx_opset_; }
  // The declared type, else the inferred one (values Emit creates with a type are declared).
  DType TypeOf(const ir::Value* v) const override;
  std::vector<ir::Value*> Emit(const std::string& op_type, const std::vector<ir::Value*>& inputs, size_t num_outputs,
                               std::vector<ir::Attribute> attributes = {}, const std::string& domain = "",
                               DType output_type = DType::kUndefined) override;
  ir::Value* Constant(ir::Tensor value) override;

  // The type to compute in for float input `x`: float64 for float64, float32 for the others (16-bit types computed as
  // the fused kernels compute them); an error naming x's type when it is not a float type or unknown.
  StatusOr<DType> ComputeTypeFor(const ir::Value* x) const;

  // The value that output i of the node is: set one for each output the node has.
  void SetY(size_t i, ir::Value* v);
  // Replaces the node by what was emitted. Each output keeps its value (name, uses, place among the graph's outputs):
  // the emitted node that computed it writes it in place of its own value, or, when the value SetY gave is not an
  // emitted node's or is read elsewhere too, an Identity copies it. Fails (the graph then holds unused nodes, and the
  // node) when an output has no value.
  Status Finish();

 private:
  ir::Graph& g_;
  ir::Node& node_;
  const int64_t onnx_opset_;
  std::function<DType(const ir::Value*)> type_of_;
  std::vector<ir::Value*> outputs_;
  std::unordered_set<const ir::Node*> added_;
  std::string base_;
};

// Emits the node's outputs through DecomposeContext and sets each with SetY. Errors name what the decomposition
// cannot handle (a missing attribute, an unknown type) and are reported with the node.
using Decomposition = Status (*)(DecomposeContext& ctx);

}  // namespace onnxamp::ops
