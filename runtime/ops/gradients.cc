// The explicit list of gradient builder families (static registration objects would be dropped by the linker from a
// static library). Each family registers the builders of its op folders.
#include <array>

#include "runtime/ops/gradient.h"

namespace onnxamp::ops {

void RegisterElementwiseGradients(GradientRegistry& r);  // elementwise/ (and clip/, min_max/), Cast(Like)
void RegisterReduceGradients(GradientRegistry& r);       // reduce/: every Reduce* but ReduceL1/L2
void RegisterReshapeGradients(GradientRegistry& r);      // reshape/: Reshape, Flatten, Squeeze, Unsqueeze
void RegisterTransposeGradients(GradientRegistry& r);    // transpose/
void RegisterConcatGradients(GradientRegistry& r);       // concat/
void RegisterNormLossGradients(GradientRegistry& r);     // layer_norm/, softmax/, loss/
void RegisterIndexGradients(GradientRegistry& r);        // gather/, slice/, pad/, topk/... (listed in gather_grad.cc)
void RegisterLinalgGradients(GradientRegistry& r);       // gemm/, matmul/, conv/, pool/ (linalg/register.cc)
void RegisterBatchNormGradients(GradientRegistry& r);    // batch_norm/: BatchNormalization, BatchNormTraining
void RegisterGroupNormGradients(GradientRegistry& r);    // group_norm/: GroupNormalization, InstanceNormalization
void RegisterResizeGradients(GradientRegistry& r);       // resize/: Resize, Upsample

namespace {

constexpr std::array kGradientFamilies = {
    &RegisterElementwiseGradients, &RegisterReduceGradients,    &RegisterReshapeGradients, &RegisterTransposeGradients,
    &RegisterConcatGradients,      &RegisterNormLossGradients,  &RegisterIndexGradients,   &RegisterLinalgGradients,
    &RegisterBatchNormGradients,   &RegisterGroupNormGradients, &RegisterResizeGradients,
};

}  // namespace

const GradientRegistry& GradientRegistry::Global() {
  static const GradientRegistry* registry = [] {
    auto* r = new GradientRegistry();
    for (auto reg : kGradientFamilies) reg(*r);
    return r;
  }();
  return *registry;
}

}  // namespace onnxamp::ops
