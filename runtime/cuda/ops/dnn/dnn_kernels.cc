// Registration of the CUDA kernels of the dnn family: Conv, FusedConv, ConvTranspose (cuDNN, conv_cuda.cc), the
// pooling ops (pool_cuda.cc) and BatchNormalization (batch_norm_cuda.cc).
#include "runtime/executor/kernel.h"

namespace onnxamp::cuda {
namespace dnn {

void RegisterCudaConvKernels(exec::KernelRegistry& r);       // conv_cuda.cc
void RegisterCudaPoolKernels(exec::KernelRegistry& r);       // pool_cuda.cc
void RegisterCudaBatchNormKernels(exec::KernelRegistry& r);  // batch_norm_cuda.cc

}  // namespace dnn

void RegisterCudaDnnKernels(exec::KernelRegistry& r) {
  dnn::RegisterCudaConvKernels(r);
  dnn::RegisterCudaPoolKernels(r);
  dnn::RegisterCudaBatchNormKernels(r);
}

}  // namespace onnxamp::cuda
