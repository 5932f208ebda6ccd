// Gradient builder of Expand (opsets 8+): dY summed back to the input's shape (SumToShape over the broadcast dims).
// The shape input is an integer tensor and gets no gradient.
#include "runtime/ops/op_info.h"

namespace onnxamp::ops {
namespace {

Status ExpandGradient(GradContext& ctx) {
  if (!ctx.NeedsDX(0) || !ctx.dY(0)) return Status::Ok();
  return ctx.SetDX(0, ctx.SumToShape(ctx.dY(0), ctx.X(0)));
}

}  // namespace

void RegisterExpandOpInfos(OpInfoRegistry& r) {
  // Opset 13 only added bfloat16.
  r.Add("Expand").Gradient(8, INT64_MAX, &ExpandGradient);
}

}  // namespace onnxamp::ops
