// Launchers of the CUDA LayerNormalizationGrad and GroupNormalizationGrad kernels (com.onnxamp,
// runtime/ops/gradient_ops.h): norm_grad_ops.cc checks attributes and shapes with the CPU kernels' helpers and fills
// these in; norm_grad_kernels.cu queues the work on `stream` without synchronising. Sums have a fixed order that
// depends on the shapes only, so a run gives the same bits every time (no atomics).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "runtime/common/dtype.h"
#include "runtime/common/status.h"
#include "runtime/cuda/ops/norm_reduce/norm_reduce_launch.h"

namespace onnxamp::cuda::norm_reduce {

// LayerNormalizationGrad over X viewed as rows x cols (dY, X and dX of `dtype`): with xhat = (x - mean[r]) *
// inv_std[r] and g = dY * scale[j] in the compute type (float, double for float64), dX = inv_std * (g - mean(g) -
// xhat * mean(g * xhat)), the row sums in double. dScale[s] and dB[s] (optional, `dtype`, scale's elements) sum
// dY * xhat and dY in double over the rows and over the normalised positions that read scale element s (its
// broadcast `scale` view). mean and inv_std hold `rows` values of any float type.
struct LayerNormGradArgs {
  DType dtype = DType::kFloat32;
  const void* dy = nullptr;
  const void* x = nullptr;
  void* dx = nullptr;
  int64_t rows = 0, cols = 0;
  ParamView scale;  // broadcast to the cols normalised positions
  int64_t scale_count = 0;
  ParamView mean, inv_std;  // flat, rows values
  void* dscale = nullptr;
  void* dbias = nullptr;
};
Status LaunchLayerNormGrad(const LayerNormGradArgs& args, const ScratchFn& scratch, cudaStream_t stream);

// GroupNormalizationGrad over X [batch, groups * channels_per_group, run...] (dY, X, dX of `dtype`), everything in
// double as the CPU: per (sample, group) block, the mean and population variance recomputed from X (two passes),
// inv_std = 1 / sqrt(var + epsilon), g = dY * scale[channel or group], dX = inv_std * (g - mean(g) - xhat *
// mean(g * xhat)). dScale and dBias (optional, `dtype`, param_count elements) sum dY * xhat and dY per channel over
// the samples in order, then per group over its channels when !per_channel. dx may be null.
struct GroupNormGradArgs {
  DType dtype = DType::kFloat32;
  const void* dy = nullptr;
  const void* x = nullptr;
  void* dx = nullptr;
  int64_t batch = 0, groups = 0, channels_per_group = 0, run = 0;
  bool per_channel = true;
  ParamView scale;  // flat, param_count values
  int64_t param_count = 0;
  double epsilon = 1e-5;
  void* dscale = nullptr;
  void* dbias = nullptr;
};
Status LaunchGroupNormGrad(const GroupNormGradArgs& args, const ScratchFn& scratch, cudaStream_t stream);

}  // namespace onnxamp::cuda::norm_reduce
