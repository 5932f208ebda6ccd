// ResizeGrad (CPU, com.onnxamp): the gradient of Resize and Upsample with respect to X, the adjoint of the forward
// interpolation (runtime/ops/gradient_ops.h). The per-axis tables are the forward's (ResizeSpec::PlanAxes and
// PlanAxis in resize_plan.cc), so both directions use the same source indices and weights: nearest adds each dY
// element at the source element it was copied from, linear and cubic scatter-add dY through the taps axis by axis
// (the transposed separable passes). Output positions filled with tf_crop_and_resize's extrapolation value depend on
// no input and pass no gradient. Accumulation in float (double for double) in a fixed order.
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/resize/resize.h"

namespace onnxamp::ops {
namespace {

// The transpose of one separable pass: `src` has dims `dims` with a.out at `axis`; `dst` gets a.in there.
template <typename C>
void ScatterAxis(const std::vector<C>& src, std::vector<C>& dst, const std::vector<int64_t>& dims, size_t axis,
                 const AxisPlan& a, exec::ThreadPool& pool) {
  const int64_t outer = DimProduct(dims, 0, axis);
  const int64_t inner = DimProduct(dims, axis + 1, dims.size());
  dst.assign(static_cast<size_t>(outer * a.in * inner), C(0));
  // Each outer slice is independent; within one, taps are added in output order.
  auto run = [&](int64_t begin, int64_t end) {
    for (int64_t ob = begin; ob < end; ++ob) {
      for (int64_t o = 0; o < a.out; ++o) {
        if (a.extrapolate[o]) continue;
        const C* s = src.data() + (ob * a.out + o) * inner;
        for (int64_t k = 0; k < a.taps; ++k) {
          const C w = static_cast<C>(a.tap_weight[o * a.taps + k]);
          if (w == C(0)) continue;
          C* d = dst.data() + (ob * a.in + a.tap_index[o * a.taps + k]) * inner;
          for (int64_t i = 0; i < inner; ++i) d[i] += w * s[i];
        }
      }
    }
  };
  pool.ParallelFor(outer, 1, run);
}

// Nearest: dX[source of each output element] += dY[output element], in output order.
template <typename C>
void ScatterNearest(const std::vector<C>& dy, std::vector<C>& dx, const std::vector<int64_t>& in_dims,
                    const std::vector<AxisPlan>& plans) {
  const size_t rank = plans.size();
  if (rank == 0) {
    if (!dy.empty()) dx[0] += dy[0];
    return;
  }
  const std::vector<int64_t> in_strides = ContiguousStrides(in_dims);
  std::vector<int64_t> out_dims;
  for (const AxisPlan& a : plans) out_dims.push_back(a.out);
  for (size_t flat = 0; flat < dy.size(); ++flat) {
    int64_t rest = static_cast<int64_t>(flat), base = 0;
    bool filled = false;
    for (size_t k = rank; k-- > 0;) {
      const int64_t o = rest % out_dims[k];
      rest /= out_dims[k];
      const int64_t s = plans[k].identity ? o : plans[k].src[o];
      filled |= s < 0;
      base += s * in_strides[k];
    }
    if (!filled) dx[static_cast<size_t>(base)] += dy[flat];
  }
}

class ResizeGradCpu : public exec::OpKernel {
 public:
  ResizeGradCpu(const exec::KernelInfo& info, Status* st) {
    const bool upsample = info.node.GetString("forward_op", "Resize") == "Upsample";
    *st = spec_.Parse(info.node, info.node.GetInt("forward_opset", 0), upsample);
  }

  Status Compute(exec::KernelContext& ctx) const override {
    const ResizeAttrs& attrs = spec_.attrs();
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* shape_t, RequireInput(ctx, 0, "X_shape"));
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* dy, RequireInput(ctx, 4, "dY"));
    if (shape_t->dtype() != DType::kInt64 || shape_t->rank() != 1) {
      return InvalidArgument("input 0 (X_shape) must be a 1-D int64 tensor");
    }
    const std::vector<int64_t> in_dims(shape_t->values<int64_t>().begin(), shape_t->values<int64_t>().end());
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<AxisPlan> plans, spec_.PlanAxes(ctx, in_dims));
    std::vector<int64_t> out_dims;
    for (const AxisPlan& a : plans) out_dims.push_back(a.out);
    if (dy->dims() != out_dims) {
      return InvalidArgument("input 4 (dY) has shape ", ShapeToString(dy->dims()), ", expected ",
                             ShapeToString(out_dims), " (the forward's output for X ", ShapeToString(in_dims), ")");
    }
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * dx, ctx.AllocateOutput(0, dy->dtype(), in_dims));
    for (AxisPlan& a : plans) PlanAxis(attrs, a);
    return DispatchFloat(dy->dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = ComputeType<T>;
      const auto in = dy->values<T>();
      std::vector<C> cur(in.size()), next;
      for (size_t i = 0; i < in.size(); ++i) cur[i] = Load<T>(in[i]);
      if (attrs.mode == InterpMode::kNearest) {
        next.assign(static_cast<size_t>(dx->num_elements()), C(0));
        ScatterNearest<C>(cur, next, in_dims, plans);
        cur.swap(next);
      } else {
        std::vector<int64_t> dims = out_dims;
        for (size_t k = plans.size(); k-- > 0;) {
          if (plans[k].identity) continue;
          ScatterAxis<C>(cur, next, dims, k, plans[k], ctx.threads());
          cur.swap(next);
          dims[k] = plans[k].in;
        }
      }
      auto out = dx->mutable_values<T>();
      for (size_t i = 0; i < out.size(); ++i) out[i] = Store<T>(cur[i]);
      return Status::Ok();
    });
  }

 private:
  ResizeSpec spec_;
};

}  // namespace

void RegisterResizeGradKernels(exec::KernelRegistry& r) {
  r.Register({kResizeGradOp,
              exec::kInternalDomain,
              1,
              1,
              exec::Device::kCpu,
              {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64},
              4,
              &exec::MakeKernel<ResizeGradCpu>});
}

}  // namespace onnxamp::ops
