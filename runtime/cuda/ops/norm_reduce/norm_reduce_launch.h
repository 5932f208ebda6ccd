// The launchers of the norm_reduce CUDA family (reductions, ArgMax/ArgMin, Softmax, normalisations, TopK, losses):
// plain descriptions of the work (element types, device pointers, merged shapes) that the host-side kernels in
// *_ops.cc fill in after checking attributes and shapes, and the .cu files turn into launches on `stream`. No
// launcher synchronises the stream; scratch memory comes from a ScratchFn (the CUDA context's workspace).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>

#include "runtime/common/dtype.h"
#include "runtime/common/status.h"

namespace onnxamp::cuda::norm_reduce {

// Device scratch of at least `bytes` (null for 0), valid until the launcher returns and the work it queued has run.
// A launcher calls it at most once.
using ScratchFn = std::function<StatusOr<void*>(size_t bytes)>;

// ---- reductions -------------------------------------------------------------------------------------------------

enum class ReduceKind { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kSumSquare, kLogSum, kLogSumExp };

// Most merged dimensions on either side (kept, reduced) of a reduction.
inline constexpr int kMaxMergedDims = 8;

// A reduction with size-1 dimensions dropped and neighbouring dimensions that are both reduced or both kept merged.
// The innermost merged dimension (length `inner`, stride 1) is reduced when `inner_reduced`, else kept:
//   inner_reduced: output o (row-major over `kept`) folds x[Offset(kept, o) + Offset(red, r) + j] for every run
//                  r of `red` and j < inner;
//   kept inner:    output o = k * inner + i folds x[Offset(kept, k) + i + Offset(red, r)] for every r of `red`.
// Offset(dims, index) decomposes index row-major over the (size, stride) pairs.
struct ReduceLayout {
  bool inner_reduced = true;
  int64_t inner = 1;
  int kept_rank = 0;
  int64_t kept_dims[kMaxMergedDims] = {};
  int64_t kept_strides[kMaxMergedDims] = {};
  int red_rank = 0;
  int64_t red_dims[kMaxMergedDims] = {};
  int64_t red_strides[kMaxMergedDims] = {};
  int64_t out_count = 1;     // outputs
  int64_t reduce_count = 1;  // input values folded into each output
};

// y[o] = the `kind` reduction (the CPU kernel's accumulation types: float for fp16/bf16, 64-bit integers wrapping,
// double for integer L2/LogSum/LogSumExp) of x under `layout`. x and y have element type `dtype`.
Status LaunchReduce(ReduceKind kind, DType dtype, const void* x, void* y, const ReduceLayout& layout,
                    const ScratchFn& scratch, cudaStream_t stream);

// out[o * inner + i] (int64) = the index along the middle axis of x viewed as [outer, n, inner] of its largest
// (kMax) or smallest value; NaN is the extreme; ties go to the first index, or the last when `select_last`. n > 0.
Status LaunchArgExtreme(bool max, DType dtype, const void* x, int64_t* out, int64_t outer, int64_t n, int64_t inner,
                        bool select_last, cudaStream_t stream);

// ---- softmax and losses ------------------------------------------------------------------------------------------

// y = Softmax(x) (or LogSoftmax) along the middle axis of [outer, n, inner], max subtracted first, float
// accumulation for fp16/bf16. x and y (same dtype) do not overlap.
Status LaunchSoftmax(bool log, DType dtype, const void* x, void* y, int64_t outer, int64_t n, int64_t inner,
                     cudaStream_t stream);

enum class LossReduction { kNone, kSum, kMean };

// The inputs of SoftmaxCrossEntropyLoss (softmax = true) or NegativeLogLikelihoodLoss, shared by the loss and its
// gradient (grad_launch.h): x [batch, classes, inner] and labels [batch, inner] (int32 or int64); weights: null, or
// `classes` values of `weight_dtype`.
struct LossInputs {
  bool softmax = true;
  LossReduction reduction = LossReduction::kMean;
  DType dtype = DType::kFloat32;
  const void* x = nullptr;
  DType label_dtype = DType::kInt64;
  const void* labels = nullptr;
  DType weight_dtype = DType::kFloat32;
  const void* weights = nullptr;
  bool has_ignore_index = false;
  int64_t ignore_index = 0;
  int64_t batch = 0, classes = 0, inner = 1;
};

// SoftmaxCrossEntropyLoss (softmax = true) or NegativeLogLikelihoodLoss: per position loss = -weight[t] * logp[t]
// (0 where t == ignore_index), with logp = LogSoftmax(x) along classes or x itself. `loss` holds [batch * inner]
// values (kNone) or one. A label outside [0, classes) that is not ignore_index gives a NaN loss for its position
// (the CPU reports an error; a device kernel cannot without synchronising).
struct LossArgs : LossInputs {
  void* loss = nullptr;
};
Status LaunchLoss(const LossArgs& args, const ScratchFn& scratch, cudaStream_t stream);

// ---- normalisations ----------------------------------------------------------------------------------------------

// A float parameter tensor (any float dtype) read through a broadcast: element e of the `count` expanded values is
// src[sum over d of index_d(e) * strides[d]] with e decomposed row-major over dims[0..rank).
inline constexpr int kMaxParamDims = 8;
struct ParamView {
  DType dtype = DType::kFloat32;
  const void* data = nullptr;
  int rank = 0;
  int64_t dims[kMaxParamDims] = {};
  int64_t strides[kMaxParamDims] = {};
};

// LayerNormalization over rows x cols: y = (x - mean) * inv_std * scale[j] + bias[j] (bias optional), statistics
// in double when `stats_double` or x is double, else float. mean / inv_std: null, or `rows` values of stat_dtype.
struct LayerNormArgs {
  DType dtype = DType::kFloat32;
  const void* x = nullptr;
  void* y = nullptr;
  int64_t rows = 0, cols = 0;
  ParamView scale;  // expanded to cols values
  bool has_bias = false;
  ParamView bias;
  double epsilon = 1e-5;
  bool stats_double = false;
  DType stat_dtype = DType::kFloat32;
  void* mean = nullptr;
  void* inv_std = nullptr;
};
Status LaunchLayerNorm(const LayerNormArgs& args, const ScratchFn& scratch, cudaStream_t stream);

// Group normalisation of x viewed as [batch, groups, channels_per_group, run] (InstanceNormalization: groups = C):
// each (batch, group) block is normalised by its own mean and population variance (float statistics, double for
// double x), then channel c is scaled by scale[c] and shifted by bias[c] (views expanded to groups * cpg values).
struct GroupNormArgs {
  DType dtype = DType::kFloat32;
  const void* x = nullptr;
  void* y = nullptr;
  int64_t batch = 0, groups = 1, channels_per_group = 1, run = 1;
  ParamView scale, bias;
  double epsilon = 1e-5;
};
Status LaunchGroupNorm(const GroupNormArgs& args, const ScratchFn& scratch, cudaStream_t stream);

// ---- TopK --------------------------------------------------------------------------------------------------------

// The k largest (or smallest) values along the middle axis of x [outer, n, inner] and their int64 indices, written
// as [outer, k, inner]; sorted, equal values in index order, NaN above every number. values / indices may be null.
Status LaunchTopK(DType dtype, const void* x, int64_t outer, int64_t n, int64_t inner, int64_t k, bool largest,
                  void* values, int64_t* indices, const ScratchFn& scratch, cudaStream_t stream);

}  // namespace onnxamp::cuda::norm_reduce
