// CUDA ReluGrad, EluGrad and GeluGrad: one grid-stride loop per op over equally shaped dY and X (or Y), in the
// compute type of runtime/ops/elementwise/activation_grad_cpu.cc and relu_grad_cpu.cc (float for fp16/bf16, double
// for double), with the device's exact expf/erfcf (not the forward's fast approximations).
#include <cstdint>

#include "runtime/cuda/ops/cuda_common.cuh"
#include "runtime/cuda/ops/elementwise/activation_grad_launch.h"

namespace onnxamp::cuda::ew {
namespace {

template <typename C>
__device__ __forceinline__ C Exp(C x) {
  if constexpr (std::is_same_v<C, float>) {
    return expf(x);
  } else {
    return exp(x);
  }
}

template <typename C>
__device__ __forceinline__ C Erfc(C x) {
  if constexpr (std::is_same_v<C, float>) {
    return erfcf(x);
  } else {
    return erfc(x);
  }
}

// The factor dX / dY at input value x (Y for ReluGrad), as the CPU kernels write it.
template <ActivationGradOp kOp, typename C>
__device__ __forceinline__ C Derivative(C x, C alpha) {
  if constexpr (kOp == ActivationGradOp::kElu) {
    return x > C(0) ? C(1) : alpha * Exp(x);
  } else if constexpr (kOp == ActivationGradOp::kGelu) {
    const C cdf = C(0.5) * Erfc(-x * C(0.70710678118654752440));
    const C pdf = C(0.39894228040143267794) * Exp(C(-0.5) * x * x);  // 1/sqrt(2 pi) exp(-x^2/2)
    // x pdf is 0 beyond |x| = 15 in float (40 in double): dropped there, so that +-inf give 1 and 0, not inf * 0.
    return cdf + (fabs(x) < C(sizeof(C) == 4 ? 15 : 40) ? x * pdf : C(0));
  } else {
    // kGeluTanh: s = sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3); y' = s + x s (1 - s) 2u'.
    const C k = C(1.5957691216057308);  // 2 sqrt(2/pi)
    const C c = C(0.044715);
    const C s = C(1) / (C(1) + Exp(-k * (x + c * x * x * x)));
    // The second term is 0 beyond |x| = 100 (s is exactly 0 or 1), dropped for the same reason.
    return s + (fabs(x) < C(100) ? x * s * (C(1) - s) * k * (C(1) + C(3) * c * x * x) : C(0));
  }
}

template <ActivationGradOp kOp, typename T>
__global__ void ActivationGradKernel(const T* dy, const T* __restrict__ x, T* dx, int64_t n, ComputeType<T> alpha) {
  using C = ComputeType<T>;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    if constexpr (kOp == ActivationGradOp::kRelu) {
      // dY's bits pass through unchanged where Y > 0 (NaN Y gives 0, as on the CPU).
      dx[i] = LoadValue<T>(x[i]) > C(0) ? dy[i] : StoreValue<T>(C(0));
    } else {
      dx[i] = StoreValue<T>(LoadValue<T>(dy[i]) * Derivative<kOp, C>(LoadValue<T>(x[i]), alpha));
    }
  }
}

template <ActivationGradOp kOp, typename T>
Status Run(const void* dy, const void* x, void* dx, int64_t n, float alpha, cudaStream_t stream,
           std::string_view what) {
  ActivationGradKernel<kOp, T><<<GridFor(n), kThreadsPerBlock, 0, stream>>>(
      static_cast<const T*>(dy), static_cast<const T*>(x), static_cast<T*>(dx), n, static_cast<ComputeType<T>>(alpha));
  return CheckLaunch(what);
}

}  // namespace

Status LaunchActivationGrad(ActivationGradOp op, DType dtype, const void* dy, const void* x, void* dx, int64_t n,
                            float alpha, cudaStream_t stream, std::string_view what) {
  if (n <= 0) return Status::Ok();
  return DispatchFloat(dtype, what, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    switch (op) {
      case ActivationGradOp::kRelu:
        return Run<ActivationGradOp::kRelu, T>(dy, x, dx, n, alpha, stream, what);
      case ActivationGradOp::kElu:
        return Run<ActivationGradOp::kElu, T>(dy, x, dx, n, alpha, stream, what);
      case ActivationGradOp::kGelu:
        return Run<ActivationGradOp::kGelu, T>(dy, x, dx, n, alpha, stream, what);
      case ActivationGradOp::kGeluTanh:
        return Run<ActivationGradOp::kGeluTanh, T>(dy, x, dx, n, alpha, stream, what);
    }
    return Internal(what, ": unknown activation gradient");
  });
}

}  // namespace onnxamp::cuda::ew
