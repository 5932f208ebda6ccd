// ArgMax and ArgMin: attribute parsing and the view of the input shared by every backend (see argmax.h).
#include "runtime/ops/argmax/argmax.h"

namespace onnxamp::ops {

Status ParseArgExtremeSpec(const exec::KernelInfo& info, ArgExtremeSpec* spec) {
  spec->axis = info.node.GetInt("axis", 0);
  spec->keepdims = info.node.GetInt("keepdims", 1) != 0;
  spec->select_last = info.node.GetInt("select_last_index", 0) != 0;
  if (auto rank = reduce::DeclaredRank(info.node, 0)) {
    Status s = reduce::NormalizeAxis(spec->axis, *rank).status();
    if (!s.ok()) return s.WithContext("attribute 'axis'");
  }
  return Status::Ok();
}

StatusOr<ArgExtremeShape> ResolveArgExtremeShape(const ArgExtremeSpec& spec, const ir::Tensor* x, bool max) {
  if (!x) return InvalidArgument("input 0 (data) is missing");
  StatusOr<int64_t> axis = reduce::NormalizeAxis(spec.axis, x->rank());
  if (!axis.ok()) return axis.status().WithContext("attribute 'axis'");
  ArgExtremeShape shape;
  shape.axis = *axis;
  shape.view = reduce::ViewAround(x->dims(), *axis);
  const reduce::AxisView& v = shape.view;
  if (v.n == 0 && v.outer * v.inner > 0) {
    return InvalidArgument("input 0 (data): dimension ", *axis, " is empty, so it has no ",
                           max ? "maximum" : "minimum");
  }
  shape.out_dims = x->dims();
  if (spec.keepdims) {
    shape.out_dims[*axis] = 1;
  } else {
    shape.out_dims.erase(shape.out_dims.begin() + *axis);
  }
  return shape;
}

}  // namespace onnxamp::ops
