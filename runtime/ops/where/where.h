// Where's input checks and broadcast plan, shared by the CPU kernel and device kernels.
#pragma once

#include "runtime/common/status.h"
#include "runtime/ir/tensor.h"
#include "runtime/ops/common/broadcast.h"

namespace onnxamp::ops {

// Checks Where's inputs (condition bool; X and Y present and of one element type) and returns the broadcast plan of
// the three shapes; an error names the input, expected and got.
StatusOr<BroadcastPlan> PlanWhere(const ir::Tensor* c, const ir::Tensor* x, const ir::Tensor* y);

}  // namespace onnxamp::ops
