// Elementwise casts between float and the 16-bit float types on a CUDA stream (fp32 <-> fp16, fp32 <-> bf16).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "runtime/common/half.h"
#include "runtime/common/status.h"

namespace onnxamp::cuda {

// Each converts `n` elements from `src` to `dst` (device memory, not overlapping) asynchronously on `stream`,
// rounding exactly as runtime/common/half.h does. Any element-aligned pointers work: when src and dst can both
// be brought to 16-byte alignment by the same element offset, the bulk goes through 16-byte vector loads and
// stores, with the unaligned head and the tail done element by element. n == 0 does nothing. Returns
// kInvalidArgument for null or misaligned pointers with n > 0, and the launch error if the kernel cannot start
// (errors during execution surface at the next synchronisation).
Status CastFloatToHalf(const float* src, Float16* dst, size_t n, cudaStream_t stream);
Status CastHalfToFloat(const Float16* src, float* dst, size_t n, cudaStream_t stream);
Status CastFloatToBFloat16(const float* src, BFloat16* dst, size_t n, cudaStream_t stream);
Status CastBFloat16ToFloat(const BFloat16* src, float* dst, size_t n, cudaStream_t stream);

}  // namespace onnxamp::cuda
