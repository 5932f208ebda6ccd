// Gradient builders of ScatterElements, ScatterND and GatherND, and the OpInfos of scatter/. A scatter without a
// reduction passes dY to data except where updates overwrote it (dY scattered over by zeros), and gives updates dY at
// the positions they went to (GatherElements / GatherND of dY): PyTorch's scatter backward, which also hands every
// duplicate of a repeated index the gradient. With reduction add, data's gradient is dY itself. mul, max and min are
// refused (their gradients depend on which value won, which the forward does not keep). GatherND's backward is a
// com.onnxamp GatherNDGrad (ScatterND with add needs opset 16 and has no batch_dims).
#include <string>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/op_info.h"

namespace onnxamp::ops {
namespace {

Status ScatterGradient(GradContext& ctx, bool nd) {
  const std::string op = ctx.node().op_type();
  const std::string reduction = ctx.node().GetString("reduction", "none");
  if (reduction != "none" && reduction != "add") {
    return Unimplemented(op, " with reduction '", reduction,
                         "' has no gradient builder (none and add only: the others depend on which value won)");
  }
  ir::Value* dy = ctx.dY(0);
  if (!dy) return Status::Ok();
  std::vector<ir::Attribute> axis;
  if (!nd) axis.push_back(ir::Attribute::Int("axis", ctx.node().GetInt("axis", 0)));
  if (ctx.NeedsDX(0)) {
    if (reduction == "add") {
      ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(0, dy));
    } else {
      ir::Value* zeros = ctx.Zeros(ctx.TypeOf(ctx.X(2)), ctx.X(2));
      ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(0, ctx.Emit1(op, {dy, ctx.X(1), zeros}, axis)));
    }
  }
  if (ctx.NeedsDX(2)) {
    ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(2, ctx.Emit1(nd ? "GatherND" : "GatherElements", {dy, ctx.X(1)}, axis)));
  }
  return Status::Ok();
}

Status ScatterElementsGradient(GradContext& ctx) { return ScatterGradient(ctx, /*nd=*/false); }
Status ScatterNDGradient(GradContext& ctx) { return ScatterGradient(ctx, /*nd=*/true); }

Status GatherNDGradient(GradContext& ctx) {
  if (!ctx.NeedsDX(0) || !ctx.dY(0)) return Status::Ok();
  ir::Value* dx = ctx.Emit(kGatherNDGradOp, {ctx.dY(0), ctx.X(1), ctx.ShapeOf(ctx.X(0))}, 1,
                           {ir::Attribute::Int("batch_dims", ctx.node().GetInt("batch_dims", 0))},
                           exec::kInternalDomain, ctx.TypeOf(ctx.X(0)))[0];
  return ctx.SetDX(0, dx);
}

// GatherNDGrad's own gradient (second derivatives): linear in dY, its adjoint reads the incoming gradient at the
// slices the index tuples name: GatherND again (batch_dims: opset 12+).
Status GatherNDGradGradient(GradContext& ctx) {
  if (!ctx.NeedsDX(0)) return Status::Ok();
  if (!ctx.dY(0)) return ctx.SetDX(0, ctx.Zeros(ctx.TypeOf(ctx.X(0)), ctx.X(0)));
  const int64_t batch_dims = ctx.node().GetInt("batch_dims", 0);
  std::vector<ir::Attribute> attrs;
  if (batch_dims != 0) {
    if (ctx.onnx_opset() < 12) {
      return InvalidArgument(
          "the second derivative of a GatherND with batch_dims is a GatherND with batch_dims "
          "(opset 12+); the model's opset is ",
          ctx.onnx_opset());
    }
    attrs.push_back(ir::Attribute::Int("batch_dims", batch_dims));
  }
  return ctx.SetDX(0, ctx.Emit1("GatherND", {ctx.dY(0), ctx.X(1)}, std::move(attrs)));
}

}  // namespace

void RegisterScatterOpInfos(OpInfoRegistry& r) {
  r.Add("ScatterElements").KeepUnlessNone("reduction").Gradient(11, INT64_MAX, &ScatterElementsGradient);
  r.Add("ScatterND").KeepUnlessNone("reduction").Gradient(11, INT64_MAX, &ScatterNDGradient);
  r.Add("Scatter").NotDifferentiable(
      "Scatter is ScatterElements before opset 11, and updates' gradient is a GatherElements, which opsets 9-10 do "
      "not have: re-export at opset 11 or later");
  r.Add("GatherND").Gradient(11, INT64_MAX, &GatherNDGradient);
  r.Add(kGatherNDGradOp, exec::kInternalDomain).Gradient(1, INT64_MAX, &GatherNDGradGradient);
}

}  // namespace onnxamp::ops
