// Partial shapes of a graph's values: the rank and whichever dims are known, declared where the model declares a
// shape (or holds an initializer), else inferred from each node's inputs and attributes by per-op rules. Gradient
// builders ask for them where the graph of an exported model declares none for its intermediate values: MatMul's
// whether an operand is 1-D, 2-D or batched; a broadcasting op's whether an input already has the output's shape
// (then its gradient needs no SumToShape).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/ir/graph.h"
#include "runtime/ops/shape_rules.h"

namespace onnxamp::trainer {

// Dims of a value, -1 where unknown (a symbolic or unknowable dim); the vector's size is the rank.
using PartialShape = std::vector<int64_t>;
using Shapes = std::unordered_map<const ir::Value*, PartialShape>;

// The partial shape of each value of `graph` (top level) whose rank is declared or can be inferred; values left out
// have an unknown rank. Rules, in topological order:
//  - dims too: elementwise and other shape-keeping ops (unary math, activations, Cast, Softmax, normalisations,
//    Dropout, Identity, Clip) copy their input's; broadcasting ops (Add, Mul, Where, Max, comparisons ...) broadcast
//    their inputs' (a dim is known where every input's is known, or where one input's known dim is not 1); MatMul
//    numpy's batch broadcast and [M from A, N from B]; Gemm [M, N]; Transpose permutes; Reshape takes a constant
//    shape's positive entries and 0s (the input's dim); Flatten the products when known; Constant its value's dims.
//  - the rank only: other ops that keep their input's rank (Conv, pooling, Slice, Pad, Concat, Split, Resize ...);
//    Shape 1, Size 0; Expand and ConstantOfShape from a constant shape's length; Unsqueeze and Squeeze from constant
//    axes; Gather rank(data) - 1 + rank(indices); reductions by keepdims and their axes.
// com.onnxamp Gelu (training graphs' fused GELU) keeps its input's dims too. Ops of other domains, and anything
// depending on an unknown rank, stay unknown.
// With `spatial_dims` (the recompute pass's size estimates; the gradient builders do without) these know dims too:
// Conv (weight dims from the initializer or declared type, or kernel_shape), MaxPool and AveragePool (both outputs),
// GlobalAveragePool/GlobalMaxPool ([N, C, 1, ...]) from their attributes (pads, strides, dilations, auto_pad,
// ceil_mode), and com.onnxamp BatchNormTraining (Y as X; the statistics [C]).
// `input_dims` (by name) replace the declared shapes of those graph inputs (the recompute estimates: the data's dims).
Shapes InferShapes(const ir::Graph& graph, bool spatial_dims = false,
                   const std::unordered_map<std::string, PartialShape>* input_dims = nullptr);

// Ops whose inputs broadcast numpy-style (runtime/ops/shape_rules.h).
using ops::IsNumpyBroadcastOp;

// Whether input `x` of broadcasting node `n` (Add, Sub, Mul, Div, Pow, Where, Max, ... of the default domain) is
// known to have the node's output shape, i.e. no other input broadcasts it: every other input's rank is known and no
// larger, and each of its dims is 1, or equal to x's known dim there. (A Linear's Add of a bias [N] to x [..., N]
// keeps x's shape when x's last dim is known to be N, as MatMul by a [K, N] weight tells.)
bool BroadcastKeepsShape(const ir::Node& n, const ir::Value* x, const Shapes& shapes);

}  // namespace onnxamp::trainer
