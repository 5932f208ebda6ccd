// Gradient builder of Identity (dY passes through unchanged), and the OpInfo of identity/.
#include "runtime/ops/op_info.h"

namespace onnxamp::ops {
namespace {

Status IdentityGradient(GradContext& ctx) { return ctx.SetDX(0, ctx.dY(0)); }

}  // namespace

void RegisterIdentityOpInfos(OpInfoRegistry& r) { r.Add("Identity").Gradient(1, INT64_MAX, &IdentityGradient); }

}  // namespace onnxamp::ops
