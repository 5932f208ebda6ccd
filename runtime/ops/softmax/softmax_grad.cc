// Gradient builders of Softmax and LogSoftmax (every opset): SoftmaxGrad / LogSoftmaxGrad of the forward's output,
// with the forward's axis resolved by ParseSoftmaxSpec and `legacy` 1 before opset 13 (the 2-D coercion).
#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/op_info.h"
#include "runtime/ops/softmax/softmax.h"

namespace onnxamp::ops {
namespace {

template <bool kLog>
Status SoftmaxGradient(GradContext& ctx) {
  if (!ctx.NeedsDX(0) || !ctx.dY(0)) return Status::Ok();
  SoftmaxSpec spec;
  ONNXAMP_RETURN_IF_ERROR(ParseSoftmaxSpec(exec::KernelInfo{ctx.node(), ctx.opset(), exec::Device::kCpu}, &spec));
  ir::Value* dx = ctx.Emit(kLog ? kLogSoftmaxGradOp : kSoftmaxGradOp, {ctx.dY(0), ctx.Y(0)}, 1,
                           {ir::Attribute::Int("axis", spec.axis), ir::Attribute::Int("legacy", spec.coerce_2d)},
                           exec::kInternalDomain, ctx.TypeOf(ctx.X(0)))[0];
  return ctx.SetDX(0, dx);
}

}  // namespace

void RegisterSoftmaxOpInfos(OpInfoRegistry& r) {
  r.Add("Hardmax")
      .Gradient(8, INT64_MAX, &ZeroGradient)  // piecewise constant, as PyTorch's one-hot of an argmax
      .GradientFloor("its zero gradient is Expand(0, Shape(x)), and Expand needs opset 8");
  // Opsets 1-12 coerce the input to 2-D at `axis` (default 1); from 13 one axis (default -1). One builder each way.
  r.Add("Softmax")
      .Keep("exp and a sum along the axis")
      .Gradient(1, 12, &SoftmaxGradient<false>)
      .Gradient(13, INT64_MAX, &SoftmaxGradient<false>);
  r.Add("LogSoftmax")
      .Keep("exp, a sum and a log along the axis")
      .Gradient(1, 12, &SoftmaxGradient<true>)
      .Gradient(13, INT64_MAX, &SoftmaxGradient<true>);
  r.Add(kSoftmaxGradOp, exec::kInternalDomain).NotDifferentiable(kBackwardOpReason);
  r.Add(kLogSoftmaxGradOp, exec::kInternalDomain).NotDifferentiable(kBackwardOpReason);
}

}  // namespace onnxamp::ops
