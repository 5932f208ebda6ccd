// Reverse-mode automatic differentiation over the IR: appends to a graph the backward pass of a scalar loss with
// respect to chosen values, node by node through the gradient builders of runtime/ops/gradient.h. The result is an
// ordinary graph (inspectable, convertible, runnable by any session) whose extra outputs are the gradients.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/ir/model.h"

namespace onnxamp::trainer {

struct GradientRequest {
  // The value to differentiate: a float tensor of one element (a scalar loss).
  std::string loss;
  // The values whose gradients are wanted (graph inputs or initializers of floating type).
  std::vector<std::string> wrt;
  // A graph input (a scalar of the loss's type) that the loss's gradient is seeded with: the loss scale of mixed
  // precision training. Empty: the gradient of the loss is 1.
  std::string seed;
  // Instead of a loss (leave `loss` empty): pairs (a floating value of the graph, a graph input holding the gradient
  // that reaches it). The backward pass is then the vector-Jacobian product of those values with those gradients: how
  // the autodiff builds the gradient branches of an If (trainer/autodiff/if_gradient.h).
  std::vector<std::pair<std::string, std::string>> output_gradients;
};

struct GradientResult {
  // Per wrt value, in request order: the graph output holding its gradient ("<name>_grad", or a unique variant of
  // it), or "" when the loss does not depend on that value.
  std::vector<std::string> gradients;
  // The nodes the backward pass added.
  int nodes_added = 0;
};

// Appends the backward pass of request.loss to `model` (top-level graph), adding the gradients as graph outputs, and
// imports com.onnxamp version 1 when an internal gradient op was emitted. Gradients stop at integer and bool values
// (indices, shapes, labels) and at inputs a builder declares non-differentiable. Fails, leaving the model as it was,
// when the loss or a wrt value does not exist or is not floating, when a node between them has no gradient builder
// (naming the node and its op and opset) or its builder refuses it.
StatusOr<GradientResult> BuildGradients(ir::Model& model, const GradientRequest& request);

}  // namespace onnxamp::trainer
