// RoiAlign's attributes and sampling plan, shared by the forward kernel and RoiAlignGrad (runtime/ops/detection/).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "runtime/common/status.h"
#include "runtime/ir/graph.h"

namespace onnxamp::ops {

struct RoiAlignSpec {
  bool max_mode = false;   // mode "max" (else "avg")
  bool half_pixel = true;  // coordinate_transformation_mode "half_pixel" (opset 16+ default); opset 10: false
  int64_t out_h = 1, out_w = 1;
  int64_t sampling_ratio = 0;  // 0: ceil(roi size / output size) samples per bin and axis
  double spatial_scale = 1.0;

  // Reads the attributes of `node` at `opset`; the error names the attribute.
  Status Init(const ir::Node& node, int64_t opset);
};

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

// The largest number of samples one roi may take (over all its bins): a roi vastly larger than the image (a hostile
// or broken box) is refused instead of running for hours.
inline constexpr double kMaxRoiSamples = 1 << 26;

// The geometry of roi [x1, y1, x2, y2] (finite); an error when it would take more than kMaxRoiSamples samples.
inline StatusOr<RoiGeometry> MakeRoiGeometry(const RoiAlignSpec& s, const double roi[4]) {
  const double offset = s.half_pixel ? 0.5 : 0.0;
  RoiGeometry g;
  g.start_w = roi[0] * s.spatial_scale - offset;
  g.start_h = roi[1] * s.spatial_scale - offset;
  double roi_w = roi[2] * s.spatial_scale - offset - g.start_w, roi_h = roi[3] * s.spatial_scale - offset - g.start_h;
  if (!s.half_pixel) {  // opset 10 ("output_half_pixel"): a roi is at least one pixel
    roi_w = std::max(roi_w, 1.0);
    roi_h = std::max(roi_h, 1.0);
  }
  g.bin_h = roi_h / static_cast<double>(s.out_h);
  g.bin_w = roi_w / static_cast<double>(s.out_w);
  const double grid_h = s.sampling_ratio > 0 ? static_cast<double>(s.sampling_ratio) : std::ceil(g.bin_h);
  const double grid_w = s.sampling_ratio > 0 ? static_cast<double>(s.sampling_ratio) : std::ceil(g.bin_w);
  const double samples = std::fabs(grid_h) * std::fabs(grid_w) * static_cast<double>(s.out_h * s.out_w);
  if (!(samples <= kMaxRoiSamples)) {
    return InvalidArgument("the roi [", roi[0], ", ", roi[1], ", ", roi[2], ", ", roi[3], "] would take ", samples,
                           " samples (at most ", kMaxRoiSamples, "): a box far larger than the image");
  }
  // A reversed roi (x2 < x1, half_pixel) gives a negative grid: no sample, as in ONNX Runtime.
  g.grid_h = static_cast<int64_t>(grid_h);
  g.grid_w = static_cast<int64_t>(grid_w);
  g.count = std::max<int64_t>(g.grid_h * g.grid_w, 1);
  return g;
}

// Calls f(ph, pw, sample) for each sample of every bin of a roi of geometry `g` on an H x W plane (H, W >= 1).
template <typename F>
void ForEachRoiSample(const RoiAlignSpec& s, const RoiGeometry& g, int64_t height, int64_t width, F&& f) {
  for (int64_t ph = 0; ph < s.out_h; ++ph) {
    for (int64_t pw = 0; pw < s.out_w; ++pw) {
      for (int64_t iy = 0; iy < g.grid_h; ++iy) {
        const double y = g.start_h + static_cast<double>(ph) * g.bin_h +
                         (static_cast<double>(iy) + 0.5) * g.bin_h / static_cast<double>(g.grid_h);
        for (int64_t ix = 0; ix < g.grid_w; ++ix) {
          const double x = g.start_w + static_cast<double>(pw) * g.bin_w +
                           (static_cast<double>(ix) + 0.5) * g.bin_w / static_cast<double>(g.grid_w);
          RoiSample smp;
          if (y < -1.0 || y > static_cast<double>(height) || x < -1.0 || x > static_cast<double>(width)) {
            f(ph, pw, smp);
            continue;
          }
          double yy = std::max(y, 0.0), xx = std::max(x, 0.0);
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
          f(ph, pw, smp);
        }
      }
    }
  }
}

}  // namespace onnxamp::ops
