// Launchers of the dnn family's own CUDA kernels (direct convolution, the conv epilogue, window copies, pooling,
// batch normalization), callable from host .cc files. Every launcher runs on `stream`, launches nothing for an
// empty problem, and returns the launch's Status. Tensors are packed device memory, NCHW(D...) unless a launcher
// takes a channels-last flag: a tensor of logical shape [N, C, spatial...] then lies as [N, spatial..., C].
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "runtime/common/dtype.h"
#include "runtime/common/status.h"

namespace onnxamp::ops {
struct WindowGeometry;  // runtime/ops/common/conv_geometry.h
}  // namespace onnxamp::ops

namespace onnxamp::cuda::dnn {

// The most spatial dims the direct kernels take (cuDNN takes at most 3; pooling and the fallback go further).
inline constexpr int kMaxSpatial = 6;

// A resolved sliding window (ops::WindowGeometry) by value, for kernels.
struct WindowParams {
  int nsp = 0;
  int64_t in[kMaxSpatial] = {};
  int64_t out[kMaxSpatial] = {};
  int64_t kernel[kMaxSpatial] = {};
  int64_t stride[kMaxSpatial] = {};
  int64_t dilation[kMaxSpatial] = {};
  int64_t pad_begin[kMaxSpatial] = {};
  int64_t pad_end[kMaxSpatial] = {};
  int64_t in_size = 1;      // elements of one input plane
  int64_t out_size = 1;     // elements of one output plane
  int64_t kernel_size = 1;  // taps of one kernel
};

// The window of `g`; Unimplemented when it has more than kMaxSpatial spatial dims (cudnn_util.cc).
StatusOr<WindowParams> MakeWindowParams(const ops::WindowGeometry& g);

// ---- convolution (conv_kernels.cu) ------------------------------------------------------------------------------

// The sizes of a convolution: x [n, c, in...], y [n, m, out...]; Conv's w is [m, c/group, k...], ConvTranspose's
// w is [c, m/group, k...]. With `channels_last` (Conv only) x is stored [n, in..., c], y [n, out..., m] and w
// [m, k..., c/group].
struct ConvSizes {
  int64_t n = 0, c = 0, m = 0, group = 1;
  bool channels_last = false;
};

// y = act(conv(x, w) + b + z) with one thread per output element, FP32 (FP64 for double) accumulation and one
// rounding on store, in the layout s.channels_last says. b ([m]) and z (y's stored shape) may be null. For float
// types (fp32, fp16, bf16, double).
Status LaunchConvDirect(cudaStream_t stream, DType dtype, const WindowParams& g, const ConvSizes& s, const void* x,
                        const void* w, const void* b, const void* z, bool relu, void* y);

// ConvTranspose: y = conv_transpose(x, w) + b, one thread per output element gathering its inputs (b may be null).
Status LaunchConvTransposeDirect(cudaStream_t stream, DType dtype, const WindowParams& g, const ConvSizes& s,
                                 const void* x, const void* w, const void* b, void* y);

// y[i] = act(src[i'] + b[channel of i'] + z[i'']) over y of `out_dims`, where src (of `src_dims`: [N, C, ...], or
// [N, ..., C] when `channels_last`) and z (of `z_dims`) broadcast to out_dims numpy-style (all dims as stored); b
// ([C of src]) and z may be null. y may be src when their dims are equal. InvalidArgument when the dims do not
// broadcast.
Status LaunchConvEpilogue(cudaStream_t stream, DType dtype, const std::vector<int64_t>& out_dims, const void* src,
                          const std::vector<int64_t>& src_dims, bool channels_last, const void* b, const void* z,
                          const std::vector<int64_t>& z_dims, bool relu, void* y);

// A shifted copy of the spatial window of every plane: dst [planes, dst_sp...] from src [planes, src_sp...],
// dst[p, o] = src[p, o + offset] where that is inside src, else 0; plus b[p % channels] when b is not null.
// Pads an input (negative offsets) or crops a ConvTranspose output (pad_begin offsets). With `channels_last` the
// planes are (image, channel) pairs of tensors stored [images, sp..., channels] (planes = images * channels).
Status LaunchWindowCopy(cudaStream_t stream, DType dtype, int64_t planes, int64_t channels, bool channels_last,
                        const std::vector<int64_t>& src_sp, const std::vector<int64_t>& dst_sp,
                        const std::vector<int64_t>& offset, const void* src, const void* b, void* dst);

// ---- pooling (pool_kernels.cu) ----------------------------------------------------------------------------------

struct PoolMode {
  bool max = true;
  bool count_include_pad = false;  // AveragePool
  int64_t storage_order = 0;       // MaxPool Indices: 0 row-major, 1 column-major
  // x stored [N, in..., C] and y [N, out..., C] (planes = N * C); no Indices then.
  bool channels_last = false;
  int64_t channels = 1;  // C, when channels_last
};

// MaxPool / AveragePool over `planes` planes of x, one thread per output element. `indices` (int64, y's shape) may
// be null, and must be with mode.channels_last. Max: float types, int8 and uint8; average: float types.
Status LaunchPool(cudaStream_t stream, DType dtype, const PoolMode& mode, int64_t planes, const WindowParams& g,
                  const void* x, void* y, int64_t* indices);

// GlobalMaxPool / GlobalAveragePool: y[p] = max or mean of x[p, 0..size), one block per plane. size >= 1.
Status LaunchGlobalPool(cudaStream_t stream, DType dtype, bool max, int64_t planes, int64_t size, const void* x,
                        void* y);

// GlobalAveragePool of a channels-last x [n, size, c] (size = the spatial elements) into y [n, c]: one thread per
// (image, channel) walking the positions with stride c (neighbouring threads read neighbouring channels), FP32
// accumulation (FP64 for double), one rounding. Float types.
Status LaunchGlobalAveragePoolChannelsLast(cudaStream_t stream, DType dtype, int64_t n, int64_t c, int64_t size,
                                           const void* x, void* y);

// ---- batch normalization (batch_norm_kernels.cu) ----------------------------------------------------------------

// dst[i] = (double) src[i] for a float-typed src of `count` elements.
Status LaunchToDouble(cudaStream_t stream, DType dtype, int64_t count, const void* src, double* dst);
// dst[i] = src[i] rounded to dtype (through float for fp16/bf16, as the CPU writes parameters).
Status LaunchFromDouble(cudaStream_t stream, DType dtype, int64_t count, const double* src, void* dst);

// Per parameter p of x viewed as [batch, params, run]: the mean and population variance over batch and run (two
// passes, accumulated in float; double for double x), one block per parameter.
Status LaunchBatchStatistics(cudaStream_t stream, DType dtype, int64_t batch, int64_t params, int64_t run,
                             const void* x, double* mean, double* var);

// Per parameter: scale_eff = scale / sqrt(var' + epsilon) with var' = batch_var when training else var, and when
// training running_mean/var = mean/var * momentum + batch_mean/var * (1 - momentum). Inputs in double.
struct BatchNormParams {
  const double* scale = nullptr;
  const double* mean = nullptr;
  const double* var = nullptr;
  const double* batch_mean = nullptr;  // training only
  const double* batch_var = nullptr;   // training only
  double* scale_eff = nullptr;
  double* running_mean = nullptr;  // training only
  double* running_var = nullptr;   // training only
};
Status LaunchBatchNormFinalize(cudaStream_t stream, int64_t params, bool training, double momentum, double epsilon,
                               const BatchNormParams& p);

// y = (x - mean[p]) * scale_eff[p] + bias[p] over x viewed as [batch, params, run], the coefficients cast to the
// accumulation type (float; double for double x) as the CPU does.
Status LaunchBatchNormApply(cudaStream_t stream, DType dtype, int64_t batch, int64_t params, int64_t run, const void* x,
                            const double* mean, const double* scale_eff, const double* bias, void* y);

}  // namespace onnxamp::cuda::dnn
