// The explicit list of CPU kernel families. Static registration objects would be dropped by the linker from a
// static library, so every family is named here; the count is checked so that a family cannot be lost.
#include <array>

#include "runtime/executor/kernel.h"

namespace onnxamp::ops {

void RegisterIdentityKernels(exec::KernelRegistry& r);     // identity/
void RegisterElementwiseKernels(exec::KernelRegistry& r);  // elementwise/, cast/, dropout/
void RegisterLinalgKernels(exec::KernelRegistry& r);       // matmul/, gemm/, conv/, conv_transpose/, pool/, einsum/
void RegisterNormReduceKernels(exec::KernelRegistry& r);   // normalization/, reduce/, softmax/, topk/, loss/
void RegisterTensorKernels(exec::KernelRegistry& r);       // shape and data movement ops
void RegisterLayoutKernels(exec::KernelRegistry& r);       // layout/: ops on the blocked and channels-last layouts
void RegisterControlFlowKernels(exec::KernelRegistry& r);  // control_flow/: If, Loop, Scan

namespace {

constexpr std::array kCpuFamilies = {
    &RegisterIdentityKernels, &RegisterElementwiseKernels, &RegisterLinalgKernels,      &RegisterNormReduceKernels,
    &RegisterTensorKernels,   &RegisterLayoutKernels,      &RegisterControlFlowKernels,
};
static_assert(kCpuFamilies.size() == 7, "update this count when a kernel family is added");

}  // namespace
}  // namespace onnxamp::ops

namespace onnxamp::exec {

void RegisterAllCpuKernels(KernelRegistry& registry) {
  for (auto reg : ops::kCpuFamilies) reg(registry);
}

}  // namespace onnxamp::exec
