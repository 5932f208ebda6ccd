// The explicit list of CUDA kernel families (as runtime/ops/cpu_kernels.cc for the CPU), the CUDA registry, and
// RegisterLikeCpu.
#include <array>

#include "runtime/cuda/cuda_context.h"
#include "runtime/cuda/ops/register_like_cpu.h"
#include "runtime/executor/kernel.h"

namespace onnxamp::cuda {

void RegisterCudaElementwiseKernels(exec::KernelRegistry& r);      // ops/elementwise/: unary, binary, compare, Cast...
void RegisterCudaLinalgKernels(exec::KernelRegistry& r);           // ops/linalg/: MatMul, Gemm, Einsum (cuBLASLt)
void RegisterCudaDnnKernels(exec::KernelRegistry& r);              // ops/dnn/: Conv, ConvTranspose, pools, BN (cuDNN)
void RegisterCudaNormReduceKernels(exec::KernelRegistry& r);       // ops/norm_reduce/: Reduce*, Softmax, norms, losses
void RegisterCudaTensorKernels(exec::KernelRegistry& r);           // ops/tensor/: shape and data movement ops
void RegisterCudaElementwiseGradKernels(exec::KernelRegistry& r);  // ops/elementwise/: Relu/Elu/Gelu/DropoutGrad
void RegisterCudaNormReduceGradKernels(exec::KernelRegistry& r);   // ops/norm_reduce/: softmax, loss, sum/prod grads
void RegisterCudaIndexGradKernels(exec::KernelRegistry& r);        // ops/tensor/: Gather, Slice, Pad, Resize grads
void RegisterCudaNormGradKernels(exec::KernelRegistry& r);         // ops/norm_reduce/: LayerNorm, GroupNorm grads
void RegisterCudaRecurrentKernels(exec::KernelRegistry& r);        // ops/rnn/: RNN, GRU, LSTM and RNNGrad
void RegisterCudaSampleKernels(exec::KernelRegistry& r);           // ops/sample/: GridSample, RoiAlign, their grads
void RegisterCudaSpectralKernels(exec::KernelRegistry& r);         // ops/spectral/: DFT, STFT and their grads

namespace {

constexpr std::array kCudaFamilies = {
    &RegisterCudaElementwiseKernels,    &RegisterCudaLinalgKernels,    &RegisterCudaDnnKernels,
    &RegisterCudaNormReduceKernels,     &RegisterCudaTensorKernels,    &RegisterCudaElementwiseGradKernels,
    &RegisterCudaNormReduceGradKernels, &RegisterCudaIndexGradKernels, &RegisterCudaNormGradKernels,
    &RegisterCudaRecurrentKernels,      &RegisterCudaSampleKernels,    &RegisterCudaSpectralKernels,
};
static_assert(kCudaFamilies.size() == 12, "update this count when a kernel family is added");

}  // namespace

void RegisterLikeCpu(exec::KernelRegistry& r, std::string_view op, exec::KernelFactory factory,
                     std::vector<int> host_inputs, std::string_view domain) {
  bool found = false;
  for (const exec::KernelDef& cpu : exec::KernelRegistry::Global().defs()) {
    if (cpu.op_type != op || cpu.domain != domain || cpu.device != exec::Device::kCpu) continue;
    exec::KernelDef d = cpu;
    d.device = exec::Device::kCuda;
    d.factory = factory;
    d.host_inputs = host_inputs;
    d.outputs_on_host = false;
    r.Register(std::move(d));
    found = true;
  }
  ONNXAMP_CHECK(found, "RegisterLikeCpu: the CPU registers no kernel for ", op);
}

const exec::KernelRegistry& CudaKernelRegistry() {
  static const exec::KernelRegistry* registry = [] {
    auto* r = new exec::KernelRegistry();
    for (auto reg : kCudaFamilies) reg(*r);
    return r;
  }();
  return *registry;
}

}  // namespace onnxamp::cuda
