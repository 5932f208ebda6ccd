// CUDA Resize, linear and cubic: one separable pass per resized axis, with the index and weight tables the host
// computed exactly as the CPU kernel does (runtime/ops/resize/resize.h). fp16/bf16 data are read into float and
// the last pass rounds to nearest even on store; intermediate passes stay in the compute type, as on the CPU.
#include <type_traits>

#include "runtime/cuda/ops/cuda_common.cuh"
#include "runtime/cuda/ops/tensor/tensor_launch.h"

namespace onnxamp::cuda {
namespace {

// Multiply and add rounded separately (no fused multiply-add), so sums match the CPU's bit for bit.
__device__ __forceinline__ float MulRn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double MulRn(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float AddRn(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double AddRn(double a, double b) { return __dadd_rn(a, b); }

// The value of a source element (storage type T, or already the compute type C) in C.
template <typename S, typename C>
__device__ __forceinline__ C LoadAs(S v) {
  if constexpr (std::is_same_v<S, C>) {
    return v;
  } else {
    return static_cast<C>(LoadValue<S>(v));
  }
}

template <typename D, typename C>
__device__ __forceinline__ D StoreAs(C v) {
  if constexpr (std::is_same_v<D, C>) {
    return v;
  } else {
    return StoreValue<D>(static_cast<ComputeType<D>>(v));
  }
}

template <typename S, typename D, typename C>
__global__ void ResizePassKernel(D* __restrict__ dst, const S* __restrict__ src, ResizePassArgs a, C extrapolation,
                                 int64_t n) {
  const C* weights = static_cast<const C*>(a.weights);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = i / a.inner;
    const int64_t col = i - row * a.inner;
    const int64_t ob = row / a.out;
    const int64_t o = row - ob * a.out;
    if (a.extrapolate[o]) {
      dst[i] = StoreAs<D, C>(extrapolation);
      continue;
    }
    C acc = C(0);
    const S* base = src + ob * a.in * a.inner + col;
    for (int64_t k = 0; k < a.taps; ++k) {
      const C w = weights[o * a.taps + k];
      if (w == C(0)) continue;
      acc = AddRn(acc, MulRn(w, LoadAs<S, C>(base[a.tap_index[o * a.taps + k] * a.inner])));
    }
    dst[i] = StoreAs<D, C>(acc);
  }
}

// Launches the pass for storage type T: source T or C, destination C or T.
template <typename T>
Status LaunchTyped(void* dst, const void* src, const ResizePassArgs& a, int64_t n, cudaStream_t stream) {
  using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const C extrapolation = static_cast<C>(a.extrapolation);
  const unsigned int grid = GridFor(n);
  auto launch = [&](auto s_tag, auto d_tag) {
    using S = typename decltype(s_tag)::type;
    using D = typename decltype(d_tag)::type;
    ResizePassKernel<S, D, C>
        <<<grid, kThreadsPerBlock, 0, stream>>>(static_cast<D*>(dst), static_cast<const S*>(src), a, extrapolation, n);
  };
  if constexpr (std::is_same_v<T, C>) {
    launch(TypeTag<T>{}, TypeTag<T>{});
  } else {
    if (a.src_is_storage && a.dst_is_storage) {
      launch(TypeTag<T>{}, TypeTag<T>{});
    } else if (a.src_is_storage) {
      launch(TypeTag<T>{}, TypeTag<C>{});
    } else if (a.dst_is_storage) {
      launch(TypeTag<C>{}, TypeTag<T>{});
    } else {
      launch(TypeTag<C>{}, TypeTag<C>{});
    }
  }
  return CheckLaunch("Resize");
}

}  // namespace

Status LaunchResizePass(void* dst, const void* src, ResizeFloat type, const ResizePassArgs& args, cudaStream_t stream) {
  const int64_t n = args.outer * args.out * args.inner;
  if (n == 0) return Status::Ok();
  switch (type) {
    case ResizeFloat::kFloat32:
      return LaunchTyped<float>(dst, src, args, n, stream);
    case ResizeFloat::kFloat16:
      return LaunchTyped<__half>(dst, src, args, n, stream);
    case ResizeFloat::kBFloat16:
      return LaunchTyped<__nv_bfloat16>(dst, src, args, n, stream);
    case ResizeFloat::kFloat64:
      return LaunchTyped<double>(dst, src, args, n, stream);
  }
  return Internal("Resize: unknown float type");
}

}  // namespace onnxamp::cuda
