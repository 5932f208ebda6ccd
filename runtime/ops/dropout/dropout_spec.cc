// DropoutSpec: Dropout's attribute parsing and per-run ratio and training-mode checks (see dropout.h).
#include "runtime/ops/common/elementwise.h"
#include "runtime/ops/dropout/dropout.h"

namespace onnxamp::ops {

Status DropoutSpec::Init(const exec::KernelInfo& info) {
  opset_ = info.opset;
  if (opset_ >= 12) {
    ONNXAMP_ASSIGN_OR_RETURN(seed_, OptionalIntAttribute(info.node, "seed"));
    return Status::Ok();
  }
  ONNXAMP_ASSIGN_OR_RETURN(float ratio, FloatAttribute(info.node, "ratio", 0.5f));
  if (!(ratio >= 0.0f && ratio <= 1.0f)) return InvalidArgument("attribute 'ratio' must be in [0, 1], got ", ratio);
  attr_ratio_ = ratio;
  // is_test: Dropout-6's attribute (default 0, training); from opset 7 only the trainer's train graph sets it.
  ONNXAMP_ASSIGN_OR_RETURN(int64_t is_test, IntAttribute(info.node, "is_test", opset_ < 7 ? 0 : 1));
  attr_training_ = is_test == 0;
  return Status::Ok();
}

Status DropoutSpec::Resolve(const exec::KernelContext& ctx, const ir::Tensor** x, double* ratio, bool* training) const {
  *x = ctx.input(0);
  if (!*x) return InvalidArgument("input 0 (data) is missing");
  *ratio = attr_ratio_;
  *training = attr_training_;
  if (opset_ < 12) return Status::Ok();
  *ratio = 0.5;
  *training = false;
  if (const ir::Tensor* r = ctx.input(1)) {
    if (r->num_elements() != 1) {
      return InvalidArgument("input 1 (ratio) must be a scalar, got shape ", ShapeToString(r->dims()));
    }
    ONNXAMP_RETURN_IF_ERROR(DispatchFloat(r->dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      *ratio = static_cast<double>(Load(r->values<T>()[0]));
      return Status::Ok();
    }));
  }
  if (const ir::Tensor* t = ctx.input(2)) {
    if (t->dtype() != DType::kBool || t->num_elements() != 1) {
      return InvalidArgument("input 2 (training_mode) must be a bool scalar, got ", DTypeName(t->dtype()), " ",
                             ShapeToString(t->dims()));
    }
    *training = t->values<bool>()[0];
  }
  if (!(*ratio >= 0.0 && *ratio <= 1.0)) {
    return InvalidArgument("input 1 (ratio) must be in [0, 1], got ", *ratio);
  }
  return Status::Ok();
}

}  // namespace onnxamp::ops
