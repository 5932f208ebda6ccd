// Registration of the norm_reduce kernel family (CPU): normalisations, reductions, softmax, arg/top-k and losses.
#include "runtime/executor/kernel.h"

namespace onnxamp::ops {

void RegisterBatchNormKernels(exec::KernelRegistry& r);     // batch_norm/
void RegisterLayerNormKernels(exec::KernelRegistry& r);     // layer_norm/
void RegisterGroupNormKernels(exec::KernelRegistry& r);     // group_norm/
void RegisterInstanceNormKernels(exec::KernelRegistry& r);  // instance_norm/
void RegisterLrnKernels(exec::KernelRegistry& r);           // lrn/: LRN, com.onnxamp LRNGrad
void RegisterReduceKernels(exec::KernelRegistry& r);        // reduce/: ReduceSum .. ReduceLogSumExp
void RegisterSumToShapeKernels(exec::KernelRegistry& r);    // reduce/sum_to_shape_cpu.cc (com.onnxamp)
void RegisterSoftmaxKernels(exec::KernelRegistry& r);       // softmax/: Softmax, LogSoftmax
void RegisterHardmaxKernels(exec::KernelRegistry& r);       // softmax/hardmax_cpu.cc
void RegisterArgMaxKernels(exec::KernelRegistry& r);        // argmax/: ArgMax, ArgMin
void RegisterTopKKernels(exec::KernelRegistry& r);          // topk/
void RegisterLossKernels(exec::KernelRegistry& r);          // loss/: SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss
// batch_norm/batch_norm_grad_cpu.cc: com.onnxamp BatchNormTraining, BatchNormalizationGrad
void RegisterBatchNormGradKernels(exec::KernelRegistry& r);
void RegisterLayerNormGradKernels(exec::KernelRegistry& r);  // layer_norm/: com.onnxamp LayerNormalizationGrad
void RegisterGroupNormGradKernels(exec::KernelRegistry& r);  // group_norm/: com.onnxamp GroupNormalizationGrad
void RegisterSoftmaxGradKernels(exec::KernelRegistry& r);    // softmax/: com.onnxamp SoftmaxGrad, LogSoftmaxGrad
void RegisterLossGradKernels(exec::KernelRegistry& r);       // loss/: com.onnxamp *LossGrad
// reduce/reduce_prod_grad_cpu.cc: com.onnxamp ReduceProdGrad
void RegisterReduceProdGradKernels(exec::KernelRegistry& r);

void RegisterNormReduceKernels(exec::KernelRegistry& r) {
  RegisterBatchNormKernels(r);
  RegisterBatchNormGradKernels(r);
  RegisterLayerNormKernels(r);
  RegisterGroupNormKernels(r);
  RegisterInstanceNormKernels(r);
  RegisterLrnKernels(r);
  RegisterReduceKernels(r);
  RegisterSumToShapeKernels(r);
  RegisterReduceProdGradKernels(r);
  RegisterSoftmaxKernels(r);
  RegisterHardmaxKernels(r);
  RegisterArgMaxKernels(r);
  RegisterTopKKernels(r);
  RegisterLossKernels(r);
  RegisterLayerNormGradKernels(r);
  RegisterGroupNormGradKernels(r);
  RegisterSoftmaxGradKernels(r);
  RegisterLossGradKernels(r);
}

}  // namespace onnxamp::ops
