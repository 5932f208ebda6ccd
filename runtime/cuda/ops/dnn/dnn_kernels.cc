// Registration of the CUDA kernels of the dnn family: Conv, FusedConv, ChannelsLastConv, ConvTranspose (cuDNN,
// conv_cuda.cc), the pooling ops and their channels-last forms (pool_cuda.cc) and BatchNormalization
// (batch_norm_cuda.cc), the gradient ops of those (conv_grad_cuda.cc, pool_bn_grad_cuda.cc), MaxUnpool with its
// gradient (unpool_cuda.cc), and ConvInteger and QLinearConv (conv_integer_cuda.cc).
#include "runtime/executor/kernel.h"

namespace onnxamp::cuda {
namespace dnn {

void RegisterCudaConvKernels(exec::KernelRegistry& r);       // conv_cuda.cc (with ChannelsLastConv)
void RegisterCudaPoolKernels(exec::KernelRegistry& r);       // pool_cuda.cc (with the ChannelsLast* pools)
void RegisterCudaBatchNormKernels(exec::KernelRegistry& r);  // batch_norm_cuda.cc
// ConvGrad, ConvTransposeGrad (conv_grad_cuda.cc); MaxPoolGrad, AveragePoolGrad, BatchNormTraining,
// BatchNormalizationGrad (pool_bn_grad_cuda.cc).
void RegisterCudaConvGradKernels(exec::KernelRegistry& r);
void RegisterCudaPoolBatchNormGradKernels(exec::KernelRegistry& r);
void RegisterCudaUnpoolKernels(exec::KernelRegistry& r);       // unpool_cuda.cc: MaxUnpool, MaxUnpoolGrad
void RegisterCudaConvIntegerKernels(exec::KernelRegistry& r);  // conv_integer_cuda.cc: ConvInteger, QLinearConv

}  // namespace dnn

void RegisterCudaDnnKernels(exec::KernelRegistry& r) {
  dnn::RegisterCudaConvKernels(r);
  dnn::RegisterCudaPoolKernels(r);
  dnn::RegisterCudaBatchNormKernels(r);
  dnn::RegisterCudaConvGradKernels(r);
  dnn::RegisterCudaPoolBatchNormGradKernels(r);
  dnn::RegisterCudaUnpoolKernels(r);
  dnn::RegisterCudaConvIntegerKernels(r);
}

}  // namespace onnxamp::cuda
