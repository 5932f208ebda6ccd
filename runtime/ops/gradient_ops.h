// The com.onnxamp ops that gradient builders emit where composing ONNX ops would be slow or wrong, with their
// contracts. Each has a CPU reference kernel in the folder of its forward op (registered at version 1 of
// exec::kInternalDomain) and a finite-difference-checked builder that emits it. Shapes are the forward's.
#pragma once

namespace onnxamp::ops {

// SumToShape(G, shape: int64[r]) -> Y of shape `shape`: G summed over the dims along which a tensor of `shape` was
// broadcast to G's shape (numpy rules, right-aligned: leading extra dims and dims of size 1). Any float type;
// accumulates in float (double for float64) in a fixed order. (runtime/ops/reduce/sum_to_shape_cpu.cc)
inline constexpr char kSumToShapeOp[] = "SumToShape";

// ReluGrad(dY, Y) -> dX = dY where Y > 0, else 0. (runtime/ops/elementwise/)
inline constexpr char kReluGradOp[] = "ReluGrad";

// SoftmaxGrad(dY, Y) -> dX = Y * (dY - sum(dY * Y)) and LogSoftmaxGrad(dY, Y) -> dX = dY - exp(Y) * sum(dY), sums
// over the softmax's reduced dims. Attributes: axis (as the forward's), legacy (1 for opsets before 13: the reduced
// dims are `axis` and every dim after it, the input coerced to 2-D). (runtime/ops/softmax/)
inline constexpr char kSoftmaxGradOp[] = "SoftmaxGrad";
inline constexpr char kLogSoftmaxGradOp[] = "LogSoftmaxGrad";

// GatherGrad(dY, indices, data_shape: int64) -> dData of shape data_shape, zero but for the rows `indices` selected,
// which receive the matching slices of dY summed (repeated indices accumulate in index order: deterministic).
// Attribute axis (as Gather's); negative indices count from the end. (runtime/ops/gather/)
inline constexpr char kGatherGradOp[] = "GatherGrad";

// MaxPoolGrad(dY, Indices, X_shape: int64) -> dX: each dY element added at the flat position its Indices element
// names (MaxPool's Indices output with storage_order 0), in order. (runtime/ops/pool/)
inline constexpr char kMaxPoolGradOp[] = "MaxPoolGrad";
// AveragePoolGrad(dY, X_shape: int64) -> dX with AveragePool's attributes (kernel_shape, strides, pads, auto_pad,
// ceil_mode, count_include_pad, dilations): each output's gradient spread evenly over the window it averaged.
// (runtime/ops/pool/)
inline constexpr char kAveragePoolGradOp[] = "AveragePoolGrad";

// ConvGrad(dY, X, W) -> dX (X's shape), dW, dB (optional outputs: the builder requests only those needed), with
// Conv's attributes (auto_pad, dilations, group, kernel_shape, pads, strides). Taking X itself (not its shape)
// removes the output-size ambiguity of stride > 1. (runtime/ops/conv/)
inline constexpr char kConvGradOp[] = "ConvGrad";

// BatchNormTraining(X, scale, B, running_mean, running_var) -> Y, new_running_mean, new_running_var, saved_mean,
// saved_inv_std. Attributes epsilon, momentum (ONNX's: new = momentum * running + (1 - momentum) * batch; PyTorch's
// momentum 0.1 is ONNX's 0.9). Y uses the batch's mean and biased variance; the running variance is updated with the
// unbiased variance (n / (n - 1)), as PyTorch does. saved_* are per channel, float32 for every X type.
// BatchNormalizationGrad(dY, X, scale, saved_mean, saved_inv_std) -> dX, dScale, dB (optional outputs).
// (runtime/ops/batch_norm/)
inline constexpr char kBatchNormTrainingOp[] = "BatchNormTraining";
inline constexpr char kBatchNormalizationGradOp[] = "BatchNormalizationGrad";

// LayerNormalizationGrad(dY, X, scale, mean, inv_std) -> dX, dScale, dB (optional outputs), with the forward's axis;
// mean and inv_std are LayerNormalization's optional outputs 1 and 2. dScale and dB both have scale's shape (the
// builder sums dY to B's shape itself when B's differs). (runtime/ops/layer_norm/)
inline constexpr char kLayerNormalizationGradOp[] = "LayerNormalizationGrad";

// SoftmaxCrossEntropyLossGrad(dLoss, log_prob, labels[, weights]) -> dScores (log_prob's shape, type of log_prob),
// with the forward's reduction and ignore_index: softmax(scores) - onehot(labels), scaled by dLoss, by the weights
// and by 1 / (sum of weights of the non-ignored elements) for reduction "mean"; ignored positions get 0.
// NegativeLogLikelihoodLossGrad(dLoss, input, target[, weights]) -> dInput likewise. (runtime/ops/loss/)
inline constexpr char kSoftmaxCrossEntropyLossGradOp[] = "SoftmaxCrossEntropyLossGrad";
inline constexpr char kNegativeLogLikelihoodLossGradOp[] = "NegativeLogLikelihoodLossGrad";

// DropoutGrad(dY, ratio, training_mode) -> dX = dY * mask / (1 - ratio), the mask recomputed from the forward node's
// seed instead of stored: attribute seed_from (the forward node's first output name, which the session turns into the
// same per-node seed) or the forward's seed attribute. ratio and training_mode are optional and read as Dropout-12
// reads them (training_mode false, the default, or ratio 0: dX = dY). (runtime/ops/dropout/)
inline constexpr char kDropoutGradOp[] = "DropoutGrad";

}  // namespace onnxamp::ops
