// The OpInfo of InstanceNormalization. Its gradient builder is GroupNormalization's with a group per channel (the
// com.onnxamp GroupNormalizationGrad kernel serves both).
#include "runtime/ops/op_info.h"

namespace onnxamp::ops {

Status InstanceNormGradient(GradContext& ctx);  // group_norm/group_norm_grad.cc

void RegisterInstanceNormOpInfos(OpInfoRegistry& r) {
  r.Add("InstanceNormalization")
      .Keep("mean and variance over many elements")
      .Gradient(6, INT64_MAX, &InstanceNormGradient);
}

}  // namespace onnxamp::ops
