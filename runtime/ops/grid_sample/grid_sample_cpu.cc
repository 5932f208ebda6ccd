// GridSample (CPU, opsets 16-25) on 4-D input and its backward, com.onnxamp GridSampleGrad. X is [N, C, H, W], grid
// [N, Ho, Wo, 2] of (x, y) in [-1, 1]; Y [N, C, Ho, Wo] samples X at each grid point:
//   mode: bilinear (opset 20+: linear), nearest (round half to even), bicubic (cubic; A = -0.75);
//   padding_mode: zeros (taps outside X read 0), border (coordinates clamped), reflection (reflected at the borders);
//   align_corners: -1 and 1 are the centres of the corner pixels (1) or their outer edges (0, the default).
// The arithmetic is PyTorch's grid_sample's (ONNX Runtime's too, but for nearest with reflection, where it rounds
// before reflecting): bilinear and nearest pad the source coordinate once, bicubic pads each of its 16 taps; a NaN
// grid value gives NaN. 5-D input (opset 20's volumetric sampling) is refused.
// GridSampleGrad(dY, X, grid) -> dX, dGrid (optional outputs), with the forward's attributes: dX adds dY times each
// tap's weight at the tap, dGrid is the derivative of the interpolation through the padding and the unnormalisation
// (zero for nearest, and where a coordinate was clamped). Everything in double, rounded once; float types.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/gradient_ops.h"

namespace onnxamp::ops {
namespace {

enum class Mode { kBilinear, kNearest, kBicubic };
enum class Padding { kZeros, kBorder, kReflection };

struct GridSpec {
  Mode mode = Mode::kBilinear;
  Padding padding = Padding::kZeros;
  bool align_corners = false;
};

Status ParseGridSpec(const ir::Node& node, GridSpec* spec) {
  const std::string mode = node.GetString("mode", "bilinear");
  if (mode == "bilinear" || mode == "linear") {
    spec->mode = Mode::kBilinear;
  } else if (mode == "nearest") {
    spec->mode = Mode::kNearest;
  } else if (mode == "bicubic" || mode == "cubic") {
    spec->mode = Mode::kBicubic;
  } else {
    return InvalidArgument("attribute 'mode' must be bilinear/linear, nearest or bicubic/cubic, got '", mode, "'");
  }
  const std::string padding = node.GetString("padding_mode", "zeros");
  if (padding == "zeros") {
    spec->padding = Padding::kZeros;
  } else if (padding == "border") {
    spec->padding = Padding::kBorder;
  } else if (padding == "reflection") {
    spec->padding = Padding::kReflection;
  } else {
    return InvalidArgument("attribute 'padding_mode' must be zeros, border or reflection, got '", padding, "'");
  }
  spec->align_corners = node.GetInt("align_corners", 0) != 0;
  return Status::Ok();
}

// The coordinate arithmetic runs in C, the grid's compute type (float for float, float16 and bfloat16; double for
// double), as PyTorch's does in the tensor's type: a float grid value that unnormalises to exactly a half must round
// as it does there (nearest), not as its double widening would.

// A coordinate through the padding, with d(out)/d(in).
template <typename C>
struct Padded {
  C v;
  C grad;
};

// Clamped to [0, size - 1]; the slope is 0 at and beyond the bounds (PyTorch's clip_coordinates_set_grad).
template <typename C>
Padded<C> Clip(C x, int64_t size) {
  if (x <= 0) return {0, 0};
  if (x >= static_cast<C>(size - 1)) return {static_cast<C>(size - 1), 0};
  return {x, 1};
}

// Reflects x into [lo, hi] (the twice-doubled bounds PyTorch uses: 2 * low, 2 * high), with the sign of the slope.
// fmod, not an integer count of flips: a coordinate of 1e30 is a grid value too.
template <typename C>
Padded<C> Reflect(C x, C twice_lo, C twice_hi) {
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
Padded<C> Pad(const GridSpec& s, C x, int64_t size) {
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
C Unnormalize(const GridSpec& s, C g, int64_t size) {
  return s.align_corners ? (g + 1) / 2 * static_cast<C>(size - 1) : ((g + 1) * static_cast<C>(size) - 1) / 2;
}
template <typename C>
C UnnormalizeSlope(const GridSpec& s, int64_t size) {
  return s.align_corners ? static_cast<C>(size - 1) / 2 : static_cast<C>(size) / 2;
}

// The cubic convolution weights of the 4 taps at t in [0, 1) (A = -0.75), and their derivatives in t.
template <typename C>
void CubicWeights(C t, std::array<C, 4>* w, std::array<C, 4>* dw) {
  constexpr C A = C(-0.75);
  auto near = [](C x) { return ((A + 2) * x - (A + 3)) * x * x + 1; };       // |x| <= 1
  auto far = [](C x) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; };  // 1 < |x| < 2
  auto dnear = [](C x) { return (3 * (A + 2) * x - 2 * (A + 3)) * x; };
  auto dfar = [](C x) { return (3 * A * x - 10 * A) * x + 8 * A; };
  (*w) = {far(t + 1), near(t), near(1 - t), far(2 - t)};
  (*dw) = {dfar(t + 1), dnear(t), -dnear(1 - t), -dfar(2 - t)};
}

// A coordinate far outside the image, brought to where it samples the same (so that floor and the integer casts stay
// defined): without padding, any point 2 pixels past the edge reads only zeros (bicubic: 4); with border and
// reflection padding, bicubic's taps are padded one by one, and only the reflection's period matters (2^52 keeps
// integers exact).
template <typename C>
C Bounded(const GridSpec& s, C x, int64_t size) {
  if (s.padding == Padding::kReflection) return std::clamp(x, C(-4503599627370496.0), C(4503599627370496.0));
  return std::clamp(x, C(-4), static_cast<C>(size + 3));
}

// The taps of one output point: (flat offset in the H x W plane, weight, d weight/dx, d weight/dy in pixel units) and
// the slopes of the padded source coordinates. False for a NaN grid value (the point is NaN, as in PyTorch).
struct Tap {
  int64_t offset;
  double w, dwx, dwy;
};

template <typename C>
bool Taps(const GridSpec& s, C gx, C gy, int64_t H, int64_t W, std::vector<Tap>* taps, double* sx, double* sy) {
  taps->clear();
  if (std::isnan(gx) || std::isnan(gy)) return false;
  C x = Unnormalize(s, gx, W), y = Unnormalize(s, gy, H);
  *sx = static_cast<double>(UnnormalizeSlope<C>(s, W));
  *sy = static_cast<double>(UnnormalizeSlope<C>(s, H));
  auto inside = [&](int64_t ix, int64_t iy) { return ix >= 0 && ix < W && iy >= 0 && iy < H; };
  if (s.mode == Mode::kBicubic) {
    x = Bounded(s, x, W);
    y = Bounded(s, y, H);
    const C fx = std::floor(x), fy = std::floor(y);
    std::array<C, 4> wx, wy, dwx, dwy;
    CubicWeights<C>(x - fx, &wx, &dwx);
    CubicWeights<C>(y - fy, &wy, &dwy);
    for (int j = 0; j < 4; ++j) {
      for (int i = 0; i < 4; ++i) {
        // Each tap through the padding (PyTorch's get_value_bounded); a clamped or reflected tap reads another pixel.
        int64_t ix = static_cast<int64_t>(fx) - 1 + i, iy = static_cast<int64_t>(fy) - 1 + j;
        if (s.padding != Padding::kZeros) {
          ix = static_cast<int64_t>(Pad<C>(s, static_cast<C>(ix), W).v);
          iy = static_cast<int64_t>(Pad<C>(s, static_cast<C>(iy), H).v);
        }
        if (!inside(ix, iy)) continue;
        taps->push_back({iy * W + ix, static_cast<double>(wx[i] * wy[j]), static_cast<double>(dwx[i] * wy[j]),
                         static_cast<double>(wx[i] * dwy[j])});
      }
    }
    return true;
  }
  Padded<C> px = Pad(s, x, W), py = Pad(s, y, H);
  *sx *= static_cast<double>(px.grad);
  *sy *= static_cast<double>(py.grad);
  px.v = Bounded(s, px.v, W);  // zeros padding only: the others are inside already
  py.v = Bounded(s, py.v, H);
  if (s.mode == Mode::kNearest) {
    const int64_t ix = static_cast<int64_t>(std::nearbyint(px.v)), iy = static_cast<int64_t>(std::nearbyint(py.v));
    if (inside(ix, iy)) taps->push_back({iy * W + ix, 1, 0, 0});
    return true;
  }
  const C fx = std::floor(px.v), fy = std::floor(py.v);
  const C tx = px.v - fx, ty = py.v - fy;
  const int64_t x0 = static_cast<int64_t>(fx), y0 = static_cast<int64_t>(fy);
  const std::array<C, 2> wx = {1 - tx, tx}, wy = {1 - ty, ty}, dwx = {-1, 1}, dwy = {-1, 1};
  for (int j = 0; j < 2; ++j) {
    for (int i = 0; i < 2; ++i) {
      if (!inside(x0 + i, y0 + j)) continue;
      taps->push_back({(y0 + j) * W + x0 + i, static_cast<double>(wx[i] * wy[j]), static_cast<double>(dwx[i] * wy[j]),
                       static_cast<double>(wx[i] * dwy[j])});
    }
  }
  return true;
}

// X [N, C, H, W] and grid [N, Ho, Wo, 2] checked against each other.
struct GridShape {
  int64_t n, c, h, w, ho, wo;
};

StatusOr<GridShape> ResolveGrid(const exec::KernelContext& ctx, const ir::Tensor& x, const ir::Tensor& grid,
                                size_t x_index) {
  if (x.rank() != 4) {
    return Unimplemented(InputLabel(ctx, x_index, "X"), " ", ShapeToString(x.dims()),
                         ": GridSample runs on 4-D input [N, C, H, W] only");
  }
  const std::vector<int64_t>& g = grid.dims();
  if (grid.rank() != 4 || g[0] != x.dims()[0] || g[3] != 2) {
    return InvalidArgument(InputLabel(ctx, x_index + 1, "grid"), " must be [N, Ho, Wo, 2] with N ", x.dims()[0],
                           ", got ", ShapeToString(g));
  }
  if (grid.dtype() != x.dtype()) {
    return InvalidArgument(InputLabel(ctx, x_index + 1, "grid"), " has element type ", DTypeName(grid.dtype()),
                           ", expected ", DTypeName(x.dtype()));
  }
  return GridShape{x.dims()[0], x.dims()[1], x.dims()[2], x.dims()[3], g[1], g[2]};
}

class GridSampleCpu : public exec::OpKernel {
 public:
  GridSampleCpu(const exec::KernelInfo& info, Status* st) : grad_(info.node.op_type() == kGridSampleGradOp) {
    *st = ParseGridSpec(info.node, &spec_);
  }

  Status Compute(exec::KernelContext& ctx) const override {
    const size_t xi = grad_ ? 1 : 0;
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, xi, "X"));
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* grid, RequireInput(ctx, xi + 1, "grid"));
    ONNXAMP_ASSIGN_OR_RETURN(const GridShape s, ResolveGrid(ctx, *x, *grid, xi));
    const ir::Tensor* dy = nullptr;
    if (grad_) {
      ONNXAMP_ASSIGN_OR_RETURN(dy, RequireInput(ctx, 0, "dY"));
      const std::vector<int64_t> want = {s.n, s.c, s.ho, s.wo};
      if (dy->dtype() != x->dtype() || dy->dims() != want) {
        return InvalidArgument(InputLabel(ctx, 0, "dY"), " must be ", DTypeName(x->dtype()), " ", ShapeToString(want),
                               ", got ", DTypeName(dy->dtype()), " ", ShapeToString(dy->dims()));
      }
    }
    return DispatchFloat(x->dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const T* px = x->values<T>().data();
      const T* pg = grid->values<T>().data();
      const int64_t plane = s.h * s.w, points = s.ho * s.wo;
      std::vector<Tap> taps;
      double sx = 0, sy = 0;
      if (!grad_) {
        ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), {s.n, s.c, s.ho, s.wo}));
        T* py = y->mutable_values<T>().data();
        for (int64_t b = 0; b < s.n; ++b) {
          for (int64_t p = 0; p < points; ++p) {
            const T* gp = pg + (b * points + p) * 2;
            const bool finite = Taps<ComputeType<T>>(spec_, Load<T>(gp[0]), Load<T>(gp[1]), s.h, s.w, &taps, &sx, &sy);
            for (int64_t ch = 0; ch < s.c; ++ch) {
              const T* xc = px + (b * s.c + ch) * plane;
              double v = finite ? 0 : std::numeric_limits<double>::quiet_NaN();
              for (const Tap& t : taps) v += t.w * static_cast<double>(Load<T>(xc[t.offset]));
              py[(b * s.c + ch) * points + p] = Store<T>(static_cast<ComputeType<T>>(v));
            }
          }
        }
        return Status::Ok();
      }
      const T* pdy = dy->values<T>().data();
      std::vector<double> dx(ctx.output_requested(0) ? static_cast<size_t>(x->num_elements()) : 0, 0.0);
      std::vector<double> dgrid(ctx.output_requested(1) ? static_cast<size_t>(grid->num_elements()) : 0, 0.0);
      for (int64_t b = 0; b < s.n; ++b) {
        for (int64_t p = 0; p < points; ++p) {
          const T* gp = pg + (b * points + p) * 2;
          const bool finite = Taps<ComputeType<T>>(spec_, Load<T>(gp[0]), Load<T>(gp[1]), s.h, s.w, &taps, &sx, &sy);
          double gx = finite ? 0 : std::numeric_limits<double>::quiet_NaN(), gy = gx;
          for (int64_t ch = 0; ch < s.c; ++ch) {
            const double g = static_cast<double>(Load<T>(pdy[(b * s.c + ch) * points + p]));
            const T* xc = px + (b * s.c + ch) * plane;
            for (const Tap& t : taps) {
              if (!dx.empty()) dx[static_cast<size_t>((b * s.c + ch) * plane + t.offset)] += g * t.w;
              const double v = static_cast<double>(Load<T>(xc[t.offset]));
              gx += g * v * t.dwx;
              gy += g * v * t.dwy;
            }
          }
          if (!dgrid.empty()) {
            dgrid[static_cast<size_t>((b * points + p) * 2)] = gx * sx;
            dgrid[static_cast<size_t>((b * points + p) * 2 + 1)] = gy * sy;
          }
        }
      }
      for (size_t k = 0; k < 2; ++k) {
        const std::vector<double>& values = k == 0 ? dx : dgrid;
        if (!ctx.output_requested(k)) continue;
        ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * out,
                                 ctx.AllocateOutput(k, x->dtype(), k == 0 ? x->dims() : grid->dims()));
        T* po = out->mutable_values<T>().data();
        for (size_t i = 0; i < values.size(); ++i) po[i] = Store<T>(static_cast<ComputeType<T>>(values[i]));
      }
      return Status::Ok();
    });
  }

 private:
  bool grad_;
  GridSpec spec_;
};

}  // namespace

void RegisterGridSampleKernels(exec::KernelRegistry& r) {
  const std::vector<DType> types = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64};
  r.Register({"GridSample", "", 16, 25, exec::Device::kCpu, types, 0, &exec::MakeKernel<GridSampleCpu>});
  r.Register(
      {kGridSampleGradOp, exec::kInternalDomain, 1, 1, exec::Device::kCpu, types, 0, &exec::MakeKernel<GridSampleCpu>});
}

}  // namespace onnxamp::ops
