// The explicit list of gradient builder families (static registration objects would be dropped by the linker from a
// static library). Each family registers the builders of its op folders.
#include <array>

#include "runtime/ops/gradient.h"

namespace onnxamp::ops {

void RegisterElementwiseGradients(GradientRegistry& r);  // elementwise/: arithmetic, math, activations, Cast
void RegisterReduceGradients(GradientRegistry& r);       // reduce/: ReduceSum, ReduceMean, ReduceSumSquare
void RegisterReshapeGradients(GradientRegistry& r);      // reshape/: Reshape, Flatten, Squeeze, Unsqueeze
void RegisterTransposeGradients(GradientRegistry& r);    // transpose/
void RegisterConcatGradients(GradientRegistry& r);       // concat/
void RegisterNormLossGradients(GradientRegistry& r);     // layer_norm/, softmax/, loss/
void RegisterIndexGradients(GradientRegistry& r);        // gather/, dropout/, where/, expand/, tile/
void RegisterLinalgGradients(GradientRegistry& r);       // gemm/, matmul/, conv/, pool/ (linalg/register.cc)
void RegisterBatchNormGradients(GradientRegistry& r);    // batch_norm/: BatchNormalization, BatchNormTraining

namespace {

constexpr std::array kGradientFamilies = {
    &RegisterElementwiseGradients, &RegisterReduceGradients, &RegisterReshapeGradients,
    &RegisterTransposeGradients,   &RegisterConcatGradients, &RegisterNormLossGradients,
    &RegisterIndexGradients,       &RegisterLinalgGradients, &RegisterBatchNormGradients,
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
