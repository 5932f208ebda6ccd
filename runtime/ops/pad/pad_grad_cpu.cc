// PadGrad (CPU), com.onnxamp version 1: the backward of Pad in its edge, reflect and wrap modes
// (runtime/ops/gradient_ops.h).
//
// PadGrad(dY, x_shape: int64[r], pads: int64[2n][, axes: int64[n]]) -> dX of shape x_shape and dY's type, attribute
// mode (constant, edge, reflect or wrap, as Pad-19 reads it). pads and axes mean what Pad-18's do; the output position
// each input element was copied to comes from the forward's own per-axis maps (PadAxisMap, pad_spec.cc), so negative
// pads (crops) and every mode agree with the forward. Each dY element is added to the input element it was copied
// from (fill positions of constant mode to none), in row-major order of dY on one thread, in the compute type (float
// for fp16/bf16): a fixed summation order.
#include <algorithm>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/pad/pad.h"

namespace onnxamp::ops {
namespace {

class PadGradCpu : public exec::OpKernel {
 public:
  // The mode as Pad-19 reads it (every mode; no attribute pads from opset 11).
  PadGradCpu(const exec::KernelInfo& info, Status* status) { *status = spec_.Parse(info.node, 19); }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* dy, RequireInput(ctx, 0, "dY"));
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* shape_t, RequireInput(ctx, 1, "x_shape"));
    const std::string shape_label = InputLabel(ctx, 1, "x_shape");
    ONNXAMP_ASSIGN_OR_RETURN(const std::vector<int64_t> x_dims, ReadInt64s(*shape_t, shape_label));
    for (int64_t d : x_dims) {
      if (d < 0) return InvalidArgument(shape_label, " has a negative dim: ", ShapeToString(x_dims));
    }
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* p, RequireInput(ctx, 2, "pads"));
    ONNXAMP_ASSIGN_OR_RETURN(const std::vector<int64_t> pads, ReadInt64s(*p, InputLabel(ctx, 2, "pads")));
    std::vector<int64_t> axes;
    const ir::Tensor* a = ctx.input(3);
    if (a) {
      ONNXAMP_ASSIGN_OR_RETURN(axes, ReadInt64s(*a, InputLabel(ctx, 3, "axes")));
    }
    ONNXAMP_ASSIGN_OR_RETURN(const PadShape shape, ResolvePadShape(x_dims, pads, a ? &axes : nullptr, spec_.mode()));
    if (dy->dims() != shape.out_dims) {
      return InvalidArgument(InputLabel(ctx, 0, "dY"), " has shape ", ShapeToString(dy->dims()), "; expected ",
                             ShapeToString(shape.out_dims), " (Pad's output for input ", ShapeToString(x_dims),
                             " and pads ", ShapeToString(pads), ")");
    }
    const size_t rank = x_dims.size();
    std::vector<std::vector<int64_t>> maps(rank);
    for (size_t k = 0; k < rank; ++k) maps[k] = PadAxisMap(x_dims[k], shape.begin[k], shape.end[k], spec_.mode());
    return DispatchFloat(dy->dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using A = ComputeType<T>;
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * dx, ctx.AllocateOutput(0, dy->dtype(), x_dims));
      const T* g = dy->values<T>().data();
      T* out = dx->mutable_values<T>().data();
      std::vector<A> acc(static_cast<size_t>(dx->num_elements()), A(0));
      if (rank == 0) {
        acc[0] = Load<T>(g[0]);
      } else if (dy->num_elements() > 0) {
        const std::vector<int64_t> x_strides = ContiguousStrides(x_dims);
        const std::vector<int64_t>& inner_map = maps.back();
        const int64_t inner = static_cast<int64_t>(inner_map.size());
        const int64_t rows = dy->num_elements() / inner;
        for (int64_t row = 0; row < rows; ++row) {
          // The input row this output row was copied from (none: a fill row of constant mode).
          int64_t rest = row, base = 0;
          bool fill = false;
          for (size_t k = rank - 1; k-- > 0;) {
            const int64_t n = static_cast<int64_t>(maps[k].size());
            const int64_t src = maps[k][rest % n];
            rest /= n;
            if (src < 0) fill = true;
            base += src * x_strides[k];
          }
          if (fill) continue;
          const T* src_row = g + row * inner;
          for (int64_t j = 0; j < inner; ++j) {
            if (inner_map[j] >= 0) acc[base + inner_map[j]] += Load<T>(src_row[j]);
          }
        }
      }
      for (size_t k = 0; k < acc.size(); ++k) out[k] = Store<T>(acc[k]);
      return Status::Ok();
    });
  }

 private:
  PadSpec spec_;
};

}  // namespace

void RegisterPadGradKernels(exec::KernelRegistry& r) {
  const std::vector<DType> types = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64};
  r.Register({kPadGradOp, exec::kInternalDomain, 1, 1, exec::Device::kCpu, types, 0, &exec::MakeKernel<PadGradCpu>});
}

}  // namespace onnxamp::ops
