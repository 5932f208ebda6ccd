// Gradient builder of LayerNormalization (opset 17+): LayerNormalizationGrad of dY, X, Scale and the forward's Mean
// and InvStdDev (optional outputs 1 and 2, turned on by the builder), with the forward's axis.
#include <cstdint>
#include <optional>
#include <string>
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
               outputs, {ir::Attribute::Int("axis", spec.axis), ir::Attribute::Float("epsilon", spec.epsilon)},
               exec::kInternalDomain, ctx.TypeOf(ctx.X(0)));
  if (need_x) ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(0, grads[0]));
  if (need_scale) ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(1, grads[1]));
  if (need_bias)
    ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(2, bias_from_kernel ? grads[2] : ctx.SumToShape(ctx.dY(0), ctx.X(2))));
  return Status::Ok();
}

// LayerNormalizationGrad as ONNX ops and SumToShape, for its own gradient (second derivatives: a gradient penalty
// through a LayerNormalization). The statistics are computed again from X, so that the gradient reaches X through
// them too (the Mean and InvStdDev inputs carry none), with the forward's epsilon; in float32 for 16-bit types, as the
// kernel computes. With x and g = dY * scale as rows of the normalised dims (Flatten at axis):
//   r = 1 / sqrt(mean((x - mean(x))^2) + epsilon), xhat = (x - mean(x)) * r,
//   dX = r * (g - mean(g) - xhat * mean(g * xhat)), dScale = SumToShape(dY * xhat), dB = SumToShape(dY).
Status DecomposeLayerNormGrad(DecomposeContext& ctx) {
  const ir::Attribute* epsilon = ctx.node().FindAttribute("epsilon");
  if (!epsilon || epsilon->type() != ir::AttrType::kFloat) {
    return InvalidArgument("has no float attribute 'epsilon' (the forward's), which its decomposition needs");
  }
  const DType x_type = ctx.TypeOf(ctx.X(1));
  ONNXAMP_ASSIGN_OR_RETURN(const DType c, ctx.ComputeTypeFor(ctx.X(1)));
  const std::vector<ir::Attribute> flatten = {ir::Attribute::Int("axis", ctx.node().GetInt("axis", -1))};
  ir::Value* dy = ctx.CastTo(ctx.X(0), c);
  ir::Value* x = ctx.CastTo(ctx.X(1), c);
  ir::Value* scale = ctx.CastTo(ctx.X(2), c);
  ir::Value* x_shape = ctx.Emit1("Shape", {x}, {}, "", DType::kInt64);
  auto reshape = [&](ir::Value* rows) {
    return ctx.Emit1("Reshape", {rows, x_shape}, {ir::Attribute::Int("allowzero", 1)}, "", c);
  };
  auto op = [&](const char* type, ir::Value* a, ir::Value* b) { return ctx.Emit1(type, {a, b}, {}, "", c); };
  ir::Value* x2 = ctx.Emit1("Flatten", {x}, flatten, "", c);
  ir::Value* xc = op("Sub", x2, ctx.EmitReduceMean(x2, {1}, true, c));
  ir::Value* var = ctx.EmitReduceMean(op("Mul", xc, xc), {1}, true, c);
  ir::Value* stdev = ctx.Emit1("Sqrt", {op("Add", var, ctx.Scalar(c, epsilon->f))}, {}, "", c);
  ir::Value* r = ctx.Emit1("Reciprocal", {stdev}, {}, "", c);
  ir::Value* xhat = op("Mul", xc, r);
  ir::Value* g = ctx.Emit1("Flatten", {op("Mul", dy, scale)}, flatten, "", c);
  ir::Value* centred = op("Sub", g, ctx.EmitReduceMean(g, {1}, true, c));
  ir::Value* projected = op("Mul", xhat, ctx.EmitReduceMean(op("Mul", g, xhat), {1}, true, c));
  auto out_type = [&](size_t i) {
    const DType t = ctx.TypeOf(ctx.Y(i));
    return t == DType::kUndefined ? x_type : t;
  };
  ctx.SetY(0, ctx.CastTo(reshape(op("Mul", op("Sub", centred, projected), r)), out_type(0)));
  auto sum_to_scale = [&](ir::Value* v) {
    return ctx.Emit1(kSumToShapeOp, {v, ctx.Emit1("Shape", {scale}, {}, "", DType::kInt64)}, {}, exec::kInternalDomain,
                     c);
  };
  if (ctx.Y(1)) ctx.SetY(1, ctx.CastTo(sum_to_scale(op("Mul", dy, reshape(xhat))), out_type(1)));
  if (ctx.Y(2)) ctx.SetY(2, ctx.CastTo(sum_to_scale(dy), out_type(2)));
  return Status::Ok();
}

}  // namespace

void RegisterLayerNormOpInfos(OpInfoRegistry& r) {
  r.Add("LayerNormalization").Keep("mean and variance over many elements").Gradient(17, INT64_MAX, &LayerNormGradient);
  r.Add(kLayerNormalizationGradOp, exec::kInternalDomain).Decompose(&DecomposeLayerNormGrad);
}

}  // namespace onnxamp::ops
