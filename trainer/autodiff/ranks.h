// Ranks of a graph's values: declared where the model declares a shape (or holds an initializer), else inferred from
// each node's inputs and attributes by per-op rules. Gradient builders that must know whether an operand is 1-D,
// 2-D or batched (MatMul's) ask for it: intermediate values of exported models often declare no shape.
#pragma once

#include <cstdint>
#include <unordered_map>

#include "runtime/ir/graph.h"

namespace onnxamp::trainer {

using Ranks = std::unordered_map<const ir::Value*, int64_t>;

// The rank of each value of `graph` (top level) that is declared or can be inferred; values left out are unknown.
// Rules, in topological order: ops that keep their input's shape (unary math, activations, Cast, Softmax,
// normalisations, Dropout, Transpose, Slice, Pad, Tile, Concat, Split, Resize, Conv and pooling ...) its rank;
// broadcasting ops (Add, Mul, Where, Max, comparisons ...) the largest input rank; MatMul numpy's rule; Gemm and
// Flatten 2; Shape 1, Size 0; Reshape, Expand and ConstantOfShape from a constant shape's length; Unsqueeze and
// Squeeze from constant axes; Gather rank(data) - 1 + rank(indices); reductions by keepdims and their axes;
// Constant its value's rank. Ops of other domains, and anything depending on an unknown rank, stay unknown.
Ranks InferRanks(const ir::Graph& graph);

}  // namespace onnxamp::trainer
