// Gradient builder of Trilu: the forward keeps a fixed set of positions, so dX = Trilu(dY, k) with the same `upper`.
#include "runtime/ops/op_info.h"

namespace onnxamp::ops {
namespace {

Status TriluGradient(GradContext& ctx) {
  std::vector<ir::Value*> inputs = {ctx.dY(0)};
  if (ctx.X(1)) inputs.push_back(ctx.X(1));
  std::vector<ir::Attribute> attrs;
  if (const ir::Attribute* a = ctx.node().FindAttribute("upper")) attrs.push_back(*a);
  return ctx.SetDX(0, ctx.Emit1("Trilu", inputs, std::move(attrs)));
}

}  // namespace

void RegisterTriluOpInfos(OpInfoRegistry& r) { r.Add("Trilu").Gradient(14, INT64_MAX, &TriluGradient); }

}  // namespace onnxamp::ops
