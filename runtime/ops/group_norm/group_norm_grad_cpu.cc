// GroupNormalizationGrad (CPU, com.onnxamp): the gradients of GroupNormalization and InstanceNormalization for X,
// scale and bias (runtime/ops/gradient_ops.h). The statistics are recomputed from X (two passes, in double) instead
// of stashed by the forward; per (sample, group) block of M values, with xhat = (x - mean) * inv_std and
// g = dY * scale[c]: dX = inv_std * (g - mean(g) - xhat * mean(g * xhat)). dScale and dBias sum dY * xhat and dY per
// channel over the samples (then per group when scale is per group), samples in order: deterministic.
#include <cmath>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/common/reduce.h"
#include "runtime/ops/common/reduce_norm.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/group_norm/group_norm.h"

namespace onnxamp::ops {
namespace {

template <typename T>
void GroupNormGrad(const GroupNormShape& s, bool per_channel, double epsilon, const T* dy, const T* x,
                   const std::vector<double>& scale, T* dx, std::vector<double>* dscale_c, std::vector<double>* dbias_c,
                   exec::ThreadPool& pool) {
  const int64_t block = s.channels_per_group * s.run;
  // Per (sample, channel): sum of dY * xhat and of dY, summed over the samples afterwards.
  std::vector<double> sum_dy_xhat(static_cast<size_t>(s.batch * s.channels)), sum_dy(sum_dy_xhat.size());
  pool.ParallelFor(s.batch * s.groups, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      if (block == 0) continue;
      const T* xb = x + b * block;
      const T* dyb = dy + b * block;
      const int64_t grp = b % s.groups, c0 = grp * s.channels_per_group;
      double mean = 0;
      for (int64_t j = 0; j < block; ++j) mean += static_cast<double>(Load<T>(xb[j]));
      mean /= static_cast<double>(block);
      double var = 0;
      for (int64_t j = 0; j < block; ++j) {
        const double d = static_cast<double>(Load<T>(xb[j])) - mean;
        var += d * d;
      }
      var /= static_cast<double>(block);
      const double inv = 1.0 / std::sqrt(var + epsilon);
      double sum_g = 0, sum_g_xhat = 0;
      for (int64_t c = 0; c < s.channels_per_group; ++c) {
        const double gamma = scale[static_cast<size_t>(per_channel ? c0 + c : grp)];
        double acc_dy_xhat = 0, acc_dy = 0;
        for (int64_t j = c * s.run; j < (c + 1) * s.run; ++j) {
          const double xhat = (static_cast<double>(Load<T>(xb[j])) - mean) * inv;
          const double g = static_cast<double>(Load<T>(dyb[j]));
          acc_dy_xhat += g * xhat;
          acc_dy += g;
        }
        sum_dy_xhat[static_cast<size_t>(b * s.channels_per_group + c)] = acc_dy_xhat;
        sum_dy[static_cast<size_t>(b * s.channels_per_group + c)] = acc_dy;
        sum_g += gamma * acc_dy;
        sum_g_xhat += gamma * acc_dy_xhat;
      }
      if (!dx) continue;
      const double mean_g = sum_g / static_cast<double>(block), mean_g_xhat = sum_g_xhat / static_cast<double>(block);
      T* dxb = dx + b * block;
      for (int64_t c = 0; c < s.channels_per_group; ++c) {
        const double gamma = scale[static_cast<size_t>(per_channel ? c0 + c : grp)];
        for (int64_t j = c * s.run; j < (c + 1) * s.run; ++j) {
          const double xhat = (static_cast<double>(Load<T>(xb[j])) - mean) * inv;
          const double g = static_cast<double>(Load<T>(dyb[j])) * gamma;
          dxb[j] = Store<T>(static_cast<ComputeType<T>>(inv * (g - mean_g - xhat * mean_g_xhat)));
        }
      }
    }
  });
  dscale_c->assign(static_cast<size_t>(s.channels), 0.0);
  dbias_c->assign(static_cast<size_t>(s.channels), 0.0);
  for (int64_t n = 0; n < s.batch; ++n) {
    for (int64_t c = 0; c < s.channels; ++c) {
      (*dscale_c)[static_cast<size_t>(c)] += sum_dy_xhat[static_cast<size_t>(n * s.channels + c)];
      (*dbias_c)[static_cast<size_t>(c)] += sum_dy[static_cast<size_t>(n * s.channels + c)];
    }
  }
}

class GroupNormGradCpu : public exec::OpKernel {
 public:
  GroupNormGradCpu(const exec::KernelInfo& info, Status* st) { *st = ParseGroupNormGradSpec(info, &spec_); }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* dy = ctx.input(0);
    const ir::Tensor* x = ctx.input(1);
    ONNXAMP_ASSIGN_OR_RETURN(const GroupNormShape shape, ResolveGroupNormGradShape(spec_, dy, x));
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<double> scale,
                             reduce::ReadParam(ctx.input(2), shape.param_count, "input 2 (scale)"));
    ir::Tensor* dx = nullptr;
    if (ctx.output_requested(0)) {
      ONNXAMP_ASSIGN_OR_RETURN(dx, ctx.AllocateOutput(0, x->dtype(), x->dims()));
    }
    return DispatchFloat(x->dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      std::vector<double> dscale, dbias;
      GroupNormGrad<T>(shape, spec_.per_channel, spec_.epsilon, dy->values<T>().data(), x->values<T>().data(), scale,
                       dx ? dx->mutable_values<T>().data() : nullptr, &dscale, &dbias, ctx.threads());
      // Per channel, or summed over each group's channels when scale and bias are per group.
      for (int i = 1; i <= 2; ++i) {
        if (!ctx.output_requested(static_cast<size_t>(i))) continue;
        const std::vector<double>& per_c = i == 1 ? dscale : dbias;
        ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * out,
                                 ctx.AllocateOutput(static_cast<size_t>(i), x->dtype(), ctx.input(2)->dims()));
        auto values = out->mutable_values<T>();
        for (int64_t k = 0; k < shape.param_count; ++k) {
          double sum = 0;
          if (spec_.per_channel) {
            sum = per_c[static_cast<size_t>(k)];
          } else {
            for (int64_t c = 0; c < shape.channels_per_group; ++c) {
              sum += per_c[static_cast<size_t>(k * shape.channels_per_group + c)];
            }
          }
          values[static_cast<size_t>(k)] = Store<T>(static_cast<ComputeType<T>>(sum));
        }
      }
      return Status::Ok();
    });
  }

 private:
  GroupNormSpec spec_;
};

}  // namespace

void RegisterGroupNormGradKernels(exec::KernelRegistry& r) {
  r.Register({kGroupNormalizationGradOp,
              exec::kInternalDomain,
              1,
              1,
              exec::Device::kCpu,
              {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64},
              0,
              &exec::MakeKernel<GroupNormGradCpu>});
}

}  // namespace onnxamp::ops
