// Registration of the elementwise kernel family (CPU).
#include "runtime/executor/kernel.h"

namespace onnxamp::ops {

void RegisterElementwiseKernels(exec::KernelRegistry& r) { (void)r; }

}  // namespace onnxamp::ops
