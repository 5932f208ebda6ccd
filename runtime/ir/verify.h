// Structural checks on the IR that do not depend on ONNX's checker (so they work for every opset).
#pragma once

#include <string>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/ir/model.h"

namespace onnxamp::ir {

struct Finding {
  enum class Severity { kError, kWarning };
  std::string where;    // "graph 'main' node Add 'add1'", "graph 'main' initializer 'w'", ...
  std::string message;  // what is wrong
  Severity severity = Severity::kError;
  bool is_error() const { return severity == Severity::kError; }
  std::string ToString() const {
    std::string s = is_error() ? "" : "warning: ";
    return s + (where.empty() ? message : where + ": " + message);
  }
};

// Every problem found in `graph` and its subgraphs:
//  - each node input resolves to a value defined exactly once: a graph input, an initializer, a node output,
//    or (for subgraphs) a value of an enclosing graph; each graph output is defined;
//  - no value is produced twice or both produced and fed as a graph input;
//  - no cycles (including dependencies through subgraph outer-scope references);
//  - use lists and producers agree with node inputs/outputs (IR invariants);
//  - initializers agree with declared types: element type, and dims where the declared shape is known;
//  - node op_type non-empty.
// Warnings (which do not make Verify fail): a node whose domain has no opset import, a value_info entry
// whose type contradicts the initializer it describes only in shape.
std::vector<Finding> VerifyAll(const Graph& graph);
std::vector<Finding> VerifyAll(const Model& model);  // plus opset imports and function bodies

// OK, or the first error finding as an InvalidArgument status (warnings are ignored).
Status Verify(const Graph& graph);
Status Verify(const Model& model);

}  // namespace onnxamp::ir
