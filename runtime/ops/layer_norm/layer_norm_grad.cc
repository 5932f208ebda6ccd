// Gradient builder of LayerNormalization (opset 17+): LayerNormalizationGrad of dY, X, Scale and the forward's Mean
// and InvStdDev (optional outputs 1 and 2, turned on by the builder), with the forward's axis.
#include <cstdint>
#include <optional>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/layer_norm/layer_norm.h"
#include "runtime/ops/op_info.h"

namespace onnxamp::ops {
namespace {

// The dims of `v` when all are known: an initializer's, or declared ones that are all values.
std::optional<std::vector<int64_t>> StaticDims(const ir::Value* v) {
  if (!v) return std::nullopt;
  if (v->initializer()) return v->initializer()->dims();
  if (!v->type().is_tensor() || !v->type().shape()) return std::nullopt;
  std::vector<int64_t> dims;
  for (const ir::Dim& d : *v->type().shape()) {
    if (!d.is_value()) return std::nullopt;
    dims.push_back(d.value);
  }
  return dims;
}

Status LayerNormGradient(GradContext& ctx) {
  if (ctx.dY(1) || ctx.dY(2)) {
    return Unimplemented("no gradient flows through LayerNormalization's outputs Mean and InvStdDev");
  }
  const bool need_x = ctx.NeedsDX(0), need_scale = ctx.NeedsDX(1), need_bias = ctx.X(2) && ctx.NeedsDX(2);
  if (!ctx.dY(0) || !(need_x || need_scale || need_bias)) return Status::Ok();
  LayerNormSpec spec;
  ONNXAMP_RETURN_IF_ERROR(ParseLayerNormSpec(exec::KernelInfo{ctx.node(), ctx.opset(), exec::Device::kCpu}, &spec));
  // dB from the kernel (which sums dY to Scale's shape) when B is known to have Scale's shape; else dY summed to B's.
  const std::optional<std::vector<int64_t>> scale_dims = StaticDims(ctx.X(1));
  const bool bias_from_kernel = need_bias && scale_dims && scale_dims == StaticDims(ctx.X(2));
  const size_t outputs = bias_from_kernel ? 3 : need_scale ? 2 : 1;
  std::vector<ir::Value*> grads =
      ctx.Emit(kLayerNormalizationGradOp, {ctx.dY(0), ctx.X(0), ctx.X(1), ctx.ForwardOutput(1), ctx.ForwardOutput(2)},
               outputs, {ir::Attribute::Int("axis", spec.axis)}, exec::kInternalDomain, ctx.TypeOf(ctx.X(0)));
  if (need_x) ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(0, grads[0]));
  if (need_scale) ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(1, grads[1]));
  if (need_bias)
    ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(2, bias_from_kernel ? grads[2] : ctx.SumToShape(ctx.dY(0), ctx.X(2))));
  return Status::Ok();
}

}  // namespace

void RegisterLayerNormOpInfos(OpInfoRegistry& r) {
  r.Add("LayerNormalization").Keep("mean and variance over many elements").Gradient(17, INT64_MAX, &LayerNormGradient);
  r.Add(kLayerNormalizationGradOp, exec::kInternalDomain).NotDifferentiable(kBackwardOpReason);
}

}  // namespace onnxamp::ops
