// The OpInfos of Shape and Size.
#include "runtime/ops/op_info.h"

namespace onnxamp::ops {

void RegisterShapeOpInfos(OpInfoRegistry& r) {
  r.Add("Shape").NotDifferentiable("integer result");
  r.Add("Size").NotDifferentiable("integer result");
}

}  // namespace onnxamp::ops
