// The OpInfo of OneHot.
#include "runtime/ops/op_info.h"

namespace onnxamp::ops {

void RegisterOneHotOpInfos(OpInfoRegistry& r) {
  r.Add("OneHot").NotDifferentiable("a table of the two constant values, picked by integer indices");
}

}  // namespace onnxamp::ops
