// CUDA kernels of CumSum, Trilu, EyeLike and OneHot (declared in layout_launch.h). Trilu, EyeLike and OneHot move
// bytes by element size; CumSum scans in the CPU kernel's compute type and order, so its results are the CPU's bits.
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "runtime/cuda/ops/cuda_common.cuh"
#include "runtime/cuda/ops/tensor/layout_launch.h"
#include "runtime/ops/common/wrap_arith.h"

namespace onnxamp::cuda {
namespace {

using ::onnxamp::ops::WrapType;

// The CPU's CumSum accumulator: double for float32, float for fp16/bf16, the type itself otherwise.
template <typename T>
using CumSumAcc = std::conditional_t<std::is_same_v<T, float>, double, ComputeType<T>>;

template <typename T>
__global__ void CumSumKernel(T* __restrict__ y, const T* __restrict__ x, int64_t outer, int64_t len, int64_t inner,
                             bool exclusive, bool reverse) {
  using C = CumSumAcc<T>;
  const int64_t lines = outer * inner;
  for (int64_t l = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; l < lines;
       l += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t base = (l / inner) * len * inner + l % inner;
    C sum = C(0);
    for (int64_t s = 0; s < len; ++s) {
      const int64_t at = base + (reverse ? len - 1 - s : s) * inner;
      const C v = static_cast<C>(LoadValue<T>(x[at]));
      if (exclusive) y[at] = StoreValue<T>(static_cast<ComputeType<T>>(sum));
      sum = static_cast<C>(static_cast<WrapType<C>>(sum) + static_cast<WrapType<C>>(v));
      if (!exclusive) y[at] = StoreValue<T>(static_cast<ComputeType<T>>(sum));
    }
  }
}

template <typename U>
__global__ void TriluKernel(U* __restrict__ y, const U* __restrict__ x, int64_t total, int64_t rows, int64_t cols,
                            int64_t k, bool upper) {
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t j = e % cols;
    const int64_t i = (e / cols) % rows;
    const int64_t d = j - i;  // |d| below the dims, so no overflow for any k
    y[e] = (upper ? d >= k : d <= k) ? x[e] : U{};
  }
}

template <typename U>
__global__ void EyeLikeKernel(U* __restrict__ y, int64_t total, int64_t cols, int64_t k, U one) {
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    // j - i == k is the CPU's j = i + k inside [0, cols), without its overflow for a huge k.
    y[e] = e % cols - e / cols == k ? one : U{};
  }
}

// An index as ops::ReadAsInt64 reads it; INT64_MIN (which no depth reaches) for what addresses nothing.
template <typename I>
__device__ __forceinline__ int64_t IndexAsInt64(I raw) {
  if constexpr (kIsFloatLike<I>) {
    const double d = static_cast<double>(LoadValue<I>(raw));
    return isfinite(d) && fabs(d) < 9.2e18 ? static_cast<int64_t>(d) : INT64_MIN;
  } else if constexpr (std::is_unsigned_v<I>) {
    return raw > static_cast<I>(INT64_MAX) ? INT64_MIN : static_cast<int64_t>(raw);
  } else {
    return static_cast<int64_t>(raw);
  }
}

template <typename I, typename U>
__global__ void OneHotKernel(U* __restrict__ y, const I* __restrict__ indices, const U* __restrict__ values,
                             int64_t outer, int64_t depth, int64_t inner, bool negative_from_end) {
  const int64_t total = outer * depth * inner;
  const U off = values[0], on = values[1];
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = e % inner;
    const int64_t j = (e / inner) % depth;
    const int64_t o = e / (inner * depth);
    int64_t k = IndexAsInt64(indices[o * inner + i]);
    if (negative_from_end && k < 0 && k >= -depth) k += depth;
    y[e] = k == j ? on : off;
  }
}

}  // namespace

Status LaunchCumSum(DType dtype, void* y, const void* x, int64_t outer, int64_t len, int64_t inner, bool exclusive,
                    bool reverse, cudaStream_t stream) {
  const int64_t lines = outer * inner;
  if (lines * len == 0) return Status::Ok();
  return DispatchNumeric(dtype, "CumSum", [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    CumSumKernel<T><<<GridFor(lines), kThreadsPerBlock, 0, stream>>>(static_cast<T*>(y), static_cast<const T*>(x),
                                                                     outer, len, inner, exclusive, reverse);
    return CheckLaunch("CumSum");
  });
}

Status LaunchTrilu(void* y, const void* x, int64_t matrices, int64_t rows, int64_t cols, int64_t k, bool upper,
                   size_t elem_size, cudaStream_t stream) {
  const int64_t total = matrices * rows * cols;
  if (total == 0) return Status::Ok();
  return DispatchBySize(elem_size, "Trilu", [&](auto tag) -> Status {
    using U = typename decltype(tag)::type;
    TriluKernel<U><<<GridFor(total), kThreadsPerBlock, 0, stream>>>(static_cast<U*>(y), static_cast<const U*>(x), total,
                                                                    rows, cols, k, upper);
    return CheckLaunch("Trilu");
  });
}

Status LaunchEyeLike(void* y, int64_t rows, int64_t cols, int64_t k, const void* one, size_t elem_size,
                     cudaStream_t stream) {
  const int64_t total = rows * cols;
  if (total == 0) return Status::Ok();
  return DispatchBySize(elem_size, "EyeLike", [&](auto tag) -> Status {
    using U = typename decltype(tag)::type;
    U one_value;
    std::memcpy(&one_value, one, sizeof(U));
    EyeLikeKernel<U><<<GridFor(total), kThreadsPerBlock, 0, stream>>>(static_cast<U*>(y), total, cols, k, one_value);
    return CheckLaunch("EyeLike");
  });
}

Status LaunchOneHot(void* y, const void* indices, DType index_type, const void* values, int64_t outer, int64_t depth,
                    int64_t inner, bool negative_from_end, size_t elem_size, cudaStream_t stream) {
  const int64_t total = outer * depth * inner;
  if (total == 0) return Status::Ok();
  return DispatchNumeric(index_type, "OneHot indices", [&](auto itag) -> Status {
    using I = typename decltype(itag)::type;
    return DispatchBySize(elem_size, "OneHot", [&](auto tag) -> Status {
      using U = typename decltype(tag)::type;
      OneHotKernel<I, U><<<GridFor(total), kThreadsPerBlock, 0, stream>>>(
          static_cast<U*>(y), static_cast<const I*>(indices), static_cast<const U*>(values), outer, depth, inner,
          negative_from_end);
      return CheckLaunch("OneHot");
    });
  });
}

}  // namespace onnxamp::cuda
