// The OpInfo of Unique.
#include "runtime/ops/op_info.h"

namespace onnxamp::ops {

void RegisterUniqueOpInfos(OpInfoRegistry& r) {
  r.Add("Unique").NotDifferentiable("a selection of distinct values and int64 indices (torch.unique has no gradient)");
}

}  // namespace onnxamp::ops
