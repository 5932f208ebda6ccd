// ClipSpec: Clip's attribute bounds and bound-input checks (see clip.h).
#include "runtime/ops/clip/clip.h"
#include "runtime/ops/common/elementwise.h"

namespace onnxamp::ops {

Status ClipSpec::Init(const exec::KernelInfo& info) {
  bounds_as_inputs_ = info.opset >= 11;
  if (bounds_as_inputs_) return Status::Ok();
  ONNXAMP_ASSIGN_OR_RETURN(attr_min_, OptionalFloatAttribute(info.node, "min"));
  ONNXAMP_ASSIGN_OR_RETURN(attr_max_, OptionalFloatAttribute(info.node, "max"));
  return Status::Ok();
}

Status ClipSpec::Inputs(const exec::KernelContext& ctx, const ir::Tensor** x, const ir::Tensor** lo,
                        const ir::Tensor** hi) const {
  *x = ctx.input(0);
  if (!*x) return InvalidArgument("input 0 (input) is missing");
  *lo = bounds_as_inputs_ ? ctx.input(1) : nullptr;
  *hi = bounds_as_inputs_ ? ctx.input(2) : nullptr;
  const char* names[] = {"", "min", "max"};
  for (int i : {1, 2}) {
    const ir::Tensor* b = i == 1 ? *lo : *hi;
    if (!b) continue;
    if (b->dtype() != (*x)->dtype()) {
      return InvalidArgument("input ", i, " (", names[i], ") has element type ", DTypeName(b->dtype()), ", expected ",
                             DTypeName((*x)->dtype()), " like input 0");
    }
    if (b->num_elements() != 1) {
      return InvalidArgument("input ", i, " (", names[i], ") must be a scalar, got shape ", ShapeToString(b->dims()));
    }
  }
  return Status::Ok();
}

}  // namespace onnxamp::ops
