// Conv's gradient builder: one com.onnxamp ConvGrad(dY, X, W) node with Conv's attributes, whose outputs dX, dW, dB
// are requested only for the inputs that need a gradient. Taking X itself (not ConvTranspose with an output shape)
// settles the input size that stride > 1 leaves ambiguous, whatever auto_pad, group and dilations say.
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/ops/common/conv_geometry.h"
#include "runtime/ops/gradient.h"
#include "runtime/ops/gradient_ops.h"

namespace onnxamp::ops {
namespace {

Status ConvGradient(GradContext& ctx) {
  // The forward's attribute checks, so that a node the kernel would refuse is refused here, naming the attribute.
  WindowAttrs attrs;
  int64_t group = 1;
  ONNXAMP_RETURN_IF_ERROR(ParseConvAttrs(ctx.node(), /*transpose=*/false, &attrs, &group, /*relu=*/nullptr));
  const bool needs[3] = {ctx.NeedsDX(0), ctx.NeedsDX(1), ctx.X(2) != nullptr && ctx.NeedsDX(2)};
  size_t count = 0;
  for (size_t i = 0; i < 3; ++i) count = needs[i] ? i + 1 : count;
  if (count == 0) return Status::Ok();
  std::vector<ir::Value*> grads = ctx.Emit(kConvGradOp, {ctx.dY(0), ctx.X(0), ctx.X(1)}, count, ctx.node().attributes(),
                                           exec::kInternalDomain, ctx.TypeOf(ctx.X(0)));
  for (size_t i = 0; i < count; ++i) {
    if (needs[i]) {
      ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(i, grads[i]));
    } else {
      // An output no input needs (dX of the first convolution, dW of a frozen layer): left unrequested.
      grads[i]->producer()->SetOutput(static_cast<size_t>(grads[i]->producer_index()), nullptr);
    }
  }
  return Status::Ok();
}

}  // namespace

void RegisterConvGradients(GradientRegistry& r) {
  // One builder for every opset: 1, 11 (no semantic change), 22 (bfloat16).
  r.Register({"Conv", "", 1, INT64_MAX, &ConvGradient});
}

}  // namespace onnxamp::ops
