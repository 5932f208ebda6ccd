// Registration of the elementwise kernel family (CPU): unary math and activations, binary arithmetic,
// comparisons and logic (elementwise/), Min/Max (min_max/), Clip (clip/), Where (where/), Cast and CastLike (cast/),
// Dropout (dropout/).
#include "runtime/executor/kernel.h"

namespace onnxamp::ops {

void RegisterUnaryKernels(exec::KernelRegistry& r);         // elementwise/unary_cpu.cc
void RegisterBinaryKernels(exec::KernelRegistry& r);        // elementwise/binary_cpu.cc
void RegisterCompareLogicKernels(exec::KernelRegistry& r);  // elementwise/compare_logic_cpu.cc
void RegisterBitShiftKernels(exec::KernelRegistry& r);      // elementwise/bitshift_cpu.cc
void RegisterMinMaxKernels(exec::KernelRegistry& r);        // min_max/min_max_cpu.cc
void RegisterClipKernels(exec::KernelRegistry& r);          // clip/clip_cpu.cc
void RegisterWhereKernels(exec::KernelRegistry& r);         // where/where_cpu.cc
void RegisterCastKernels(exec::KernelRegistry& r);          // cast/cast_cpu.cc
void RegisterDropoutKernels(exec::KernelRegistry& r);       // dropout/dropout_cpu.cc
void RegisterDropoutGradKernels(exec::KernelRegistry& r);   // dropout/dropout_grad_cpu.cc: com.onnxamp DropoutGrad
void RegisterReluGradKernels(exec::KernelRegistry& r);      // elementwise/relu_grad_cpu.cc (com.onnxamp)
// elementwise/activation_grad_cpu.cc: com.onnxamp EluGrad, GeluGrad
void RegisterActivationGradKernels(exec::KernelRegistry& r);

void RegisterElementwiseKernels(exec::KernelRegistry& r) {
  RegisterUnaryKernels(r);
  RegisterBinaryKernels(r);
  RegisterCompareLogicKernels(r);
  RegisterBitShiftKernels(r);
  RegisterMinMaxKernels(r);
  RegisterClipKernels(r);
  RegisterWhereKernels(r);
  RegisterCastKernels(r);
  RegisterDropoutKernels(r);
  RegisterDropoutGradKernels(r);
  RegisterReluGradKernels(r);
  RegisterActivationGradKernels(r);
}

}  // namespace onnxamp::ops
