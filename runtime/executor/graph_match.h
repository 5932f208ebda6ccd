// What the graph rewrites (the session's inference optimizer, the CUDA rewrites) ask of a graph while matching a
// pattern: which node an op is, which values the model fixes, who reads a value, what a value's shape is known to be.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "runtime/common/dtype.h"
#include "runtime/ir/graph.h"
#include "runtime/ir/model.h"

namespace onnxamp::exec {

// `n` is an op of the default domain with exactly one output, which exists.
bool IsSingleOutputOp(const ir::Node* n, const char* op);

bool IsFloatType(DType t);

// A binary op of opsets before 7 that broadcasts its second input from `axis` (`broadcast = 1` with an `axis`
// attribute): B's dims align with A's from that axis, which numpy's trailing alignment, which every fusion assumes,
// need not give.
bool BroadcastsFromAxis(const ir::Node* n);

// The data of a value the model fixes: an initializer that no graph input overrides (and that holds data), or a
// Constant node's `value`.
const ir::Tensor* ConstantOf(const ir::Value* v);

// The one value of a float constant of rank 0 or 1 (so that it broadcasts without changing any shape), and its
// element type.
std::optional<double> ScalarOf(const ir::Value* v, DType* dtype);

// Whether constant `v` is the scalar `want` up to the rounding of its element type (one unit in the last place;
// double constants may carry float precision).
bool IsConstantNear(const ir::Value* v, double want);

// The only node reading `v` (through exactly one input), or null when v is read by several or none, or is a graph
// output (its value must then stay visible).
ir::Node* SoleConsumer(const ir::Value* v);

// For a two-input node reading `v`: its other input (null when it does not read v exactly once).
ir::Value* OtherInput(const ir::Node* n, const ir::Value* v);

// The value an outer-scope reference of a subgraph stands for, found by name in the enclosing graphs; `v` itself when
// it is not such a reference (or the name is defined nowhere further out).
const ir::Value* DefiningValue(const ir::Value* v);
inline ir::Value* DefiningValue(ir::Value* v) {
  return const_cast<ir::Value*>(DefiningValue(static_cast<const ir::Value*>(v)));
}

// The Cast (default domain, one input) that makes `v`, or null.
ir::Node* CastProducer(const ir::Value* v);

// The element type a value declares, or its initializer's, or else the `to` of the Cast that makes it, or the type
// of the input of the Flatten, Reshape, Transpose, Identity, Squeeze or Unsqueeze that makes it.
DType TypeOf(const ir::Value* v);

// Static dims of a value: its initializer's, else its type's when every dim is known, else those of a Cast's input
// when a Cast makes it (a Cast keeps the shape).
std::optional<std::vector<int64_t>> StaticDims(const ir::Value* v);

// The rank of a value when known (the same sources as StaticDims).
std::optional<size_t> RankOf(const ir::Value* v);

// Removes a value nothing reads any more (no node, no subgraph by name), and is not a graph input or output: a
// Constant node's output (and the node), or an initializer.
void RemoveIfUnused(ir::Graph& g, ir::Value* v);

// A GELU spelled out in ops, as models exported for opsets before Gelu-20 write it: `x` read by the pattern's nodes
// alone and not a graph output, every intermediate value read only inside the pattern, constants matching up to
// their element type's rounding (IsConstantNear).
struct GeluPattern {
  ir::Value* in = nullptr;            // x
  std::vector<ir::Node*> nodes;       // the pattern's nodes, the one reading x first
  std::vector<ir::Value*> constants;  // the constants they read
  ir::Value* out = nullptr;           // the GELU of x
  bool tanh = false;                  // the tanh approximation (Gelu's approximate = "tanh")
};
// The erf form, 0.5 * x * (1 + erf(x / sqrt 2)) with the scaling also as x * sqrt(1/2), in any of the three ways its
// two products associate (nodes: Div or Mul, Erf, Add, the two Muls).
std::optional<GeluPattern> MatchErfGelu(ir::Value* x);
// The tanh form, 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))): x^3 as Pow(x, 3) or x * x * x (either
// association), each product's operands in either order, and the outer product 0.5 * x * (1 + tanh) in any of its
// three associations: PyTorch's export of gelu(approximate="tanh") before opset 20 and the "gelu_new" of GPT-2-style
// models write it so.
std::optional<GeluPattern> MatchTanhGelu(ir::Value* x);
// Either form.
std::optional<GeluPattern> MatchGelu(ir::Value* x);

}  // namespace onnxamp::exec
