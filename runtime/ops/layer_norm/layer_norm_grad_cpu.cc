// LayerNormalizationGrad (CPU), com.onnxamp version 1: the backward of LayerNormalization (runtime/ops/gradient_ops.h).
//
// Inputs dY, X, Scale, Mean, InvStdDev (the forward's optional outputs 1 and 2: X's shape with the normalised dims
// 1, any float type); attributes as the forward's (axis). Per row of n normalised values, with xhat = (x - mean) *
// inv_std and g = dY * Scale: dX = inv_std * (g - mean(g) - xhat * mean(g * xhat)); dScale = sum over rows of
// dY * xhat and dB = sum over rows of dY, both reduced to Scale's shape (the dims along which Scale is broadcast are
// summed too; the builder reduces dB further to B's shape when B's differs). Optional outputs dScale and dB.
// dY, X and Scale have one float type; fp16/bf16 compute in float; the row and column sums are in double, the
// column sums (dScale, dB) row by row in order, so the result does not depend on the thread count.
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/common/reduce.h"
#include "runtime/ops/common/reduce_norm.h"
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/layer_norm/layer_norm.h"

namespace onnxamp::ops {
namespace {

class LayerNormGradCpu : public exec::OpKernel {
 public:
  LayerNormGradCpu(const exec::KernelInfo& info, Status* st) { *st = ParseLayerNormSpec(info, &spec_); }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const LayerNormGradInputs in, ResolveLayerNormGradInputs(ctx, spec_));
    const ir::Tensor* x = in.x;
    const ir::Tensor* dy = in.dy;
    const ir::Tensor* scale = in.scale;
    const ir::Tensor* mean_t = in.mean;
    const ir::Tensor* inv_t = in.inv_std;
    const LayerNormShape& shape = in.shape;
    const int64_t axis = shape.axis, rows = shape.rows, cols = shape.cols;
    ONNXAMP_ASSIGN_OR_RETURN(const std::vector<double> mean,
                             reduce::ReadParam(mean_t, rows, InputLabel(ctx, 3, "Mean")));
    ONNXAMP_ASSIGN_OR_RETURN(const std::vector<double> inv,
                             reduce::ReadParam(inv_t, rows, InputLabel(ctx, 4, "InvStdDev")));
    ONNXAMP_ASSIGN_OR_RETURN(const std::vector<double> scale_v,
                             reduce::ReadParam(scale, scale->num_elements(), InputLabel(ctx, 2, "Scale")));
    // The Scale element of each normalised position.
    const std::vector<int64_t> norm_dims(x->dims().begin() + axis, x->dims().end());
    const int64_t rank = static_cast<int64_t>(norm_dims.size());
    const std::vector<int64_t> stride = NormalisedBroadcastStrides(*scale, rank);
    std::vector<int64_t> sidx(static_cast<size_t>(cols));
    {
      std::vector<int64_t> index(rank, 0);
      int64_t offset = 0;
      for (int64_t j = 0; j < cols; ++j) {
        sidx[j] = offset;
        for (int64_t d = rank - 1; d >= 0; --d) {
          offset += stride[d];
          if (++index[d] < norm_dims[d]) break;
          offset -= stride[d] * norm_dims[d];
          index[d] = 0;
        }
      }
    }
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * dx, ctx.AllocateOutput(0, x->dtype(), x->dims()));
    ir::Tensor* dscale = nullptr;
    ir::Tensor* dbias = nullptr;
    if (ctx.output_requested(1)) {
      ONNXAMP_ASSIGN_OR_RETURN(dscale, ctx.AllocateOutput(1, scale->dtype(), scale->dims()));
    }
    if (ctx.output_requested(2)) {
      ONNXAMP_ASSIGN_OR_RETURN(dbias, ctx.AllocateOutput(2, scale->dtype(), scale->dims()));
    }
    std::vector<double> dscale_acc(dscale ? scale->num_elements() : 0, 0.0);
    std::vector<double> dbias_acc(dbias ? scale->num_elements() : 0, 0.0);
    // Scale per normalised position, in the compute type, and whether that is Scale itself (one value per position,
    // the usual [cols] scale): the loops below then run over plain arrays, which the compiler vectorizes, with the
    // same operations in the same order.
    bool scale_per_position = static_cast<int64_t>(scale_v.size()) == cols;
    for (int64_t j = 0; j < cols && scale_per_position; ++j) scale_per_position = sidx[j] == j;
    ONNXAMP_RETURN_IF_ERROR(DispatchFloat(x->dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using A = ComputeType<T>;
      const T* g = dy->values<T>().data();
      const T* xd = x->values<T>().data();
      T* out = dx->mutable_values<T>().data();
      const double n = static_cast<double>(cols);
      std::vector<A> scale_a(static_cast<size_t>(cols));
      for (int64_t j = 0; j < cols; ++j) scale_a[j] = static_cast<A>(scale_v[sidx[j]]);
      const A* __restrict sa = scale_a.data();
      reduce::ParallelOver(ctx.threads(), rows, cols, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          const A m = static_cast<A>(mean[r]), is = static_cast<A>(inv[r]);
          const int64_t base = r * cols;
          double sum_g = 0, sum_gx = 0;
          for (int64_t j = 0; j < cols; ++j) {
            const A xhat = (Load<T>(xd[base + j]) - m) * is;
            const A gj = Load<T>(g[base + j]) * sa[j];
            sum_g += gj;
            sum_gx += gj * xhat;
          }
          const A mean_g = static_cast<A>(sum_g / n), mean_gx = static_cast<A>(sum_gx / n);
          T* __restrict o = out + base;
          const T* __restrict xr = xd + base;
          const T* __restrict gr = g + base;
          for (int64_t j = 0; j < cols; ++j) {
            const A xhat = (Load<T>(xr[j]) - m) * is;
            const A gj = Load<T>(gr[j]) * sa[j];
            o[j] = Store<T>(is * (gj - mean_g - xhat * mean_gx));
          }
        }
      });
      if (dscale || dbias) {
        double* __restrict ds = dscale_acc.data();
        double* __restrict db = dbias_acc.data();
        for (int64_t r = 0; r < rows; ++r) {
          const A m = static_cast<A>(mean[r]), is = static_cast<A>(inv[r]);
          const T* __restrict xr = xd + r * cols;
          const T* __restrict gr = g + r * cols;
          if (scale_per_position) {
            if (dscale) {
              for (int64_t j = 0; j < cols; ++j)
                ds[j] += static_cast<double>(Load<T>(gr[j]) * ((Load<T>(xr[j]) - m) * is));
            }
            if (dbias) {
              for (int64_t j = 0; j < cols; ++j) db[j] += static_cast<double>(Load<T>(gr[j]));
            }
            continue;
          }
          for (int64_t j = 0; j < cols; ++j) {
            const A gy = Load<T>(gr[j]);
            if (dscale) ds[sidx[j]] += static_cast<double>(gy * ((Load<T>(xr[j]) - m) * is));
            if (dbias) db[sidx[j]] += static_cast<double>(gy);
          }
        }
      }
      return Status::Ok();
    }));
    if (dscale) ONNXAMP_RETURN_IF_ERROR(reduce::WriteParam(dscale, dscale_acc));
    if (dbias) ONNXAMP_RETURN_IF_ERROR(reduce::WriteParam(dbias, dbias_acc));
    return Status::Ok();
  }

 private:
  LayerNormSpec spec_;
};

}  // namespace

void RegisterLayerNormGradKernels(exec::KernelRegistry& r) {
  const std::vector<DType> types = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64};
  r.Register({kLayerNormalizationGradOp, exec::kInternalDomain, 1, 1, exec::Device::kCpu, types, 0,
              &exec::MakeKernel<LayerNormGradCpu>});
}

}  // namespace onnxamp::ops
