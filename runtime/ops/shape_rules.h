// Op tables for shape reasoning over graphs: which ops of the default domain broadcast their inputs numpy-style, and
// which keep their first input's shape or rank. The trainer's shape inference (trainer/autodiff/shapes.h) and the
// runtime's sequence lowering (runtime/executor/lower_sequences.h) share them.
#pragma once

#include <string>

namespace onnxamp::ops {

// Ops whose inputs broadcast numpy-style (multidirectional, or PRelu's slope onto X): Add, Sub, Mul, Div, Pow, Mod,
// Where, Max, Min, Sum, Mean, PRelu, the comparisons and the logic and bitwise ops.
bool IsNumpyBroadcastOp(const std::string& op);

// Ops whose output 0 has the shape of their first input (unary math, activations, Cast, Softmax, normalisations,
// Dropout, Identity, Clip, the scatters, ...). Every output for most; not BatchNormalization's running statistics.
bool KeepsShape(const std::string& op);

// Ops whose outputs have the rank of their first input: those of KeepsShape, and ops whose dims change but not their
// rank (convolutions, pooling, Concat, Slice, Pad, Split, Tile, Transpose, Resize, ...).
bool KeepsRank(const std::string& op);

}  // namespace onnxamp::ops
