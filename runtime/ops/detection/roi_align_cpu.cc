// RoiAlign (CPU, opsets 10-25) and com.onnxamp RoiAlignGrad.
//
//   RoiAlign(X [N, C, H, W], rois [R, 4] (x1, y1, x2, y2), batch_indices [R] int64) -> [R, C, out_h, out_w]
//
// Each output bin averages ("avg") its bilinear samples, or ("max") takes the largest weighted tap over them: ONNX
// Runtime's max mode, max over samples of max(w_k * v_k) over the four taps, which the ONNX reference follows too.
// The sampling plan is roi_align.h's. float16 and bfloat16 compute in float; float and double in themselves.
//
// RoiAlignGrad(dY, X_shape, rois, batch_indices) -> dX (avg mode): each sample's taps receive dY * w_k / count.
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/elementwise.h"
#include "runtime/ops/common/reduce_norm.h"
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/detection/roi_align.h"
#include "runtime/ops/gradient_ops.h"

namespace onnxamp::ops {

Status RoiAlignSpec::Init(const ir::Node& node, int64_t opset) {
  ONNXAMP_ASSIGN_OR_RETURN(std::string mode, StringAttribute(node, "mode", "avg"));
  if (mode != "avg" && mode != "max") return InvalidArgument("attribute 'mode' is '", mode, "', expected avg or max");
  max_mode = mode == "max";
  if (opset >= 16) {
    ONNXAMP_ASSIGN_OR_RETURN(std::string ct, StringAttribute(node, "coordinate_transformation_mode", "half_pixel"));
    if (ct != "half_pixel" && ct != "output_half_pixel") {
      return InvalidArgument("attribute 'coordinate_transformation_mode' is '", ct,
                             "', expected half_pixel or output_half_pixel");
    }
    half_pixel = ct == "half_pixel";
  } else {
    half_pixel = false;
  }
  ONNXAMP_ASSIGN_OR_RETURN(out_h, IntAttribute(node, "output_height", 1));
  ONNXAMP_ASSIGN_OR_RETURN(out_w, IntAttribute(node, "output_width", 1));
  if (out_h < 1 || out_w < 1) {
    return InvalidArgument("attributes 'output_height' and 'output_width' are ", out_h, " and ", out_w,
                           ", expected at least 1");
  }
  ONNXAMP_ASSIGN_OR_RETURN(sampling_ratio, IntAttribute(node, "sampling_ratio", 0));
  if (sampling_ratio < 0) return InvalidArgument("attribute 'sampling_ratio' is ", sampling_ratio, ", expected >= 0");
  ONNXAMP_ASSIGN_OR_RETURN(float scale, FloatAttribute(node, "spatial_scale", 1.0f));
  if (!(scale > 0.0f) || !std::isfinite(scale)) {
    return InvalidArgument("attribute 'spatial_scale' is ", scale, ", expected a positive number");
  }
  spatial_scale = scale;
  return Status::Ok();
}

namespace {

// The rois' geometries and batch indices, checked against N.
Status ReadRois(const exec::KernelContext& ctx, const RoiAlignSpec& spec, size_t rois_input, int64_t batch,
                std::vector<RoiGeometry>* geometries, std::vector<int64_t>* batch_indices) {
  ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* r, RequireInput(ctx, rois_input, "rois"));
  ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* b, RequireInput(ctx, rois_input + 1, "batch_indices"));
  const std::string rl = InputLabel(ctx, rois_input, "rois"), bl = InputLabel(ctx, rois_input + 1, "batch_indices");
  if (r->rank() != 2 || r->dims()[1] != 4) {
    return InvalidArgument(rl, " must be [num_rois, 4], got ", ShapeToString(r->dims()));
  }
  const int64_t n = r->dims()[0];
  if (b->rank() != 1 || b->dims()[0] != n) {
    return InvalidArgument(bl, " must be [", n, "] (one per roi), got ", ShapeToString(b->dims()));
  }
  ONNXAMP_ASSIGN_OR_RETURN(const std::vector<double> values, reduce::ReadParam(r, 4 * n, rl));
  ONNXAMP_ASSIGN_OR_RETURN(*batch_indices, ReadInt64s(*b, bl));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t k = (*batch_indices)[static_cast<size_t>(i)];
    if (k < 0 || k >= batch) return InvalidArgument(bl, "[", i, "] is ", k, ", outside [0, ", batch, ")");
    for (int c = 0; c < 4; ++c) {
      if (!std::isfinite(values[static_cast<size_t>(4 * i + c)])) {
        return InvalidArgument(rl, " row ", i, " holds ", values[static_cast<size_t>(4 * i + c)]);
      }
    }
    StatusOr<RoiGeometry> g = MakeRoiGeometry(spec, &values[static_cast<size_t>(4 * i)]);
    if (!g.ok()) return InvalidArgument(rl, " row ", i, ": ", g.status().message());
    geometries->push_back(*g);
  }
  return Status::Ok();
}

}  // namespace

StatusOr<RoiAlignShape> ResolveRoiAlign(const exec::KernelContext& ctx, const RoiAlignSpec& spec) {
  ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, 0, "X"));
  if (x->rank() != 4) return InvalidArgument(InputLabel(ctx, 0, "X"), " must be 4-D, got ", ShapeToString(x->dims()));
  RoiAlignShape s;
  s.batch = x->dims()[0];
  s.channels = x->dims()[1];
  s.height = x->dims()[2];
  s.width = x->dims()[3];
  if (s.height == 0 || s.width == 0) return InvalidArgument(InputLabel(ctx, 0, "X"), " has an empty plane");
  ONNXAMP_RETURN_IF_ERROR(ReadRois(ctx, spec, 1, s.batch, &s.rois, &s.batch_indices));
  return s;
}

StatusOr<RoiAlignShape> ResolveRoiAlignGrad(const exec::KernelContext& ctx, const RoiAlignSpec& spec) {
  ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* dy, RequireInput(ctx, 0, "dY"));
  ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* shape_t, RequireInput(ctx, 1, "X_shape"));
  ONNXAMP_ASSIGN_OR_RETURN(std::vector<int64_t> dims, ReadInt64s(*shape_t, InputLabel(ctx, 1, "X_shape")));
  if (dims.size() != 4) return InvalidArgument(InputLabel(ctx, 1, "X_shape"), " must have 4 dims");
  RoiAlignShape s;
  s.batch = dims[0];
  s.channels = dims[1];
  s.height = dims[2];
  s.width = dims[3];
  if (s.batch < 0 || s.channels < 0 || s.height < 1 || s.width < 1) {
    return InvalidArgument(InputLabel(ctx, 1, "X_shape"), " is ", ShapeToString(dims), ", expected a non-empty plane");
  }
  ONNXAMP_RETURN_IF_ERROR(ReadRois(ctx, spec, 2, s.batch, &s.rois, &s.batch_indices));
  const std::vector<int64_t> want = {static_cast<int64_t>(s.rois.size()), s.channels, spec.out_h, spec.out_w};
  if (dy->dims() != want) {
    return InvalidArgument(InputLabel(ctx, 0, "dY"), " has shape ", ShapeToString(dy->dims()), ", expected ",
                           ShapeToString(want));
  }
  return s;
}

Status InitRoiAlignGradSpec(const exec::KernelInfo& info, RoiAlignSpec* spec) {
  // Read as opset 16's attributes: the builder writes the forward's coordinate mode out (opset 10's is
  // output_half_pixel).
  ONNXAMP_RETURN_IF_ERROR(spec->Init(info.node, 16));
  if (spec->max_mode) return Unimplemented("RoiAlign's gradient covers mode avg only");
  return Status::Ok();
}

namespace {

class RoiAlignCpu : public exec::OpKernel {
 public:
  RoiAlignCpu(const exec::KernelInfo& info, Status* st) { *st = spec_.Init(info.node, info.opset); }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const RoiAlignShape shape, ResolveRoiAlign(ctx, spec_));
    const ir::Tensor* x = ctx.input(0);
    const int64_t channels = shape.channels, height = shape.height, width = shape.width;
    const std::vector<RoiGeometry>& rois = shape.rois;
    const std::vector<int64_t>& bidx = shape.batch_indices;
    const int64_t num_rois = static_cast<int64_t>(bidx.size());
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y,
                             ctx.AllocateOutput(0, x->dtype(), {num_rois, channels, spec_.out_h, spec_.out_w}));
    const RoiAlignSpec& s = spec_;
    return DispatchFloat(x->dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = ComputeType<T>;
      const T* px = x->values<T>().data();
      T* py = y->mutable_values<T>().data();
      const int64_t bins = s.out_h * s.out_w;
      ParallelRanges(ctx.threads(), num_rois * channels, 1, [&](int64_t b, int64_t e) {
        for (int64_t rc = b; rc < e; ++rc) {
          const int64_t r = rc / channels, c = rc % channels;
          const T* plane = px + (bidx[static_cast<size_t>(r)] * channels + c) * height * width;
          const RoiGeometry& geometry = rois[static_cast<size_t>(r)];
          T* out = py + rc * bins;
          for (int64_t k = 0; k < bins; ++k) {
            out[k] = Store<T>(RoiBinValue<C>(geometry, height, width, k / s.out_w, k % s.out_w, s.max_mode,
                                             [&](int64_t pos) { return Load(plane[pos]); }));
          }
        }
      });
      return Status::Ok();
    });
  }

 private:
  RoiAlignSpec spec_;
};

class RoiAlignGradCpu : public exec::OpKernel {
 public:
  RoiAlignGradCpu(const exec::KernelInfo& info, Status* st) { *st = InitRoiAlignGradSpec(info, &spec_); }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const RoiAlignShape shape, ResolveRoiAlignGrad(ctx, spec_));
    const ir::Tensor* dy = ctx.input(0);
    const int64_t batch = shape.batch, channels = shape.channels, height = shape.height, width = shape.width;
    const std::vector<RoiGeometry>& rois = shape.rois;
    const std::vector<int64_t>& bidx = shape.batch_indices;
    const int64_t num_rois = static_cast<int64_t>(bidx.size());
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * dx, ctx.AllocateOutput(0, dy->dtype(), {batch, channels, height, width}));
    const RoiAlignSpec& s = spec_;
    return DispatchFloat(dy->dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const T* pdy = dy->values<T>().data();
      // Accumulated in double per channel (rois of one image overlap: parallel over channels, never over rois).
      std::vector<double> acc(static_cast<size_t>(batch * channels * height * width), 0.0);
      const int64_t bins = s.out_h * s.out_w;
      ParallelRanges(ctx.threads(), channels, 1, [&](int64_t b, int64_t e) {
        for (int64_t c = b; c < e; ++c) {
          for (int64_t r = 0; r < num_rois; ++r) {
            double* plane = acc.data() + (bidx[static_cast<size_t>(r)] * channels + c) * height * width;
            const T* g = pdy + (r * channels + c) * bins;
            const RoiGeometry& geometry = rois[static_cast<size_t>(r)];
            const double inv_count = 1.0 / static_cast<double>(geometry.count);
            ForEachRoiSample(s, geometry, height, width, [&](int64_t ph, int64_t pw, const RoiSample& smp) {
              const double gv = static_cast<double>(Load(g[ph * s.out_w + pw])) * inv_count;
              for (int k = 0; k < 4; ++k) plane[smp.pos[k]] += gv * smp.w[k];
            });
          }
        }
      });
      T* out = dx->mutable_values<T>().data();
      for (size_t i = 0; i < acc.size(); ++i) out[i] = Store<T>(static_cast<ComputeType<T>>(acc[i]));
      return Status::Ok();
    });
  }

 private:
  RoiAlignSpec spec_;
};

}  // namespace

void RegisterRoiAlignKernels(exec::KernelRegistry& r) {
  const std::vector<DType> types = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64};
  r.Register({"RoiAlign", "", 10, 25, exec::Device::kCpu, types, 0, &exec::MakeKernel<RoiAlignCpu>});
  r.Register(
      {kRoiAlignGradOp, exec::kInternalDomain, 1, 1, exec::Device::kCpu, types, 0, &exec::MakeKernel<RoiAlignGradCpu>});
}

}  // namespace onnxamp::ops
