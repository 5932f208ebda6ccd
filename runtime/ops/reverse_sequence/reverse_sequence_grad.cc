// ReverseSequence's gradient builder: the op is its own inverse for the same lengths, so dX = ReverseSequence(dY).
#include "runtime/ops/op_info.h"

namespace onnxamp::ops {
namespace {

Status ReverseSequenceGradient(GradContext& ctx) {
  if (!ctx.NeedsDX(0) || !ctx.dY(0)) return Status::Ok();
  return ctx.SetDX(0, ctx.Emit1("ReverseSequence", {ctx.dY(0), ctx.X(1)}, ctx.node().attributes()));
}

}  // namespace

void RegisterReverseSequenceOpInfos(OpInfoRegistry& r) {
  r.Add("ReverseSequence").Gradient(10, INT64_MAX, &ReverseSequenceGradient);
}

}  // namespace onnxamp::ops
