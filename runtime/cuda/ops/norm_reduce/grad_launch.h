// Launchers of the gradient kernels of the norm_reduce CUDA family (com.onnxamp ops, contracts in
// runtime/ops/gradient_ops.h): SoftmaxGrad / LogSoftmaxGrad and the two loss gradients (softmax_grad_kernels.cu),
// ReduceProdGrad (reduce_grad_kernels.cu). The host-side kernels in grad_ops.cc check attributes and shapes with the
// CPU kernels' helpers and fill these in; no launcher synchronises the stream.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "runtime/common/dtype.h"
#include "runtime/common/status.h"
#include "runtime/cuda/ops/norm_reduce/norm_reduce_launch.h"

namespace onnxamp::cuda::norm_reduce {

// Along the middle axis of [outer, n, inner]: SoftmaxGrad dx = y * (dy - sum(dy * y)), LogSoftmaxGrad (`log`)
// dx = dy - exp(y) * sum(dy), sums in the compute type (float for fp16/bf16/float, double for double) in a fixed
// order. dy, y and dx have element type `dtype`.
Status LaunchSoftmaxGrad(bool log, DType dtype, const void* dy, const void* y, void* dx, int64_t outer, int64_t n,
                         int64_t inner, cudaStream_t stream);

// SoftmaxCrossEntropyLossGrad (softmax) or NegativeLogLikelihoodLossGrad over x [batch, classes, inner] (log_prob /
// input) and labels [batch, inner] (int32 or int64): dx[b, c, d] = f * (exp(x[b, c, d]) - (c == t)) (softmax) or
// -f * (c == t), with f = weight[t] * dLoss[b, d] (kNone) or weight[t] * dLoss[0] (kSum), divided by the sum of the
// weights of the non-ignored positions (kMean), computed in double and rounded to the compute type as the CPU kernel
// does; 0 where t == ignore_index. A label outside [0, classes) that is not ignore_index gives NaN for its position
// (the CPU reports an error; a device kernel cannot without synchronising). dloss has element type `dtype`; weights
// null or `classes` values of `weight_dtype`.
struct LossGradArgs : LossInputs {
  const void* dloss = nullptr;
  void* dx = nullptr;
};
Status LaunchLossGrad(const LossGradArgs& args, const ScratchFn& scratch, cudaStream_t stream);

// ReduceProdGrad over X viewed as merged dimensions (reduce::MergeReduceDims): the groups are indexed row-major over
// the kept dimensions (dY's order), the members of a group row-major over the reduced ones, both given as (size,
// stride in X) pairs. dx[i] = dy[group] * (product of the members before i) * (product of those after), products in
// double. dy, x and dx have element type `dtype`.
struct ReduceProdGradArgs {
  DType dtype = DType::kFloat32;
  const void* dy = nullptr;
  const void* x = nullptr;
  void* dx = nullptr;
  int64_t groups = 0;      // dY's elements
  int64_t group_size = 1;  // members of each group
  int kept_rank = 0;
  int64_t kept_dims[kMaxMergedDims] = {};
  int64_t kept_strides[kMaxMergedDims] = {};
  int red_rank = 0;
  int64_t red_dims[kMaxMergedDims] = {};
  int64_t red_strides[kMaxMergedDims] = {};
};
Status LaunchReduceProdGrad(const ReduceProdGradArgs& args, const ScratchFn& scratch, cudaStream_t stream);

}  // namespace onnxamp::cuda::norm_reduce
