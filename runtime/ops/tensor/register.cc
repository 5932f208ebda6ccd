// Registration of the tensor kernel family (CPU).
#include "runtime/executor/kernel.h"

namespace onnxamp::ops {

void RegisterTensorKernels(exec::KernelRegistry& r) { (void)r; }

}  // namespace onnxamp::ops
