// Launchers of the CUDA DFT and STFT kernels and of their com.onnxamp gradients DFTGrad and STFTGrad
// (spectral_kernels.cu): spectral_cuda.cc checks and plans with the CPU kernels' helpers (runtime/ops/spectral/
// spectral.h), uploads the CPU's table of roots of unity, and calls these, which queue the work on `stream` without
// synchronising. Every output is one thread running the CPU's own sum (spectral_transform.h) in double, and the file
// is built without FMA contraction: the results are the CPU kernels' bits.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "runtime/common/dtype.h"
#include "runtime/common/status.h"
#include "runtime/cuda/ops/tensor/index_grad_launch.h"
#include "runtime/ops/spectral/spectral_transform.h"

namespace onnxamp::cuda {

// DFT: x [outer, t.n_in, inner, channels] -> y [outer, t.out_len, inner, 2]; DFTGrad: dy (y's shape) -> dx (x's
// shape). wc, ws: the table of cos and sin of 2 pi m / t.l (device memory, t.l doubles each). Tensors of `dtype`.
struct DftArgs {
  DType dtype = DType::kFloat32;
  ops::spectral::Transform t;
  int64_t outer = 1, inner = 1, channels = 1;
  const double* wc = nullptr;
  const double* ws = nullptr;
  const void* x = nullptr;
  void* y = nullptr;
  const void* dy = nullptr;
  void* dx = nullptr;
};
Status LaunchDft(const DftArgs& args, cudaStream_t stream);
Status LaunchDftGrad(const DftArgs& args, cudaStream_t stream);

// STFT: signal [batch, length, channels] (of `dtype`) framed by `step` into `frames` frames of `frame` values, each
// times the window (doubles, device memory; null: ones) -> y [batch, frames, t.out_len, 2]. STFTGrad: dy (y's shape)
// -> dsignal (the signal's shape, null when not requested) and dwindow ([frame] doubles, null when not requested).
struct StftArgs {
  DType dtype = DType::kFloat32;
  ops::spectral::Transform t;
  int64_t batch = 0, length = 0, channels = 1, step = 1, frame = 0, frames = 0;
  const double* wc = nullptr;
  const double* ws = nullptr;
  const void* signal = nullptr;
  const double* window = nullptr;
  void* y = nullptr;
  const void* dy = nullptr;
  void* dsignal = nullptr;
  double* dwindow = nullptr;
};
Status LaunchStft(const StftArgs& args, cudaStream_t stream);
// The frames' adjoints first (one thread per frame value, into batch * frames * frame * 2 doubles of `scratch`, taken
// once), then one thread per signal value over the frames holding it and one per window value over every frame, in
// the CPU's order.
Status LaunchStftGrad(const StftArgs& args, const GradScratchFn& scratch, cudaStream_t stream);

}  // namespace onnxamp::cuda
