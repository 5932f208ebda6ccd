// Registration of the CUDA linalg kernels: MatMul and FusedMatMul (matmul_cuda.cc), Gemm (gemm_cuda.cc), Einsum
// (einsum_cuda.cc), MatMulInteger (integer_matmul_cuda.cc), with the CPU kernels' opsets and element types.
#include "runtime/executor/kernel.h"

namespace onnxamp::cuda {

void RegisterCudaMatMulKernels(exec::KernelRegistry& r);         // matmul_cuda.cc: MatMul, com.onnxamp FusedMatMul
void RegisterCudaGemmKernels(exec::KernelRegistry& r);           // gemm_cuda.cc
void RegisterCudaEinsumKernels(exec::KernelRegistry& r);         // einsum_cuda.cc
void RegisterCudaIntegerMatMulKernels(exec::KernelRegistry& r);  // integer_matmul_cuda.cc: MatMulInteger
void RegisterCudaDetKernels(exec::KernelRegistry& r);            // det_cuda.cc: Det, com.onnxamp DetGrad

void RegisterCudaLinalgKernels(exec::KernelRegistry& r) {
  RegisterCudaMatMulKernels(r);
  RegisterCudaGemmKernels(r);
  RegisterCudaEinsumKernels(r);
  RegisterCudaIntegerMatMulKernels(r);
  RegisterCudaDetKernels(r);
}

}  // namespace onnxamp::cuda
