// PlanWhere: Where's input checks and broadcast plan (see where.h).
#include "runtime/ops/where/where.h"

namespace onnxamp::ops {

StatusOr<BroadcastPlan> PlanWhere(const ir::Tensor* c, const ir::Tensor* x, const ir::Tensor* y) {
  if (!c || !x || !y) return InvalidArgument("input ", !c ? 0 : !x ? 1 : 2, " is missing");
  if (c->dtype() != DType::kBool) {
    return InvalidArgument("input 0 (condition) has element type ", DTypeName(c->dtype()), ", expected bool");
  }
  if (x->dtype() != y->dtype()) {
    return InvalidArgument("input 2 (Y) has element type ", DTypeName(y->dtype()), ", expected ", DTypeName(x->dtype()),
                           " like input 1 (X)");
  }
  const std::span<const int64_t> shapes[] = {c->dims(), x->dims(), y->dims()};
  return BroadcastPlan::Make(shapes);
}

}  // namespace onnxamp::ops
