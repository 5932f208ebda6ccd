// The ONNX Gradient operator (domain ai.onnx.preview.training, version 1), by expansion: each Gradient node of a
// model's main graph is replaced by the nodes that compute its outputs, the backward pass BuildGradients writes for
// the part of the graph between the node's xs/zs and its y. The result is an ordinary graph that any session runs.
#pragma once

#include "runtime/common/status.h"
#include "runtime/ir/model.h"

namespace onnxamp::trainer {

inline constexpr char kGradientOpDomain[] = "ai.onnx.preview.training";

// Replaces every Gradient node of `model`'s main graph, in topological order and each after the Gradient nodes whose
// outputs its y depends on (so that a Gradient of a Gradient's output, a higher derivative, differentiates the
// expanded backward pass of the first), and returns how many it replaced. Semantics, per the operator's definition:
// - y is differentiated as a function of the values named in xs and zs alone: the graph between them and y is cut at
//   those names (a value computed from an xs value through another path is held fixed), so xs may name intermediate
//   values as well as inputs and initializers. Values y depends on that are named in neither (other inputs and
//   initializers) are constants of the differentiated function.
// - Output i is dy/dxs[i] at the values the node's inputs give to xs followed by zs. When those inputs are the values
//   xs and zs name, the backward pass reads the forward values the graph computes already; otherwise the forward
//   part is computed again from the node's inputs (random ops in it draw what the graph's own twins draw).
// - A y of more than one element is differentiated as the sum of its elements (its gradient seeded with ones), as
//   TensorFlow's tf.gradients does; the definition leaves this open. An xs value y does not depend on gets zeros.
// - An empty output name skips that gradient.
// Fails, leaving the model as it was, with one line naming the Gradient node: missing or malformed attributes, an
// input count other than |xs| + |zs|, a name that is not a value of the graph or is named twice, a y that depends on
// the node's own outputs (or two Gradient nodes whose ys read each other's outputs), a Gradient node inside a subgraph
// or a model-local function, or a node between xs and y without a gradient builder (which the message names).
StatusOr<int> ExpandGradientOps(ir::Model& model);

// True when `model`'s main graph, a subgraph or a model-local function holds a Gradient node.
bool HasGradientOps(const ir::Model& model);

}  // namespace onnxamp::trainer
