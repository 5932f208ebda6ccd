// Loop-invariant code motion for the bodies of Loop and Scan. A body node whose inputs all come from enclosing graphs
// computes the same tensor in every iteration; it is moved in front of the loop, into the enclosing graph, so that it
// runs once per run of the loop instead of once per iteration, and the body reads its output from outer scope. Nodes
// reading only such outputs follow it. The case that matters: a model converted to FP16/BF16 casts the weights and
// the enclosing graph's activations it reads inside the body (the converter puts a Cast next to the node that
// reads a value), so a loop of T iterations cast the whole embedding output T times; a training graph's backward Loop
// transposes and casts the weights in every iteration too.
//
// Only ops that are pure and cannot fail on the values a valid model gives them move: Cast, CastLike, Transpose,
// Einsum and unary math. A loop of no iteration then still runs them once (it ran none before); a failure that only a
// loop of no iteration would have avoided is not possible for these ops. Nodes with subgraphs, of other domains, or
// whose output is a body output stay. Nested loops are handled inside out, so a node of an inner body that reads only
// values from outside the outer loop moves out of both. A moved value keeps its name unless an enclosing graph
// already has one of that name (two sibling loops hoisting the same Cast), in which case it gets a new one; a value
// that subgraphs of the body read by name keeps its name or stays.
#pragma once

#include "runtime/common/status.h"
#include "runtime/ir/model.h"

namespace onnxamp::exec {

// Hoists the invariant nodes of every Loop and Scan body in `graph` (and in its subgraphs, inner loops first) into the
// graph that encloses the loop. `*changed` tells whether a node moved.
Status HoistLoopInvariants(ir::Graph& graph, bool* changed);

}  // namespace onnxamp::exec
