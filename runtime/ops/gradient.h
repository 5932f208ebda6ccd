// Gradient builders: for each differentiable op, a function that emits the backward computation of one forward node
// as ordinary IR nodes (ONNX ops, plus com.onnxamp *Grad ops where composing ONNX ops would be slow or wrong). The
// trainer's autodiff (trainer/autodiff/) walks a graph backwards and calls the builder of each node; builders live in
// the op folders (`runtime/ops/<op>/<op>_grad.cc`), each in its op's OpInfo (runtime/ops/op_info.h). The *Grad ops
// and their contracts are in runtime/ops/gradient_ops.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/common/dtype.h"
#include "runtime/common/status.h"
#include "runtime/ir/attribute.h"
#include "runtime/ir/graph.h"
#include "runtime/ir/tensor.h"

namespace onnxamp::ops {

// What gradient builders and decompositions (runtime/ops/decompose.h) share: appending nodes and constants to a graph
// at the model's ONNX opset, and the helpers for the ops whose signature changed across opsets.
class NodeEmitter {
 public:
  virtual ~NodeEmitter() = default;

  // The model's ONNX (default domain) opset: ONNX ops emitted must have that version's signature (the helpers below
  // take care of the ops whose inputs changed).
  virtual int64_t onnx_opset() const = 0;
  // The element type of `v` (declared, or inferred); kUndefined when unknown.
  virtual DType TypeOf(const ir::Value* v) const = 0;
  // Appends a node and returns its `num_outputs` outputs (fresh values typed `output_type` when given; else untyped,
  // which is fine for values only the emitted nodes read).
  virtual std::vector<ir::Value*> Emit(const std::string& op_type, const std::vector<ir::Value*>& inputs,
                                       size_t num_outputs, std::vector<ir::Attribute> attributes = {},
                                       const std::string& domain = "", DType output_type = DType::kUndefined) = 0;
  // A constant (an initializer of the graph; not trainable).
  virtual ir::Value* Constant(ir::Tensor value) = 0;

  // The single output of a one-output node.
  ir::Value* Emit1(const std::string& op_type, const std::vector<ir::Value*>& inputs,
                   std::vector<ir::Attribute> attributes = {}, const std::string& domain = "",
                   DType output_type = DType::kUndefined) {
    return Emit(op_type, inputs, 1, std::move(attributes), domain, output_type)[0];
  }
  // A scalar constant of type `t` (float types, int64).
  ir::Value* Scalar(DType t, double value);
  // A 1-D int64 constant.
  ir::Value* Ints(const std::vector<int64_t>& values);
  // Unsqueeze(x, axes), ReduceSum(x, axes, keepdims) and ReduceMean(x, axes, keepdims) at the model's opset (axes as
  // an attribute before 13, as an input from 13; ReduceMean's from 18). Empty axes reduce every dim.
  ir::Value* EmitUnsqueeze(ir::Value* x, const std::vector<int64_t>& axes, DType output_type = DType::kUndefined);
  ir::Value* EmitReduceSum(ir::Value* x, const std::vector<int64_t>& axes, bool keepdims,
                           DType output_type = DType::kUndefined);
  ir::Value* EmitReduceMean(ir::Value* x, const std::vector<int64_t>& axes, bool keepdims,
                            DType output_type = DType::kUndefined);
  // x as type `to`: x itself when it has that type already, else a Cast.
  ir::Value* CastTo(ir::Value* x, DType to);

 private:
  ir::Value* EmitReduce(const std::string& op, int64_t axes_input_since, ir::Value* x, const std::vector<int64_t>& axes,
                        bool keepdims, DType output_type);
};

// What a gradient builder sees of one forward node, and what it may emit. Values it creates are fresh values of the
// training graph (names derived from the node's). All emitted nodes run after the forward pass, in emission order,
// except those emitted with EmitAfterForward.
class GradContext : public NodeEmitter {
 public:
  virtual const ir::Node& node() const = 0;
  // The opset of the node's domain in the model.
  virtual int64_t opset() const = 0;

  // Forward input i / output i (null when omitted or past the end).
  ir::Value* X(size_t i) const { return node().input(i); }
  ir::Value* Y(size_t i) const { return node().output(i); }
  // The gradient reaching forward output i; null when none does (a zero gradient: the builder may skip its terms).
  virtual ir::Value* dY(size_t i) const = 0;
  // Whether input i needs a gradient: a floating value on a path from a trainable value to the loss. A builder
  // must set the gradient of every input that needs one (the autodiff reports a builder that does not).
  virtual bool NeedsDX(size_t i) const = 0;
  // Sets the gradient of input i: a value with X(i)'s element type and shape.
  virtual Status SetDX(size_t i, ir::Value* grad) = 0;

  // The rank of forward value `v` (declared, or inferred by the autodiff); -1 when unknown.
  virtual int64_t RankOf(const ir::Value* v) const = 0;

  // Emit (NodeEmitter) appends to the backward pass.
  // Places a node right after the forward node instead (small stashes read by the backward pass, e.g. Shape(X), so
  // that X itself need not stay alive until backward).
  virtual std::vector<ir::Value*> EmitAfterForward(const std::string& op_type, const std::vector<ir::Value*>& inputs,
                                                   size_t num_outputs, std::vector<ir::Attribute> attributes = {},
                                                   const std::string& domain = "") = 0;
  // Forward output i, created (and the node's output connected) when the model omitted it: LayerNormalization's
  // Mean and InvStdDev, SoftmaxCrossEntropyLoss's log_prob, MaxPool's Indices, Dropout's mask.
  virtual ir::Value* ForwardOutput(size_t i) = 0;

  // ---- Helpers built on the above (and NodeEmitter's).

  // Shape(x), emitted after x's producer's forward node and shared by every builder that asks for it.
  virtual ir::Value* ShapeOf(ir::Value* x) = 0;
  // `grad` summed over the dims along which x was broadcast to it (numpy rules, right-aligned), so that the result
  // has x's shape: com.onnxamp SumToShape(grad, Shape(x)). Returns `grad` itself when x is known to need no reduction
  // (x's declared shape is the output's; or the node broadcasts numpy-style, grad has its output's shape, and no other
  // input broadcasts x, by the autodiff's partial shapes).
  virtual ir::Value* SumToShape(ir::Value* grad, ir::Value* x) = 0;
  // Zeros of type `t` in the run-time shape of `like`: Expand(0, Shape(like)) (ONNX opset 8+).
  ir::Value* Zeros(DType t, ir::Value* like);
  // A com.onnxamp grad op whose output i is the gradient of forward input i (ConvGrad's dX, dW, dB, ...): emitted
  // with outputs up to the last input in `wanted` (typed `output_type`), the gradients of the wanted inputs set,
  // and the outputs no input needs left unrequested. Nothing is emitted when no input is wanted.
  Status EmitInputGradients(const std::string& op_type, const std::vector<ir::Value*>& inputs,
                            const std::vector<bool>& wanted, std::vector<ir::Attribute> attributes,
                            DType output_type = DType::kUndefined);
};

// A tensor of `dims` (one element: [] or [1]) holding `value` as type `t` (a float type or int64): the constants of
// builders and of the autodiff's seeds.
ir::Tensor ScalarTensor(DType t, double value, std::vector<int64_t> dims = {});

// Emits the backward nodes of ctx.node() and sets the gradient of every input that NeedsDX. Errors name what the
// builder cannot differentiate (an attribute value, a mode) and are reported with the node.
using GradientBuilder = Status (*)(GradContext& ctx);

// The builder of ops whose output is piecewise constant in input 0 (Floor, Ceil, Round, Sign, Hardmax) or depends only
// on its shape (EyeLike): zeros of input 0's type and run-time shape (GradContext::Zeros: ONNX opset 8+).
Status ZeroGradient(GradContext& ctx);

// One builder of an op's OpInfo, for an opset range.
struct GradientDef {
  int64_t since = 1;  // opset range the builder handles, inclusive
  int64_t until = INT64_MAX;
  GradientBuilder build = nullptr;
};

class OpInfoRegistry;

// The builders of the OpInfos, found by (domain, op, opset) like kernels.
class GradientRegistry {
 public:
  explicit GradientRegistry(const OpInfoRegistry& ops) : ops_(&ops) {}
  // The builder for `op_type` in `domain` at `opset`; NotFound naming the op (and the opsets builders cover, when
  // some do) otherwise.
  StatusOr<const GradientDef*> Find(const std::string& op_type, const std::string& domain, int64_t opset) const;
  // Every op with a builder ("Add", "com.onnxamp:BatchNormTraining"...), sorted.
  std::vector<std::string> Ops() const;

  // The builders of OpInfoRegistry::Global().
  static const GradientRegistry& Global();

 private:
  const OpInfoRegistry* ops_;
};

}  // namespace onnxamp::ops
