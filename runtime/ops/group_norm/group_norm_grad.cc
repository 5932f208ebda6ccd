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

// GroupNormalizationGrad as ONNX ops, for its own gradient (second derivatives: a gradient penalty through an
// InstanceNormalization or GroupNormalization). X as [N, C, S] (Reshape to [0, 0, -1]), its groups as [N, G, C / G * S]
// (num_groups 0: a group per channel); the statistics per group computed again from X with epsilon, in float32 for
// 16-bit types (the kernel computes in double); with g = dY * scale (scale per channel, or per group when per_channel
// is 0):
//   xhat = (x - mean) / sqrt(var + epsilon), dX = r (g - mean(g) - xhat mean(g xhat)) per group,
//   dScale = sum(dY xhat), dBias = sum(dY) over N and the positions of each channel (or group).
Status DecomposeGroupNormGrad(DecomposeContext& ctx) {
  ONNXAMP_ASSIGN_OR_RETURN(const DType c, ctx.ComputeTypeFor(ctx.X(1)));
  const int64_t groups = ctx.node().GetInt("num_groups", 0);
  const bool per_channel = ctx.node().GetInt("per_channel", 1) != 0;
  const ir::Attribute* epsilon = ctx.node().FindAttribute("epsilon");
  if (!epsilon || epsilon->type() != ir::AttrType::kFloat) return InvalidArgument("has no float attribute 'epsilon'");
  if (groups < 0) return InvalidArgument("attribute 'num_groups' is ", groups);
  auto op = [&](const char* type, ir::Value* a, ir::Value* b) { return ctx.Emit1(type, {a, b}, {}, "", c); };
  auto reshape = [&](ir::Value* v, const std::vector<int64_t>& dims) {
    return ctx.Emit1("Reshape", {ctx.CastTo(v, c), ctx.Ints(dims)}, {}, "", c);
  };
  // [N, C, S] -> [N, G, C / G * S]; a group per channel: itself.
  auto grouped = [&](ir::Value* v3) { return groups == 0 ? v3 : reshape(v3, {0, groups, -1}); };
  const std::vector<int64_t> rows = {0, 0, -1}, per_row = {1, -1, 1};
  ir::Value* dy3 = reshape(ctx.X(0), rows);
  ir::Value* x3 = reshape(ctx.X(1), rows);
  ir::Value* xg = grouped(x3);
  ir::Value* dyg = grouped(dy3);
  ir::Value* xc = op("Sub", xg, ctx.EmitReduceMean(xg, {2}, true, c));
  ir::Value* var = ctx.EmitReduceMean(op("Mul", xc, xc), {2}, true, c);
  ir::Value* stdev = ctx.Emit1("Sqrt", {op("Add", var, ctx.Scalar(c, epsilon->f))}, {}, "", c);
  ir::Value* r = ctx.Emit1("Reciprocal", {stdev}, {}, "", c);
  ir::Value* xhat = op("Mul", xc, r);  // grouped
  ir::Value* scale = reshape(ctx.X(2), per_row);
  ir::Value* g = per_channel ? grouped(op("Mul", dy3, scale)) : op("Mul", dyg, scale);
  auto out_type = [&](size_t i) {
    const DType t = ctx.TypeOf(ctx.Y(i));
    return t == DType::kUndefined ? ctx.TypeOf(ctx.X(1)) : t;
  };
  if (ctx.Y(0)) {
    ir::Value* centred = op("Sub", g, ctx.EmitReduceMean(g, {2}, true, c));
    ir::Value* dx = op("Sub", centred, op("Mul", xhat, ctx.EmitReduceMean(op("Mul", g, xhat), {2}, true, c)));
    ir::Value* x_shape = ctx.Emit1("Shape", {ctx.X(1)}, {}, "", DType::kInt64);
    ctx.SetY(0, ctx.CastTo(ctx.Emit1("Reshape", {op("Mul", dx, r), x_shape}, {}, "", c), out_type(0)));
  }
  // dScale and dBias per channel ([N, C, S] sums over N and S) or per group ([N, G, .] sums).
  ir::Value* dy_by = per_channel ? dy3 : dyg;
  ir::Value* xhat_by = xhat;
  if (per_channel && groups != 0) {
    xhat_by = ctx.Emit1("Reshape", {xhat, ctx.Emit1("Shape", {x3}, {}, "", DType::kInt64)}, {}, "", c);
  }
  if (ctx.Y(1)) ctx.SetY(1, ctx.CastTo(ctx.EmitReduceSum(op("Mul", dy_by, xhat_by), {0, 2}, false, c), out_type(1)));
  if (ctx.Y(2)) ctx.SetY(2, ctx.CastTo(ctx.EmitReduceSum(dy_by, {0, 2}, false, c), out_type(2)));
  return Status::Ok();
}

}  // namespace

Status InstanceNormGradient(GradContext& ctx) { return NormGradient(ctx, /*instance=*/true); }

void RegisterGroupNormOpInfos(OpInfoRegistry& r) {
  r.Add("GroupNormalization").Keep("mean and variance over many elements").Gradient(18, INT64_MAX, &GroupNormGradient);
  r.Add(kGroupNormalizationGradOp, exec::kInternalDomain).Decompose(&DecomposeGroupNormGrad);
}

}  // namespace onnxamp::ops
