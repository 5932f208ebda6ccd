// The com.onnxamp ops that gradient builders emit where composing ONNX ops would be slow or wrong, with their
// contracts. Each has a CPU reference kernel in the folder of its forward op (registered at version 1 of
// exec::kInternalDomain) and a finite-difference-checked builder that emits it. Shapes are the forward's.
#pragma once

namespace onnxamp::ops {

// SumToShape(G, shape: int64[r]) -> Y of shape `shape`: G summed over the dims along which a tensor of `shape` was
// broadcast to G's shape (numpy rules, right-aligned: leading extra dims and dims of size 1). Any float type; a fixed
// order of additions: the CPU kernel accumulates in double (runtime/ops/reduce/sum_to_shape_cpu.cc), the CUDA
// kernel in float (double for float64). Differentiable in G (an Expand back), for second derivatives.
inline constexpr char kSumToShapeOp[] = "SumToShape";

// ReluGrad(dY, Y) -> dX = dY where Y > 0, else 0. Differentiable (second derivatives): ReluGrad again in dY, zero in
// Y. (runtime/ops/elementwise/)
inline constexpr char kReluGradOp[] = "ReluGrad";

// EluGrad(dY, X) -> dX = dY where X > 0, else dY * alpha * exp(X) (attribute alpha, default 1; alpha at X = 0 as in
// PyTorch). GeluGrad(dY, X) -> dX = dY * Gelu'(X), attribute approximate ("none": Phi(X) + X phi(X); "tanh": the
// derivative of the tanh form). Both evaluate exp/erf exactly (float64 in double, others in float). Both differentiable
// (second derivatives: themselves again in dY, closed forms in X; runtime/ops/elementwise/elementwise_grad.cc).
// (runtime/ops/elementwise/activation_grad_cpu.cc)
inline constexpr char kEluGradOp[] = "EluGrad";
inline constexpr char kGeluGradOp[] = "GeluGrad";

// Gelu(X) -> Y: ONNX Gelu-20 (attribute approximate, "none" or "tanh") at any opset, computed in float for fp16/bf16
// and rounded once. Training graphs put it where a model spells the erf form out in five nodes (trainer::
// UseFusedGelu), so that the backward pass is one GeluGrad. Differentiable. (runtime/ops/elementwise/unary_cpu.cc)
inline constexpr char kGeluOp[] = "Gelu";

// ReduceProdGrad(dY, X) -> dX of X's shape: dX[i] = dY[group of i] * (product of the other elements of i's group),
// computed with prefix and suffix products (no division, so zeros in X are exact). dY has the reduction's keepdims
// shape (right-aligned against X; missing leading dims count as 1): the dims where dY has 1 and X does not are the
// reduced ones. Products accumulate in double. (runtime/ops/reduce/reduce_prod_grad_cpu.cc)
inline constexpr char kReduceProdGradOp[] = "ReduceProdGrad";

// SoftmaxGrad(dY, Y) -> dX = Y * (dY - sum(dY * Y)) and LogSoftmaxGrad(dY, Y) -> dX = dY - exp(Y) * sum(dY), sums
// over the softmax's reduced dims. Attributes: axis (as the forward's), legacy (1 for opsets before 13: the reduced
// dims are `axis` and every dim after it, the input coerced to 2-D). Both differentiable (second derivatives, composed
// of ONNX ops and SoftmaxGrad). (runtime/ops/softmax/)
inline constexpr char kSoftmaxGradOp[] = "SoftmaxGrad";
inline constexpr char kLogSoftmaxGradOp[] = "LogSoftmaxGrad";

// GatherGrad(dY, indices, data_shape: int64) -> dData of shape data_shape, zero but for the rows `indices` selected,
// which receive the matching slices of dY summed (repeated indices accumulate in index order: deterministic).
// Attribute axis (as Gather's); negative indices count from the end. Differentiable in dY (second derivatives: Gather
// again). (runtime/ops/gather/)
inline constexpr char kGatherGradOp[] = "GatherGrad";

// GatherElementsGrad(dY, indices, data_shape: int64) -> dData of shape data_shape: zeros, plus each dY element added
// at the position of data its index picked along `axis` (attribute, as GatherElements'); repeated positions sum in
// row-major order of dY (deterministic). Also TopK's backward (Values' gradient at Indices). Differentiable in dY
// (second derivatives: GatherElements again). (runtime/ops/gather/)
inline constexpr char kGatherElementsGradOp[] = "GatherElementsGrad";

// GatherNDGrad(dY, indices, data_shape: int64) -> dData of shape data_shape: zeros, plus each dY slice added at the
// slice of data its index tuple named, per batch item (attribute batch_dims, as GatherND's), in index order
// (repeated tuples sum deterministically). Differentiable in dY (second derivatives: GatherND again).
// (runtime/ops/scatter/gather_nd_cpu.cc)
inline constexpr char kGatherNDGradOp[] = "GatherNDGrad";

// DepthToSpaceGrad(dY) -> dX: the inverse rearrangement of DepthToSpace with the same attributes (blocksize; mode DCR,
// the default, or CRD): [N, C/b^2, H*b, W*b] back to [N, C, H, W]. Any element type. Differentiable (second
// derivatives: DepthToSpace again). (runtime/ops/depth_space/)
inline constexpr char kDepthToSpaceGradOp[] = "DepthToSpaceGrad";

// SliceGrad(dY, x_shape: int64, starts, ends[, axes[, steps]]) -> dX of shape x_shape: zeros with dY written where
// the Slice read, starts..steps resolved exactly as Slice-10's inputs (opsets 1-9: the attributes as constants).
// Differentiable in dY (second derivatives: Slice again, opset 10+). (runtime/ops/slice/)
inline constexpr char kSliceGradOp[] = "SliceGrad";

// PadGrad(dY, x_shape: int64, pads: int64[, axes: int64]) -> dX of shape x_shape, attribute mode (Pad-19's): each dY
// element added to the input element Pad copied it from (edge, reflect and wrap copy some several times; fill
// positions contribute nothing), in row-major order of dY. Differentiable in dY (second derivatives: the Pad again).
// (runtime/ops/pad/)
inline constexpr char kPadGradOp[] = "PadGrad";

// MaxPoolGrad(dY, Indices, X_shape: int64) -> dX: each dY element added at the flat position its Indices element
// names (MaxPool's Indices output with storage_order 0), in order. Differentiable in dY (second derivatives: a Gather
// at Indices). (runtime/ops/pool/)
inline constexpr char kMaxPoolGradOp[] = "MaxPoolGrad";
// MaxUnpoolGrad(dY, I, X_shape: int64[, output_shape]) -> dX of I's shape: dY at the position each index names in
// MaxUnpool's unpooled shape (through the zero padding output_shape adds), with MaxUnpool's attributes. X_shape is
// taken for the graph's shape bookkeeping; I has X's shape. Differentiable in dY without output_shape (second
// derivatives: MaxPoolGrad, which adds at repeated indices). (runtime/ops/pool/unpool_cpu.cc)
inline constexpr char kMaxUnpoolGradOp[] = "MaxUnpoolGrad";
// AveragePoolGrad(dY, X_shape: int64) -> dX with AveragePool's attributes (kernel_shape, strides, pads, auto_pad,
// ceil_mode, count_include_pad, dilations): each output's gradient spread evenly over the window it averaged.
// Differentiable in dY (second derivatives: AveragePool again). (runtime/ops/pool/)
inline constexpr char kAveragePoolGradOp[] = "AveragePoolGrad";

// ConvGrad(dY, X, W) -> dX (X's shape), dW, dB (optional outputs: the builder requests only those needed), with
// Conv's attributes (auto_pad, dilations, group, kernel_shape, pads, strides). Taking X itself (not its shape)
// removes the output-size ambiguity of stride > 1. Differentiable (second derivatives): Conv and ConvGrad again.
// (runtime/ops/conv/)
inline constexpr char kConvGradOp[] = "ConvGrad";
// ConvTransposeGrad(dY, X, W) -> dX (X's shape), dW, dB (optional outputs), with ConvTranspose's attributes
// (auto_pad, dilations, group, kernel_shape, output_padding, output_shape, pads, strides): dX is the Conv of dY with
// W of the same geometry, dW correlates X with dY, dB sums dY over all but the channel axis. Differentiable (second
// derivatives): ConvTranspose and ConvTransposeGrad again. (runtime/ops/conv/)
inline constexpr char kConvTransposeGradOp[] = "ConvTransposeGrad";

// BatchNormTraining(X, scale, B, running_mean, running_var) -> Y, new_running_mean, new_running_var, saved_mean,
// saved_inv_std. Attributes epsilon, momentum (ONNX's: new = momentum * running + (1 - momentum) * batch; PyTorch's
// momentum 0.1 is ONNX's 0.9). Y uses the batch's mean and biased variance; the running variance is updated with the
// unbiased variance (n / (n - 1)), as PyTorch does. saved_* are per channel, float32 for every X type.
// BatchNormalizationGrad(dY, X, scale, saved_mean, saved_inv_std) -> dX, dScale, dB (optional outputs). Attributes
// batch_statistics (1: the statistics are the batch's, BatchNormTraining's; 0, the default: running statistics, from
// an inference-mode BatchNormalization) and epsilon (the forward's), which only its decomposition reads (second
// derivatives: runtime/ops/decompose.h). (runtime/ops/batch_norm/)
inline constexpr char kBatchNormTrainingOp[] = "BatchNormTraining";
inline constexpr char kBatchNormalizationGradOp[] = "BatchNormalizationGrad";

// LayerNormalizationGrad(dY, X, scale, mean, inv_std) -> dX, dScale, dB (optional outputs), with the forward's axis
// and epsilon (which only its decomposition reads: second derivatives, runtime/ops/decompose.h); mean and inv_std are
// LayerNormalization's optional outputs 1 and 2. dScale and dB both have scale's shape (the builder sums dY to B's
// shape itself when B's differs). (runtime/ops/layer_norm/)
inline constexpr char kLayerNormalizationGradOp[] = "LayerNormalizationGrad";

// GroupNormalizationGrad(dY, X, scale) -> dX, dScale, dBias (optional outputs; dScale and dBias of scale's shape), for
// GroupNormalization and InstanceNormalization. Attributes num_groups (0: a group per channel, InstanceNormalization),
// epsilon, per_channel (1: scale and bias per channel [C]; 0: per group, GroupNormalization 18-20). The mean and
// variance are recomputed from X, and everything is computed in double. Differentiated through its decomposition
// (second derivatives: runtime/ops/decompose.h). (runtime/ops/group_norm/)
inline constexpr char kGroupNormalizationGradOp[] = "GroupNormalizationGrad";

// GridSampleGrad(dY, X, grid) -> dX, dGrid (optional outputs), with GridSample's attributes (mode, padding_mode,
// align_corners): dX receives dY times each tap's interpolation weight, dGrid the derivative of the interpolation
// through the padding and the unnormalisation (0 for nearest and where a coordinate was clamped); in double. 4-D X.
// (runtime/ops/grid_sample/)
inline constexpr char kGridSampleGradOp[] = "GridSampleGrad";

// RoiAlignGrad(dY, X_shape: int64, rois, batch_indices) -> dX of shape X_shape, with RoiAlign's attributes
// (coordinate_transformation_mode always written): each bilinear sample's four taps receive dY * weight / samples per
// bin, accumulated in double. Mode avg only. (runtime/ops/detection/)
inline constexpr char kRoiAlignGradOp[] = "RoiAlignGrad";

// MeanVarianceNormalizationGrad(dY, X) -> dX and LpNormalizationGrad(dY, X) -> dX, with the forward's attributes: the
// statistics recomputed from X, in double. Differentiated through their decompositions (second derivatives:
// runtime/ops/decompose.h). (runtime/ops/normalize/)
inline constexpr char kMeanVarianceNormalizationGradOp[] = "MeanVarianceNormalizationGrad";
inline constexpr char kLpNormalizationGradOp[] = "LpNormalizationGrad";

// DetGrad(dY, X) -> dX = dY * adj(X)^T (the cofactor matrix), in double. (runtime/ops/det/)
inline constexpr char kDetGradOp[] = "DetGrad";

// FakeQuantize(x, scale, zero_point?) -> y: QuantizeLinear followed by DequantizeLinear with the same scale and zero
// point, bit for bit, in x's type: y = (clamp(round_half_even(x / scale) + zp, qmin, qmax) - zp) * scale. Attributes
// axis (per-axis scale, as QuantizeLinear's), qmin and qmax (the quantized type's range). The training graphs' form of
// a QuantizeLinear -> DequantizeLinear pair (trainer/graph/fake_quantize.h), so that quantization-aware training
// reaches the float value behind it.
// FakeQuantizeGrad(dY, x, scale, zero_point?) -> dX, dScale (optional outputs): the straight-through estimator, dX =
// dY where round(x / scale) + zp lies in [qmin, qmax] and 0 outside (PyTorch's fake_quantize backward); dScale the
// learned-step-size gradient (PyTorch's _fake_quantize_learnable_*), summed per scale in double: dY * (q - zp - x /
// scale) inside, dY * (qmin - zp) or dY * (qmax - zp) outside. (runtime/ops/quantize/)
inline constexpr char kFakeQuantizeOp[] = "FakeQuantize";
inline constexpr char kFakeQuantizeGradOp[] = "FakeQuantizeGrad";

// DFTGrad(dY, X, dft_length?, axis?) -> dX with DFT's attributes and `opset` (the forward's: whether axis is an
// attribute or an input), and STFTGrad(dY, signal, frame_step, window?, frame_length?) -> dsignal, (none), dwindow with
// STFT's attributes: the adjoints of the transforms, in double. (runtime/ops/spectral/)
inline constexpr char kDftGradOp[] = "DFTGrad";
inline constexpr char kStftGradOp[] = "STFTGrad";

// LRNGrad(dY, X) -> dX with LRN's attributes (size, alpha, beta, bias): the window sums recomputed from X, everything
// in double. (runtime/ops/lrn/)
inline constexpr char kLrnGradOp[] = "LRNGrad";

// ResizeGrad(X_shape: int64, in1, in2, in3, dY) -> dX of shape X_shape: the adjoint of Resize or Upsample (attribute
// forward_op, "Resize" by default) at opset forward_opset, with the forward's other attributes; inputs 1-3 are the
// forward's inputs 1-3 as it has them (roi, scales, sizes; scales alone before Resize-11; none for Upsample-7). dY
// is scattered back through the forward's interpolation tables. Differentiable in dY (second derivatives: the
// forward op again). (runtime/ops/resize/)
inline constexpr char kResizeGradOp[] = "ResizeGrad";

// SoftmaxCrossEntropyLossGrad(dLoss, log_prob, labels[, weights]) -> dScores (log_prob's shape, type of log_prob),
// with the forward's reduction and ignore_index: softmax(scores) - onehot(labels), scaled by dLoss, by the weights
// and by 1 / (sum of weights of the non-ignored elements) for reduction "mean"; ignored positions get 0.
// NegativeLogLikelihoodLossGrad(dLoss, input, target[, weights]) -> dInput likewise. Both are differentiated through
// their decompositions (second derivatives: runtime/ops/decompose.h). (runtime/ops/loss/)
inline constexpr char kSoftmaxCrossEntropyLossGradOp[] = "SoftmaxCrossEntropyLossGrad";
inline constexpr char kNegativeLogLikelihoodLossGradOp[] = "NegativeLogLikelihoodLossGrad";
// SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss of the internal domain, version 1: the ONNX ops of opset 12+
// (the same inputs, outputs, attributes and kernels), for the loss the trainer attaches to a model of an older opset,
// which has no such op. (runtime/ops/loss/)

// DropoutGrad(dY, ratio, training_mode) -> dX = dY * mask / (1 - ratio), the mask recomputed from the forward node's
// seed instead of stored: attribute seed_from (the forward node's first output name, which the session turns into the
// same per-node seed) or the forward's seed attribute. ratio and training_mode are optional and read as Dropout-12
// reads them (training_mode false, the default, or ratio 0: dX = dY). Differentiable in dY (second derivatives:
// DropoutGrad again, the same mask). (runtime/ops/dropout/)
inline constexpr char kDropoutGradOp[] = "DropoutGrad";

// RNNGrad(X, W, R, B, sequence_lens, initial_h, initial_c, P, dY, dY_h, dY_c, trace) -> the gradients of inputs 0-7
// (output k for input k; optional outputs, 4 never), for RNN, GRU or LSTM (attribute forward_op) with the forward's
// other attributes. Inputs 0-7 are the forward's (RNN and GRU have no 6 and 7); dY, dY_h and dY_c are the gradients of
// its outputs, each optional. `trace` (optional) is what back-propagation through time needs of the forward pass, as
// RNNTraining's output 3 stashed it; without it the kernel recomputes the forward. The gradient builders emit no
// trace; a training session's stash_recurrent_traces pass (runtime/executor/graph_optimizer.h) connects it.
// (runtime/ops/rnn/)
inline constexpr char kRnnGradOp[] = "RNNGrad";
// RNNTraining(X, W, R, B, sequence_lens, initial_h, initial_c, P) -> Y, Y_h, Y_c, trace: the forward named by
// attribute forward_op (RNN, GRU or LSTM, with its attributes; Y_c is LSTM's only), which also writes `trace`, every
// direction's gate inputs and states by step ([directions, n] in the compute type, float32 or float64 for float64
// tensors; runtime/ops/rnn/rnn.h lays it out) for RNNGrad. Not differentiable: made after the gradients are.
// (runtime/ops/rnn/)
inline constexpr char kRnnTrainingOp[] = "RNNTraining";

}  // namespace onnxamp::ops
