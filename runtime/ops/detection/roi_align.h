// RoiAlign's attributes and sampling plan, shared by the forward kernel and RoiAlignGrad (runtime/ops/detection/) and
// by their CUDA kernels (runtime/cuda/ops/sample/).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/executor/kernel.h"
#include "runtime/ir/graph.h"
#include "runtime/ops/detection/roi_sample.h"

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

// What RoiAlign and RoiAlignGrad read before computing: X's dims and every roi's geometry and batch index.
struct RoiAlignShape {
  int64_t batch = 0, channels = 0, height = 0, width = 0;
  std::vector<RoiGeometry> rois;
  std::vector<int64_t> batch_indices;
};

// RoiAlign's inputs: X [N, C, H, W] with a non-empty plane, rois [R, 4] (finite, of a sane size) and batch_indices
// [R] within [0, N). rois and batch_indices are read: host tensors.
StatusOr<RoiAlignShape> ResolveRoiAlign(const exec::KernelContext& ctx, const RoiAlignSpec& spec);
// RoiAlignGrad's inputs (dY, X_shape, rois, batch_indices): X_shape a non-empty plane, the rois as above, dY
// [R, C, out_h, out_w]. X_shape, rois and batch_indices are read: host tensors.
StatusOr<RoiAlignShape> ResolveRoiAlignGrad(const exec::KernelContext& ctx, const RoiAlignSpec& spec);
// RoiAlignGrad's attributes: the forward's, read as opset 16's; mode max is refused.
Status InitRoiAlignGradSpec(const exec::KernelInfo& info, RoiAlignSpec* spec);

// Calls f(ph, pw, sample) for each sample of every bin of a roi of geometry `g` on an H x W plane (H, W >= 1), bins
// and their samples in order.
template <typename F>
void ForEachRoiSample(const RoiAlignSpec& s, const RoiGeometry& g, int64_t height, int64_t width, F&& f) {
  for (int64_t ph = 0; ph < s.out_h; ++ph) {
    for (int64_t pw = 0; pw < s.out_w; ++pw) {
      for (int64_t iy = 0; iy < g.grid_h; ++iy) {
        for (int64_t ix = 0; ix < g.grid_w; ++ix) f(ph, pw, RoiSampleAt(g, height, width, ph, pw, iy, ix));
      }
    }
  }
}

}  // namespace onnxamp::ops
