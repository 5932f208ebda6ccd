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
// (zero for nearest, and where a coordinate was clamped). Everything in double, rounded once; float types. The taps
// of a point come from grid_sample_taps.h, which the CUDA kernel shares.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/grid_sample/grid_sample.h"

namespace onnxamp::ops {
namespace grid_sample {

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

Status CheckGridSampleDy(const exec::KernelContext& ctx, const ir::Tensor& dy, const ir::Tensor& x,
                         const GridShape& s) {
  const std::vector<int64_t> want = {s.n, s.c, s.ho, s.wo};
  if (dy.dtype() != x.dtype() || dy.dims() != want) {
    return InvalidArgument(InputLabel(ctx, 0, "dY"), " must be ", DTypeName(x.dtype()), " ", ShapeToString(want),
                           ", got ", DTypeName(dy.dtype()), " ", ShapeToString(dy.dims()));
  }
  return Status::Ok();
}

}  // namespace grid_sample

namespace {

using grid_sample::GridShape;
using grid_sample::GridSpec;
using grid_sample::TapList;

class GridSampleCpu : public exec::OpKernel {
 public:
  GridSampleCpu(const exec::KernelInfo& info, Status* st) : grad_(info.node.op_type() == kGridSampleGradOp) {
    *st = grid_sample::ParseGridSpec(info.node, &spec_);
  }

  Status Compute(exec::KernelContext& ctx) const override {
    const size_t xi = grad_ ? 1 : 0;
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, xi, "X"));
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* grid, RequireInput(ctx, xi + 1, "grid"));
    ONNXAMP_ASSIGN_OR_RETURN(const GridShape s, grid_sample::ResolveGrid(ctx, *x, *grid, xi));
    const ir::Tensor* dy = nullptr;
    if (grad_) {
      ONNXAMP_ASSIGN_OR_RETURN(dy, RequireInput(ctx, 0, "dY"));
      ONNXAMP_RETURN_IF_ERROR(grid_sample::CheckGridSampleDy(ctx, *dy, *x, s));
    }
    return DispatchFloat(x->dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const T* px = x->values<T>().data();
      const T* pg = grid->values<T>().data();
      const int64_t plane = s.h * s.w, points = s.ho * s.wo;
      TapList taps;
      if (!grad_) {
        ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), {s.n, s.c, s.ho, s.wo}));
        T* py = y->mutable_values<T>().data();
        for (int64_t b = 0; b < s.n; ++b) {
          for (int64_t p = 0; p < points; ++p) {
            const T* gp = pg + (b * points + p) * 2;
            const bool finite =
                grid_sample::SampleTaps<ComputeType<T>>(spec_, Load<T>(gp[0]), Load<T>(gp[1]), s.h, s.w, &taps);
            for (int64_t ch = 0; ch < s.c; ++ch) {
              const T* xc = px + (b * s.c + ch) * plane;
              const double v = grid_sample::PointValue(
                  taps, finite, [&](int64_t offset) { return static_cast<double>(Load<T>(xc[offset])); });
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
          const bool finite =
              grid_sample::SampleTaps<ComputeType<T>>(spec_, Load<T>(gp[0]), Load<T>(gp[1]), s.h, s.w, &taps);
          double gx = finite ? 0 : std::numeric_limits<double>::quiet_NaN(), gy = gx;
          for (int64_t ch = 0; ch < s.c; ++ch) {
            const double g = static_cast<double>(Load<T>(pdy[(b * s.c + ch) * points + p]));
            const T* xc = px + (b * s.c + ch) * plane;
            for (int k = 0; k < taps.count && !dx.empty(); ++k) {
              dx[static_cast<size_t>((b * s.c + ch) * plane + taps.taps[k].offset)] += g * taps.taps[k].w;
            }
            grid_sample::AddPointGridGrad(
                taps, g, [&](int64_t offset) { return static_cast<double>(Load<T>(xc[offset])); }, &gx, &gy);
          }
          if (!dgrid.empty()) {
            dgrid[static_cast<size_t>((b * points + p) * 2)] = gx * taps.sx;
            dgrid[static_cast<size_t>((b * points + p) * 2 + 1)] = gy * taps.sy;
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
