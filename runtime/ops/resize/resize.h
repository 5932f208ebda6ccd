// Resize and Upsample: attribute parsing, output sizes and per-axis sampling tables, shared by the CPU kernel and
// device kernels (which apply the same tables, so every backend computes the same source indices and weights).
//
// See resize_cpu.cc for the semantics of every mode.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/common/shape_util.h"

namespace onnxamp::ops {

enum class InterpMode { kNearest, kLinear, kCubic };
enum class CoordMode {
  kHalfPixel,
  kPytorchHalfPixel,
  kAlignCorners,
  kAsymmetric,
  kTfHalfPixelForNn,
  kTfCropAndResize,
  kHalfPixelSymmetric
};
enum class NearestMode { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil, kLegacy };
enum class AspectPolicy { kStretch, kNotLarger, kNotSmaller };

struct ResizeAttrs {
  InterpMode mode = InterpMode::kNearest;
  CoordMode coord = CoordMode::kHalfPixel;
  NearestMode nearest = NearestMode::kRoundPreferFloor;
  AspectPolicy aspect = AspectPolicy::kStretch;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  bool antialias = false;
  double extrapolation = 0.0;
  std::vector<int64_t> axes;  // empty: all axes
  bool has_axes = false;
};

// How one axis is resampled.
struct AxisPlan {
  int64_t in = 0, out = 0;
  double scale = 1.0;
  double roi_start = 0.0, roi_end = 1.0;
  bool identity = true;
  // Nearest: the source index per output index (-1: extrapolation value). Linear/cubic: `taps` clamped source
  // indices and weights per output index, and whether the output index takes the extrapolation value.
  std::vector<int64_t> src;
  int64_t taps = 0;
  std::vector<int64_t> tap_index;
  std::vector<double> tap_weight;
  std::vector<bool> extrapolate;
};

// Fills the index/weight tables of one axis (src for nearest; taps, tap_index, tap_weight and extrapolate for
// linear and cubic); leaves an identity axis (identity = true) without tables.
void PlanAxis(const ResizeAttrs& at, AxisPlan& a);

// The parsed attributes of one Resize or Upsample node, and the output sizes of a run.
class ResizeSpec {
 public:
  // Parses and checks the node's attributes for `opset` (InvalidArgument naming a bad attribute).
  Status Parse(const ir::Node& node, int64_t opset);
  // The same for the attributes of a Resize (`upsample` false) or Upsample node carried by another node (ResizeGrad).
  Status Parse(const ir::Node& node, int64_t opset, bool upsample);

  // One plan per input axis with in/out sizes, scale and roi (tables not filled: see PlanAxis), from the node's
  // scales/sizes/roi inputs (host tensors) or attributes. Fails as the CPU kernel reports: both or neither of
  // scales and sizes, wrong lengths, bad values, and an empty axis resized to a non-empty one.
  StatusOr<std::vector<AxisPlan>> PlanAxes(const exec::KernelContext& ctx, const std::vector<int64_t>& x_dims) const;
  StatusOr<std::vector<AxisPlan>> PlanAxes(const exec::KernelContext& ctx, const ir::Tensor& x) const {
    return PlanAxes(ctx, x.dims());
  }

  const ResizeAttrs& attrs() const { return attrs_; }

  // extrapolation_value as one element of the data's type (numeric and bool types only).
  template <typename T>
  Status ExtrapolationValue(DType dtype, T* fill) const {
    if constexpr (std::is_same_v<T, std::string> || std::is_same_v<T, Bytes16>) {
      return Unimplemented("tf_crop_and_resize on ", DTypeName(dtype), " data (no extrapolation value of that type)");
    } else {
      return DispatchNumericOrBool(dtype, [&](auto vt) -> Status {
        using V = typename decltype(vt)::type;
        if constexpr (sizeof(V) == sizeof(T)) {
          const V v = Store<V>(static_cast<ComputeType<V>>(attrs_.extrapolation));
          std::memcpy(fill, &v, sizeof(T));
        }
        return Status::Ok();
      });
    }
  }

 private:
  bool upsample_ = false;
  int64_t opset_ = 0;
  ResizeAttrs attrs_;
  std::vector<float> scales_attr_;  // Upsample-7
};

}  // namespace onnxamp::ops
