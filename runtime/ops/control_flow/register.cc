// Registration of the control-flow kernels (CPU): the ops whose attributes hold subgraphs.
#include "runtime/executor/kernel.h"

namespace onnxamp::ops {

void RegisterIfKernels(exec::KernelRegistry& r);    // if_cpu.cc
void RegisterLoopKernels(exec::KernelRegistry& r);  // loop_cpu.cc
void RegisterScanKernels(exec::KernelRegistry& r);  // scan_cpu.cc

void RegisterControlFlowKernels(exec::KernelRegistry& r) {
  RegisterIfKernels(r);
  RegisterLoopKernels(r);
  RegisterScanKernels(r);
}

}  // namespace onnxamp::ops
