// Registration of the linalg kernel family (CPU): MatMul, Gemm, Conv, ConvTranspose, the pooling ops and Einsum, with
// their com.onnxamp gradient kernels, and of their gradient builders.
#include "runtime/executor/kernel.h"
#include "runtime/ops/gradient.h"

namespace onnxamp::ops {

void RegisterMatMulKernels(exec::KernelRegistry& r);         // matmul/
void RegisterGemmKernels(exec::KernelRegistry& r);           // gemm/
void RegisterConvKernels(exec::KernelRegistry& r);           // conv/
void RegisterConvTransposeKernels(exec::KernelRegistry& r);  // conv_transpose/
void RegisterPoolKernels(exec::KernelRegistry& r);           // pool/: MaxPool, AveragePool, Global{Average,Max}Pool
void RegisterEinsumKernels(exec::KernelRegistry& r);         // einsum/
void RegisterConvGradKernels(exec::KernelRegistry& r);       // conv/conv_grad_cpu.cc (com.onnxamp ConvGrad)
void RegisterPoolGradKernels(exec::KernelRegistry& r);       // pool/pool_grad_cpu.cc (com.onnxamp *PoolGrad)

void RegisterLinalgKernels(exec::KernelRegistry& r) {
  RegisterMatMulKernels(r);
  RegisterGemmKernels(r);
  RegisterConvKernels(r);
  RegisterConvTransposeKernels(r);
  RegisterPoolKernels(r);
  RegisterEinsumKernels(r);
  RegisterConvGradKernels(r);
  RegisterPoolGradKernels(r);
}

void RegisterGemmGradients(GradientRegistry& r);           // gemm/gemm_grad.cc
void RegisterMatMulGradients(GradientRegistry& r);         // matmul/matmul_grad.cc
void RegisterConvGradients(GradientRegistry& r);           // conv/conv_grad.cc
void RegisterPoolGradients(GradientRegistry& r);           // pool/pool_grad.cc
void RegisterConvTransposeGradients(GradientRegistry& r);  // conv_transpose/conv_transpose_grad.cc
void RegisterEinsumGradients(GradientRegistry& r);         // einsum/einsum_grad.cc

// The gradient builders of the linalg family (listed in runtime/ops/gradients.cc).
void RegisterLinalgGradients(GradientRegistry& r) {
  RegisterGemmGradients(r);
  RegisterMatMulGradients(r);
  RegisterConvGradients(r);
  RegisterPoolGradients(r);
  RegisterConvTransposeGradients(r);
  RegisterEinsumGradients(r);
}

}  // namespace onnxamp::ops
