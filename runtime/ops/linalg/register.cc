// Registration of the linalg kernel family (CPU).
#include "runtime/executor/kernel.h"

namespace onnxamp::ops {

void RegisterLinalgKernels(exec::KernelRegistry& r) { (void)r; }

}  // namespace onnxamp::ops
