// Registration of the linalg kernel family (CPU): MatMul, Gemm, Conv, ConvTranspose, the pooling ops, Einsum and the
// recurrent ops (RNN, GRU, LSTM), with their com.onnxamp gradient kernels.
#include "runtime/executor/kernel.h"

namespace onnxamp::ops {

void RegisterMatMulKernels(exec::KernelRegistry& r);         // matmul/
void RegisterFusedMatMulKernels(exec::KernelRegistry& r);    // matmul/fused_matmul_cpu.cc (com.onnxamp FusedMatMul)
void RegisterGemmKernels(exec::KernelRegistry& r);           // gemm/
void RegisterConvKernels(exec::KernelRegistry& r);           // conv/
void RegisterConvTransposeKernels(exec::KernelRegistry& r);  // conv_transpose/
void RegisterPoolKernels(exec::KernelRegistry& r);           // pool/: MaxPool, AveragePool, Global{Average,Max}Pool
void RegisterEinsumKernels(exec::KernelRegistry& r);         // einsum/
void RegisterConvGradKernels(exec::KernelRegistry& r);       // conv/conv_grad_cpu.cc (com.onnxamp ConvGrad)
void RegisterPoolGradKernels(exec::KernelRegistry& r);       // pool/pool_grad_cpu.cc (com.onnxamp *PoolGrad)
void RegisterMaxUnpoolKernels(exec::KernelRegistry& r);      // pool/unpool_cpu.cc
void RegisterRecurrentKernels(exec::KernelRegistry& r);      // rnn/: RNN, GRU, LSTM
void RegisterRecurrentGradKernels(exec::KernelRegistry& r);  // rnn/rnn_grad_cpu.cc (com.onnxamp RNNGrad)

void RegisterLinalgKernels(exec::KernelRegistry& r) {
  RegisterMatMulKernels(r);
  RegisterFusedMatMulKernels(r);
  RegisterGemmKernels(r);
  RegisterConvKernels(r);
  RegisterConvTransposeKernels(r);
  RegisterPoolKernels(r);
  RegisterEinsumKernels(r);
  RegisterConvGradKernels(r);
  RegisterPoolGradKernels(r);
  RegisterMaxUnpoolKernels(r);
  RegisterRecurrentKernels(r);
  RegisterRecurrentGradKernels(r);
}

}  // namespace onnxamp::ops
