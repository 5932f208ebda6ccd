// Gradient builder of Pad (every opset; pads as the attribute `paddings` (1) or `pads` (2-10), as an input from 11,
// with the optional `axes` input from 18).
//
// - constant mode: dX is dY with the padding taken off and the cropped parts put back as zeros, i.e. Pad(dY, -pads)
//   in constant mode with fill 0: a positive pad of the forward becomes a crop (a Slice of dY), a negative one (a
//   crop of X) pads the gradient with zeros. The gradient of constant_value (input 2, opset 11+) is the sum of dY
//   over the fill positions, sum(dY) - sum(dX), expanded to constant_value's shape.
// - edge, reflect, wrap (19+): com.onnxamp PadGrad(dY, Shape(X), pads[, axes]) adds each dY element to the input
//   element it was copied from; constant_value is unused and gets a zero gradient.
#include "runtime/executor/graph_optimizer.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/op_info.h"

namespace onnxamp::ops {
namespace {

Status PadGradient(GradContext& ctx) {
  ir::Value* dy = ctx.dY(0);
  if (!dy) return Status::Ok();
  const int64_t opset = ctx.opset();
  const std::string mode = ctx.node().GetString("mode", "constant");
  const DType type = ctx.TypeOf(ctx.X(0));
  // The pads (and axes) as values: the forward's inputs from opset 11, constants of the attribute before.
  std::vector<int64_t> pads_attr;
  ir::Value* pads = nullptr;
  ir::Value* axes = opset >= 18 ? ctx.X(3) : nullptr;
  if (opset < 11) {
    const char* name = opset < 2 ? "paddings" : "pads";
    const ir::Attribute* a = ctx.node().FindAttribute(name);
    if (!a) return InvalidArgument("Pad-", opset, " needs the ints attribute '", name, "'");
    pads_attr = a->ints;
  } else {
    pads = ctx.X(1);
  }

  ir::Value* dx = nullptr;
  if (mode == "constant") {
    if (opset < 11) {
      std::vector<int64_t> neg(pads_attr.size());
      for (size_t i = 0; i < neg.size(); ++i) neg[i] = -pads_attr[i];
      dx = ctx.Emit1("Pad", {dy}, {ir::Attribute::Ints(opset < 2 ? "paddings" : "pads", neg)});
    } else {
      std::vector<ir::Value*> inputs = {dy, ctx.Emit1("Neg", {pads})};
      if (axes) inputs.insert(inputs.end(), {nullptr, axes});
      dx = ctx.Emit1("Pad", inputs);
    }
  } else if (mode == "edge" || mode == "reflect" || mode == "wrap") {
    if (!pads) pads = ctx.Ints(pads_attr);
    std::vector<ir::Value*> inputs = {dy, ctx.ShapeOf(ctx.X(0)), pads};
    if (axes) inputs.push_back(axes);
    dx = ctx.Emit(kPadGradOp, inputs, 1, {ir::Attribute::String("mode", mode)}, exec::kInternalDomain, type)[0];
  } else {
    return InvalidArgument("attribute 'mode' is '", mode, "'; expected constant, edge, reflect or wrap");
  }
  if (ctx.NeedsDX(0)) ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(0, dx));

  if (opset >= 11 && ctx.X(2) && ctx.NeedsDX(2)) {
    ir::Value* shape = ctx.ShapeOf(ctx.X(2));
    ir::Value* dv = mode == "constant"
                        ? ctx.Emit1("Sub", {ctx.EmitReduceSum(dy, {}, false), ctx.EmitReduceSum(dx, {}, false)})
                        : ctx.Scalar(ctx.TypeOf(ctx.X(2)), 0.0);
    ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(2, ctx.Emit1("Expand", {dv, shape})));
  }
  return Status::Ok();
}

// PadGrad's own gradient (second derivatives). PadGrad is the adjoint of Pad in edge, reflect or wrap mode, linear in
// dY; its adjoint is that Pad again, with the same pads, axes and mode (pads as an input: opset 11+; axes 18+; wrap
// 19+).
Status PadGradGradient(GradContext& ctx) {
  if (!ctx.NeedsDX(0)) return Status::Ok();
  if (!ctx.dY(0)) return ctx.SetDX(0, ctx.Zeros(ctx.TypeOf(ctx.X(0)), ctx.X(0)));
  const std::string mode = ctx.node().GetString("mode", "constant");
  const bool axes = ctx.X(3) != nullptr;
  const int64_t needs = mode == "wrap" ? 19 : axes ? 18 : 11;
  if (ctx.onnx_opset() < needs) {
    return InvalidArgument("the second derivative of a Pad in mode ", mode, " is that Pad again, with pads",
                           axes ? " and axes" : "", " as inputs (opset ", needs, "+); the model's opset is ",
                           ctx.onnx_opset());
  }
  std::vector<ir::Value*> inputs = {ctx.dY(0), ctx.X(2)};
  if (axes) inputs.insert(inputs.end(), {nullptr, ctx.X(3)});
  return ctx.SetDX(0, ctx.Emit1("Pad", inputs, {ir::Attribute::String("mode", mode)}));
}

}  // namespace

void RegisterPadOpInfos(OpInfoRegistry& r) {
  r.Add("Pad").Gradient(1, INT64_MAX, &PadGradient);
  r.Add(kPadGradOp, exec::kInternalDomain).Gradient(1, INT64_MAX, &PadGradGradient);
}

}  // namespace onnxamp::ops
