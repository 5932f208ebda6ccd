// DFT's and STFT's attributes, input checks and plans, shared by the CPU kernels (spectral_cpu.cc) and the CUDA ones
// (runtime/cuda/ops/spectral/), with the same messages.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/spectral/spectral_transform.h"

namespace onnxamp::ops::spectral {

// The longest transform: the direct transform is O(L^2) (no FFT), so 2^16 points already take 4e9 multiply-adds per
// signal; longer ones are refused rather than run for hours.
inline constexpr int64_t kMaxTransformLength = int64_t{1} << 16;

// cos and sin of 2 pi m / L for m < L (glibc's, in double: the CUDA kernels upload this table).
struct Twiddles {
  std::vector<double> c, s;
  explicit Twiddles(int64_t l);
};

// DFT's (or com.onnxamp DFTGrad's) attributes.
struct DftSpec {
  bool grad = false;
  int64_t opset = 20;  // the forward's opset (DFTGrad: its `opset` attribute)
  bool inverse = false, onesided = false;
  int64_t axis_attr = 1;  // before opset 20

  Status Init(const exec::KernelInfo& info);
};

// The DFT of one node and run: the input viewed as [outer, n_in, inner, channels] around the axis.
struct DftPlan {
  int64_t outer = 1, inner = 1, channels = 1;
  Transform t;
  std::vector<int64_t> out_dims;
};

// DFT(input, dft_length?, axis?) or DFTGrad(dY, input, dft_length?, axis?): the input present and of a float type,
// [..., 1 or 2], the axis (an attribute before opset 20) one of its signal dims, dft_length in [1, 2^16]; dft_length
// and axis are read (host tensors).
StatusOr<DftPlan> PlanDft(const exec::KernelContext& ctx, const DftSpec& spec);

// STFT's frames of one run.
struct StftPlan {
  int64_t batch = 0, length = 0, channels = 1, step = 0, frame = 0, frames = 0;
  Transform t;
  std::vector<double> window;  // frame values (ones without a window), when read
  std::vector<int64_t> out_dims;
};

// STFT(signal, frame_step, window?, frame_length?) or (grad) STFTGrad(dY, signal, frame_step, window?,
// frame_length?): signal [batch, length, 1 or 2] of a float type, frame_step >= 1, a 1-D float window or
// frame_length (equal when both are given) within the signal; frame_step and frame_length are read (host tensors),
// the window's values only with read_window.
StatusOr<StftPlan> PlanStft(const exec::KernelContext& ctx, bool onesided, bool grad, bool read_window);

// The gradient kernels' dY (input 0): the forward output's shape `dims`, a float type.
Status CheckIncomingGradient(const exec::KernelContext& ctx, const std::vector<int64_t>& dims);

}  // namespace onnxamp::ops::spectral
