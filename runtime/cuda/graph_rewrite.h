// Graph rewrites for CUDA sessions, run on the session's copy of the model after the generic inference optimizer:
// fusions into ops that only the CUDA kernels implement (MatMul/Gemm + bias + activation as one cuBLASLt call), and
// the channels-last layout for half-precision convolutions.
#pragma once

#include "runtime/common/status.h"
#include "runtime/executor/session.h"
#include "runtime/ir/graph.h"
#include "runtime/ir/model.h"
#include "runtime/passes/pass.h"

namespace onnxamp::cuda {

// FusedMatMul (domain com.onnxamp, version 1, CUDA kernels only): Y = activation(alpha * op(A) op(B) + bias).
// Inputs A, B (numpy matmul shapes as MatMul; transA / transB, ints 0 or 1, transpose 2-D operands as Gemm does),
// bias (optional): a row vector of N values ([N] or [1, N]) added to every row. Attributes: alpha (float, default 1),
// activation: "" (none), "Relu", "Gelu" (the erf form, 0.5 x (1 + erf(x / sqrt 2))) or "GeluTanh" (Gelu with
// approximate = "tanh"). Float types only.
inline constexpr char kFusedMatMulOp[] = "FusedMatMul";
inline constexpr char kFusedMatMulDomain[] = "com.onnxamp";

// Replaces MatMul or Gemm followed by an Add of a constant row-vector bias and/or an activation (Relu; Gelu; or the
// erf pattern x * (1 + erf(x / sqrt 2)) * 0.5 written as Div, Erf, Add, Mul, Mul) with one FusedMatMul node. Fires
// only where the result is the same up to float rounding: the bias is an initializer (that no graph input overrides)
// or a Constant node's value, of the product's element type (fp32, fp16, bf16, double) and N values with N known
// from B; Gemm with alpha, transA/transB, and C absent or a constant row vector with beta = 1; every intermediate
// value read by exactly one node (the erf pattern's input by its Div and Mul only) and not a graph output; the erf
// pattern's constants sqrt 2 (or 1 / sqrt 2 in a Mul), 1 and 0.5 up to the rounding of their element type. Leaves
// the graph valid and its inputs and outputs unchanged; removes Constant nodes and initializers nothing reads any
// more.
Status FuseMatMulEpilogues(ir::Graph& graph, bool* changed);

// The CUDA passes a session with `options` runs after the generic ones (exec::InferencePasses): none for
// GraphOptimization::kNone or a training session; fuse_matmul_epilogues (the fusion above) for kBasic; for kAll also
// use_channels_last_layout (exec::UseChannelsLastLayout for fp16/bf16 convolution chains) when
// options.channels_last. Each imports com.onnxamp at version 1 when it made a node of it.
passes::PassPipeline CudaPasses(const exec::SessionOptions& options);

// Rewrites `model` in place with CudaPasses(options), verifying after each pass; the result computes the same
// outputs. Used as DeviceBackend::optimize_graph. Does nothing when the model does not verify (the session reports
// that itself).
Status OptimizeGraphForCuda(ir::Model& model, const exec::SessionOptions& options);

}  // namespace onnxamp::cuda
