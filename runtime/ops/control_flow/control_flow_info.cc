// The OpInfos of the control-flow ops. None has a gradient builder: the autodiff differentiates them itself. An If's
// gradient is a backward If whose branches are the autodiff of the forward branches (trainer/autodiff/if_gradient.h);
// a Loop's or Scan's is a trace loop and a backward loop whose body is the autodiff of the forward body
// (trainer/autodiff/loop_gradient.h).
#include "runtime/ops/op_info.h"

namespace onnxamp::ops {

void RegisterControlFlowOpInfos(OpInfoRegistry& r) {
  r.Add("If").NotDifferentiable("no builder: the autodiff differentiates If itself, into a backward If");
  r.Add("Loop").NotDifferentiable("no builder: the autodiff differentiates Loop itself, into a backward Loop");
  r.Add("Scan").NotDifferentiable("no builder: the autodiff differentiates Scan itself, into a backward Scan");
}

}  // namespace onnxamp::ops
