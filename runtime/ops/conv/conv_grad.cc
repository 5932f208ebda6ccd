// Conv's gradient builder: one com.onnxamp ConvGrad(dY, X, W) node with Conv's attributes, whose outputs dX, dW, dB
// are requested only for the inputs that need a gradient. Taking X itself (not ConvTranspose with an output shape)
// settles the input size that stride > 1 leaves ambiguous, whatever auto_pad, group and dilations say.
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/ops/common/conv_geometry.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/op_info.h"

namespace onnxamp::ops {
namespace {

Status ConvGradient(GradContext& ctx) {
  // The forward's attribute checks, so that a node the kernel would refuse is refused here, naming the attribute.
  WindowAttrs attrs;
  int64_t group = 1;
  ONNXAMP_RETURN_IF_ERROR(ParseConvAttrs(ctx.node(), /*transpose=*/false, &attrs, &group, /*relu=*/nullptr));
  return ctx.EmitInputGradients(kConvGradOp, {ctx.dY(0), ctx.X(0), ctx.X(1)},
                                {ctx.NeedsDX(0), ctx.NeedsDX(1), ctx.X(2) != nullptr && ctx.NeedsDX(2)},
                                ctx.node().attributes(), ctx.TypeOf(ctx.X(0)));
}

// ConvGrad's own gradient, for second derivatives (a gradient penalty through a convolution, as WGAN-GP's critic
// has). dX = Conv^T(dY, W) is linear in dY and in W, dW correlates X with dY (linear in each), dB sums dY. With GX, GW
// and GB reaching dX, dW and dB:
//   d/d(dY) = Conv(GX, W) + Conv(X, GW) + GB broadcast over dY,
//   d/dX = ConvGrad(dY, X, GW)'s dX (the input gradient of a convolution with weights GW),
//   d/dW = ConvGrad(dY, GX, W)'s dW (the weight gradient of a convolution of GX),
// every product with the node's own Conv attributes, so that strides, pads, dilations and groups carry over.
// ConvTransposeGrad's is the same with ConvTranspose for Conv (its dX is a Conv of dY, whose adjoint is the
// ConvTranspose with the node's attributes, output_padding and output_shape included, so of dY's shape).
template <bool kTranspose>
Status ConvGradGradient(GradContext& ctx) {
  const char* forward = kTranspose ? "ConvTranspose" : "Conv";
  const char* backward = kTranspose ? kConvTransposeGradOp : kConvGradOp;
  ir::Value* dy = ctx.X(0);
  ir::Value* x = ctx.X(1);
  ir::Value* w = ctx.X(2);
  ir::Value* gx = ctx.dY(0);
  ir::Value* gw = ctx.dY(1);
  ir::Value* gb = ctx.dY(2);
  const std::vector<ir::Attribute>& attrs = ctx.node().attributes();
  const DType t = ctx.TypeOf(x);
  if (ctx.NeedsDX(0)) {
    ir::Value* sum = nullptr;
    auto add = [&](ir::Value* v) { sum = sum ? ctx.Emit1("Add", {sum, v}) : v; };
    if (gx) add(ctx.Emit1(forward, {gx, w}, attrs));
    if (gw) add(ctx.Emit1(forward, {x, gw}, attrs));
    if (gb) {
      const int64_t rank = ctx.RankOf(dy) >= 0 ? ctx.RankOf(dy) : ctx.RankOf(x);
      if (rank < 3) return Unimplemented("the bias gradient's own gradient needs the rank of dY, which is unknown");
      std::vector<int64_t> axes = {0};
      for (int64_t d = 2; d < rank; ++d) axes.push_back(d);
      add(ctx.Emit1("Expand", {ctx.EmitUnsqueeze(gb, axes), ctx.ShapeOf(dy)}));
    }
    ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(0, sum ? sum : ctx.Zeros(t, dy)));
  }
  if (ctx.NeedsDX(1)) {
    ir::Value* dx = gw ? ctx.Emit(backward, {dy, x, gw}, 1, attrs, exec::kInternalDomain, t)[0] : ctx.Zeros(t, x);
    ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(1, dx));
  }
  if (ctx.NeedsDX(2)) {
    ir::Value* dw = nullptr;
    if (gx) {
      std::vector<ir::Value*> outs = ctx.Emit(backward, {dy, gx, w}, 2, attrs, exec::kInternalDomain, t);
      outs[0]->producer()->SetOutput(0, nullptr);  // only dW
      dw = outs[1];
    } else {
      dw = ctx.Zeros(ctx.TypeOf(w), w);
    }
    ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(2, dw));
  }
  return Status::Ok();
}

}  // namespace

void RegisterConvOpInfos(OpInfoRegistry& r) {
  // One builder for every opset: 1, 11 (no semantic change), 22 (bfloat16).
  r.Add("Conv").Low("compute-bound; the fp16/bf16 kernels accumulate in FP32").Gradient(1, INT64_MAX, &ConvGradient);
  r.Add(kConvGradOp, exec::kInternalDomain).Gradient(1, INT64_MAX, &ConvGradGradient<false>);
  r.Add(kConvTransposeGradOp, exec::kInternalDomain).Gradient(1, INT64_MAX, &ConvGradGradient<true>);
  r.Add(exec::kFusedConvOp, exec::kInternalDomain)
      .NotDifferentiable("an inference fusion: training graphs keep Conv and its activation");
}

}  // namespace onnxamp::ops
