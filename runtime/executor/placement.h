// Placement decisions for device sessions, as pure functions of the graph and the kernels found for each node:
// which nodes are deterministic (may be folded to constants at Create), and which nodes that have a device kernel
// should still run on the host because they only compute shapes for other host-side consumers.
#pragma once

#include <functional>
#include <vector>

#include "runtime/ir/graph.h"
#include "runtime/ir/tensor.h"

namespace onnxamp::exec {

// False for ops whose result changes from run to run (Random*, Multinomial, Bernoulli) and for Dropout, whose
// training mode may be switched on by an input: the OpInfo's `deterministic` (runtime/ops/op_info.h). True for ops
// without an OpInfo.
bool IsDeterministic(const ir::Node& node);

// What the session decided for one node before the shape-subgraph pass.
struct NodePlacement {
  const ir::Node* node = nullptr;
  bool on_device = false;                         // a device kernel was chosen
  bool has_cpu_kernel = false;                    // a CPU kernel exists for the node (it may move to the host)
  const std::vector<int>* host_inputs = nullptr;  // device kernels: inputs they read on the host
  bool outputs_on_host = false;                   // device kernels whose outputs are host tensors (Shape, Size)
};

// The nodes (by index into `nodes`, in the graph's topological order) that have a device kernel but should run on
// the host, as ONNX Runtime keeps shape computations on the CPU: every input is host-resident (a value for which
// `host_constant` is true, or an output of a host node: a CPU node, a device node with outputs_on_host, or another
// node of the set), every output is an integer or bool tensor (declared, or inferred from the op and its inputs when
// the model declares no type), a CPU kernel exists, and every reader of every output is a host node, the host input of
// a device node, or the graph output. The largest such set is returned. `host_constant` says whether a value is a
// constant that lives on the host (integer graph constants).
std::vector<bool> FindHostShapeNodes(const std::vector<NodePlacement>& nodes,
                                     const std::function<bool(const ir::Value*)>& host_constant);

}  // namespace onnxamp::exec
