// Gradient builder of Transpose: dY transposed by the inverse permutation.
#include "runtime/ops/op_info.h"

namespace onnxamp::ops {
namespace {

Status Transpose(GradContext& ctx) {
  const ir::Attribute* perm = ctx.node().FindAttribute("perm");
  if (!perm) return ctx.SetDX(0, ctx.Emit1("Transpose", {ctx.dY(0)}));  // the reversal is its own inverse
  if (perm->type() != ir::AttrType::kInts) return InvalidArgument("attribute 'perm' must be ints");
  const std::vector<int64_t>& p = perm->ints;
  std::vector<int64_t> inverse(p.size(), -1);
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] < 0 || p[i] >= static_cast<int64_t>(p.size()) || inverse[p[i]] >= 0) {
      return InvalidArgument("attribute 'perm' is not a permutation");
    }
    inverse[p[i]] = static_cast<int64_t>(i);
  }
  return ctx.SetDX(0, ctx.Emit1("Transpose", {ctx.dY(0)}, {ir::Attribute::Ints("perm", inverse)}));
}

}  // namespace

void RegisterTransposeOpInfos(OpInfoRegistry& r) { r.Add("Transpose").Gradient(1, INT64_MAX, &Transpose); }

}  // namespace onnxamp::ops
