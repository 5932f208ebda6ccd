// Inference graph optimizations a Session applies to its own copy of the model when it is created: folding a
// BatchNormalization in inference mode into the Conv before it, and fusing Conv [+ Add] [+ Relu] into one FusedConv
// node (internal domain) whose kernel runs the sum and the ReLU as post-ops of the convolution.
//
// Every pass shares the signature Status Run(ir::Graph&, bool* changed), leaves the graph valid (ir::Verify), keeps
// the graph's inputs and outputs (names, order, types) as they are, and changes results only by float rounding. A
// pass fires only where it is exact in that sense: constant (initializer, not overridable by an input) weights and
// BatchNormalization parameters, intermediate values read by exactly one node and not graph outputs.
#pragma once

#include "runtime/common/status.h"
#include "runtime/ir/graph.h"
#include "runtime/ir/model.h"

namespace onnxamp::exec {

// The domain of the runtime's internal ops (imported at version 1 by a model that the optimizer changed).
inline constexpr char kInternalDomain[] = "com.onnxamp";
// FusedConv: inputs X, W, B (optional), Z (optional); Conv's attributes plus `activation` ("Relu" or empty).
// Y = activation(Conv(X, W, B) + Z), Z broadcast as Add broadcasts.
inline constexpr char kFusedConvOp[] = "FusedConv";

// Conv (W and B constant) followed by BatchNormalization in inference mode with constant scale, B, mean and var,
// the Conv's output read only by it: the normalisation is folded into new Conv weights and bias (computed in
// double, stored in the weights' type) and the BatchNormalization removed.
Status FoldConvBatchNorm(ir::Graph& graph, bool* changed);

// Conv whose output is read only by an Add (Z = the Add's other input) and/or then only by a Relu: replaced by one
// FusedConv node that writes the last of them.
Status FuseConvActivation(ir::Graph& graph, bool* changed);

// Runs the passes above on `model` (top-level graph only), importing kInternalDomain when a fused node was made.
// Does nothing when optimization is disabled (SetGraphOptimization) or the model does not verify (Session::Create
// reports that itself).
Status OptimizeForInference(ir::Model& model);

// Whether sessions created from now on optimize their graph. Default true; the environment variable
// ONNXAMP_GRAPH_OPT=0, read once, turns it off (to compare a model against its unoptimized graph). Tests set it.
bool GraphOptimizationEnabled();
void SetGraphOptimization(bool enabled);

}  // namespace onnxamp::exec
