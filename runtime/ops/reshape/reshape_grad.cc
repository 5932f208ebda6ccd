// Gradient builders of the ops that only re-view their data (Reshape, Flatten, Squeeze, Unsqueeze): dY reshaped to
// X's run-time shape, never to the forward's shape input (whose 0 and -1 entries mean something else).
#include "runtime/ops/gradient.h"

namespace onnxamp::ops {
namespace {

Status ReshapeBack(GradContext& ctx) { return ctx.SetDX(0, ctx.Emit1("Reshape", {ctx.dY(0), ctx.ShapeOf(ctx.X(0))})); }

}  // namespace

void RegisterReshapeGradients(GradientRegistry& r) {
  for (const char* op : {"Reshape", "Flatten", "Squeeze", "Unsqueeze"})
    r.Register({op, "", 1, INT64_MAX, &ReshapeBack});
}

}  // namespace onnxamp::ops
