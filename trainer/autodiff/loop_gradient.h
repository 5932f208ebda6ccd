// The gradients of Scan and Loop: the body's vector-Jacobian product run over the iterations in reverse.
//
// The backward pass needs every iteration's state inputs. A trace node (a copy of the forward node whose body also
// returns its state inputs as scan outputs) recomputes the forward loop in the backward pass and stacks them; a
// backward node then runs the iterations last to first. Its body recomputes the forward body from that iteration's
// states and inputs, differentiated by the autodiff itself (BuildGradients with output gradients), and carries the
// gradients of the states and of the enclosing values the body reads (summed over the iterations) from one iteration
// to the one before it. A Scan's scan inputs get their gradients as the backward Scan's scan outputs. Random ops in the
// body draw in the trace and in the backward body what they drew in the forward iteration: both loops take the
// forward node's seed, and the backward loop numbers its iterations in reverse (attribute `seed_reverse`).
//
// An enclosing value a Loop body gathers slices of per iteration (a scripted loop's e[:, t]) gets its
// gradient slices and their indices as the backward Loop's scan outputs and one GatherGrad after it, instead of an
// accumulator of the value's size added to in every iteration (time quadratic in the iterations).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/ir/model.h"
#include "trainer/autodiff/subgraph_util.h"

namespace onnxamp::trainer {

// How the gradient adds nodes to the graph of the forward node (the autodiff's backward section).
struct LoopEmitter {
  // Appends op_type(inputs) of `domain` with one output per entry of `output_types`.
  std::function<std::vector<ir::Value*>(const std::string& op_type, const std::vector<ir::Value*>& inputs,
                                        const std::vector<DType>& output_types, std::vector<ir::Attribute> attributes,
                                        const std::string& domain)>
      emit;
  // Zeros of x's shape, of element type t.
  std::function<ir::Value*(ir::Value* x, DType t)> zeros_like;
  // The rank of a value of the node's graph, -1 when unknown.
  std::function<int64_t(const ir::Value* v)> rank_of;
};

struct LoopGradients {
  std::vector<ir::Value*> inputs;  // per input of the node: its gradient, or null
  std::vector<ir::Value*> reads;   // per entry of `reads`: its gradient, or null (the body does not reach the loss)
  bool uses_internal = false;      // com.onnxamp ops in a body
};

// Scan (opsets 9-25) node `node` of `model`'s graph (or of a subgraph of it). `needs`: per input of the node, whether
// its gradient is wanted; `reads`: the enclosing values the body reads whose gradients are wanted; `dys`: per output,
// the gradient reaching it (null: none). `prefix` names the new subgraphs' values.
StatusOr<LoopGradients> ScanGradient(const ir::Model& model, const ir::Node& node, const std::vector<bool>& needs,
                                     const std::vector<ir::Value*>& reads, const std::vector<ir::Value*>& dys,
                                     const subgraph::TypeOf& type_of, const std::string& prefix,
                                     const LoopEmitter& emitter);

// Loop node `node`, as ScanGradient: gradients of the initial values of the loop-carried variables and of the reads.
// The trip count and the condition take none.
StatusOr<LoopGradients> LoopGradient(const ir::Model& model, const ir::Node& node, const std::vector<bool>& needs,
                                     const std::vector<ir::Value*>& reads, const std::vector<ir::Value*>& dys,
                                     const subgraph::TypeOf& type_of, const std::string& prefix,
                                     const LoopEmitter& emitter);

}  // namespace onnxamp::trainer
