// CUDA Clip, Where and Dropout (training mode and the all-true mask of inference mode), with the CPU kernels'
// semantics (runtime/ops/clip/clip_cpu.cc, where/where_cpu.cc, dropout/dropout_cpu.cc).
#include <cstdint>
#include <limits>
#include <type_traits>

#include "runtime/cuda/ops/elementwise/elementwise_engine.cuh"
#include "runtime/ops/dropout/dropout_mask.h"

namespace onnxamp::cuda::ew {
namespace {

// ---- Clip -------------------------------------------------------------------------------------------------------

// Bounds: from device scalars when given (read once per thread), else the host values (attribute or +-inf).
template <typename T>
__global__ void ClipKernel(const T* x, T* y, int64_t n, const T* lo_ptr, const T* hi_ptr, ComputeType<T> lo_value,
                           ComputeType<T> hi_value, bool vec) {
  using C = ComputeType<T>;
  const C lo = lo_ptr ? LoadValue(*lo_ptr) : lo_value;
  const C hi = hi_ptr ? LoadValue(*hi_ptr) : hi_value;
  auto clip = [lo, hi](T t) {
    C v = LoadValue(t);
    v = v < lo ? lo : v;  // NaN stays NaN; min > max gives max everywhere
    v = v > hi ? hi : v;
    return StoreValue<T>(v);
  };
  UnaryLoop(clip, x, y, n, vec);
}

// ---- Where ------------------------------------------------------------------------------------------------------

template <typename U>
__global__ void WhereRank2Kernel(const bool* c, const U* x, const U* y, U* out, Rank2 g, bool idx32) {
  const int64_t n = g.rows * g.cols;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    int64_t r, col;
    SplitIndex(i, g, idx32, &r, &col);
    out[i] = c[r * g.rs[0] + col * g.cs[0]] ? x[r * g.rs[1] + col * g.cs[1]] : y[r * g.rs[2] + col * g.cs[2]];
  }
}

template <typename U>
__global__ void WhereGeneralKernel(const bool* c, const U* x, const U* y, U* out, Geometry g) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < g.n; i += stride) {
    int64_t off[3];
    GeneralOffsets<3>(g, i, off);
    out[i] = c[off[0]] ? x[off[1]] : y[off[2]];
  }
}

template <typename U>
Status RunWhere(const bool* c, const void* x, const void* y, void* out, const Geometry& g, cudaStream_t stream,
                std::string_view what) {
  const U* px = static_cast<const U*>(x);
  const U* py = static_cast<const U*>(y);
  U* po = static_cast<U*>(out);
  if (g.rank <= 2) {
    const bool idx32 = g.n <= static_cast<int64_t>(UINT32_MAX);
    WhereRank2Kernel<U><<<GridFor(g.n), kThreadsPerBlock, 0, stream>>>(c, px, py, po, ToRank2(g), idx32);
  } else {
    WhereGeneralKernel<U><<<GridFor(g.n), kThreadsPerBlock, 0, stream>>>(c, px, py, po, g);
  }
  return CheckLaunch(what);
}

// ---- Dropout ----------------------------------------------------------------------------------------------------

template <typename T>
__global__ void DropoutKernel(const T* x, T* y, int64_t n, uint64_t seed, float threshold, ComputeType<T> scale,
                              bool* mask_bool, T* mask_typed, const uint64_t* device_step) {
  using C = ComputeType<T>;
  if (device_step) seed = ops::DropoutSeedForStep(seed, *device_step);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const bool keep = ops::DropoutUniform(seed, static_cast<uint64_t>(i)) >= threshold;
    y[i] = keep ? StoreValue<T>(LoadValue(x[i]) * scale) : StoreValue<T>(C(0));
    if (mask_bool) mask_bool[i] = keep;
    if (mask_typed) mask_typed[i] = StoreValue<T>(keep ? C(1) : C(0));
  }
}

template <typename T>
__global__ void FillKernel(T* out, int64_t n, T value) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) out[i] = value;
}

}  // namespace

Status LaunchClip(DType dtype, const void* x, void* y, int64_t n, const void* lo, const void* hi,
                  std::optional<float> attr_lo, std::optional<float> attr_hi, cudaStream_t stream,
                  std::string_view what) {
  if (n <= 0) return Status::Ok();
  return DispatchNumeric(dtype, what, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    using C = ComputeType<T>;
    C lo_value = std::numeric_limits<C>::lowest();
    C hi_value = std::numeric_limits<C>::max();
    if constexpr (!std::is_integral_v<C>) {
      lo_value = -std::numeric_limits<C>::infinity();
      hi_value = std::numeric_limits<C>::infinity();
    }
    const T* lo_ptr = static_cast<const T*>(lo);
    const T* hi_ptr = static_cast<const T*>(hi);
    // The attribute bounds (opsets before 11, where there are no bound inputs) win, as on the CPU.
    if (attr_lo) {
      lo_value = static_cast<C>(*attr_lo);
      lo_ptr = nullptr;
    }
    if (attr_hi) {
      hi_value = static_cast<C>(*attr_hi);
      hi_ptr = nullptr;
    }
    constexpr int V = kVec<T>;
    const T* px = static_cast<const T*>(x);
    T* py = static_cast<T*>(y);
    const bool vec = V > 1 && IsAligned(px, sizeof(T) * V) && IsAligned(py, sizeof(T) * V);
    ClipKernel<T><<<GridFor(vec ? (n + V - 1) / V : n), kThreadsPerBlock, 0, stream>>>(px, py, n, lo_ptr, hi_ptr,
                                                                                       lo_value, hi_value, vec);
    return CheckLaunch(what);
  });
}

Status LaunchWhere(int element_bytes, const bool* cond, const void* x, const void* y, void* out, const Geometry& g,
                   cudaStream_t stream, std::string_view what) {
  ONNXAMP_RETURN_IF_ERROR(CheckGeometry(g, 3, what));
  if (g.n <= 0) return Status::Ok();
  switch (element_bytes) {
    case 1:
      return RunWhere<uint8_t>(cond, x, y, out, g, stream, what);
    case 2:
      return RunWhere<uint16_t>(cond, x, y, out, g, stream, what);
    case 4:
      return RunWhere<uint32_t>(cond, x, y, out, g, stream, what);
    case 8:
      return RunWhere<uint64_t>(cond, x, y, out, g, stream, what);
    default:
      return Unimplemented(what, ": elements of ", element_bytes, " bytes are not supported");
  }
}

Status LaunchDropout(DType dtype, const void* x, void* y, int64_t n, uint64_t seed, double ratio, bool* mask_bool,
                     void* mask_typed, cudaStream_t stream, std::string_view what, const uint64_t* device_step) {
  if (n <= 0) return Status::Ok();
  return DispatchFloat(dtype, what, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    using C = ComputeType<T>;
    // 1 / (1 - ratio) in the compute type, exactly as the CPU kernel computes it.
    const C scale = ratio < 1.0 ? C(1) / (C(1) - static_cast<C>(ratio)) : C(0);
    DropoutKernel<T><<<GridFor(n), kThreadsPerBlock, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(y), n, seed,
                                                                  static_cast<float>(ratio), scale, mask_bool,
                                                                  static_cast<T*>(mask_typed), device_step);
    return CheckLaunch(what);
  });
}

Status LaunchFillOne(DType dtype, void* out, int64_t n, cudaStream_t stream, std::string_view what) {
  if (n <= 0) return Status::Ok();
  if (dtype == DType::kBool) {
    ONNXAMP_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(out, 1, static_cast<size_t>(n), stream), what);
    return Status::Ok();
  }
  return DispatchNumeric(dtype, what, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    // 1 built on the host: fp16 / bf16 from their bit patterns (0x3c00, 0x3f80).
    T one{};
    if constexpr (std::is_same_v<T, __half>) {
      __half_raw raw;
      raw.x = 0x3c00;
      one = __half(raw);
    } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      __nv_bfloat16_raw raw;
      raw.x = 0x3f80;
      one = __nv_bfloat16(raw);
    } else {
      one = T(1);
    }
    FillKernel<T><<<GridFor(n), kThreadsPerBlock, 0, stream>>>(static_cast<T*>(out), n, one);
    return CheckLaunch(what);
  });
}

}  // namespace onnxamp::cuda::ew
