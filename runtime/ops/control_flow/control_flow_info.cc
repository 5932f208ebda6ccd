// The OpInfos of the control-flow ops. None has a gradient builder: the autodiff differentiates an If itself (its
// gradient is a backward If whose branches are the autodiff of the forward branches, trainer/autodiff/if_gradient.h),
// and refuses a Loop or Scan between the trained parameters and the loss, naming it.
#include "runtime/ops/op_info.h"

namespace onnxamp::ops {

void RegisterControlFlowOpInfos(OpInfoRegistry& r) {
  r.Add("If").NotDifferentiable("no builder: the autodiff differentiates If itself, into a backward If");
  r.Add("Loop").NotDifferentiable("a loop: the autodiff does not differentiate through loop bodies");
  r.Add("Scan").NotDifferentiable("a loop: the autodiff does not differentiate through loop bodies");
}

}  // namespace onnxamp::ops
