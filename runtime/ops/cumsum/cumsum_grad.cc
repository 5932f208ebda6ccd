// Gradient builder of CumSum: each input element reaches the outputs on its side of the running sum, so dX is the
// running sum of dY the other way: CumSum(dY, axis) with `reverse` flipped and `exclusive` kept.
#include "runtime/ops/op_info.h"

namespace onnxamp::ops {
namespace {

Status CumSumGradient(GradContext& ctx) {
  const ir::Attribute* r = ctx.node().FindAttribute("reverse");
  const bool reverse = r && r->type() == ir::AttrType::kInt && r->i != 0;
  std::vector<ir::Attribute> attrs = {ir::Attribute::Int("reverse", reverse ? 0 : 1)};
  if (const ir::Attribute* e = ctx.node().FindAttribute("exclusive")) attrs.push_back(*e);
  return ctx.SetDX(0, ctx.Emit1("CumSum", {ctx.dY(0), ctx.X(1)}, std::move(attrs)));
}

}  // namespace

void RegisterCumSumOpInfos(OpInfoRegistry& r) {
  r.Add("CumSum").Keep("a running sum: fp16's precision cannot hold it").Gradient(11, INT64_MAX, &CumSumGradient);
}

}  // namespace onnxamp::ops
