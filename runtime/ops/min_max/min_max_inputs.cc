// MinMaxInputs: Min and Max's input checks (see min_max.h).
#include "runtime/ops/min_max/min_max.h"

#include "runtime/ops/common/variadic_inputs.h"

namespace onnxamp::ops {

Status MinMaxInputs(const exec::KernelContext& ctx, DType* dtype, std::vector<std::vector<int64_t>>* shapes) {
  return SameTypeInputs(ctx, "needs at least one input", " like input 0", dtype, shapes);
}

}  // namespace onnxamp::ops
