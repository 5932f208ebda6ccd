// Graph rewrites for CUDA sessions, run on the session's copy of the model after the generic inference optimizer
// (which fuses MatMul/Gemm + scale + bias + activation into FusedMatMul for every device, exec::FuseMatMulEpilogues):
// in training sessions the backward GEMMs with an FP32 output and the bias gradient, and the channels-last layout for
// half-precision convolutions.
#pragma once

#include "runtime/common/status.h"
#include "runtime/executor/graph_optimizer.h"
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

// The backward GEMMs of training graphs with an FP32 output and their bias gradient (exec::FuseBackwardGemms; CUDA
// sessions fuse both for fp16 and bf16).
using exec::FuseBackwardGemms;

// The CUDA passes a session with `options` runs after the generic ones (exec::InferencePasses): none for
// GraphOptimization::kNone; fuse_backward_gemms (above), then fuse_activation_gradients (exec::FuseActivationGradients)
// for a training session at kBasic and kAll; otherwise, for kAll, use_channels_last_layout (exec::UseChannelsLastLayout
// for fp16/bf16 convolution chains) when options.channels_last. Each imports com.onnxamp at version 1 when it made a
// node of it.
passes::PassPipeline CudaPasses(const exec::SessionOptions& options);

// Rewrites `model` in place with CudaPasses(options), verifying after each pass; the result computes the same
// outputs. Used as DeviceBackend::optimize_graph. Does nothing when the model does not verify (the session reports
// that itself).
Status OptimizeGraphForCuda(ir::Model& model, const exec::SessionOptions& options);

}  // namespace onnxamp::cuda
