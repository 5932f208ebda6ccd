// Resize (opsets 10-25) and Upsample (opsets 7-9) on the CPU.
//
// Modes: nearest (any element type of 1-16 bytes, strings included: elements are copied), linear and cubic
// (float, float16, bfloat16, double; computed in float, or double for double, with weights in double). Linear and
// cubic work on any number of axes (bilinear, trilinear, ...) one axis at a time: interpolation is separable.
//
// For each resized axis an output index x maps to a source coordinate x_ori by the
// coordinate_transformation_mode (half_pixel, pytorch_half_pixel, align_corners, asymmetric, tf_half_pixel_for_nn,
// tf_crop_and_resize with `roi`, half_pixel_symmetric from opset 19), following ONNX's reference implementation:
// `output_width` there is scale * input length, which differs from the integer output length when a scale is
// given. nearest picks one source index by nearest_mode (round_prefer_floor, round_prefer_ceil, floor, ceil);
// linear and cubic weigh the neighbours of x_ori with a triangle or a cubic kernel (cubic_coeff_a), stretched by
// 1/scale when antialias=1 and downsampling (opset 18+), with taps outside the input dropped and the rest
// renormalised when exclude_outside=1, and otherwise clamped to the edge. tf_crop_and_resize writes
// extrapolation_value where x_ori falls outside the input.
//
// Output sizes: from `scales` floor(scale * dim); from `sizes` as given, or with keep_aspect_ratio_policy
// not_larger / not_smaller (18+) one common scale and round-half-up sizes over the resized axes. `axes` (18+)
// names the axes that scales, sizes and roi refer to.
//
// Opset 10 Resize and Upsample have no coordinate or nearest mode attributes; they behave as ONNX Runtime does:
// asymmetric coordinates and, for nearest, the floor of x_ori when upsampling and its ceiling when downsampling.
#include <cmath>

#include "runtime/executor/kernel.h"
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/resize/resize.h"

namespace onnxamp::ops {
namespace {

// One separable pass: resamples axis `axis` of `src` (dims `dims`, compute type C) into `dst`.
template <typename C>
void InterpolateAxis(const std::vector<C>& src, std::vector<C>& dst, const std::vector<int64_t>& dims, size_t axis,
                     const AxisPlan& a, C extrapolation, exec::ThreadPool& pool) {
  const int64_t outer = DimProduct(dims, 0, axis);
  const int64_t inner = DimProduct(dims, axis + 1, dims.size());
  dst.assign(static_cast<size_t>(outer * a.out * inner), C(0));
  auto run = [&](int64_t begin, int64_t end) {
    for (int64_t u = begin; u < end; ++u) {
      const int64_t ob = u / a.out, o = u % a.out;
      C* d = dst.data() + u * inner;
      if (a.extrapolate[o]) {
        std::fill_n(d, inner, extrapolation);
        continue;
      }
      for (int64_t k = 0; k < a.taps; ++k) {
        const C w = static_cast<C>(a.tap_weight[o * a.taps + k]);
        if (w == C(0)) continue;
        const C* s = src.data() + (ob * a.in + a.tap_index[o * a.taps + k]) * inner;
        for (int64_t i = 0; i < inner; ++i) d[i] += w * s[i];
      }
    }
  };
  const int64_t units = outer * a.out;
  const int64_t grain = std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(1, inner * a.taps));
  if (units >= 2 * grain) {
    pool.ParallelFor(units, grain, run);
  } else {
    run(0, units);
  }
}

template <typename T>
Status ResizeWeighted(const ir::Tensor& x, ir::Tensor& y, std::vector<AxisPlan>& plans, const ResizeAttrs& at,
                      exec::ThreadPool& pool) {
  using C = ComputeType<T>;
  std::vector<int64_t> dims = x.dims();
  const auto in = x.values<T>();
  std::vector<C> cur(in.size()), next;
  for (size_t i = 0; i < in.size(); ++i) cur[i] = Load<T>(in[i]);
  for (size_t k = 0; k < plans.size(); ++k) {
    if (plans[k].identity) continue;
    std::vector<int64_t> next_dims = dims;
    next_dims[k] = plans[k].out;
    ONNXAMP_RETURN_IF_ERROR(CheckFitsInMemory(DTypeOf<C>(), next_dims, "Resize intermediate"));
    InterpolateAxis<C>(cur, next, dims, k, plans[k], static_cast<C>(at.extrapolation), pool);
    cur.swap(next);
    dims = std::move(next_dims);
  }
  auto out = y.mutable_values<T>();
  for (size_t i = 0; i < out.size(); ++i) out[i] = Store<T>(cur[i]);
  return Status::Ok();
}

// Nearest: one gather with a source map per axis (identity axes map to themselves).
template <typename T>
void ResizeNearest(const ir::Tensor& x, ir::Tensor& y, const std::vector<AxisPlan>& plans, const T& fill) {
  const size_t rank = plans.size();
  const T* src = ElementsOf<T>(x);
  T* dst = MutableElementsOf<T>(y);
  const int64_t count = y.num_elements();
  if (rank == 0) {
    if (count) dst[0] = src[0];
    return;
  }
  const std::vector<int64_t> in_strides = ContiguousStrides(x.dims());
  std::vector<std::vector<int64_t>> maps(rank);
  for (size_t k = 0; k < rank; ++k) {
    if (plans[k].identity) {
      maps[k].resize(static_cast<size_t>(plans[k].out));
      for (int64_t o = 0; o < plans[k].out; ++o) maps[k][o] = o;
    } else {
      maps[k] = plans[k].src;
    }
  }
  const int64_t inner = plans.back().out;
  const std::vector<int64_t>& inner_map = maps.back();
  for (int64_t row = 0; inner > 0 && row < count / inner; ++row) {
    int64_t rest = row, base = 0;
    bool filled = false;
    for (size_t k = rank - 1; k-- > 0;) {
      const int64_t n = plans[k].out;
      const int64_t s = maps[k][rest % n];
      rest /= n;
      filled |= s < 0;
      base += s * in_strides[k];
    }
    T* d = dst + row * inner;
    for (int64_t j = 0; j < inner; ++j) d[j] = filled || inner_map[j] < 0 ? fill : src[base + inner_map[j]];
  }
}

class ResizeCpu : public exec::OpKernel {
 public:
  ResizeCpu(const exec::KernelInfo& info, Status* status) { *status = spec_.Parse(info.node, info.opset); }

  Status Compute(exec::KernelContext& ctx) const override {
    const ResizeAttrs& attrs = spec_.attrs();
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, 0, "X"));
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<AxisPlan> plans, spec_.PlanAxes(ctx, *x));
    std::vector<int64_t> out_dims;
    for (const AxisPlan& a : plans) out_dims.push_back(a.out);
    // Allocation first: it refuses absurd output sizes before any table is built.
    if (attrs.mode == InterpMode::kNearest) {
      return DispatchByElementSize(x->dtype(), "Resize", [&](auto tag) -> Status {
        using T = typename decltype(tag)::type;
        ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, AllocateAnyOutput(ctx, 0, x->dtype(), out_dims));
        for (AxisPlan& a : plans) PlanAxis(attrs, a);
        T fill{};
        const bool crops = attrs.coord == CoordMode::kTfCropAndResize;
        if (crops) ONNXAMP_RETURN_IF_ERROR(spec_.ExtrapolationValue(x->dtype(), &fill));
        ResizeNearest<T>(*x, *y, plans, fill);
        return Status::Ok();
      });
    }
    return DispatchFloat(x->dtype(),
                         [&](auto tag) -> Status {
                           using T = typename decltype(tag)::type;
                           ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), out_dims));
                           for (AxisPlan& a : plans) PlanAxis(attrs, a);
                           return ResizeWeighted<T>(*x, *y, plans, attrs, ctx.threads());
                         })
        .WithContext(attrs.mode == InterpMode::kLinear ? "mode 'linear'" : "mode 'cubic'");
  }

 private:
  ResizeSpec spec_;
};

}  // namespace

void RegisterResizeKernels(exec::KernelRegistry& r) {
  r.Register({"Resize", "", 10, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<ResizeCpu>});
  r.Register({"Upsample", "", 7, 9, exec::Device::kCpu, {}, 0, &exec::MakeKernel<ResizeCpu>});
}

}  // namespace onnxamp::ops
