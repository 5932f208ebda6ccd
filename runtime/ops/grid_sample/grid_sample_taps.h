// GridSample's sampling arithmetic for host and device code: the CPU kernel (grid_sample_cpu.cc) and the CUDA one
// (runtime/cuda/ops/sample/) compute the taps of a grid point with the very same functions. The coordinate arithmetic
// runs in C, the grid's compute type (float for float, float16 and bfloat16; double for double), as PyTorch's does in
// the tensor's type: a float grid value that unnormalises to exactly a half must round as it does there (nearest), not
// as its double widening would.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "runtime/common/host_device.h"

namespace onnxamp::ops::grid_sample {

enum class Mode { kBilinear, kNearest, kBicubic };
enum class Padding { kZeros, kBorder, kReflection };

struct GridSpec {
  Mode mode = Mode::kBilinear;
  Padding padding = Padding::kZeros;
  bool align_corners = false;
};

// The most taps a point reads (bicubic's 4 x 4), and how many a mode reads.
inline constexpr int kMaxTaps = 16;
ONNXAMP_HOST_DEVICE inline int TapsOf(Mode m) { return m == Mode::kBicubic ? 16 : m == Mode::kBilinear ? 4 : 1; }

// A coordinate through the padding, with d(out)/d(in).
template <typename C>
struct Padded {
  C v;
  C grad;
};

// Clamped to [0, size - 1]; the slope is 0 at and beyond the bounds (PyTorch's clip_coordinates_set_grad).
template <typename C>
ONNXAMP_HOST_DEVICE Padded<C> Clip(C x, int64_t size) {
  if (x <= 0) return {0, 0};
  if (x >= static_cast<C>(size - 1)) return {static_cast<C>(size - 1), 0};
  return {x, 1};
}

// Reflects x into [lo, hi] (the twice-doubled bounds PyTorch uses: 2 * low, 2 * high), with the sign of the slope.
// fmod, not an integer count of flips: a coordinate of 1e30 is a grid value too.
template <typename C>
ONNXAMP_HOST_DEVICE Padded<C> Reflect(C x, C twice_lo, C twice_hi) {
  if (twice_lo == twice_hi) return {0, 0};
  const C lo = twice_lo / 2, span = (twice_hi - twice_lo) / 2;
  C grad = 1;
  if (x < lo) {
    x = lo + (lo - x);  // mirror once
    grad = -1;
  }
  const C d = x - lo;
  const C extra = std::fmod(d, span);
  const bool odd = std::fmod(std::floor(d / span), C(2)) != 0;
  if (!odd) return {lo + extra, grad};
  return {span + lo - extra, -grad};
}

template <typename C>
ONNXAMP_HOST_DEVICE Padded<C> Pad(const GridSpec& s, C x, int64_t size) {
  if (s.padding == Padding::kBorder) return Clip(x, size);
  if (s.padding == Padding::kReflection) {
    const Padded<C> r = s.align_corners ? Reflect<C>(x, 0, C(2) * static_cast<C>(size - 1))
                                        : Reflect<C>(x, -1, C(2) * static_cast<C>(size) - 1);
    const Padded<C> c = Clip(r.v, size);
    return {c.v, r.grad * c.grad};
  }
  return {x, 1};
}

// Grid value -> pixel coordinate, and its slope.
template <typename C>
ONNXAMP_HOST_DEVICE C Unnormalize(const GridSpec& s, C g, int64_t size) {
  return s.align_corners ? (g + 1) / 2 * static_cast<C>(size - 1) : ((g + 1) * static_cast<C>(size) - 1) / 2;
}
template <typename C>
ONNXAMP_HOST_DEVICE C UnnormalizeSlope(const GridSpec& s, int64_t size) {
  return s.align_corners ? static_cast<C>(size - 1) / 2 : static_cast<C>(size) / 2;
}

// The cubic convolution weights of the 4 taps at t in [0, 1) (A = -0.75), and their derivatives in t.
template <typename C>
ONNXAMP_HOST_DEVICE C CubicNear(C x) {  // |x| <= 1
  constexpr C A = C(-0.75);
  return ((A + 2) * x - (A + 3)) * x * x + 1;
}
template <typename C>
ONNXAMP_HOST_DEVICE C CubicFar(C x) {  // 1 < |x| < 2
  constexpr C A = C(-0.75);
  return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
}
template <typename C>
ONNXAMP_HOST_DEVICE C CubicNearSlope(C x) {
  constexpr C A = C(-0.75);
  return (3 * (A + 2) * x - 2 * (A + 3)) * x;
}
template <typename C>
ONNXAMP_HOST_DEVICE C CubicFarSlope(C x) {
  constexpr C A = C(-0.75);
  return (3 * A * x - 10 * A) * x + 8 * A;
}
template <typename C>
ONNXAMP_HOST_DEVICE void CubicWeights(C t, C w[4], C dw[4]) {
  w[0] = CubicFar(t + 1);
  w[1] = CubicNear(t);
  w[2] = CubicNear(1 - t);
  w[3] = CubicFar(2 - t);
  dw[0] = CubicFarSlope(t + 1);
  dw[1] = CubicNearSlope(t);
  dw[2] = -CubicNearSlope(1 - t);
  dw[3] = -CubicFarSlope(2 - t);
}

// A coordinate far outside the image, brought to where it samples the same (so that floor and the integer casts stay
// defined): without padding, any point 2 pixels past the edge reads only zeros (bicubic: 4); with border and
// reflection padding, bicubic's taps are padded one by one, and only the reflection's period matters (2^52 keeps
// integers exact).
template <typename C>
ONNXAMP_HOST_DEVICE C Bounded(const GridSpec& s, C x, int64_t size) {
  if (s.padding == Padding::kReflection) return std::clamp(x, C(-4503599627370496.0), C(4503599627370496.0));
  return std::clamp(x, C(-4), static_cast<C>(size + 3));
}

// One tap of a grid point: its flat offset in the H x W plane, weight, and d weight / dx, d weight / dy in pixel units.
struct Tap {
  int64_t offset;
  double w, dwx, dwy;
};

// The taps of one grid point inside the image (in the order the CPU kernel adds them) and the slopes of the padded
// source coordinates in grid units.
struct TapList {
  Tap taps[kMaxTaps];
  int count = 0;
  double sx = 0, sy = 0;
};

// The taps of the point (gx, gy) of an H x W image. False for a NaN grid value (the point is NaN, as in PyTorch). An
// infinite grid value whose coordinate becomes NaN on the way (reflected, or times a zero size - 1 with align_corners)
// samples nothing: no taps, the point reads zeros (PyTorch sends such coordinates out of the image too), and no
// NaN reaches an integer conversion.
template <typename C>
ONNXAMP_HOST_DEVICE bool SampleTaps(const GridSpec& s, C gx, C gy, int64_t H, int64_t W, TapList* out) {
  out->count = 0;
  if (std::isnan(gx) || std::isnan(gy)) return false;
  C x = Unnormalize(s, gx, W), y = Unnormalize(s, gy, H);
  out->sx = static_cast<double>(UnnormalizeSlope<C>(s, W));
  out->sy = static_cast<double>(UnnormalizeSlope<C>(s, H));
  auto inside = [&](int64_t ix, int64_t iy) { return ix >= 0 && ix < W && iy >= 0 && iy < H; };
  auto add = [&](int64_t offset, C w, C dwx, C dwy) {
    out->taps[out->count++] = {offset, static_cast<double>(w), static_cast<double>(dwx), static_cast<double>(dwy)};
  };
  if (s.mode == Mode::kBicubic) {
    x = Bounded(s, x, W);
    y = Bounded(s, y, H);
    if (std::isnan(x) || std::isnan(y)) return true;
    const C fx = std::floor(x), fy = std::floor(y);
    C wx[4], wy[4], dwx[4], dwy[4];
    CubicWeights<C>(x - fx, wx, dwx);
    CubicWeights<C>(y - fy, wy, dwy);
    for (int j = 0; j < 4; ++j) {
      for (int i = 0; i < 4; ++i) {
        // Each tap through the padding (PyTorch's get_value_bounded); a clamped or reflected tap reads another pixel.
        int64_t ix = static_cast<int64_t>(fx) - 1 + i, iy = static_cast<int64_t>(fy) - 1 + j;
        if (s.padding != Padding::kZeros) {
          ix = static_cast<int64_t>(Pad<C>(s, static_cast<C>(ix), W).v);
          iy = static_cast<int64_t>(Pad<C>(s, static_cast<C>(iy), H).v);
        }
        if (inside(ix, iy)) add(iy * W + ix, wx[i] * wy[j], dwx[i] * wy[j], wx[i] * dwy[j]);
      }
    }
    return true;
  }
  Padded<C> px = Pad(s, x, W), py = Pad(s, y, H);
  out->sx *= static_cast<double>(px.grad);
  out->sy *= static_cast<double>(py.grad);
  px.v = Bounded(s, px.v, W);  // zeros padding only: the others are inside already
  py.v = Bounded(s, py.v, H);
  if (std::isnan(px.v) || std::isnan(py.v)) return true;
  if (s.mode == Mode::kNearest) {
    const int64_t ix = static_cast<int64_t>(std::nearbyint(px.v)), iy = static_cast<int64_t>(std::nearbyint(py.v));
    if (inside(ix, iy)) add(iy * W + ix, C(1), C(0), C(0));
    return true;
  }
  const C fx = std::floor(px.v), fy = std::floor(py.v);
  const C tx = px.v - fx, ty = py.v - fy;
  const int64_t x0 = static_cast<int64_t>(fx), y0 = static_cast<int64_t>(fy);
  const C wx[2] = {1 - tx, tx}, wy[2] = {1 - ty, ty}, dw[2] = {-1, 1};
  for (int j = 0; j < 2; ++j) {
    for (int i = 0; i < 2; ++i) {
      if (inside(x0 + i, y0 + j)) add((y0 + j) * W + x0 + i, wx[i] * wy[j], dw[i] * wy[j], wx[i] * dw[j]);
    }
  }
  return true;
}

// Y at one point of one channel: the taps' weighted values summed in double (NaN for a NaN point); value(offset)
// reads the channel's pixel as double.
template <typename Value>
ONNXAMP_HOST_DEVICE double PointValue(const TapList& taps, bool finite, const Value& value) {
  double v = finite ? 0 : std::numeric_limits<double>::quiet_NaN();
  for (int k = 0; k < taps.count; ++k) v += taps.taps[k].w * value(taps.taps[k].offset);
  return v;
}

// One channel's share of a point's grid gradient (in pixel units; times taps.sx and .sy at the end): g, that
// channel's dY, times each tap's pixel and weight slopes, added to *gx and *gy.
template <typename Value>
ONNXAMP_HOST_DEVICE void AddPointGridGrad(const TapList& taps, double g, const Value& value, double* gx, double* gy) {
  for (int k = 0; k < taps.count; ++k) {
    const Tap& t = taps.taps[k];
    const double v = value(t.offset);
    *gx += g * v * t.dwx;
    *gy += g * v * t.dwy;
  }
}

}  // namespace onnxamp::ops::grid_sample
