// Gradient builders of GroupNormalization (opset 18: scale and bias per group; 21: per channel) and
// InstanceNormalization (registered in instance_norm/instance_norm_info.cc): one com.onnxamp GroupNormalizationGrad(dY,
// X, scale) node whose outputs dX, dScale, dBias are requested only for the inputs that need a gradient. A dedicated
// kernel rather than LayerNormalizationGrad behind reshapes: the forward stashes no statistics, the scale is per
// channel or per group (neither is LayerNormalization's per-element scale), and the kernel recomputes mean and variance
// in double.
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/group_norm/group_norm.h"
#include "runtime/ops/op_info.h"

namespace onnxamp::ops {
namespace {

Status NormGradient(GradContext& ctx, bool instance) {
  GroupNormSpec spec;
  ONNXAMP_RETURN_IF_ERROR(
      ParseGroupNormSpec(exec::KernelInfo{ctx.node(), ctx.opset(), exec::Device::kCpu}, instance, &spec));
  if (ctx.dY(0) == nullptr) return Status::Ok();
  return ctx.EmitInputGradients(
      kGroupNormalizationGradOp, {ctx.dY(0), ctx.X(0), ctx.X(1)}, {ctx.NeedsDX(0), ctx.NeedsDX(1), ctx.NeedsDX(2)},
      {ir::Attribute::Int("num_groups", instance ? 0 : spec.groups), ir::Attribute::Float("epsilon", spec.epsilon),
       ir::Attribute::Int("per_channel", spec.per_channel ? 1 : 0)},
      ctx.TypeOf(ctx.X(0)));
}

Status GroupNormGradient(GradContext& ctx) { return NormGradient(ctx, /*instance=*/false); }

}  // namespace

Status InstanceNormGradient(GradContext& ctx) { return NormGradient(ctx, /*instance=*/true); }

void RegisterGroupNormOpInfos(OpInfoRegistry& r) {
  r.Add("GroupNormalization").Keep("mean and variance over many elements").Gradient(18, INT64_MAX, &GroupNormGradient);
  r.Add(kGroupNormalizationGradOp, exec::kInternalDomain).NotDifferentiable(kBackwardOpReason);
}

}  // namespace onnxamp::ops
