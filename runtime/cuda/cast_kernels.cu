// Cast kernels float <-> fp16/bf16: 16-byte vector loads and stores over the aligned bulk, scalar head and tail.
#include "runtime/cuda/cast_kernels.h"

#include <algorithm>
#include <cstdint>

#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/half_convert.h"

namespace onnxamp::cuda {
namespace {

// Elements per vector step: 8 x 16-bit = one 16-byte access, 8 x fp32 = two.
constexpr int kVector = 8;
constexpr int kThreads = 256;
constexpr size_t kMaxBlocks = 65535;  // a grid-stride loop covers the rest

// The conversions, on raw bits for the 16-bit side.
struct FloatToHalfOp {
  using Src = float;
  using Dst = uint16_t;
  __device__ Dst operator()(Src x) const { return FloatToHalfBitsHD(x); }
};
struct HalfToFloatOp {
  using Src = uint16_t;
  using Dst = float;
  __device__ Dst operator()(Src x) const { return HalfBitsToFloatHD(x); }
};
struct FloatToBFloat16Op {
  using Src = float;
  using Dst = uint16_t;
  __device__ Dst operator()(Src x) const { return FloatToBFloat16BitsHD(x); }
};
struct BFloat16ToFloatOp {
  using Src = uint16_t;
  using Dst = float;
  __device__ Dst operator()(Src x) const { return BFloat16BitsToFloatHD(x); }
};

// kVector elements moved with 16-byte (uint4) accesses; the address must be 16-byte aligned.
template <typename T>
struct alignas(16) Pack {
  T v[kVector];
};
static_assert(sizeof(Pack<float>) == 32 && sizeof(Pack<uint16_t>) == 16);

template <typename T>
__device__ __forceinline__ Pack<T> LoadPack(const T* p) {
  Pack<T> pack;
  const uint4* from = reinterpret_cast<const uint4*>(p);
  uint4* to = reinterpret_cast<uint4*>(&pack);
#pragma unroll
  for (int i = 0; i < static_cast<int>(sizeof(Pack<T>) / 16); ++i) to[i] = from[i];
  return pack;
}

template <typename T>
__device__ __forceinline__ void StorePack(T* p, const Pack<T>& pack) {
  const uint4* from = reinterpret_cast<const uint4*>(&pack);
  uint4* to = reinterpret_cast<uint4*>(p);
#pragma unroll
  for (int i = 0; i < static_cast<int>(sizeof(Pack<T>) / 16); ++i) to[i] = from[i];
}

// Elements [0, head) and [head + packs * kVector, n) one by one; the `packs` vectors in between with 16-byte
// accesses (src + head and dst + head are 16-byte aligned).
template <typename Op>
__global__ void CastKernel(const typename Op::Src* __restrict__ src, typename Op::Dst* __restrict__ dst, size_t head,
                           size_t packs, size_t n) {
  using Src = typename Op::Src;
  using Dst = typename Op::Dst;
  const Op op{};
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t tid = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (size_t p = tid; p < packs; p += stride) {
    const Pack<Src> in = LoadPack(src + head + p * kVector);
    Pack<Dst> out;
#pragma unroll
    for (int k = 0; k < kVector; ++k) out.v[k] = op(in.v[k]);
    StorePack(dst + head + p * kVector, out);
  }
  const size_t tail_start = head + packs * kVector;
  const size_t scalars = head + (n - tail_start);
  for (size_t i = tid; i < scalars; i += stride) {
    const size_t idx = i < head ? i : tail_start + (i - head);
    dst[idx] = op(src[idx]);
  }
}

template <typename Op>
Status Launch(const void* src_ptr, void* dst_ptr, size_t n, cudaStream_t stream, const char* name) {
  using Src = typename Op::Src;
  using Dst = typename Op::Dst;
  if (n == 0) return Status::Ok();
  if (src_ptr == nullptr || dst_ptr == nullptr) return InvalidArgument(name, ": null pointer for ", n, " elements");
  const auto s = reinterpret_cast<uintptr_t>(src_ptr);
  const auto d = reinterpret_cast<uintptr_t>(dst_ptr);
  if (s % alignof(Src) != 0 || d % alignof(Dst) != 0) {
    return InvalidArgument(name, ": pointers must be aligned to their element size (src ", src_ptr, ", dst ", dst_ptr,
                           ")");
  }
  if (s < d + n * sizeof(Dst) && d < s + n * sizeof(Src)) {
    return InvalidArgument(name, ": source and destination overlap");
  }
  // The first element offset at which both pointers are 16-byte aligned, if any: the vectorised bulk starts there.
  size_t head = n;
  for (size_t h = 0; h < kVector && h < n; ++h) {
    if ((s + h * sizeof(Src)) % 16 == 0 && (d + h * sizeof(Dst)) % 16 == 0) {
      head = h;
      break;
    }
  }
  const size_t packs = head < n ? (n - head) / kVector : 0;
  const size_t scalars = n - packs * kVector;
  const size_t work = std::max(packs, scalars);
  const auto blocks = static_cast<unsigned>(std::min((work + kThreads - 1) / kThreads, kMaxBlocks));
  CastKernel<Op>
      <<<blocks, kThreads, 0, stream>>>(static_cast<const Src*>(src_ptr), static_cast<Dst*>(dst_ptr), head, packs, n);
  ONNXAMP_CUDA_RETURN_IF_ERROR(cudaGetLastError(), name, " of ", n, " elements");
  return Status::Ok();
}

}  // namespace

Status CastFloatToHalf(const float* src, Float16* dst, size_t n, cudaStream_t stream) {
  return Launch<FloatToHalfOp>(src, dst, n, stream, "CastFloatToHalf");
}

Status CastHalfToFloat(const Float16* src, float* dst, size_t n, cudaStream_t stream) {
  return Launch<HalfToFloatOp>(src, dst, n, stream, "CastHalfToFloat");
}

Status CastFloatToBFloat16(const float* src, BFloat16* dst, size_t n, cudaStream_t stream) {
  return Launch<FloatToBFloat16Op>(src, dst, n, stream, "CastFloatToBFloat16");
}

Status CastBFloat16ToFloat(const BFloat16* src, float* dst, size_t n, cudaStream_t stream) {
  return Launch<BFloat16ToFloatOp>(src, dst, n, stream, "CastBFloat16ToFloat");
}

}  // namespace onnxamp::cuda
