// The OpInfos of the random ops. None is deterministic (never folded into a constant). The *Like ops' outputs do not
// depend on their input's values, and Bernoulli's gradient is zero as PyTorch defines it (torch.bernoulli): zero
// gradients; Multinomial gives integer indices.
#include "runtime/ops/op_info.h"

namespace onnxamp::ops {

void RegisterRandomOpInfos(OpInfoRegistry& r) {
  for (const char* op : {"RandomNormal", "RandomUniform"}) {
    r.Add(op).Random().NotDifferentiable("no inputs: numbers drawn from the attributes alone");
  }
  for (const char* op : {"RandomNormalLike", "RandomUniformLike"}) {
    r.Add(op).Random().Gradient(8, INT64_MAX, &ZeroGradient).GradientFloor("the zero gradient is an Expand (opset 8)");
  }
  r.Add("Bernoulli").Random().Gradient(15, INT64_MAX, &ZeroGradient);
  r.Add("Multinomial").Random().NotDifferentiable("integer class indices");
}

}  // namespace onnxamp::ops
