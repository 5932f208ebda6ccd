// RoiAlign's bilinear samples for host and device code: the CPU kernels (roi_align_cpu.cc, through roi_align.h's
// ForEachRoiSample) and the CUDA ones (runtime/cuda/ops/sample/) compute every sample with the very same function.
#pragma once

#include <cstdint>

#include "runtime/common/host_device.h"

namespace onnxamp::ops {

// One sample of a bin: the four taps (flat indices into an H x W plane) and their bilinear weights; all weights are 0
// for a sample outside [-1, H] x [-1, W].
struct RoiSample {
  int64_t pos[4] = {0, 0, 0, 0};
  double w[4] = {0, 0, 0, 0};
};

// Where one roi's bins and samples lie: its start, the size of a bin, the samples per bin and axis, and the number of
// samples avg divides by (grid_h * grid_w, at least 1), as ONNX Runtime (and Detectron) take them.
struct RoiGeometry {
  double start_h = 0, start_w = 0, bin_h = 0, bin_w = 0;
  int64_t grid_h = 0, grid_w = 0, count = 1;
};

// Sample (iy, ix) of bin (ph, pw) of a roi of geometry `g` on an H x W plane (H, W >= 1).
ONNXAMP_HOST_DEVICE inline RoiSample RoiSampleAt(const RoiGeometry& g, int64_t height, int64_t width, int64_t ph,
                                                 int64_t pw, int64_t iy, int64_t ix) {
  const double y = g.start_h + static_cast<double>(ph) * g.bin_h +
                   (static_cast<double>(iy) + 0.5) * g.bin_h / static_cast<double>(g.grid_h);
  const double x = g.start_w + static_cast<double>(pw) * g.bin_w +
                   (static_cast<double>(ix) + 0.5) * g.bin_w / static_cast<double>(g.grid_w);
  RoiSample smp;
  if (y < -1.0 || y > static_cast<double>(height) || x < -1.0 || x > static_cast<double>(width)) return smp;
  double yy = y < 0.0 ? 0.0 : y, xx = x < 0.0 ? 0.0 : x;  // std::max(y, 0.0), as the CPU kernel had it
  int64_t y_low = static_cast<int64_t>(yy), x_low = static_cast<int64_t>(xx), y_high, x_high;
  if (y_low >= height - 1) {
    y_high = y_low = height - 1;
    yy = static_cast<double>(y_low);
  } else {
    y_high = y_low + 1;
  }
  if (x_low >= width - 1) {
    x_high = x_low = width - 1;
    xx = static_cast<double>(x_low);
  } else {
    x_high = x_low + 1;
  }
  const double ly = yy - static_cast<double>(y_low), lx = xx - static_cast<double>(x_low);
  const double hy = 1.0 - ly, hx = 1.0 - lx;
  smp.pos[0] = y_low * width + x_low;
  smp.pos[1] = y_low * width + x_high;
  smp.pos[2] = y_high * width + x_low;
  smp.pos[3] = y_high * width + x_high;
  smp.w[0] = hy * hx;
  smp.w[1] = hy * lx;
  smp.w[2] = ly * hx;
  smp.w[3] = ly * lx;
  return smp;
}

// Bin (ph, pw) of a roi in C, the compute type: mode avg adds the weighted taps of its samples (in order) and divides
// by the sample count; mode max takes the largest weighted tap over its samples (0 without samples). value(pos) reads
// the plane's pixel in C.
template <typename C, typename Value>
ONNXAMP_HOST_DEVICE C RoiBinValue(const RoiGeometry& g, int64_t height, int64_t width, int64_t ph, int64_t pw,
                                  bool max_mode, const Value& value) {
  C acc = 0;
  bool seen = false;
  for (int64_t iy = 0; iy < g.grid_h; ++iy) {
    for (int64_t ix = 0; ix < g.grid_w; ++ix) {
      const RoiSample smp = RoiSampleAt(g, height, width, ph, pw, iy, ix);
      if (max_mode) {
        C v = static_cast<C>(smp.w[0]) * value(smp.pos[0]);
        for (int k = 1; k < 4; ++k) {
          const C t = static_cast<C>(smp.w[k]) * value(smp.pos[k]);
          v = v < t ? t : v;  // std::max(v, t)
        }
        acc = seen ? (acc < v ? v : acc) : v;
        seen = true;
      } else {
        for (int k = 0; k < 4; ++k) acc += static_cast<C>(smp.w[k]) * value(smp.pos[k]);
      }
    }
  }
  return max_mode ? acc : acc / static_cast<C>(g.count);
}

}  // namespace onnxamp::ops
