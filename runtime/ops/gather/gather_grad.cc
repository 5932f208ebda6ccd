// Gradient builders of Gather (every opset) and GatherElements (11+): GatherGrad / GatherElementsGrad of dY and the
// indices into data's shape (Shape(data), stashed after data's producer), with the forward's axis. Indices are
// integers and get no gradient. Also RegisterIndexGradients, the family of gather/, dropout/, where/, expand/, tile/,
// slice/, split/, pad/ and topk/.
#include "runtime/executor/graph_optimizer.h"
#include "runtime/ops/gradient.h"
#include "runtime/ops/gradient_ops.h"

namespace onnxamp::ops {
namespace {

Status GatherGradient(GradContext& ctx) {
  if (!ctx.NeedsDX(0) || !ctx.dY(0)) return Status::Ok();
  // Gather's only attribute, read as GatherCpu reads it (range-checked by the kernels against the run's rank).
  const int64_t axis = ctx.node().GetInt("axis", 0);
  ir::Value* dx = ctx.Emit(kGatherGradOp, {ctx.dY(0), ctx.X(1), ctx.ShapeOf(ctx.X(0))}, 1,
                           {ir::Attribute::Int("axis", axis)}, exec::kInternalDomain, ctx.TypeOf(ctx.X(0)))[0];
  return ctx.SetDX(0, dx);
}

Status GatherElementsGradient(GradContext& ctx) {
  if (!ctx.NeedsDX(0) || !ctx.dY(0)) return Status::Ok();
  const int64_t axis = ctx.node().GetInt("axis", 0);
  ir::Value* dx = ctx.Emit(kGatherElementsGradOp, {ctx.dY(0), ctx.X(1), ctx.ShapeOf(ctx.X(0))}, 1,
                           {ir::Attribute::Int("axis", axis)}, exec::kInternalDomain, ctx.TypeOf(ctx.X(0)))[0];
  return ctx.SetDX(0, dx);
}

}  // namespace

void RegisterGatherGradients(GradientRegistry& r) {
  // Opset 11 allowed negative indices, 13 bfloat16: GatherGrad handles both.
  r.Register({"Gather", "", 1, INT64_MAX, &GatherGradient});
  r.Register({"GatherElements", "", 11, INT64_MAX, &GatherElementsGradient});
}

void RegisterDropoutGradients(GradientRegistry& r);  // dropout/dropout_grad.cc
void RegisterWhereGradients(GradientRegistry& r);    // where/where_grad.cc
void RegisterExpandGradients(GradientRegistry& r);   // expand/expand_grad.cc
void RegisterTileGradients(GradientRegistry& r);     // tile/tile_grad.cc
void RegisterSliceGradients(GradientRegistry& r);    // slice/slice_grad.cc
void RegisterSplitGradients(GradientRegistry& r);    // split/split_grad.cc
void RegisterPadGradients(GradientRegistry& r);      // pad/pad_grad.cc
void RegisterTopKGradients(GradientRegistry& r);     // topk/topk_grad.cc

void RegisterIndexGradients(GradientRegistry& r) {
  RegisterGatherGradients(r);
  RegisterDropoutGradients(r);
  RegisterWhereGradients(r);
  RegisterExpandGradients(r);
  RegisterTileGradients(r);
  RegisterSliceGradients(r);
  RegisterSplitGradients(r);
  RegisterPadGradients(r);
  RegisterTopKGradients(r);
}

}  // namespace onnxamp::ops
