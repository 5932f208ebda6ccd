// Graph rewrites for CUDA sessions, run on the session's copy of the model after the generic inference optimizer
// (which fuses MatMul/Gemm + scale + bias + activation into FusedMatMul for every device, exec::FuseMatMulEpilogues):
// in training sessions the backward GEMMs with an FP32 output and the bias gradient, and the channels-last layout for
// half-precision convolutions.
#pragma once

#include "runtime/common/status.h"
#include "runtime/executor/session.h"
#include "runtime/ir/graph.h"
#include "runtime/ir/model.h"
#include "runtime/ops/matmul/fused_matmul.h"
#include "runtime/passes/pass.h"

namespace onnxamp::cuda {

// FusedMatMul (domain com.onnxamp, version 1; the contract in runtime/ops/matmul/fused_matmul.h, a CPU reference
// kernel there): Y = activation(alpha * op(A) op(B) + bias), optionally in float for fp16/bf16 inputs
// (output_type) and with a bias gradient as a second output (bias_grad).
using ops::kFusedMatMulDomain;
using ops::kFusedMatMulOp;

// The GEMMs of a training graph's backward pass (training sessions, after autodiff; dY the output gradient):
//  - Weight gradients in FP32: MatMul or Gemm (no C) of fp16/bf16 A and B whose result only a Cast to float reads
//    (not a graph output) becomes one FusedMatMul with output_type float writing the Cast's output: cuBLASLt
//    accumulates in FP32 either way, and the fused node skips the rounding to fp16/bf16 in between.
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
Status FuseBackwardGemms(ir::Graph& graph, bool* changed);

// The CUDA passes a session with `options` runs after the generic ones (exec::InferencePasses): none for
// GraphOptimization::kNone; fuse_backward_gemms (above) for a training session at kBasic and kAll; otherwise, for
// kAll, use_channels_last_layout (exec::UseChannelsLastLayout for fp16/bf16 convolution chains) when
// options.channels_last. Each imports com.onnxamp at version 1 when it made a node of it.
passes::PassPipeline CudaPasses(const exec::SessionOptions& options);

// Rewrites `model` in place with CudaPasses(options), verifying after each pass; the result computes the same
// outputs. Used as DeviceBackend::optimize_graph. Does nothing when the model does not verify (the session reports
// that itself).
Status OptimizeGraphForCuda(ir::Model& model, const exec::SessionOptions& options);

}  // namespace onnxamp::cuda
