// Launchers of the dnn family's gradient kernels (dnn_grad_kernels.cu), callable from host .cc files: the per-channel
// sums of dB, the direct weight gradient of a convolution, MaxPoolGrad, AveragePoolGrad, and the statistics and
// gradients of BatchNormTraining / BatchNormalizationGrad. Same conventions as dnn_launch.h: packed NCHW(D...) device
// memory, one stream, nothing launched for an empty problem. Every sum is formed in a fixed order (per-thread runs,
// then a tree over the block), so results are the same bits run to run.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>

#include "runtime/common/dtype.h"
#include "runtime/common/status.h"
#include "runtime/cuda/ops/dnn/dnn_launch.h"

namespace onnxamp::cuda::dnn {

// Device scratch of at least `bytes` for a launcher's temporaries, valid until the launcher returns and its work on
// the stream has run (CudaContext::Workspace).
using GradScratchFn = std::function<StatusOr<void*>(size_t bytes)>;

// db[c] = sum over images and positions of dy [n, channels, plane] (float accumulation; double for double), one
// block per channel. Float types.
Status LaunchChannelSums(cudaStream_t stream, DType dtype, int64_t n, int64_t channels, int64_t plane, const void* dy,
                         void* db);

// The weight gradient of the convolution x [s.n, s.c, g.in...] -> dy [s.n, s.m, g.out...] with w [s.m, s.c / group,
// g.kernel...]: dw[oc, ic, k] = sum over images and output positions of dy * the x element tap k reads (none in the
// padding). One thread per dw element, images then positions in order, FP32 accumulation (FP64 for double), one
// rounding. NCHW only (s.channels_last must be false). Float types.
Status LaunchConvGradFilterDirect(cudaStream_t stream, DType dtype, const WindowParams& g, const ConvSizes& s,
                                  const void* dy, const void* x, void* dw);

// MaxPoolGrad: dx [x_count] = 0, plus each dy[i] added at the flat position indices[i] names, in the order of i
// (float accumulation; double for double), one rounding on store. Indices outside [0, x_count) (-1: a window in the
// padding) add nothing. The indices are sorted stably by position on the device (scratch for keys, values and the
// sort), then every dx element sums its run. At most INT_MAX dy elements (Unimplemented beyond).
Status LaunchMaxPoolGrad(cudaStream_t stream, DType dtype, int64_t dy_count, int64_t x_count, const void* dy,
                         const int64_t* indices, void* dx, const GradScratchFn& scratch);

// AveragePoolGrad over `planes` planes: every dx element gathers dy / count of each window that covers it, windows in
// row-major order of their output position (the order the CPU adds them in), one thread per dx element. count is
// the number of the window's taps inside the input, or with count_include_pad inside the explicitly padded input.
// Float types.
Status LaunchAveragePoolGrad(cudaStream_t stream, DType dtype, int64_t planes, const WindowParams& g,
                             bool count_include_pad, const void* dy, void* dx);

// BatchNormTraining's per-parameter statistics of x viewed as [batch, params, run] (count = batch * run >= 2): the
// mean and biased variance (two passes, double accumulation for every x type), inv_std = 1 / sqrt(var + epsilon),
// scale_eff = scale * inv_std, and the running statistics momentum * running + (1 - momentum) * batch statistic with
// the unbiased variance (var * count / (count - 1)) for running_var. One block per parameter; arrays in double.
struct BatchNormTrainingParams {
  const double* scale = nullptr;
  const double* running_mean = nullptr;
  const double* running_var = nullptr;
  double* mean = nullptr;
  double* inv_std = nullptr;
  double* scale_eff = nullptr;
  double* new_running_mean = nullptr;
  double* new_running_var = nullptr;
};
Status LaunchBatchNormTrainingStatistics(cudaStream_t stream, DType dtype, int64_t batch, int64_t params, int64_t run,
                                         const void* x, double momentum, double epsilon,
                                         const BatchNormTrainingParams& p);

// BatchNormalizationGrad's per-parameter sums over [batch, params, run] (double accumulation): sum_dy = sum(dy) and
// sum_dy_xhat = inv_std * sum(dy * (x - mean)). One block per parameter; arrays in double.
Status LaunchBatchNormGradSums(cudaStream_t stream, DType dtype, int64_t batch, int64_t params, int64_t run,
                               const void* dy, const void* x, const double* mean, const double* inv_std, double* sum_dy,
                               double* sum_dy_xhat);

// dx = k * (dy - sum_dy / count - x_hat * sum_dy_xhat / count), k = scale * inv_std, x_hat = (x - mean) * inv_std,
// with every per-parameter coefficient worked out in double and cast to the accumulation type (float; double for
// double) as the CPU does, one rounding on store.
Status LaunchBatchNormGradInput(cudaStream_t stream, DType dtype, int64_t batch, int64_t params, int64_t run,
                                const void* dy, const void* x, const double* scale, const double* mean,
                                const double* inv_std, const double* sum_dy, const double* sum_dy_xhat, void* dx);

}  // namespace onnxamp::cuda::dnn
