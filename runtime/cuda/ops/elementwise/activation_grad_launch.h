// Host entry points of the CUDA activation gradient kernels (activation_grad.cu): ReluGrad, EluGrad and GeluGrad of
// com.onnxamp (contracts in runtime/ops/gradient_ops.h). The OpKernel classes are in grad_kernels.cc.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string_view>

#include "runtime/common/dtype.h"
#include "runtime/common/status.h"

namespace onnxamp::cuda::ew {

enum class ActivationGradOp {
  kRelu,      // dX = dY where Y > 0, else 0 (input 1 is Y)
  kElu,       // dX = dY where X > 0, else dY * alpha * exp(X)
  kGelu,      // dX = dY * (Phi(X) + X phi(X))
  kGeluTanh,  // dX = dY * the derivative of X sigmoid(2 sqrt(2/pi) (X + 0.044715 X^3))
};

// dx[i] = op(dy[i], x[i]) for i < n, all three of element type `dtype` (float, float16, bfloat16 or double), computed
// in float (double for double) with exact exp/erfc, as the CPU kernels. dx may be dy (each element is read before it
// is written; a GEMM's fallback scales its result in place so). Asynchronous on `stream`; nothing for n == 0.
Status LaunchActivationGrad(ActivationGradOp op, DType dtype, const void* dy, const void* x, void* dx, int64_t n,
                            float alpha, cudaStream_t stream, std::string_view what);

}  // namespace onnxamp::cuda::ew
