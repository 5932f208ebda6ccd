// Inference graph optimizations a Session applies to its own copy of the model when it is created: folding a
// BatchNormalization in inference mode into the Conv before it, fusing Conv [+ Add] [+ Relu] into one FusedConv
// node (internal domain) whose kernel runs the sum and the ReLU as post-ops of the convolution, and keeping the
// activations between consecutive convolutions and poolings in oneDNN's blocked channel layout.
//
// Every pass shares the signature Status Run(ir::Graph&, bool* changed) (InferencePasses runs them as GraphPasses of
// runtime/passes/pass.h), leaves the graph valid (ir::Verify), keeps the graph's inputs and outputs (names, order,
// types) as they are, and changes results only by float rounding. A
// pass fires only where it is exact in that sense: constant (initializer, not overridable by an input) weights and
// BatchNormalization parameters, intermediate values read by exactly one node and not graph outputs.
#pragma once

#include <vector>

#include "runtime/common/status.h"
#include "runtime/executor/kernel.h"
#include "runtime/ir/graph.h"
#include "runtime/ir/model.h"
#include "runtime/passes/pass.h"

namespace onnxamp::exec {

struct SessionOptions;  // runtime/executor/session.h

// The domain of the runtime's internal ops (imported at version 1 by a model that the optimizer changed).
inline constexpr char kInternalDomain[] = "com.onnxamp";
// FusedConv: inputs X, W, B (optional), Z (optional); Conv's attributes plus `activation` ("Relu" or empty).
// Y = activation(Conv(X, W, B) + Z), Z broadcast as Add broadcasts.
inline constexpr char kFusedConvOp[] = "FusedConv";
// Ops on the blocked channel layout (runtime/ops/layout/blocked_cpu.cc): a tensor of logical shape [N, C, spatial...]
// stored as [N, ceil(C / b), spatial..., b], channel c in block c / b, lane c % b, the lanes past C zero.
// BlockedConv: FusedConv's inputs and attributes plus x_block, z_block, y_block (0: that tensor is plain, else b).
inline constexpr char kBlockedConvOp[] = "BlockedConv";
// MaxPool (no Indices) and AveragePool with attributes as ONNX's plus `block`: blocked X -> blocked Y.
inline constexpr char kBlockedMaxPoolOp[] = "BlockedMaxPool";
inline constexpr char kBlockedAveragePoolOp[] = "BlockedAveragePool";
// GlobalAveragePool from blocked X to plain Y [N, C, 1, ...]; attributes `block` and `channels` (C).
inline constexpr char kBlockedGlobalAveragePoolOp[] = "BlockedGlobalAveragePool";
// Ops on the channels-last layout (CPU reference kernels in runtime/ops/layout/channels_last_cpu.cc, CUDA kernels in
// runtime/cuda/ops/dnn/): a tensor of logical shape [N, C, spatial...] stored as [N, spatial..., C], the layout
// tensor cores want. 1, 2 or 3 spatial dims.
// ChannelsLastConv: FusedConv's attributes; X [N, spatial..., C], W [M, kernel..., C / group], B [M] (optional),
// Z (optional) channels-last and broadcast against Y as Add broadcasts (same rank as Y), Y [N, out spatial..., M].
inline constexpr char kChannelsLastConvOp[] = "ChannelsLastConv";
// MaxPool (no Indices output, no storage_order) and AveragePool with ONNX's attributes: channels-last X -> Y.
inline constexpr char kChannelsLastMaxPoolOp[] = "ChannelsLastMaxPool";
inline constexpr char kChannelsLastAveragePoolOp[] = "ChannelsLastAveragePool";
// GlobalAveragePool from channels-last X [N, spatial..., C] to plain Y [N, C, 1, ...] (the bytes of [N, 1..., C]).
inline constexpr char kChannelsLastGlobalAveragePoolOp[] = "ChannelsLastGlobalAveragePool";

// Conv (W and B constant) followed by BatchNormalization in inference mode with constant scale, B, mean and var,
// the Conv's output read only by it: the normalisation is folded into new Conv weights and bias (computed in
// double, stored in the weights' type) and the BatchNormalization removed.
Status FoldConvBatchNorm(ir::Graph& graph, bool* changed);

// Conv whose output is read only by an Add (Z = the Add's other input) and/or then only by a Relu: replaced by one
// FusedConv node that writes the last of them. With `keep_input_weights` (training sessions), a Conv whose W or B
// is a graph input (a parameter bound on every run) is left as it is.
Status FuseConvActivation(ir::Graph& graph, bool* changed, bool keep_input_weights = false);

// Replaces MatMul or Gemm followed by a scale (Mul or Div by a constant scalar), an Add of a constant row-vector bias
// and/or an activation (Relu; Gelu; or the erf pattern x * (1 + erf(x / sqrt 2)) * 0.5 written as Div, Erf, Add,
// Mul, Mul), each optional but in that order, with one FusedMatMul node (runtime/ops/matmul/fused_matmul.h). Fires
// only where the result is the same up to float rounding: the scale is a constant (an initializer that no graph
// input overrides, or a Constant node's value), finite and nonzero, and follows a MatMul or a Gemm without C; the
// bias is a constant, a graph input, or a Cast of either (the session checks bound inputs against their declared
// dims; a training graph's parameters are such inputs), with static dims [N] or [1, N], N known from B (through a
// Cast too); scale and bias of the product's element type (fp32, fp16, bf16, double); Gemm with alpha,
// transA/transB, and C absent or such a row vector with beta = 1; every intermediate value read by exactly one node
// besides Shape nodes (which then read the fused output, of the same shape) and not a graph output (the erf
// pattern's input read by its Div and Mul only); the erf pattern's constants sqrt 2 (or 1 / sqrt 2 in a Mul), 1 and
// 0.5 up to the rounding of their element type. A Gemm with only a C and nothing after it stays a Gemm. Leaves the
// graph valid and its inputs and outputs unchanged; removes Constant nodes and initializers nothing reads any more.
Status FuseMatMulEpilogues(ir::Graph& graph, bool* changed);

// Stores in the blocked layout with channel block `block` (8 or 16) every float32 value that a convolution (Conv,
// FusedConv) or a blocked pooling produces and that only convolutions (as X or Z), MaxPool/AveragePool (whose
// output is blocked in turn) and GlobalAveragePool read, and that is not a graph output. Those ops become the
// Blocked* ops above; a convolution reading or writing a plain tensor beside blocked ones reorders it itself, so a
// chain starts and ends without extra nodes and every other value, graph inputs and outputs included, stays as it
// was. Needs constant float32 convolution weights and a Z not known to broadcast (the kernel broadcasts one whose
// shape the graph left open); does nothing on graphs with subgraphs.
Status UseBlockedLayout(ir::Graph& graph, int64_t block, bool* changed);

// Before UseBlockedLayout on the CPU: the float16 convolutions, MaxPools and GlobalAveragePools that the blocked
// layout would take if it took float16 (which it does not) are computed in float, so that it takes them. A
// convolution becomes a FusedConv of float weights (the float16 ones widened, exactly) with attribute `round_to` =
// FLOAT16, which rounds its output to float16 values, as the float16 kernel's output is; MaxPool's maxima are input
// values and need no rounding; a GlobalAveragePool's mean is rounded by the Cast to float16 that follows it. A Cast
// to float is inserted where such a chain reads a float16 value and a Cast to float16 where a value leaves it (a
// graph output keeps its name and type). The results are those of the float16 graph up to the order of each
// convolution's float sums; what changes is that the chain runs on the blocked layout instead of converting every
// convolution's input and output in the plain one. AveragePool stays float16 (its mean would not be rounded within
// a chain).
Status ComputeHalfConvsInFloat(ir::Graph& graph, bool* changed);

// The same analysis as UseBlockedLayout for the channels-last layout, for values whose element type is one of
// `dtypes` (the convolution weights' type decides): such values become channels-last, and the nodes touching them
// the ChannelsLast* ops above. Unlike the blocked ops these read and write channels-last tensors only, so the pass
// inserts one Transpose where a chain starts (per plain value read as X or Z) and one where a convolution inside a
// chain writes a value that something else reads; convolution weights become new initializers in [M, kernel...,
// C / group] order (the old one is removed when nothing else reads it). Needs constant weights, and a Z whose rank
// is known (from its type or because a convolution or pooling makes it); does nothing on graphs with subgraphs.
Status UseChannelsLastLayout(ir::Graph& graph, const std::vector<DType>& dtypes, bool* changed);

// The GEMMs of a training graph's backward pass (training sessions, after autodiff; dY the output gradient):
//  - Weight gradients in FP32: MatMul or Gemm (no C) of fp16/bf16 A and B whose result only a Cast to float reads
//    (not a graph output) becomes one FusedMatMul with output_type float writing the Cast's output: the GEMM
//    (cuBLASLt, oneDNN) accumulates in FP32 either way, and the fused node skips the rounding to fp16/bf16 between.
//  - Bias gradients: with 2-D operands and alpha 1, a SumToShape of the operand the GEMM reduces over its K (A with
//    transA, i.e. dY^T X; B without transB, i.e. X^T dY), to a declared 1-D shape of that operand's column count,
//    becomes the fused node's second output (bias_grad "A" or "B") when its result is in the GEMM's output type:
//    the SumToShape of the same type as the product, or followed by a Cast to float that only it reads when the
//    product went to float. A target of [1] needs the operand's declared cols of 1 (SumToShape would sum the
//    columns too); otherwise the operand's cols are N whenever the original graph runs. Where a Flatten with axis -1
//    made the operand (the weight gradient of a Linear on [batch, seq, features] as one GEMM over the flattened
//    rows), a SumToShape of the Flatten's input to [N] is the same sum and fuses too.
// Fires only on MatMul/Gemm nodes of the default domain; leaves the graph valid and its inputs and outputs unchanged;
// removes the absorbed Cast, SumToShape and a Shape node nothing reads any more.
// `what` chooses: the input types whose products get the FP32 output, and whether bias gradients fuse.
struct BackwardGemmFusion {
  std::vector<DType> float_output_for = {DType::kFloat16, DType::kBFloat16};
  bool bias_grad = true;
};
Status FuseBackwardGemms(ir::Graph& graph, bool* changed, const BackwardGemmFusion& what = {});

// The activation gradients of a training graph into the product that computes what they scale, G the output of a
// MatMul, Gemm (no C, no transA) or plain FusedMatMul with a 2-D B read by the gradient node alone
// (runtime/ops/matmul/fused_matmul.h):
// - ReluGrad(G, Y) with Y the output of a forward FusedMatMul with activation Relu (and a 2-D B) becomes one
//   FusedMatMul of G's operands with activation_grad "Relu" reading the forward node's ReLU mask (relu_mask 1, its
//   output 1). Unchanged bit for bit (the mask is where Y > 0, as ReluGrad tests it); a mask of one bit per element
//   lives from the forward to the backward pass.
// - GeluGrad(G, X) with approximate "tanh" becomes one FusedMatMul with activation_grad "GeluTanh" reading X.
//   Unchanged bit for bit in float and double (the same derivative times the same product); for fp16/bf16 the
//   product is no longer rounded before it is scaled.
// CUDA training sessions run it so that cuBLASLt's DRELU and DGELU epilogues apply the gradient as the GEMM stores
// its result: the elementwise pass over G and Y (or X) goes.
Status FuseActivationGradients(ir::Graph& graph, bool* changed);

// A training graph's recurrent nodes keep their traces for back-propagation through time: each com.onnxamp RNNGrad
// without input 11 whose forward node is in the graph (an RNN, GRU or LSTM of the default domain reading its inputs
// 0-7 with its attributes) gets that node's trace as input 11, and the forward node becomes a
// com.onnxamp RNNTraining (the same inputs, outputs and attributes, forward_op naming the op, output 3 the trace;
// runtime/ops/gradient_ops.h). RNNGrad then reads the forward's gate inputs and states instead of running the
// forward a second time, at the cost of keeping them alive from the forward to the backward pass: per direction
// seq x batch x hidden x (gates + 1, LSTM and GRU with linear_before_reset + 2) floats (an LSTM of 32 steps, batch 32
// and hidden 128: 3 MiB). The graph's inputs and outputs are unchanged; the caller imports kInternalDomain.
Status StashRecurrentTraces(ir::Graph& graph, bool* changed);

// The passes above that a session with `options` runs, in order (top-level graph only): nothing for
// GraphOptimization::kNone; fold_conv_batch_norm, fuse_conv_activation and (not for models of opset < 7, whose Gemm
// broadcasts C only with its `broadcast` attribute) fuse_matmul_epilogues for kBasic, in a training session
// stash_recurrent_traces, and in a CPU training session fuse_backward_gemms (FuseBackwardGemms for bf16 products, no
// bias gradients); for kAll also
// compute_half_convs_in_float and use_blocked_layout on the CPU when options.blocked_layout and the CPU has a
// preferred channel block for options.kernels.linalg (ops::PreferredChannelBlock; never without oneDNN). A training
// session (SessionMode::kTraining) runs no layout pass and fuses no Conv whose weights are graph inputs. The last pass
// imports kInternalDomain when a fused or blocked node was made (FusedMatMul is of the same domain, com.onnxamp).
passes::PassPipeline InferencePasses(const SessionOptions& options);

// Runs InferencePasses(options) on `model`, verifying the graph after each pass. Does nothing when the model does
// not verify or imports no default opset (Session::Create reports that itself).
Status OptimizeForInference(ir::Model& model, const SessionOptions& options);

}  // namespace onnxamp::exec
