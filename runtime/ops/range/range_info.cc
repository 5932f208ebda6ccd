// The OpInfo of Range.
#include "runtime/ops/op_info.h"

namespace onnxamp::ops {

void RegisterRangeOpInfos(OpInfoRegistry& r) {
  r.Add("Range")
      .Keep("fp16 counts integers exactly only up to 2048")
      .NotDifferentiable("integer-valued steps: a constant sequence");
}

}  // namespace onnxamp::ops
