// DropoutGrad (CPU), com.onnxamp version 1: the backward of Dropout in training mode (runtime/ops/gradient_ops.h).
//
// DropoutGrad(dY, ratio, training_mode) -> dX = dY * mask / (1 - ratio), the mask recomputed (dropout_mask.h) from
// the forward's seed instead of stored: the forward's `seed` attribute when copied here (mixed with the run's
// rng_step as Dropout mixes it), otherwise the session's per-node seed of the node named by attribute `seed_from`
// (the forward's first output), which is the forward's own. Inputs 1 and 2 are optional and read as Dropout reads
// them from opset 12 (ratio default 0.5, training_mode default false); in inference mode, or with ratio 0, dX = dY.
#include <cstdint>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/elementwise.h"
#include "runtime/ops/dropout/dropout.h"
#include "runtime/ops/dropout/dropout_mask.h"
#include "runtime/ops/gradient_ops.h"

namespace onnxamp::ops {
namespace {

class DropoutGradCpu : public exec::OpKernel {
 public:
  // The forward's parsing at opset 12, whose inputs (data, ratio, training_mode) and `seed` these are.
  DropoutGradCpu(const exec::KernelInfo& info, Status* st) {
    *st = spec_.Init(exec::KernelInfo{info.node, 12, info.device});
  }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* dy = nullptr;
    double ratio = 0.5;
    bool training = false;
    ONNXAMP_RETURN_IF_ERROR(spec_.Resolve(ctx, &dy, &ratio, &training));
    if (!training || ratio == 0.0) return ctx.SetOutput(0, *dy);
    const uint64_t seed = spec_.Seed(ctx);
    const float threshold = static_cast<float>(ratio);
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * dx, ctx.AllocateOutput(0, dy->dtype(), dy->dims()));
    return DispatchFloat(dy->dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = ComputeType<T>;
      // The forward's scale, computed as the forward computes it.
      const C scale = ratio < 1.0 ? C(1) / (C(1) - static_cast<C>(ratio)) : C(0);
      const T* g = dy->values<T>().data();
      T* out = dx->mutable_values<T>().data();
      ParallelRanges(ctx.threads(), dy->num_elements(), kElementwiseGrain / 4, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          const bool keep = DropoutUniform(seed, static_cast<uint64_t>(i)) >= threshold;
          out[i] = keep ? Store<T>(Load(g[i]) * scale) : Store<T>(C(0));
        }
      });
      return Status::Ok();
    });
  }

 private:
  DropoutSpec spec_;
};

}  // namespace

void RegisterDropoutGradKernels(exec::KernelRegistry& r) {
  r.Register({kDropoutGradOp,
              exec::kInternalDomain,
              1,
              1,
              exec::Device::kCpu,
              {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64},
              0,
              &exec::MakeKernel<DropoutGradCpu>});
}

}  // namespace onnxamp::ops
