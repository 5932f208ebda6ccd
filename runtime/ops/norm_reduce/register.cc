// Registration of the norm_reduce kernel family (CPU).
#include "runtime/executor/kernel.h"

namespace onnxamp::ops {

void RegisterNormReduceKernels(exec::KernelRegistry& r) { (void)r; }

}  // namespace onnxamp::ops
