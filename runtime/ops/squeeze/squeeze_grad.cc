// Gradient builders of Squeeze and Unsqueeze, which only re-view their data: dY reshaped to X's run-time shape. Also
// the OpInfos of squeeze/.
#include "runtime/ops/op_info.h"

namespace onnxamp::ops {
namespace {

Status ReshapeBack(GradContext& ctx) { return ctx.SetDX(0, ctx.Emit1("Reshape", {ctx.dY(0), ctx.ShapeOf(ctx.X(0))})); }

}  // namespace

void RegisterSqueezeOpInfos(OpInfoRegistry& r) {
  r.Add("Squeeze").Gradient(1, INT64_MAX, &ReshapeBack);
  r.Add("Unsqueeze").Gradient(1, INT64_MAX, &ReshapeBack);
}

}  // namespace onnxamp::ops
