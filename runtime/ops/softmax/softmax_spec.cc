// Softmax and LogSoftmax: attribute parsing and the view of the input shared by every backend (see softmax.h).
#include "runtime/ops/softmax/softmax.h"

namespace onnxamp::ops {
namespace {

// The axis as an index. Coerced to 2-D, `axis` == rank is accepted too (every row has one element).
StatusOr<int64_t> CheckAxis(const SoftmaxSpec& spec, int64_t rank) {
  if (spec.coerce_2d && spec.axis == rank) return spec.axis;
  return reduce::NormalizeAxis(spec.axis, rank);
}

}  // namespace

Status ParseSoftmaxSpec(const exec::KernelInfo& info, SoftmaxSpec* spec) {
  spec->coerce_2d = info.opset < 13;
  spec->axis = info.node.GetInt("axis", spec->coerce_2d ? 1 : -1);
  if (auto rank = reduce::DeclaredRank(info.node, 0)) {
    Status s = CheckAxis(*spec, *rank).status();
    if (!s.ok()) return s.WithContext("attribute 'axis'");
  }
  return Status::Ok();
}

StatusOr<reduce::AxisView> ResolveSoftmaxView(const SoftmaxSpec& spec, const ir::Tensor* x) {
  if (!x) return InvalidArgument("input 0 (input) is missing");
  StatusOr<int64_t> axis = CheckAxis(spec, x->rank());
  if (!axis.ok()) return axis.status().WithContext("attribute 'axis'");
  reduce::AxisView v;
  if (spec.coerce_2d) {
    v.outer = reduce::Product(x->dims(), 0, *axis);
    v.n = reduce::Product(x->dims(), *axis);
  } else {
    v = reduce::ViewAround(x->dims(), *axis);
  }
  return v;
}

}  // namespace onnxamp::ops
