// The OpInfos of Constant and ConstantOfShape.
#include "runtime/ops/op_info.h"

namespace onnxamp::ops {

void RegisterConstantOpInfos(OpInfoRegistry& r) {
  r.Add("Constant").NotDifferentiable("no inputs");
  r.Add("ConstantOfShape").NotDifferentiable("its input is a shape");
}

}  // namespace onnxamp::ops
