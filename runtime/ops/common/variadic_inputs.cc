// SameTypeInputs: the shared input check of variadic ops (see variadic_inputs.h).
#include "runtime/ops/common/variadic_inputs.h"

namespace onnxamp::ops {

Status SameTypeInputs(const exec::KernelContext& ctx, std::string_view none_message, std::string_view type_suffix,
                      DType* dtype, std::vector<std::vector<int64_t>>* shapes) {
  if (ctx.num_inputs() == 0 || !ctx.input(0)) return InvalidArgument(none_message);
  *dtype = ctx.input(0)->dtype();
  shapes->clear();
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const ir::Tensor* t = ctx.input(i);
    if (!t) return InvalidArgument("input ", i, " is missing");
    if (t->dtype() != *dtype) {
      return InvalidArgument("input ", i, " has element type ", DTypeName(t->dtype()), ", expected ", DTypeName(*dtype),
                             type_suffix);
    }
    shapes->push_back(t->dims());
  }
  return Status::Ok();
}

}  // namespace onnxamp::ops
