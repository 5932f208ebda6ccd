// CUDA kernels that move elements without looking at their values: strided copies (Concat, Split, Slice, Expand,
// Tile, Transpose), the tiled 2-D transpose, fills, Gather, GatherElements and Pad. One instantiation per element
// size (1, 2, 4, 8, 16 bytes), never per dtype.
#include <cstring>
#include <type_traits>

#include "runtime/cuda/ops/cuda_common.cuh"
#include "runtime/cuda/ops/tensor/tensor_launch.h"

namespace onnxamp::cuda {
namespace {

// An element of type U with the bytes at `p` (host memory).
template <typename U>
U ElementFrom(const void* p) {
  U v;
  std::memcpy(&v, p, sizeof(U));
  return v;
}

// ---- strided copy -----------------------------------------------------------------------------------------------

// StridedCopyArgs with index type I (int32_t when every index and offset fits: divisions are much cheaper).
template <typename I>
struct CopyDesc {
  int rank;
  I dims[kMaxMoveRank];
  I dst_strides[kMaxMoveRank];
  I src_strides[kMaxMoveRank];
};

template <typename U, typename I>
__global__ void StridedCopyKernel(U* __restrict__ dst, const U* __restrict__ src, CopyDesc<I> d, I n) {
  const I step = static_cast<I>(gridDim.x) * static_cast<I>(blockDim.x);
  for (I i = static_cast<I>(blockIdx.x) * static_cast<I>(blockDim.x) + static_cast<I>(threadIdx.x); i < n; i += step) {
    I rest = i, s = 0, t = 0;
    for (int k = d.rank - 1; k >= 0; --k) {
      const I c = rest % d.dims[k];
      rest /= d.dims[k];
      s += c * d.src_strides[k];
      t += c * d.dst_strides[k];
    }
    dst[t] = src[s];
  }
}

template <typename U, typename I>
void LaunchStridedCopyTyped(void* dst, const void* src, const StridedCopyArgs& a, int64_t n, cudaStream_t stream) {
  CopyDesc<I> d{};
  d.rank = a.rank;
  for (int k = 0; k < a.rank; ++k) {
    d.dims[k] = static_cast<I>(a.dims[k]);
    d.dst_strides[k] = static_cast<I>(a.dst_strides[k]);
    d.src_strides[k] = static_cast<I>(a.src_strides[k]);
  }
  StridedCopyKernel<U, I><<<GridFor(n), kThreadsPerBlock, 0, stream>>>(static_cast<U*>(dst), static_cast<const U*>(src),
                                                                       d, static_cast<I>(n));
}

// ---- tiled transpose --------------------------------------------------------------------------------------------

constexpr int kTile = 32;
constexpr int kTileRowsPerPass = 8;

// Each block walks tiles (grid-stride over batch * row tiles * column tiles): reads a 32x32 tile of src with
// coalesced rows into shared memory (padded against bank conflicts), writes it transposed with coalesced rows.
template <typename U>
__global__ void Transpose2DKernel(U* __restrict__ dst, const U* __restrict__ src, int64_t batch, int64_t rows,
                                  int64_t cols, int64_t tiles_r, int64_t tiles_c) {
  __shared__ U tile[kTile][kTile + 1];
  const int64_t per_matrix = tiles_r * tiles_c;
  const int64_t total = batch * per_matrix;
  for (int64_t t = blockIdx.x; t < total; t += gridDim.x) {
    const int64_t b = t / per_matrix;
    const int64_t rem = t - b * per_matrix;
    const int64_t r0 = (rem / tiles_c) * kTile;
    const int64_t c0 = (rem % tiles_c) * kTile;
    const U* s = src + b * rows * cols;
    U* o = dst + b * rows * cols;
    const int64_t c = c0 + threadIdx.x;
    for (int j = threadIdx.y; j < kTile; j += kTileRowsPerPass) {
      const int64_t r = r0 + j;
      if (r < rows && c < cols) tile[j][threadIdx.x] = s[r * cols + c];
    }
    __syncthreads();
    // Output row = input column c0 + j, output column = input row r0 + threadIdx.x.
    const int64_t r = r0 + threadIdx.x;
    for (int j = threadIdx.y; j < kTile; j += kTileRowsPerPass) {
      const int64_t oc = c0 + j;
      if (oc < cols && r < rows) o[oc * rows + r] = tile[threadIdx.x][j];
    }
    __syncthreads();  // the tile is reused by the next iteration
  }
}

// ---- fill -------------------------------------------------------------------------------------------------------

template <typename U>
__global__ void FillKernel(U* __restrict__ dst, int64_t n, U value) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dst[i] = value;
  }
}

// ---- gathers ----------------------------------------------------------------------------------------------------

template <typename Idx>
__device__ __forceinline__ bool WrapIndex(Idx raw, int64_t dim, int64_t* out) {
  int64_t v = static_cast<int64_t>(raw);
  if (v < -dim || v >= dim) return false;
  *out = v < 0 ? v + dim : v;
  return true;
}

template <typename U, typename Idx>
__global__ void GatherKernel(U* __restrict__ dst, const U* __restrict__ src, const Idx* __restrict__ indices,
                             int64_t dim, int64_t count, int64_t inner, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = i / inner;
    const int64_t col = i - row * inner;
    const int64_t o = row / count;
    const int64_t j = row - o * count;
    int64_t idx = 0;
    if (WrapIndex(indices[j], dim, &idx)) {
      dst[i] = src[(o * dim + idx) * inner + col];
    } else {
      dst[i] = U{};
    }
  }
}

template <typename U, typename Idx>
__global__ void GatherElementsKernel(U* __restrict__ dst, const U* __restrict__ src, const Idx* __restrict__ indices,
                                     GatherElementsArgs a, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t rest = i, base = 0;
    for (int k = a.rank - 1; k >= 0; --k) {
      const int64_t c = rest % a.idx_dims[k];
      rest /= a.idx_dims[k];
      if (k != a.axis) base += c * a.data_strides[k];
    }
    int64_t idx = 0;
    if (WrapIndex(indices[i], a.dim, &idx)) {
      dst[i] = src[base + idx * a.data_strides[a.axis]];
    } else {
      dst[i] = U{};
    }
  }
}

// ---- pad --------------------------------------------------------------------------------------------------------

// The input index along one axis for padded position v (v outside [0, len)), or -1 for the fill value. Same
// arithmetic as PadAxisMap (runtime/ops/pad/pad_spec.cc).
__device__ __forceinline__ int64_t PadSource(PadKind mode, int64_t v, int64_t len) {
  switch (mode) {
    case PadKind::kConstant:
      return -1;
    case PadKind::kEdge:
      return v < 0 ? 0 : len - 1;
    case PadKind::kReflect: {
      if (len == 1) return 0;
      const int64_t period = 2 * (len - 1);
      v %= period;
      if (v < 0) v += period;
      return v >= len ? period - v : v;
    }
    case PadKind::kWrap:
      v %= len;
      return v < 0 ? v + len : v;
  }
  return -1;
}

template <typename U>
__global__ void PadKernel(U* __restrict__ dst, const U* __restrict__ src, PadArgs a, U fill, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t rest = i, s = 0;
    bool filled = false;
    for (int k = a.rank - 1; k >= 0; --k) {
      const int64_t c = rest % a.out_dims[k];
      rest /= a.out_dims[k];
      int64_t v = c - a.pad_begin[k];
      if (v < 0 || v >= a.len[k]) {
        v = PadSource(a.mode, v, a.len[k]);
        if (v < 0) {
          filled = true;
          break;
        }
      }
      s += (a.crop[k] + v) * a.in_strides[k];
    }
    dst[i] = filled ? fill : src[s];
  }
}

// ---- resize, nearest --------------------------------------------------------------------------------------------

template <typename U>
__global__ void ResizeNearestKernel(U* __restrict__ dst, const U* __restrict__ src, const int64_t* __restrict__ maps,
                                    ResizeNearestArgs a, U fill, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t rest = i, s = 0;
    bool filled = false;
    for (int k = a.rank - 1; k >= 0; --k) {
      const int64_t c = rest % a.out_dims[k];
      rest /= a.out_dims[k];
      const int64_t m = maps[a.map_offsets[k] + c];
      if (m < 0) {
        filled = true;
        break;
      }
      s += m * a.in_strides[k];
    }
    dst[i] = filled ? fill : src[s];
  }
}

int64_t CountOf(const int64_t* dims, int rank) {
  int64_t n = 1;
  for (int k = 0; k < rank; ++k) n *= dims[k];
  return n;
}

}  // namespace

Status LaunchStridedCopy(void* dst, const void* src, const StridedCopyArgs& args, size_t unit, cudaStream_t stream,
                         std::string_view what) {
  if (args.rank < 1 || args.rank > kMaxMoveRank) {
    return Internal(what, ": strided copy of rank ", args.rank, " (expected 1 to ", kMaxMoveRank, ")");
  }
  const int64_t n = CountOf(args.dims, args.rank);
  if (n == 0) return Status::Ok();
  // 32-bit indices when the loop index (plus one grid stride) and every offset on both sides stay below 2^31.
  constexpr int64_t kLimit = int64_t{1} << 31;
  int64_t dst_span = 0, src_span = 0;
  for (int k = 0; k < args.rank; ++k) {
    dst_span += (args.dims[k] - 1) * (args.dst_strides[k] < 0 ? -args.dst_strides[k] : args.dst_strides[k]);
    src_span += (args.dims[k] - 1) * (args.src_strides[k] < 0 ? -args.src_strides[k] : args.src_strides[k]);
  }
  const bool narrow = n + int64_t{GridFor(n)} * kThreadsPerBlock < kLimit && dst_span < kLimit && src_span < kLimit;
  ONNXAMP_RETURN_IF_ERROR(DispatchBySize(unit, what, [&](auto tag) -> Status {
    using U = typename decltype(tag)::type;
    if (narrow) {
      LaunchStridedCopyTyped<U, int32_t>(dst, src, args, n, stream);
    } else {
      LaunchStridedCopyTyped<U, int64_t>(dst, src, args, n, stream);
    }
    return Status::Ok();
  }));
  return CheckLaunch(what);
}

Status LaunchTranspose2D(void* dst, const void* src, int64_t batch, int64_t rows, int64_t cols, size_t elem_size,
                         cudaStream_t stream, std::string_view what) {
  if (batch == 0 || rows == 0 || cols == 0) return Status::Ok();
  const int64_t tiles_r = (rows + kTile - 1) / kTile;
  const int64_t tiles_c = (cols + kTile - 1) / kTile;
  const int64_t total = batch * tiles_r * tiles_c;
  constexpr int64_t kMaxBlocks = 65535;
  const unsigned int blocks = static_cast<unsigned int>(total < kMaxBlocks ? total : kMaxBlocks);
  ONNXAMP_RETURN_IF_ERROR(DispatchBySize(elem_size, what, [&](auto tag) -> Status {
    using U = typename decltype(tag)::type;
    Transpose2DKernel<U><<<blocks, dim3(kTile, kTileRowsPerPass), 0, stream>>>(
        static_cast<U*>(dst), static_cast<const U*>(src), batch, rows, cols, tiles_r, tiles_c);
    return Status::Ok();
  }));
  return CheckLaunch(what);
}

Status LaunchFill(void* dst, int64_t n, const void* value, size_t elem_size, cudaStream_t stream,
                  std::string_view what) {
  if (n == 0) return Status::Ok();
  // Whole 16-byte stores of the repeated element when the size and the address allow.
  const int64_t bytes = n * static_cast<int64_t>(elem_size);
  if (elem_size <= 16 && 16 % elem_size == 0 && bytes % 16 == 0 && reinterpret_cast<uintptr_t>(dst) % 16 == 0) {
    unsigned char pattern[16];
    for (size_t b = 0; b < 16; b += elem_size) std::memcpy(pattern + b, value, elem_size);
    FillKernel<uint4><<<GridFor(bytes / 16), kThreadsPerBlock, 0, stream>>>(static_cast<uint4*>(dst), bytes / 16,
                                                                            ElementFrom<uint4>(pattern));
    return CheckLaunch(what);
  }
  ONNXAMP_RETURN_IF_ERROR(DispatchBySize(elem_size, what, [&](auto tag) -> Status {
    using U = typename decltype(tag)::type;
    FillKernel<U><<<GridFor(n), kThreadsPerBlock, 0, stream>>>(static_cast<U*>(dst), n, ElementFrom<U>(value));
    return Status::Ok();
  }));
  return CheckLaunch(what);
}

Status LaunchGather(void* dst, const void* src, const void* indices, bool indices_int64, int64_t outer, int64_t dim,
                    int64_t count, int64_t inner, size_t unit, cudaStream_t stream, std::string_view what) {
  const int64_t n = outer * count * inner;
  if (n == 0) return Status::Ok();
  ONNXAMP_RETURN_IF_ERROR(DispatchBySize(unit, what, [&](auto tag) -> Status {
    using U = typename decltype(tag)::type;
    if (indices_int64) {
      GatherKernel<U, int64_t><<<GridFor(n), kThreadsPerBlock, 0, stream>>>(
          static_cast<U*>(dst), static_cast<const U*>(src), static_cast<const int64_t*>(indices), dim, count, inner, n);
    } else {
      GatherKernel<U, int32_t><<<GridFor(n), kThreadsPerBlock, 0, stream>>>(
          static_cast<U*>(dst), static_cast<const U*>(src), static_cast<const int32_t*>(indices), dim, count, inner, n);
    }
    return Status::Ok();
  }));
  return CheckLaunch(what);
}

Status LaunchGatherElements(void* dst, const void* src, const void* indices, bool indices_int64,
                            const GatherElementsArgs& args, size_t elem_size, cudaStream_t stream,
                            std::string_view what) {
  if (args.rank < 1 || args.rank > kMaxMoveRank) {
    return Unimplemented(what, ": rank ", args.rank, " is above the ", kMaxMoveRank, " dims the cuda kernel takes");
  }
  const int64_t n = CountOf(args.idx_dims, args.rank);
  if (n == 0) return Status::Ok();
  ONNXAMP_RETURN_IF_ERROR(DispatchBySize(elem_size, what, [&](auto tag) -> Status {
    using U = typename decltype(tag)::type;
    if (indices_int64) {
      GatherElementsKernel<U, int64_t><<<GridFor(n), kThreadsPerBlock, 0, stream>>>(
          static_cast<U*>(dst), static_cast<const U*>(src), static_cast<const int64_t*>(indices), args, n);
    } else {
      GatherElementsKernel<U, int32_t><<<GridFor(n), kThreadsPerBlock, 0, stream>>>(
          static_cast<U*>(dst), static_cast<const U*>(src), static_cast<const int32_t*>(indices), args, n);
    }
    return Status::Ok();
  }));
  return CheckLaunch(what);
}

Status LaunchPad(void* dst, const void* src, const PadArgs& args, const void* fill, size_t elem_size,
                 cudaStream_t stream, std::string_view what) {
  if (args.rank < 0 || args.rank > kMaxMoveRank) {
    return Unimplemented(what, ": rank ", args.rank, " is above the ", kMaxMoveRank, " dims the cuda kernel takes");
  }
  const int64_t n = CountOf(args.out_dims, args.rank);
  if (n == 0) return Status::Ok();
  ONNXAMP_RETURN_IF_ERROR(DispatchBySize(elem_size, what, [&](auto tag) -> Status {
    using U = typename decltype(tag)::type;
    PadKernel<U><<<GridFor(n), kThreadsPerBlock, 0, stream>>>(static_cast<U*>(dst), static_cast<const U*>(src), args,
                                                              ElementFrom<U>(fill), n);
    return Status::Ok();
  }));
  return CheckLaunch(what);
}

Status LaunchResizeNearest(void* dst, const void* src, const int64_t* maps, const ResizeNearestArgs& args,
                           const void* fill, size_t elem_size, cudaStream_t stream) {
  if (args.rank < 0 || args.rank > kMaxMoveRank) {
    return Unimplemented("Resize: rank ", args.rank, " is above the ", kMaxMoveRank, " dims the cuda kernel takes");
  }
  const int64_t n = CountOf(args.out_dims, args.rank);
  if (n == 0) return Status::Ok();
  ONNXAMP_RETURN_IF_ERROR(DispatchBySize(elem_size, "Resize", [&](auto tag) -> Status {
    using U = typename decltype(tag)::type;
    ResizeNearestKernel<U><<<GridFor(n), kThreadsPerBlock, 0, stream>>>(
        static_cast<U*>(dst), static_cast<const U*>(src), maps, args, ElementFrom<U>(fill), n);
    return Status::Ok();
  }));
  return CheckLaunch("Resize");
}

}  // namespace onnxamp::cuda
