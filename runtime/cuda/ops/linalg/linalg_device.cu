// Device kernels of the CUDA linalg family (see linalg_device.h): GEMM epilogue (scale, bias, activation), Gemm's C
// broadcast, the integer GEMM (a plain shared-memory tiled kernel), and the general Einsum reduction.
#include <algorithm>
#include <type_traits>

#include "runtime/cuda/ops/cuda_common.cuh"
#include "runtime/cuda/ops/linalg/linalg_device.h"

namespace onnxamp::cuda {
namespace {

// ---- epilogue ---------------------------------------------------------------------------------------------------

__device__ __forceinline__ float Erfc(float x) { return erfcf(x); }
__device__ __forceinline__ double Erfc(double x) { return erfc(x); }
__device__ __forceinline__ float Exp(float x) { return expf(x); }
__device__ __forceinline__ double Exp(double x) { return exp(x); }

template <typename C>
__device__ __forceinline__ C Activate(C x, LinalgActivation act) {
  switch (act) {
    case LinalgActivation::kRelu:
      return x < C(0) ? C(0) : x;  // NaN stays NaN
    case LinalgActivation::kGelu:
      // 0.5 x erfc(-x / sqrt(2)) (the erf form, accurate for negative x); -0 far below zero, as the CPU kernel.
      if (x < C(-40)) return C(-0.0);
      return C(0.5) * x * Erfc(-x * C(0.70710678118654752440));
    case LinalgActivation::kGeluTanh:
      // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) written as x / (1 + exp(-2 sqrt(2/pi) (...))).
      return x / (C(1) + Exp(C(-1.5957691216057308) * (x + C(0.044715) * x * x * x)));
    case LinalgActivation::kNone:
    default:
      return x;
  }
}

template <typename T>
__global__ void BiasActivationKernel(T* y, int64_t count, int64_t n, ComputeType<T> scale, const T* bias,
                                     LinalgActivation act) {
  using C = ComputeType<T>;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += step) {
    C v = scale * LoadValue(y[i]);
    if (bias != nullptr) v += LoadValue(bias[i % n]);
    y[i] = StoreValue<T>(Activate<C>(v, act));
  }
}

// One thread per mask byte: the epilogue of the 8 values of a row it covers, then their bits (0 past n).
template <typename T>
__global__ void BiasReluMaskKernel(T* y, int64_t rows, int64_t n, ComputeType<T> scale, const T* bias, uint8_t* mask,
                                   int64_t row_bytes) {
  using C = ComputeType<T>;
  const int64_t count = rows * row_bytes;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += step) {
    const int64_t r = i / row_bytes, j0 = (i % row_bytes) * 8;
    unsigned bits = 0;
    for (int b = 0; b < 8 && j0 + b < n; ++b) {
      T* p = y + r * n + j0 + b;
      C v = scale * LoadValue(*p);
      if (bias != nullptr) v += LoadValue(bias[j0 + b]);
      const T out = StoreValue<T>(Activate<C>(v, LinalgActivation::kRelu));
      *p = out;
      if (LoadValue(out) > C(0)) bits |= 1u << b;
    }
    mask[i] = static_cast<uint8_t>(bits);
  }
}

template <typename T>
__global__ void ApplyReluMaskKernel(T* y, int64_t rows, int64_t n, const uint8_t* mask, int64_t row_bytes) {
  const int64_t count = rows * n;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += step) {
    const int64_t r = i / n, j = i % n;
    if (((mask[r * row_bytes + j / 8] >> (j % 8)) & 1) == 0) y[i] = StoreValue<T>(ComputeType<T>(0));
  }
}

template <typename U>
__global__ void Broadcast2DKernel(const U* c, int64_t s0, int64_t s1, U* y, int64_t m, int64_t n) {
  const int64_t count = m * n;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += step) {
    y[i] = c[(i / n) * s0 + (i % n) * s1];
  }
}

// ---- matrix sums (bias gradients) -------------------------------------------------------------------------------

// y[j] = sum over i of x[i * ld + j]: one thread per column, rows in order.
template <typename T, typename O>
__global__ void ColumnSumKernel(const T* x, int64_t rows, int64_t cols, int64_t ld, O* y) {
  using C = ComputeType<T>;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < cols; j += step) {
    C sum = 0;
    for (int64_t i = 0; i < rows; ++i) sum += LoadValue(x[i * ld + j]);
    if constexpr (std::is_same_v<O, T>) {
      y[j] = StoreValue<T>(sum);
    } else {
      y[j] = static_cast<O>(sum);
    }
  }
}

// y[i] = sum over j of x[i * ld + j]: one warp per row, each lane a fixed stride of columns, then a fixed shuffle
// tree (the same order on every run).
template <typename T, typename O>
__global__ void RowSumKernel(const T* x, int64_t rows, int64_t cols, int64_t ld, O* y) {
  using C = ComputeType<T>;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  for (int64_t i = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; i < rows; i += warps) {
    C sum = 0;
    for (int64_t j = lane; j < cols; j += 32) sum += LoadValue(x[i * ld + j]);
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffffu, sum, offset);
    if (lane == 0) {
      if constexpr (std::is_same_v<O, T>) {
        y[i] = StoreValue<T>(sum);
      } else {
        y[i] = static_cast<O>(sum);
      }
    }
  }
}

// ---- integer GEMM -----------------------------------------------------------------------------------------------

constexpr int kTile = 16;

template <typename T>
__global__ void IntegerGemmKernel(IntegerGemmArgs g) {
  __shared__ uint64_t as[kTile][kTile + 1];
  __shared__ uint64_t bs[kTile][kTile + 1];
  const T* a = static_cast<const T*>(g.a);
  const T* b = static_cast<const T*>(g.b);
  T* d = static_cast<T*>(g.d);
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t tiles_m = (g.m + kTile - 1) / kTile, tiles_n = (g.n + kTile - 1) / kTile;
  // Loop bounds depend on block indices only, so every thread of a block reaches each __syncthreads.
  for (int64_t bt = blockIdx.z; bt < g.batch; bt += gridDim.z) {
    const T* ab = a + bt * g.stride_a;
    const T* bb = b + bt * g.stride_b;
    T* db = d + bt * g.stride_d;
    for (int64_t tm = blockIdx.y; tm < tiles_m; tm += gridDim.y) {
      for (int64_t tn = blockIdx.x; tn < tiles_n; tn += gridDim.x) {
        const int64_t row = tm * kTile + ty, col = tn * kTile + tx;
        uint64_t acc = 0;
        for (int64_t k0 = 0; k0 < g.k; k0 += kTile) {
          const int64_t ka = k0 + tx, kb = k0 + ty;
          uint64_t va = 0, vb = 0;
          if (row < g.m && ka < g.k) {
            va = static_cast<uint64_t>(g.trans_a ? ab[ka * g.lda + row] : ab[row * g.lda + ka]);
          }
          if (kb < g.k && col < g.n) {
            vb = static_cast<uint64_t>(g.trans_b ? bb[col * g.ldb + kb] : bb[kb * g.ldb + col]);
          }
          as[ty][tx] = va;
          bs[ty][tx] = vb;
          __syncthreads();
#pragma unroll
          for (int p = 0; p < kTile; ++p) acc += as[ty][p] * bs[p][tx];
          __syncthreads();
        }
        if (row < g.m && col < g.n) {
          uint64_t v = static_cast<uint64_t>(g.alpha) * acc;
          if (g.beta != 0) v += static_cast<uint64_t>(g.beta) * static_cast<uint64_t>(db[row * g.ldd + col]);
          db[row * g.ldd + col] = static_cast<T>(v);
        }
      }
    }
  }
}

// ---- Einsum -----------------------------------------------------------------------------------------------------

// What Einsum accumulates in: as the CPU reference (float for fp16/bf16/float, double, 64-bit unsigned for
// integers so that products and sums wrap).
template <typename T>
using EinsumAccum = std::conditional_t<kIsFloatLike<T>, ComputeType<T>, uint64_t>;

template <typename T>
__device__ __forceinline__ EinsumAccum<T> LoadAccum(T v) {
  if constexpr (kIsFloatLike<T>) {
    return LoadValue(v);
  } else {
    return static_cast<uint64_t>(v);
  }
}

template <typename T>
__device__ __forceinline__ T StoreAccum(EinsumAccum<T> v) {
  if constexpr (kIsFloatLike<T>) {
    return StoreValue<T>(v);
  } else {
    return static_cast<T>(v);
  }
}

// The input offsets of output position o.
__device__ __forceinline__ void OutputOffsets(const EinsumArgs& e, int64_t o, int64_t* base) {
  for (int i = 0; i < e.num_inputs; ++i) base[i] = 0;
  for (int d = e.out_rank - 1; d >= 0; --d) {
    const int64_t idx = o % e.out_dims[d];
    o /= e.out_dims[d];
    for (int i = 0; i < e.num_inputs; ++i) base[i] += idx * e.out_strides[i][d];
  }
}

template <typename T>
__device__ __forceinline__ EinsumAccum<T> Product(const EinsumArgs& e, const int64_t* off) {
  EinsumAccum<T> p = 1;
  for (int i = 0; i < e.num_inputs; ++i) p *= LoadAccum(static_cast<const T*>(e.inputs[i])[off[i]]);
  return p;
}

// One thread per output element; the summed labels in row-major order (the CPU reference's order).
template <typename T>
__global__ void EinsumThreadKernel(EinsumArgs e, T* y) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < e.out_count; o += step) {
    int64_t off[kEinsumMaxInputs];
    OutputOffsets(e, o, off);
    int64_t idx[kEinsumMaxLabels];
    for (int d = 0; d < e.sum_rank; ++d) idx[d] = 0;
    EinsumAccum<T> sum = 0;
    for (int64_t s = 0; s < e.sum_count; ++s) {
      sum += Product<T>(e, off);
      for (int d = e.sum_rank - 1; d >= 0; --d) {
        for (int i = 0; i < e.num_inputs; ++i) off[i] += e.sum_strides[i][d];
        if (++idx[d] < e.sum_dims[d]) break;
        for (int i = 0; i < e.num_inputs; ++i) off[i] -= e.sum_strides[i][d] * e.sum_dims[d];
        idx[d] = 0;
      }
    }
    y[o] = StoreAccum<T>(sum);
  }
}

constexpr int kEinsumBlock = 256;

// One block per output element, for few outputs with long sums: each thread sums a strided share, then a tree.
template <typename T>
__global__ void EinsumBlockKernel(EinsumArgs e, T* y) {
  __shared__ EinsumAccum<T> partial[kEinsumBlock];
  for (int64_t o = blockIdx.x; o < e.out_count; o += gridDim.x) {
    int64_t base[kEinsumMaxInputs];
    OutputOffsets(e, o, base);
    EinsumAccum<T> sum = 0;
    for (int64_t s = threadIdx.x; s < e.sum_count; s += blockDim.x) {
      int64_t off[kEinsumMaxInputs];
      for (int i = 0; i < e.num_inputs; ++i) off[i] = base[i];
      int64_t rest = s;
      for (int d = e.sum_rank - 1; d >= 0; --d) {
        const int64_t idx = rest % e.sum_dims[d];
        rest /= e.sum_dims[d];
        for (int i = 0; i < e.num_inputs; ++i) off[i] += idx * e.sum_strides[i][d];
      }
      sum += Product<T>(e, off);
    }
    partial[threadIdx.x] = sum;
    __syncthreads();
    for (int half = kEinsumBlock / 2; half > 0; half /= 2) {
      if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
      __syncthreads();
    }
    if (threadIdx.x == 0) y[o] = StoreAccum<T>(partial[0]);
    __syncthreads();  // partial is reused by the next output
  }
}

}  // namespace

Status LaunchBiasActivation(DType dtype, void* y, int64_t rows, int64_t n, double scale, const void* bias,
                            LinalgActivation act, cudaStream_t stream, std::string_view what, uint8_t* relu_mask,
                            int64_t mask_row_bytes) {
  if (relu_mask != nullptr) {
    if (act != LinalgActivation::kRelu || mask_row_bytes * 8 < n) {
      return InvalidArgument(what, ": a ReLU mask takes the ReLU and at least n bits per row");
    }
    const int64_t count = rows * mask_row_bytes;
    if (count == 0) return Status::Ok();
    return DispatchFloat(dtype, what, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      BiasReluMaskKernel<T><<<GridFor(count), kThreadsPerBlock, 0, stream>>>(
          static_cast<T*>(y), rows, n, static_cast<ComputeType<T>>(scale), static_cast<const T*>(bias), relu_mask,
          mask_row_bytes);
      return CheckLaunch(what);
    });
  }
  const int64_t count = rows * n;
  if (count == 0) return Status::Ok();
  return DispatchFloat(dtype, what, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    BiasActivationKernel<T><<<GridFor(count), kThreadsPerBlock, 0, stream>>>(
        static_cast<T*>(y), count, n, static_cast<ComputeType<T>>(scale), static_cast<const T*>(bias), act);
    return CheckLaunch(what);
  });
}

Status LaunchApplyReluMask(DType dtype, void* y, int64_t rows, int64_t n, const uint8_t* mask, int64_t mask_row_bytes,
                           cudaStream_t stream, std::string_view what) {
  const int64_t count = rows * n;
  if (count == 0) return Status::Ok();
  if (mask_row_bytes * 8 < n) return InvalidArgument(what, ": a ReLU mask has fewer bits per row than n");
  return DispatchFloat(dtype, what, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    ApplyReluMaskKernel<T>
        <<<GridFor(count), kThreadsPerBlock, 0, stream>>>(static_cast<T*>(y), rows, n, mask, mask_row_bytes);
    return CheckLaunch(what);
  });
}

Status LaunchMatrixSum(DType dtype, DType out_dtype, const void* x, int64_t rows, int64_t cols, int64_t ld,
                       bool over_rows, void* y, cudaStream_t stream, std::string_view what) {
  const int64_t len = over_rows ? cols : rows;
  if (len == 0) return Status::Ok();
  const bool widened = out_dtype != dtype;
  if (widened && (out_dtype != DType::kFloat32 || (dtype != DType::kFloat16 && dtype != DType::kBFloat16))) {
    return InvalidArgument(what, ": a sum of ", DTypeName(dtype), " values cannot be stored as ", DTypeName(out_dtype));
  }
  return DispatchFloat(dtype, what, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    auto launch = [&](auto* out) {
      using O = std::remove_pointer_t<decltype(out)>;
      if (over_rows) {
        ColumnSumKernel<T, O>
            <<<GridFor(cols), kThreadsPerBlock, 0, stream>>>(static_cast<const T*>(x), rows, cols, ld, out);
      } else {
        RowSumKernel<T, O>
            <<<GridFor(rows * 32), kThreadsPerBlock, 0, stream>>>(static_cast<const T*>(x), rows, cols, ld, out);
      }
    };
    if constexpr (std::is_same_v<ComputeType<T>, float> && !std::is_same_v<T, float>) {
      if (widened) {
        launch(static_cast<float*>(y));
        return CheckLaunch(what);
      }
    }
    launch(static_cast<T*>(y));
    return CheckLaunch(what);
  });
}

Status LaunchBroadcast2D(DType dtype, const void* c, int64_t c_stride0, int64_t c_stride1, void* y, int64_t m,
                         int64_t n, cudaStream_t stream, std::string_view what) {
  const int64_t count = m * n;
  if (count == 0) return Status::Ok();
  return DispatchBySize(dtype, what, [&](auto tag) -> Status {
    using U = typename decltype(tag)::type;
    Broadcast2DKernel<U><<<GridFor(count), kThreadsPerBlock, 0, stream>>>(static_cast<const U*>(c), c_stride0,
                                                                          c_stride1, static_cast<U*>(y), m, n);
    return CheckLaunch(what);
  });
}

Status LaunchIntegerGemm(DType dtype, const IntegerGemmArgs& args, cudaStream_t stream, std::string_view what) {
  if (args.batch == 0 || args.m == 0 || args.n == 0) return Status::Ok();
  constexpr int64_t kMaxGridYZ = 65535, kMaxGridX = 1 << 30;
  const int64_t tiles_m = (args.m + kTile - 1) / kTile, tiles_n = (args.n + kTile - 1) / kTile;
  const dim3 grid(static_cast<unsigned>(std::min(tiles_n, kMaxGridX)),
                  static_cast<unsigned>(std::min(tiles_m, kMaxGridYZ)),
                  static_cast<unsigned>(std::min(args.batch, kMaxGridYZ)));
  const dim3 block(kTile, kTile);
  auto launch = [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    IntegerGemmKernel<T><<<grid, block, 0, stream>>>(args);
    return CheckLaunch(what);
  };
  switch (dtype) {
    case DType::kInt32:
      return launch(TypeTag<int32_t>{});
    case DType::kInt64:
      return launch(TypeTag<int64_t>{});
    case DType::kUint32:
      return launch(TypeTag<uint32_t>{});
    case DType::kUint64:
      return launch(TypeTag<uint64_t>{});
    default:
      return Unimplemented(what, ": element type ", DTypeName(dtype), " is not supported on cuda");
  }
}

Status LaunchEinsum(DType dtype, const EinsumArgs& args, void* y, cudaStream_t stream, std::string_view what) {
  if (args.out_count == 0) return Status::Ok();
  // Few outputs with long sums: a block per output; otherwise a thread per output.
  const bool per_block = args.out_count < 4096 && args.sum_count >= 1024;
  return DispatchNumeric(dtype, what, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    if (per_block) {
      const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(args.out_count, 65535));
      EinsumBlockKernel<T><<<blocks, kEinsumBlock, 0, stream>>>(args, static_cast<T*>(y));
    } else {
      EinsumThreadKernel<T><<<GridFor(args.out_count), kThreadsPerBlock, 0, stream>>>(args, static_cast<T*>(y));
    }
    return CheckLaunch(what);
  });
}

}  // namespace onnxamp::cuda
