// What CUDA kernels share: DType -> device type mapping and dispatch, fp16/bf16 loads in float and stores rounded to
// nearest even, launch geometry for grid-stride loops, broadcast strides, and launch error checks. Included by .cu
// files only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string_view>
#include <type_traits>
#include <vector>

#include "runtime/common/dtype.h"
#include "runtime/common/status.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/ir/tensor.h"

namespace onnxamp::cuda {

// ---- element types ----------------------------------------------------------------------------------------------

template <typename T>
struct TypeTag {
  using type = T;
};

// Storage type -> arithmetic type: fp16 and bf16 compute in float (numerics policy), everything else in itself.
template <typename T>
struct ComputeTypeOf {
  using type = T;
};
template <>
struct ComputeTypeOf<__half> {
  using type = float;
};
template <>
struct ComputeTypeOf<__nv_bfloat16> {
  using type = float;
};
template <typename T>
using ComputeType = typename ComputeTypeOf<T>::type;

template <typename T>
inline constexpr bool kIsHalfLike = std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;
template <typename T>
inline constexpr bool kIsFloatLike = std::is_floating_point_v<T> || kIsHalfLike<T>;

template <typename T>
__device__ __forceinline__ ComputeType<T> LoadValue(T v) {
  if constexpr (std::is_same_v<T, __half>) {
    return __half2float(v);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __bfloat162float(v);
  } else {
    return v;
  }
}

// Rounds to nearest even for fp16/bf16 (overflow to infinity), static_cast otherwise.
template <typename T>
__device__ __forceinline__ T StoreValue(ComputeType<T> v) {
  if constexpr (std::is_same_v<T, __half>) {
    return __float2half_rn(v);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __float2bfloat16_rn(v);
  } else {
    return static_cast<T>(v);
  }
}

// Calls f(TypeTag<T>{}) with T the device storage type of `dtype`, for float, __half, __nv_bfloat16 and double;
// Unimplemented naming `what` for anything else.
template <typename F>
Status DispatchFloat(DType dtype, std::string_view what, F&& f) {
  switch (dtype) {
    case DType::kFloat32:
      return f(TypeTag<float>{});
    case DType::kFloat16:
      return f(TypeTag<__half>{});
    case DType::kBFloat16:
      return f(TypeTag<__nv_bfloat16>{});
    case DType::kFloat64:
      return f(TypeTag<double>{});
    default:
      return Unimplemented(what, ": element type ", DTypeName(dtype), " is not supported on cuda");
  }
}

// Like DispatchFloat, plus the integer types (int8..int64, uint8..uint64).
template <typename F>
Status DispatchNumeric(DType dtype, std::string_view what, F&& f) {
  switch (dtype) {
    case DType::kInt8:
      return f(TypeTag<int8_t>{});
    case DType::kInt16:
      return f(TypeTag<int16_t>{});
    case DType::kInt32:
      return f(TypeTag<int32_t>{});
    case DType::kInt64:
      return f(TypeTag<int64_t>{});
    case DType::kUint8:
      return f(TypeTag<uint8_t>{});
    case DType::kUint16:
      return f(TypeTag<uint16_t>{});
    case DType::kUint32:
      return f(TypeTag<uint32_t>{});
    case DType::kUint64:
      return f(TypeTag<uint64_t>{});
    default:
      return DispatchFloat(dtype, what, std::forward<F>(f));
  }
}

// Like DispatchNumeric, plus bool (as bool).
template <typename F>
Status DispatchNumericOrBool(DType dtype, std::string_view what, F&& f) {
  if (dtype == DType::kBool) return f(TypeTag<bool>{});
  return DispatchNumeric(dtype, what, std::forward<F>(f));
}

// Data movement by element size only (Transpose, Concat, Gather...): calls f(TypeTag<U>{}) with U a plain type of
// `bytes` bytes (an unsigned integer for 1, 2, 4 or 8; uint4 for 16: 16-byte vector loads and stores), or returns
// `otherwise()` for any other size.
template <typename F, typename G>
Status DispatchByteSize(size_t bytes, F&& f, G&& otherwise) {
  switch (bytes) {
    case 1:
      return f(TypeTag<uint8_t>{});
    case 2:
      return f(TypeTag<uint16_t>{});
    case 4:
      return f(TypeTag<uint32_t>{});
    case 8:
      return f(TypeTag<uint64_t>{});
    case 16:
      return f(TypeTag<uint4>{});
    default:
      return otherwise();
  }
}

// DispatchByteSize on the element size of `dtype`. Unimplemented for strings and sub-byte types.
template <typename F>
Status DispatchBySize(DType dtype, std::string_view what, F&& f) {
  const size_t bytes = IsSubByte(dtype) || dtype == DType::kString ? 0 : static_cast<size_t>(DTypeBits(dtype) / 8);
  return DispatchByteSize(bytes, std::forward<F>(f), [&] {
    return Unimplemented(what, ": element type ", DTypeName(dtype), " is not supported on cuda");
  });
}

// DispatchByteSize for callers that hold an element size in bytes: Internal naming `what` for an unsupported size.
template <typename F>
Status DispatchBySize(size_t bytes, std::string_view what, F&& f) {
  return DispatchByteSize(bytes, std::forward<F>(f),
                          [&] { return Internal(what, ": unsupported element size ", bytes, " on cuda"); });
}

// Typed device pointers of a tensor (the tensor must be on the device, which the executor guarantees for every
// input not listed in the KernelDef's host_inputs and for every output).
template <typename T>
const T* DevicePtr(const ir::Tensor& t) {
  return reinterpret_cast<const T*>(t.data());
}
template <typename T>
T* MutableDevicePtr(ir::Tensor& t) {
  return reinterpret_cast<T*>(t.mutable_data());
}

// ---- launch geometry --------------------------------------------------------------------------------------------

inline constexpr int kThreadsPerBlock = 256;

// Blocks for a grid-stride loop over n items with `threads` per block, capped so the grid stays resident-sized
// (the loop covers the rest). At least 1.
inline unsigned int GridFor(int64_t n, int threads = kThreadsPerBlock) {
  const int64_t blocks = (n + threads - 1) / threads;
  constexpr int64_t kMaxBlocks = 65535;
  return static_cast<unsigned int>(blocks < 1 ? 1 : (blocks > kMaxBlocks ? kMaxBlocks : blocks));
}

// The Status for the last launch: kernels launch, then `ONNXAMP_RETURN_IF_ERROR(CheckLaunch("Softmax"));`.
inline Status CheckLaunch(std::string_view what) {
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? Status::Ok() : CudaErrorToStatus(e, "kernel launch", what);
}

// ---- broadcasting -----------------------------------------------------------------------------------------------

inline constexpr int kMaxRank = 8;

// Strides of an input as seen from an output index space (0 on broadcast dims), passed to kernels by value.
struct IndexMap {
  int rank = 0;
  int64_t out_dims[kMaxRank] = {};
  int64_t strides[kMaxRank] = {};  // input element strides per output dim; 0 where the input is broadcast
};

// The map for an input of `in_dims` broadcast (numpy rules, right-aligned) to `out_dims`. InvalidArgument when
// out_dims has more than kMaxRank dims (after merging nothing) or the dims do not broadcast.
inline StatusOr<IndexMap> MakeBroadcastMap(const std::vector<int64_t>& out_dims, const std::vector<int64_t>& in_dims) {
  if (out_dims.size() > static_cast<size_t>(kMaxRank)) {
    return Unimplemented("rank ", out_dims.size(), " is above the ", kMaxRank, " dims CUDA kernels take");
  }
  if (in_dims.size() > out_dims.size()) {
    return InvalidArgument("rank ", in_dims.size(), " does not broadcast to rank ", out_dims.size());
  }
  IndexMap m;
  m.rank = static_cast<int>(out_dims.size());
  const size_t offset = out_dims.size() - in_dims.size();
  int64_t stride = 1;
  for (int d = m.rank - 1; d >= 0; --d) {
    m.out_dims[d] = out_dims[d];
    if (static_cast<size_t>(d) < offset) {
      m.strides[d] = 0;
      continue;
    }
    const int64_t in = in_dims[d - offset];
    if (in != out_dims[d] && in != 1) {
      return InvalidArgument("dim ", in, " does not broadcast to ", out_dims[d]);
    }
    m.strides[d] = in == 1 ? 0 : stride;
    stride *= in;
  }
  return m;
}

// The input element offset of output element `index` under map `m`.
__device__ __forceinline__ int64_t MapIndex(const IndexMap& m, int64_t index) {
  int64_t offset = 0;
#pragma unroll
  for (int d = kMaxRank - 1; d >= 0; --d) {
    if (d >= m.rank) continue;
    const int64_t dim = m.out_dims[d];
    const int64_t i = index % dim;
    index /= dim;
    offset += i * m.strides[d];
  }
  return offset;
}

}  // namespace onnxamp::cuda
