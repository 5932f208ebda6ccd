// Gradient builders of Resize (opsets 10-25) and Upsample (7-9): one com.onnxamp ResizeGrad(Shape(X), the forward's
// inputs 1-3, dY) node with the forward's attributes, its op and its opset. Every mode is linear in X (nearest
// copies, linear and cubic weigh with weights that depend on sizes only), so every combination the forward runs
// has a gradient for X; roi, scales and sizes take none (OpInfo::no_gradient_inputs: the autodiff never asks).
#include <string>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/op_info.h"
#include "runtime/ops/resize/resize.h"

namespace onnxamp::ops {
namespace {

Status ResizeGradient(GradContext& ctx) {
  const ir::Node& node = ctx.node();
  const bool upsample = node.op_type() == "Upsample";
  // The forward's attribute checks, so that what the kernel would refuse is refused here, naming the attribute.
  ResizeSpec spec;
  ONNXAMP_RETURN_IF_ERROR(spec.Parse(node, ctx.opset(), upsample));
  if (!ctx.NeedsDX(0) || !ctx.dY(0)) return Status::Ok();
  std::vector<ir::Attribute> attrs = node.attributes();
  attrs.push_back(ir::Attribute::String("forward_op", node.op_type()));
  attrs.push_back(ir::Attribute::Int("forward_opset", ctx.opset()));
  std::vector<ir::Value*> inputs = {ctx.ShapeOf(ctx.X(0)), ctx.X(1), ctx.X(2), ctx.X(3), ctx.dY(0)};
  ir::Value* dx = ctx.Emit(kResizeGradOp, inputs, 1, std::move(attrs), exec::kInternalDomain, ctx.TypeOf(ctx.X(0)))[0];
  return ctx.SetDX(0, dx);
}

// ResizeGrad's own gradient (second derivatives: a penalty through an upsampling layer). Linear in dY, the adjoint of
// the forward's interpolation, whose adjoint is the forward's linear part: the forward op (Resize or Upsample) with its
// attributes and inputs 1-3 (tf_crop_and_resize's extrapolation value 0), at the forward's opset (the model's, the
// forward being one of its nodes).
Status ResizeGradGradient(GradContext& ctx) {
  if (!ctx.NeedsDX(4)) return Status::Ok();
  if (!ctx.dY(0)) return ctx.SetDX(4, ctx.Zeros(ctx.TypeOf(ctx.X(4)), ctx.X(4)));
  const std::string forward = ctx.node().GetString("forward_op", "Resize");
  const int64_t forward_opset = ctx.node().GetInt("forward_opset", ctx.onnx_opset());
  if (forward_opset != ctx.onnx_opset()) {
    return Unimplemented("the second derivative of a ", forward, "-", forward_opset, " is that ", forward,
                         " again, at the model's opset ", ctx.onnx_opset());
  }
  // Positions tf_crop_and_resize fills with extrapolation_value are a constant, not part of the linear map: 0 here.
  std::vector<ir::Attribute> attrs;
  for (const ir::Attribute& a : ctx.node().attributes()) {
    if (a.name() != "forward_op" && a.name() != "forward_opset" && a.name() != "extrapolation_value") {
      attrs.push_back(a);
    }
  }
  if (ctx.node().GetString("coordinate_transformation_mode", "") == "tf_crop_and_resize") {
    attrs.push_back(ir::Attribute::Float("extrapolation_value", 0.0f));
  }
  std::vector<ir::Value*> inputs = {ctx.dY(0), ctx.X(1), ctx.X(2), ctx.X(3)};
  while (!inputs.back()) inputs.pop_back();
  return ctx.SetDX(4, ctx.Emit1(forward, inputs, std::move(attrs)));
}

}  // namespace

void RegisterResizeOpInfos(OpInfoRegistry& r) {
  // Opset 10's Resize and Upsample-9 have scales at input 1; from 11 Resize has roi, scales, sizes at 1-3.
  r.Add("Resize").Gradient(10, INT64_MAX, &ResizeGradient).NoGradientInputs({1, 2, 3}, "roi, scales and sizes");
  r.Add("Upsample").Gradient(7, 9, &ResizeGradient).NoGradientInputs({1}, "scales");
  r.Add(kResizeGradOp, exec::kInternalDomain)
      .Gradient(1, INT64_MAX, &ResizeGradGradient)
      .NoGradientInputs({0, 1, 2, 3}, "shape, roi, scales and sizes");
}

}  // namespace onnxamp::ops
