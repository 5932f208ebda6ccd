// Registration of the CUDA kernels of the dnn family: Conv, FusedConv, ChannelsLastConv, ConvTranspose (cuDNN,
// conv_cuda.cc), the pooling ops and their channels-last forms (pool_cuda.cc) and BatchNormalization
// (batch_norm_cuda.cc).
#include "runtime/executor/kernel.h"

namespace onnxamp::cuda {
namespace dnn {

void RegisterCudaConvKernels(exec::KernelRegistry& r);       // conv_cuda.cc (with ChannelsLastConv)
void RegisterCudaPoolKernels(exec::KernelRegistry& r);       // pool_cuda.cc (with the ChannelsLast* pools)
void RegisterCudaBatchNormKernels(exec::KernelRegistry& r);  // batch_norm_cuda.cc

}  // namespace dnn

void RegisterCudaDnnKernels(exec::KernelRegistry& r) {
  dnn::RegisterCudaConvKernels(r);
  dnn::RegisterCudaPoolKernels(r);
  dnn::RegisterCudaBatchNormKernels(r);
}

}  // namespace onnxamp::cuda
