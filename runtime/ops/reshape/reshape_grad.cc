// Gradient builders of Reshape and Flatten, which only re-view their data: dY reshaped to X's run-time shape, never
// to the forward's shape input (whose 0 and -1 entries mean something else). Also the OpInfos of reshape/.
#include "runtime/ops/op_info.h"

namespace onnxamp::ops {
namespace {

Status ReshapeBack(GradContext& ctx) { return ctx.SetDX(0, ctx.Emit1("Reshape", {ctx.dY(0), ctx.ShapeOf(ctx.X(0))})); }

}  // namespace

void RegisterReshapeOpInfos(OpInfoRegistry& r) {
  r.Add("Reshape").Gradient(1, INT64_MAX, &ReshapeBack);
  r.Add("Flatten").Gradient(1, INT64_MAX, &ReshapeBack);
}

}  // namespace onnxamp::ops
