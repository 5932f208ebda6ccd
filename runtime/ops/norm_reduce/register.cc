// Registration of the norm_reduce kernel family (CPU): normalisations, reductions, softmax, arg/top-k and losses.
#include "runtime/executor/kernel.h"

namespace onnxamp::ops {

void RegisterBatchNormKernels(exec::KernelRegistry& r);     // batch_norm/
void RegisterLayerNormKernels(exec::KernelRegistry& r);     // layer_norm/
void RegisterGroupNormKernels(exec::KernelRegistry& r);     // group_norm/
void RegisterInstanceNormKernels(exec::KernelRegistry& r);  // instance_norm/
void RegisterReduceKernels(exec::KernelRegistry& r);        // reduce/: ReduceSum .. ReduceLogSumExp
void RegisterSoftmaxKernels(exec::KernelRegistry& r);       // softmax/: Softmax, LogSoftmax
void RegisterArgMaxKernels(exec::KernelRegistry& r);        // argmax/: ArgMax, ArgMin
void RegisterTopKKernels(exec::KernelRegistry& r);          // topk/
void RegisterLossKernels(exec::KernelRegistry& r);          // loss/: SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss

void RegisterNormReduceKernels(exec::KernelRegistry& r) {
  RegisterBatchNormKernels(r);
  RegisterLayerNormKernels(r);
  RegisterGroupNormKernels(r);
  RegisterInstanceNormKernels(r);
  RegisterReduceKernels(r);
  RegisterSoftmaxKernels(r);
  RegisterArgMaxKernels(r);
  RegisterTopKKernels(r);
  RegisterLossKernels(r);
}

}  // namespace onnxamp::ops
