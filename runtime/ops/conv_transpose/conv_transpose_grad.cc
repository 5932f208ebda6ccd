// ConvTranspose's gradient builder: one com.onnxamp ConvTransposeGrad(dY, X, W) node with ConvTranspose's attributes,
// whose outputs dX, dW, dB are requested only for the inputs that need a gradient. The kernel resolves output_shape,
// output_padding and auto_pad as the forward does, so every attribute combination the forward runs is covered.
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/ops/common/conv_geometry.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/op_info.h"

namespace onnxamp::ops {
namespace {

Status ConvTransposeGradient(GradContext& ctx) {
  // The forward's attribute checks, so that a node the kernel would refuse is refused here, naming the attribute.
  WindowAttrs attrs;
  int64_t group = 1;
  ONNXAMP_RETURN_IF_ERROR(ParseConvAttrs(ctx.node(), /*transpose=*/true, &attrs, &group, /*relu=*/nullptr));
  if (ctx.dY(0) == nullptr) return Status::Ok();
  return ctx.EmitInputGradients(kConvTransposeGradOp, {ctx.dY(0), ctx.X(0), ctx.X(1)},
                                {ctx.NeedsDX(0), ctx.NeedsDX(1), ctx.X(2) != nullptr && ctx.NeedsDX(2)},
                                ctx.node().attributes(), ctx.TypeOf(ctx.X(0)));
}

}  // namespace

void RegisterConvTransposeOpInfos(OpInfoRegistry& r) {
  // One builder for every opset: 1, 11 (no semantic change), 22 (bfloat16); ConvTransposeGrad's kernel is in conv/.
  r.Add("ConvTranspose")
      .Low("compute-bound; the fp16/bf16 kernels accumulate in FP32")
      .Gradient(1, INT64_MAX, &ConvTransposeGradient);
}

}  // namespace onnxamp::ops
