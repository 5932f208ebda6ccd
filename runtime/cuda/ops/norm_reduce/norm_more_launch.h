// Launchers of the CUDA LRN, LpNormalization, MeanVarianceNormalization and Hardmax kernels and of the com.onnxamp
// gradients LRNGrad, LpNormalizationGrad and MeanVarianceNormalizationGrad (runtime/ops/gradient_ops.h):
// norm_more_ops.cc checks attributes and shapes with the CPU kernels' helpers (runtime/ops/lrn/lrn.h,
// runtime/ops/normalize/normalize.h, runtime/ops/softmax/softmax.h) and fills these in; norm_more_kernels.cu queues
// the work on `stream` without synchronising. Like the CPU kernels, everything but Hardmax computes in double from
// the input values (fp16/bf16 widened through float) and rounds once to float, then to the element type. Sums have a
// fixed order that depends on the shapes only (no atomics).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "runtime/common/dtype.h"
#include "runtime/common/status.h"
#include "runtime/cuda/ops/norm_reduce/norm_reduce_launch.h"

namespace onnxamp::cuda::norm_reduce {

// LRN (dy null) or LRNGrad over x [n, c, run] (dy, x and y of `dtype`): s_ch = bias + scale * (the sum of x^2 over
// channels [ch - lo, ch + hi] clipped to [0, c), in channel order), y = x * s^-beta; the gradient's
// dx_i = dy_i * s_i^-beta - 2 scale beta x_i * (the sum over channels ch in [i - hi, i + lo] of dy_ch x_ch
// s_ch^(-beta - 1), in channel order), those terms computed once into double scratch.
struct LrnArgs {
  DType dtype = DType::kFloat32;
  const void* x = nullptr;
  const void* dy = nullptr;
  void* y = nullptr;
  int64_t n = 0, c = 0, run = 1, lo = 0, hi = 0;
  double scale = 0, beta = 0.75, bias = 1;
};
Status LaunchLrn(const LrnArgs& args, const ScratchFn& scratch, cudaStream_t stream);

enum class GroupNormKind { kLp1, kLp2, kMeanVariance };

// LpNormalization (p 1 or 2) or MeanVarianceNormalization (dy null), or their gradients, over the groups of x that
// `layout` forms (a group: one output of the reduction it describes; its members: the values folded into it, in
// row-major order over the reduced dims):
//   kLp*: y = x / norm (0 where norm == 0); grad dx = (dy - g * sum(dy * x / norm)) / norm, g = x / norm or sign(x).
//   kMeanVariance: y = (x - mean) / (s + epsilon), s the population standard deviation (two passes); grad
//     dx = (dy - mean(dy)) / d - xc * mean(dy * xc) / (d^2 s) with xc = x - mean, d = s + epsilon (0 where s = 0).
// Products and sums are rounded one at a time in double, as the CPU computes them.
struct GroupNormalizeArgs {
  GroupNormKind kind = GroupNormKind::kLp2;
  DType dtype = DType::kFloat32;
  const void* x = nullptr;
  const void* dy = nullptr;
  void* y = nullptr;
  ReduceLayout layout;
  double epsilon = 1e-9;
};
Status LaunchGroupNormalize(const GroupNormalizeArgs& args, cudaStream_t stream);

// Hardmax of x viewed as [outer, n, inner] (n > 0 unless the tensor is empty): y = 1 at the first maximum along n
// (the first NaN when there is one, as LaunchArgExtreme picks it), 0 elsewhere; x and y of `dtype`.
Status LaunchHardmax(DType dtype, const void* x, void* y, int64_t outer, int64_t n, int64_t inner,
                     const ScratchFn& scratch, cudaStream_t stream);

}  // namespace onnxamp::cuda::norm_reduce
