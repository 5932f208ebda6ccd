// Element types of every value of a graph: declared where the model declares them, else inferred from each node's
// inputs and attributes by a small table of rules (enough to tell floating values, which carry gradients, from
// integer and bool values, which stop them).
#pragma once

#include <unordered_map>

#include "runtime/common/dtype.h"
#include "runtime/ir/graph.h"

namespace onnxamp::trainer {

using ElementTypes = std::unordered_map<const ir::Value*, DType>;

// The element type of each value of `graph` (top level) that is declared or can be inferred; values left out are
// unknown. Rules: Cast 'to'; CastLike, Where and the like follow the typed input; Shape, Size, ArgMax/ArgMin,
// NonZero and the Indices outputs (TopK, MaxPool) are int64; comparisons and logic ops bool; Constant and
// ConstantOfShape their value; Dropout's mask bool; everything else its first typed input.
ElementTypes InferElementTypes(const ir::Graph& graph);

// True for the floating types gradients flow through.
bool IsDifferentiableType(DType t);

}  // namespace onnxamp::trainer
