// Gradient builders of DepthToSpace and SpaceToDepth: each moves every element once, so the gradient moves it back.
// SpaceToDepth's inverse is DepthToSpace in DCR mode (an ONNX op at every opset); DepthToSpace's is com.onnxamp
// DepthToSpaceGrad with its blocksize and mode (CRD's inverse is no ONNX op).
#include <string>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/op_info.h"

namespace onnxamp::ops {
namespace {

Status DepthToSpaceGradient(GradContext& ctx) {
  if (!ctx.NeedsDX(0) || !ctx.dY(0)) return Status::Ok();
  std::vector<ir::Attribute> attrs = {ir::Attribute::Int("blocksize", ctx.node().GetInt("blocksize", 0)),
                                      ir::Attribute::String("mode", ctx.node().GetString("mode", "DCR"))};
  return ctx.SetDX(0, ctx.Emit(kDepthToSpaceGradOp, {ctx.dY(0)}, 1, std::move(attrs), exec::kInternalDomain,
                               ctx.TypeOf(ctx.X(0)))[0]);
}

Status SpaceToDepthGradient(GradContext& ctx) {
  if (!ctx.NeedsDX(0) || !ctx.dY(0)) return Status::Ok();
  return ctx.SetDX(
      0, ctx.Emit1("DepthToSpace", {ctx.dY(0)}, {ir::Attribute::Int("blocksize", ctx.node().GetInt("blocksize", 0))}));
}

// DepthToSpaceGrad's own gradient (second derivatives): the inverse of a permutation is its adjoint, so the gradient
// of the inverse rearrangement is the rearrangement itself, DepthToSpace with the same blocksize and mode.
Status DepthToSpaceGradGradient(GradContext& ctx) {
  if (!ctx.NeedsDX(0)) return Status::Ok();
  if (!ctx.dY(0)) return ctx.SetDX(0, ctx.Zeros(ctx.TypeOf(ctx.X(0)), ctx.X(0)));
  std::vector<ir::Attribute> attrs = {ir::Attribute::Int("blocksize", ctx.node().GetInt("blocksize", 0))};
  const std::string mode = ctx.node().GetString("mode", "DCR");
  if (mode != "DCR") attrs.push_back(ir::Attribute::String("mode", mode));  // CRD: opset 11+, as its forward
  return ctx.SetDX(0, ctx.Emit1("DepthToSpace", {ctx.dY(0)}, std::move(attrs)));
}

}  // namespace

void RegisterDepthSpaceOpInfos(OpInfoRegistry& r) {
  r.Add("DepthToSpace").Gradient(1, INT64_MAX, &DepthToSpaceGradient);
  r.Add("SpaceToDepth").Gradient(1, INT64_MAX, &SpaceToDepthGradient);
  r.Add(kDepthToSpaceGradOp, exec::kInternalDomain).Gradient(1, INT64_MAX, &DepthToSpaceGradGradient);
}

}  // namespace onnxamp::ops
