// Registration of the CUDA kernels of this family: reductions and ArgMax/ArgMin (reduce_ops.cc), Softmax and the
// losses (softmax_ops.cc), normalisations (norm_ops.cc), LRN, LpNormalization, MeanVarianceNormalization, Hardmax and
// their gradients (norm_more_ops.cc) and TopK (topk_ops.cc). Opset ranges and element types are those of the CPU
// registrations of the same ops.
#include "runtime/executor/kernel.h"

namespace onnxamp::cuda {
namespace norm_reduce {

void RegisterCudaReduceKernels(exec::KernelRegistry& r);    // ReduceSum .. ReduceLogSumExp, ArgMax, ArgMin
void RegisterCudaSoftmaxKernels(exec::KernelRegistry& r);   // Softmax, LogSoftmax, the two losses
void RegisterCudaNormKernels(exec::KernelRegistry& r);      // Layer-, Group-, InstanceNormalization
void RegisterCudaTopKKernels(exec::KernelRegistry& r);      // TopK
void RegisterCudaNormMoreKernels(exec::KernelRegistry& r);  // LRN, LpNormalization, MVN (+ grads), Hardmax

}  // namespace norm_reduce

void RegisterCudaNormReduceKernels(exec::KernelRegistry& r) {
  norm_reduce::RegisterCudaReduceKernels(r);
  norm_reduce::RegisterCudaSoftmaxKernels(r);
  norm_reduce::RegisterCudaNormKernels(r);
  norm_reduce::RegisterCudaTopKKernels(r);
  norm_reduce::RegisterCudaNormMoreKernels(r);
}

}  // namespace onnxamp::cuda
