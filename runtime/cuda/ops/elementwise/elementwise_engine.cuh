// The elementwise engine the CUDA elementwise kernels share: a flat unary loop and a broadcasting binary loop, both
// grid-stride and 64-bit indexed, parameterised by a functor on storage values (so one kernel template serves every
// op and type through a functor table instead of a kernel per op per rank). Included by the .cu files of this folder.
//
// Binary paths (chosen on the host from the merged broadcast plan, Geometry):
//   rank <= 2  "rows x cols": same shapes, tensor op scalar, row broadcast (bias: [N, C] op [C]), column broadcast
//              ([N, C] op [N, 1]). Each input is read at r * rs + c * cs with cs in {0, 1}. When the pointers allow,
//              V elements move per 16-byte access (8 x fp16/bf16, 4 x fp32, 2 x fp64), broadcast inputs are read
//              once per vector, and a scalar tail finishes a single row.
//   rank > 2   general: each output index is split into merged-dim coordinates once and every input's offset
//              accumulated from its strides.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include "runtime/cuda/ops/cuda_common.cuh"
#include "runtime/cuda/ops/elementwise/elementwise_launch.h"

namespace onnxamp::cuda::ew {

// ---- vector access ----------------------------------------------------------------------------------------------

// V elements of T moved as one access of sizeof(T) * V bytes (a power of two up to 16).
template <typename T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

template <int kBytes>
struct RawOf;
template <>
struct RawOf<16> {
  using type = uint4;
};
template <>
struct RawOf<8> {
  using type = uint2;
};
template <>
struct RawOf<4> {
  using type = uint32_t;
};
template <>
struct RawOf<2> {
  using type = uint16_t;
};
template <>
struct RawOf<1> {
  using type = uint8_t;
};

// `p` must be aligned to sizeof(T) * V.
template <typename T, int V>
__device__ __forceinline__ Pack<T, V> LoadPack(const T* p) {
  using R = typename RawOf<sizeof(T) * V>::type;
  Pack<T, V> pack;
  *reinterpret_cast<R*>(&pack) = *reinterpret_cast<const R*>(p);
  return pack;
}

template <typename T, int V>
__device__ __forceinline__ void StorePack(T* p, const Pack<T, V>& pack) {
  using R = typename RawOf<sizeof(T) * V>::type;
  *reinterpret_cast<R*>(p) = *reinterpret_cast<const R*>(&pack);
}

// Elements per vector access for a loop over these element types: 16 bytes of the widest.
template <typename... Ts>
inline constexpr int kVec = static_cast<int>(16 / std::max({sizeof(Ts)...}));

inline bool IsAligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// ---- functor adaptors -------------------------------------------------------------------------------------------

// A compute-type unary op (float for fp16/bf16) as a storage-type functor: load, compute, round once on store.
template <typename Op, typename T>
struct MathUnary {
  Op op;
  __device__ __forceinline__ T operator()(T x) const { return StoreValue<T>(op(LoadValue(x))); }
};

// The same for binary ops with inputs TA, TB and output TO (bool for comparisons).
template <typename Op, typename TA, typename TB, typename TO>
struct MathBinary {
  Op op;
  __device__ __forceinline__ TO operator()(TA a, TB b) const {
    return StoreValue<TO>(static_cast<ComputeType<TO>>(op(LoadValue(a), LoadValue(b))));
  }
};

// ---- unary: flat ------------------------------------------------------------------------------------------------

// The grid-stride body of a flat unary kernel: y[i] = f(x[i]) for i < n; with `vec`, x and y are aligned to their
// pack sizes (kVec<TI, TO> elements) and the bulk moves in packs.
template <typename F, typename TI, typename TO>
__device__ __forceinline__ void UnaryLoop(const F& f, const TI* x, TO* y, int64_t n, bool vec) {
  constexpr int V = kVec<TI, TO>;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t done = 0;
  if (vec) {
    const int64_t packs = n / V;
    for (int64_t p = tid; p < packs; p += stride) {
      const Pack<TI, V> in = LoadPack<TI, V>(x + p * V);
      Pack<TO, V> out;
#pragma unroll
      for (int k = 0; k < V; ++k) out.v[k] = f(in.v[k]);
      StorePack<TO, V>(y + p * V, out);
    }
    done = packs * V;
  }
  for (int64_t i = done + tid; i < n; i += stride) y[i] = f(x[i]);
}

// y[i] = f(x[i]) for i < n (UnaryLoop).
template <typename F, typename TI, typename TO>
__global__ void UnaryKernel(F f, const TI* x, TO* y, int64_t n, bool vec) {
  UnaryLoop(f, x, y, n, vec);
}

template <typename F, typename TI, typename TO>
Status RunUnary(const F& f, const TI* x, TO* y, int64_t n, cudaStream_t stream, std::string_view what) {
  if (n <= 0) return Status::Ok();
  constexpr int V = kVec<TI, TO>;
  const bool vec = V > 1 && IsAligned(x, sizeof(TI) * V) && IsAligned(y, sizeof(TO) * V);
  UnaryKernel<F, TI, TO><<<GridFor(vec ? (n + V - 1) / V : n), kThreadsPerBlock, 0, stream>>>(f, x, y, n, vec);
  return CheckLaunch(what);
}

// ---- broadcast geometry on the device ---------------------------------------------------------------------------

// The rows x cols form of a geometry of rank <= 2.
struct Rank2 {
  int64_t rows = 1;
  int64_t cols = 1;
  int64_t rs[kMaxInputs] = {};  // row strides
  int64_t cs[kMaxInputs] = {};  // column strides, 0 or 1
};

inline Rank2 ToRank2(const Geometry& g) {
  Rank2 r;
  const bool two = g.rank == 2;
  r.rows = two ? g.dims[0] : 1;
  r.cols = g.dims[g.rank - 1];
  for (int i = 0; i < g.num_inputs; ++i) {
    r.rs[i] = two ? g.strides[i][0] : 0;
    r.cs[i] = g.strides[i][g.rank - 1];
  }
  return r;
}

// Row and column of flat index i (32-bit division when the whole index space fits: much cheaper on the device).
__device__ __forceinline__ void SplitIndex(int64_t i, const Rank2& g, bool idx32, int64_t* r, int64_t* c) {
  if (g.rows == 1) {
    *r = 0;
    *c = i;
  } else if (idx32) {
    const uint32_t ui = static_cast<uint32_t>(i), uc = static_cast<uint32_t>(g.cols);
    const uint32_t q = ui / uc;
    *r = q;
    *c = ui - q * uc;
  } else {
    *r = i / g.cols;
    *c = i - *r * g.cols;
  }
}

// Offsets of output element i in each of the first N inputs under a general geometry.
template <int N>
__device__ __forceinline__ void GeneralOffsets(const Geometry& g, int64_t i, int64_t* off) {
#pragma unroll
  for (int k = 0; k < N; ++k) off[k] = 0;
  for (int d = g.rank - 1; d >= 0; --d) {
    const int64_t dim = g.dims[d];
    const int64_t q = i / dim;
    const int64_t coord = i - q * dim;
    i = q;
#pragma unroll
    for (int k = 0; k < N; ++k) off[k] += coord * g.strides[k][d];
  }
}

// ---- binary -----------------------------------------------------------------------------------------------------

// V values of input `p` for the vector at (r, c): one pack when it is read along the row, else one broadcast value.
template <typename T, int V>
__device__ __forceinline__ void ReadVector(const T* p, int64_t rs, int64_t cs, int64_t r, int64_t c, T* out) {
  if (cs) {
    const Pack<T, V> pack = LoadPack<T, V>(p + r * rs + c);
#pragma unroll
    for (int k = 0; k < V; ++k) out[k] = pack.v[k];
  } else {
    const T v = p[r * rs];
#pragma unroll
    for (int k = 0; k < V; ++k) out[k] = v;
  }
}

template <typename F, typename TA, typename TB, typename TO>
__global__ void BinaryRank2Kernel(F f, const TA* a, const TB* b, TO* out, Rank2 g, bool vec, bool idx32) {
  constexpr int V = kVec<TA, TB, TO>;
  const int64_t n = g.rows * g.cols;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t done = 0;
  if (vec) {
    const int64_t packs = n / V;  // whole rows when rows > 1 (cols % V == 0)
    for (int64_t p = tid; p < packs; p += stride) {
      int64_t r, c;
      SplitIndex(p * V, g, idx32, &r, &c);
      TA va[V];
      TB vb[V];
      ReadVector<TA, V>(a, g.rs[0], g.cs[0], r, c, va);
      ReadVector<TB, V>(b, g.rs[1], g.cs[1], r, c, vb);
      Pack<TO, V> o;
#pragma unroll
      for (int k = 0; k < V; ++k) o.v[k] = f(va[k], vb[k]);
      StorePack<TO, V>(out + p * V, o);
    }
    done = packs * V;
  }
  for (int64_t i = done + tid; i < n; i += stride) {
    int64_t r, c;
    SplitIndex(i, g, idx32, &r, &c);
    out[i] = f(a[r * g.rs[0] + c * g.cs[0]], b[r * g.rs[1] + c * g.cs[1]]);
  }
}

template <typename F, typename TA, typename TB, typename TO>
__global__ void BinaryGeneralKernel(F f, const TA* a, const TB* b, TO* out, Geometry g) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < g.n; i += stride) {
    int64_t off[2];
    GeneralOffsets<2>(g, i, off);
    out[i] = f(a[off[0]], b[off[1]]);
  }
}

// Checks a geometry the host built (an internal invariant: the kernel classes build it from a BroadcastPlan).
inline Status CheckGeometry(const Geometry& g, int num_inputs, std::string_view what) {
  if (g.rank < 1 || g.rank > kMaxDims || g.num_inputs != num_inputs) {
    return Internal(what, ": bad elementwise geometry (rank ", g.rank, ", ", g.num_inputs, " inputs)");
  }
  return Status::Ok();
}

// out = f(a, b) over `g`. `out` may alias `a` or `b` when that input is read in full (same index as the output).
template <typename F, typename TA, typename TB, typename TO>
Status RunBinary(const F& f, const TA* a, const TB* b, TO* out, const Geometry& g, cudaStream_t stream,
                 std::string_view what) {
  ONNXAMP_RETURN_IF_ERROR(CheckGeometry(g, 2, what));
  if (g.n <= 0) return Status::Ok();
  if (g.rank <= 2) {
    constexpr int V = kVec<TA, TB, TO>;
    const Rank2 r = ToRank2(g);
    bool vec = V > 1 && (r.rows == 1 || r.cols % V == 0) && IsAligned(out, sizeof(TO) * V);
    if (r.cs[0]) vec = vec && IsAligned(a, sizeof(TA) * V) && r.rs[0] % V == 0;
    if (r.cs[1]) vec = vec && IsAligned(b, sizeof(TB) * V) && r.rs[1] % V == 0;
    const bool idx32 = g.n <= static_cast<int64_t>(UINT32_MAX);
    BinaryRank2Kernel<F, TA, TB, TO>
        <<<GridFor(vec ? (g.n + V - 1) / V : g.n), kThreadsPerBlock, 0, stream>>>(f, a, b, out, r, vec, idx32);
  } else {
    BinaryGeneralKernel<F, TA, TB, TO><<<GridFor(g.n), kThreadsPerBlock, 0, stream>>>(f, a, b, out, g);
  }
  return CheckLaunch(what);
}

// ---- launchers implemented in the other .cu files of this folder ------------------------------------------------

// Comparisons and logic (compare_logic.cu), reached through LaunchBinary.
Status LaunchCompareLogic(BinaryOp op, DType dtype, const void* a, const void* b, bool* out, const Geometry& g,
                          cudaStream_t stream, std::string_view what);

}  // namespace onnxamp::cuda::ew
