// Resize and Upsample: attribute parsing, output sizes and the per-axis sampling tables (see resize.h).
#include <cmath>

#include "runtime/ops/resize/resize.h"

namespace onnxamp::ops {
namespace {

// The source coordinate of output index x, as ONNX's reference computes it.
double SourceCoordinate(CoordMode mode, double x, const AxisPlan& a) {
  const double in = static_cast<double>(a.in);
  const double output_width = a.scale * in;
  switch (mode) {
    case CoordMode::kHalfPixel:
      return (x + 0.5) / a.scale - 0.5;
    case CoordMode::kPytorchHalfPixel:
      return output_width == 1 ? -0.5 : (x + 0.5) / a.scale - 0.5;
    case CoordMode::kAlignCorners:
      return output_width == 1 ? 0.0 : x * (in - 1) / (output_width - 1);
    case CoordMode::kAsymmetric:
      return x / a.scale;
    case CoordMode::kTfHalfPixelForNn:
      return (x + 0.5) / a.scale;
    case CoordMode::kTfCropAndResize: {
      const double span = a.roi_end - a.roi_start;
      const double v = output_width == 1 ? span * (in - 1) / 2 : x * span * (in - 1) / (output_width - 1);
      return v + a.roi_start * (in - 1);
    }
    case CoordMode::kHalfPixelSymmetric: {
      const double adjustment = static_cast<double>(a.out) / output_width;
      const double offset = in / 2 * (1 - adjustment);
      return offset + (x + 0.5) / a.scale - 0.5;
    }
  }
  return x;
}

int64_t NearestIndex(double x, NearestMode mode, bool downsampling) {
  const double fl = std::floor(x);
  const double ratio = x - fl;
  double r = fl;
  switch (mode) {
    case NearestMode::kRoundPreferFloor:
      r = ratio <= 0.5 ? fl : fl + 1;
      break;
    case NearestMode::kRoundPreferCeil:
      r = ratio < 0.5 ? fl : fl + 1;
      break;
    case NearestMode::kFloor:
      r = fl;
      break;
    case NearestMode::kCeil:
      r = std::ceil(x);
      break;
    case NearestMode::kLegacy:
      r = downsampling ? std::ceil(x) : std::trunc(x);
      break;
  }
  return static_cast<int64_t>(r);
}

// The interpolation kernel at distance t (already scaled).
double KernelWeight(InterpMode mode, double t, double a) {
  t = std::abs(t);
  if (mode == InterpMode::kLinear) return std::max(0.0, 1.0 - t);
  if (t <= 1) return ((a + 2) * t - (a + 3)) * t * t + 1;
  if (t < 2) return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a;
  return 0.0;
}

}  // namespace

void PlanAxis(const ResizeAttrs& at, AxisPlan& a) {
  const bool crop = at.coord == CoordMode::kTfCropAndResize;
  a.identity = a.out == a.in && a.scale == 1.0 && (!crop || (a.roi_start == 0.0 && a.roi_end == 1.0));
  if (a.identity) return;
  const int64_t last = a.in - 1;
  if (at.mode == InterpMode::kNearest) {
    a.src.resize(static_cast<size_t>(a.out));
    for (int64_t o = 0; o < a.out; ++o) {
      double x = SourceCoordinate(at.coord, static_cast<double>(o), a);
      if (crop && (x < 0 || x > static_cast<double>(last))) {
        a.src[o] = -1;
        continue;
      }
      x = std::clamp(x, -1.0, static_cast<double>(a.in));  // keeps the integer conversion defined
      a.src[o] = std::clamp<int64_t>(NearestIndex(x, at.nearest, a.scale < 1.0), 0, last);
    }
    return;
  }
  // Linear: kernel support 1, cubic: 2, both stretched by 1/scale when antialiasing a downsampling axis.
  const double support = at.mode == InterpMode::kLinear ? 1.0 : 2.0;
  const double s = at.antialias ? std::min(a.scale, 1.0) : 1.0;
  const int64_t start = static_cast<int64_t>(std::floor(-support / s)) + 1;
  a.taps = 2 - 2 * start;
  a.tap_index.resize(static_cast<size_t>(a.out * a.taps));
  a.tap_weight.resize(a.tap_index.size());
  a.extrapolate.assign(static_cast<size_t>(a.out), false);
  for (int64_t o = 0; o < a.out; ++o) {
    double x = SourceCoordinate(at.coord, static_cast<double>(o), a);
    if (crop && (x < 0 || x > static_cast<double>(last))) {
      a.extrapolate[o] = true;
      x = 0;
    }
    x = std::clamp(x, -2.0 * static_cast<double>(a.in) - 4, 2.0 * static_cast<double>(a.in) + 4);
    // The window starts left of x; at an integer x the reference keeps x as the right neighbour (ratio 1).
    double base = std::floor(x);
    double ratio = x - base;
    if (ratio == 0) {
      base -= 1;
      ratio = 1;
    }
    int64_t* idx = &a.tap_index[o * a.taps];
    double* w = &a.tap_weight[o * a.taps];
    double sum = 0;
    for (int64_t k = 0; k < a.taps; ++k) {
      const int64_t rel = start + k;
      idx[k] = static_cast<int64_t>(base) + rel;
      w[k] = KernelWeight(at.mode, (static_cast<double>(rel) - ratio) * s, at.cubic_a);
      sum += w[k];
    }
    if (at.antialias && sum != 0) {
      for (int64_t k = 0; k < a.taps; ++k) w[k] /= sum;
    }
    if (at.exclude_outside) {
      double kept = 0;
      for (int64_t k = 0; k < a.taps; ++k) {
        if (idx[k] < 0 || idx[k] > last) w[k] = 0;
        kept += w[k];
      }
      if (kept != 0) {
        for (int64_t k = 0; k < a.taps; ++k) w[k] /= kept;
      }
    }
    for (int64_t k = 0; k < a.taps; ++k) idx[k] = std::clamp<int64_t>(idx[k], 0, last);
  }
}

namespace {

// Reads a float tensor (float, float16, bfloat16, double) as doubles.
StatusOr<std::vector<double>> ReadFloats(const ir::Tensor& t, std::string_view label) {
  std::vector<double> out;
  Status st = DispatchFloat(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    for (T v : t.values<T>()) out.push_back(static_cast<double>(Load<T>(v)));
    return Status::Ok();
  });
  if (!st.ok()) return InvalidArgument(label, " must be a float tensor, got ", DTypeName(t.dtype()));
  return out;
}

// Parses a string attribute against a table of accepted values, naming them all in the error.
template <typename E>
Status ParseChoice(const ir::Node& node, const char* name, const char* def,
                   std::initializer_list<std::pair<const char*, E>> choices, E* out) {
  const std::string v = node.GetString(name, def);
  std::string accepted;
  for (const auto& [text, value] : choices) {
    if (v == text) {
      *out = value;
      return Status::Ok();
    }
    accepted += StrCat(accepted.empty() ? "" : ", ", text);
  }
  return InvalidArgument("attribute '", name, "' is '", v, "'; expected one of ", accepted);
}

}  // namespace

Status ResizeSpec::Parse(const ir::Node& node, int64_t opset) {
  return Parse(node, opset, node.op_type() == "Upsample");
}

Status ResizeSpec::Parse(const ir::Node& node, int64_t opset, bool upsample) {
  upsample_ = upsample;
  opset_ = opset;
  ResizeAttrs& at = attrs_;
  std::string mode = node.GetString("mode", "nearest");
  if (upsample_ && mode == "bilinear") mode = "linear";
  if (mode == "nearest") {
    at.mode = InterpMode::kNearest;
  } else if (mode == "linear") {
    at.mode = InterpMode::kLinear;
  } else if (mode == "cubic" && !upsample_ && opset_ >= 11) {
    at.mode = InterpMode::kCubic;
  } else {
    return InvalidArgument("attribute 'mode' is '", mode, "'; expected nearest or linear",
                           upsample_ || opset_ < 11 ? "" : " or cubic");
  }
  if (upsample_ || opset_ < 11) {
    at.coord = CoordMode::kAsymmetric;
    at.nearest = NearestMode::kLegacy;
    if (upsample_ && opset_ < 9) {
      const ir::Attribute* s = node.FindAttribute("scales");
      if (!s) return InvalidArgument("Upsample-", opset_, " needs the floats attribute 'scales'");
      scales_attr_ = s->floats;
    }
    return Status::Ok();
  }
  ONNXAMP_RETURN_IF_ERROR(ParseChoice<CoordMode>(node, "coordinate_transformation_mode", "half_pixel",
                                                 {{"half_pixel", CoordMode::kHalfPixel},
                                                  {"pytorch_half_pixel", CoordMode::kPytorchHalfPixel},
                                                  {"align_corners", CoordMode::kAlignCorners},
                                                  {"asymmetric", CoordMode::kAsymmetric},
                                                  {"tf_half_pixel_for_nn", CoordMode::kTfHalfPixelForNn},
                                                  {"tf_crop_and_resize", CoordMode::kTfCropAndResize},
                                                  {"half_pixel_symmetric", CoordMode::kHalfPixelSymmetric}},
                                                 &at.coord));
  if (at.coord == CoordMode::kHalfPixelSymmetric && opset_ < 19) {
    return InvalidArgument("coordinate_transformation_mode 'half_pixel_symmetric' needs opset 19, the model has ",
                           opset_);
  }
  ONNXAMP_RETURN_IF_ERROR(ParseChoice<NearestMode>(node, "nearest_mode", "round_prefer_floor",
                                                   {{"round_prefer_floor", NearestMode::kRoundPreferFloor},
                                                    {"round_prefer_ceil", NearestMode::kRoundPreferCeil},
                                                    {"floor", NearestMode::kFloor},
                                                    {"ceil", NearestMode::kCeil}},
                                                   &at.nearest));
  at.cubic_a = node.GetFloat("cubic_coeff_a", -0.75f);
  at.exclude_outside = node.GetInt("exclude_outside", 0) != 0;
  at.extrapolation = node.GetFloat("extrapolation_value", 0.0f);
  if (opset_ >= 18) {
    at.antialias = node.GetInt("antialias", 0) != 0 && at.mode != InterpMode::kNearest;
    ONNXAMP_RETURN_IF_ERROR(ParseChoice<AspectPolicy>(node, "keep_aspect_ratio_policy", "stretch",
                                                      {{"stretch", AspectPolicy::kStretch},
                                                       {"not_larger", AspectPolicy::kNotLarger},
                                                       {"not_smaller", AspectPolicy::kNotSmaller}},
                                                      &at.aspect));
    if (const ir::Attribute* a = node.FindAttribute("axes")) {
      at.axes = a->ints;
      at.has_axes = true;
    }
  }
  return Status::Ok();
}

StatusOr<std::vector<AxisPlan>> ResizeSpec::PlanAxes(const exec::KernelContext& ctx,
                                                     const std::vector<int64_t>& x_dims) const {
  const ResizeAttrs& at = attrs_;
  const int64_t rank = static_cast<int64_t>(x_dims.size());
  std::vector<int64_t> axes;
  if (at.has_axes) {
    ONNXAMP_ASSIGN_OR_RETURN(axes, NormalizeAxes(at.axes, rank, "attribute 'axes'"));
  } else {
    for (int64_t k = 0; k < rank; ++k) axes.push_back(k);
  }
  const size_t n = axes.size();
  // Where scales, sizes and roi come from in this version.
  const ir::Tensor* scales_t = nullptr;
  const ir::Tensor* sizes_t = nullptr;
  const ir::Tensor* roi_t = nullptr;
  size_t scales_input = 2;
  if (upsample_ || opset_ < 11) {
    scales_input = 1;
    if (upsample_ && opset_ < 9) {
      // Upsample-7: the attribute.
    } else {
      ONNXAMP_ASSIGN_OR_RETURN(scales_t, RequireInput(ctx, 1, "scales"));
    }
  } else {
    roi_t = ctx.input(1);
    scales_t = ctx.input(2);
    sizes_t = ctx.input(3);
    if (scales_t && scales_t->num_elements() == 0) scales_t = nullptr;
    if (sizes_t && sizes_t->num_elements() == 0) sizes_t = nullptr;
    if (roi_t && roi_t->num_elements() == 0) roi_t = nullptr;
    if (scales_t && sizes_t) return InvalidArgument("both scales and sizes are given; expected exactly one");
    if (!scales_t && !sizes_t) return InvalidArgument("neither scales nor sizes is given; expected exactly one");
  }
  std::vector<AxisPlan> plans(static_cast<size_t>(rank));
  for (int64_t k = 0; k < rank; ++k) plans[k].in = plans[k].out = x_dims[k];

  if (sizes_t) {
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, ReadInt64s(*sizes_t, InputLabel(ctx, 3, "sizes")));
    if (sizes.size() != n) {
      return InvalidArgument("sizes ", ShapeToString(sizes), " has ", sizes.size(), " entries; expected ", n,
                             " for input ", ShapeToString(x_dims));
    }
    for (int64_t s : sizes) {
      if (s < 0) return InvalidArgument("sizes ", ShapeToString(sizes), " has a negative size");
    }
    if (at.aspect == AspectPolicy::kStretch) {
      for (size_t i = 0; i < n; ++i) {
        AxisPlan& a = plans[axes[i]];
        a.out = sizes[i];
        a.scale = a.in ? static_cast<double>(a.out) / static_cast<double>(a.in) : 1.0;
      }
    } else {
      double scale = at.aspect == AspectPolicy::kNotLarger ? INFINITY : 0.0;
      for (size_t i = 0; i < n; ++i) {
        const int64_t in = plans[axes[i]].in;
        if (in == 0) return InvalidArgument("keep_aspect_ratio_policy cannot scale the empty axis ", axes[i]);
        const double r = static_cast<double>(sizes[i]) / static_cast<double>(in);
        scale = at.aspect == AspectPolicy::kNotLarger ? std::min(scale, r) : std::max(scale, r);
      }
      for (size_t i = 0; i < n; ++i) {
        AxisPlan& a = plans[axes[i]];
        a.scale = scale;
        a.out = static_cast<int64_t>(scale * static_cast<double>(a.in) + 0.5);
      }
    }
  } else {
    std::vector<double> scales;
    if (scales_t) {
      ONNXAMP_ASSIGN_OR_RETURN(scales, ReadFloats(*scales_t, InputLabel(ctx, scales_input, "scales")));
    } else {
      scales.assign(scales_attr_.begin(), scales_attr_.end());
    }
    if (scales.size() != n) {
      return InvalidArgument("scales has ", scales.size(), " entries; expected ", n, " for input ",
                             ShapeToString(x_dims));
    }
    for (size_t i = 0; i < n; ++i) {
      const double s = scales[i];
      if (!(s > 0) || !std::isfinite(s)) {
        return InvalidArgument("scale ", s, " for axis ", axes[i], " must be positive and finite");
      }
      AxisPlan& a = plans[axes[i]];
      const double out = std::floor(s * static_cast<double>(a.in));
      if (out > 9.0e18) return OutOfRange("scale ", s, " makes axis ", axes[i], " of size ", a.in, " too large");
      a.scale = s;
      a.out = static_cast<int64_t>(out);
    }
  }
  if (at.coord == CoordMode::kTfCropAndResize) {
    if (!roi_t) return InvalidArgument("coordinate_transformation_mode 'tf_crop_and_resize' needs the roi input");
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<double> roi, ReadFloats(*roi_t, InputLabel(ctx, 1, "roi")));
    if (roi.size() != 2 * n) {
      return InvalidArgument("roi has ", roi.size(), " entries; expected ", 2 * n, " (start and end for ", n, " axes)");
    }
    for (size_t i = 0; i < n; ++i) {
      plans[axes[i]].roi_start = roi[i];
      plans[axes[i]].roi_end = roi[n + i];
    }
  }
  for (const AxisPlan& a : plans) {
    if (a.in == 0 && a.out > 0) {
      std::vector<int64_t> out_dims;
      for (const AxisPlan& p : plans) out_dims.push_back(p.out);
      return InvalidArgument("cannot resize input ", ShapeToString(x_dims), " to ", ShapeToString(out_dims),
                             ": an empty axis cannot be resized to a non-empty one");
    }
  }
  return plans;
}

}  // namespace onnxamp::ops
