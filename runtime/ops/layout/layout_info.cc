// The OpInfos of the com.onnxamp ops on the blocked and channels-last layouts, which the inference optimizer
// makes from Conv and the pooling ops.
#include "runtime/executor/graph_optimizer.h"
#include "runtime/ops/op_info.h"

namespace onnxamp::ops {

void RegisterLayoutOpInfos(OpInfoRegistry& r) {
  for (const char* op : {exec::kBlockedConvOp, exec::kBlockedMaxPoolOp, exec::kBlockedAveragePoolOp,
                         exec::kBlockedGlobalAveragePoolOp, exec::kChannelsLastConvOp, exec::kChannelsLastMaxPoolOp,
                         exec::kChannelsLastAveragePoolOp, exec::kChannelsLastGlobalAveragePoolOp}) {
    r.Add(op, exec::kInternalDomain)
        .NotDifferentiable("an inference layout rewrite: training graphs keep the plain ops");
  }
}

}  // namespace onnxamp::ops
