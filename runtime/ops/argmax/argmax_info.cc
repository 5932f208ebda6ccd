// The OpInfos of ArgMax and ArgMin.
#include "runtime/ops/op_info.h"

namespace onnxamp::ops {

void RegisterArgMaxOpInfos(OpInfoRegistry& r) {
  r.Add("ArgMax").NotDifferentiable("integer result");
  r.Add("ArgMin").NotDifferentiable("integer result");
}

}  // namespace onnxamp::ops
