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

}  // namespace

void RegisterConvOpInfos(OpInfoRegistry& r) {
  // One builder for every opset: 1, 11 (no semantic change), 22 (bfloat16).
  r.Add("Conv").Low("compute-bound; the fp16/bf16 kernels accumulate in FP32").Gradient(1, INT64_MAX, &ConvGradient);
  r.Add(kConvGradOp, exec::kInternalDomain).NotDifferentiable(kBackwardOpReason);
  r.Add(kConvTransposeGradOp, exec::kInternalDomain).NotDifferentiable(kBackwardOpReason);
  r.Add(exec::kFusedConvOp, exec::kInternalDomain)
      .NotDifferentiable("an inference fusion: training graphs keep Conv and its activation");
}

}  // namespace onnxamp::ops
