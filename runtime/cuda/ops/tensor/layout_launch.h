// Launchers of the CUDA CumSum, Trilu, EyeLike and OneHot kernels (layout_kernels.cu), callable from plain C++: the
// host kernels in layout_ops_cuda.cc check attributes and shapes with the CPU kernels' helpers and call these, which
// queue the work on `stream` without synchronising. Each does nothing when its output is empty.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "runtime/common/dtype.h"
#include "runtime/common/status.h"

namespace onnxamp::cuda {

// CumSum: x and y viewed as [outer, len, inner]; one thread per line (o, i) adds its len elements in index order
// (from the end with `reverse`; `exclusive` stores the sum before adding), as cumsum_cpu.cc does: float32 in double,
// fp16/bf16 in float, float64 in double, integers (int32, int64, uint32, uint64) in their own type, wrapping; each
// output rounded once from the running sum.
Status LaunchCumSum(DType dtype, void* y, const void* x, int64_t outer, int64_t len, int64_t inner, bool exclusive,
                    bool reverse, cudaStream_t stream);

// Trilu: `matrices` matrices of rows x cols of `elem_size` bytes; element (i, j) is copied when j - i >= k (upper)
// or j - i <= k (lower), else zero bytes.
Status LaunchTrilu(void* y, const void* x, int64_t matrices, int64_t rows, int64_t cols, int64_t k, bool upper,
                   size_t elem_size, cudaStream_t stream);

// EyeLike: y [rows, cols] of `elem_size` bytes (1, 2, 4 or 8) holds the bytes at `one` (host memory, read before
// returning) where j - i == k and zero bytes elsewhere.
Status LaunchEyeLike(void* y, int64_t rows, int64_t cols, int64_t k, const void* one, size_t elem_size,
                     cudaStream_t stream);

// OneHot: indices [outer, inner] of the numeric type `index_type` (device memory) converted to int64 as
// ops::ReadAsInt64 does (floats truncated; NaN, infinities, magnitudes from 9.2e18 and unsigned values above INT64_MAX
// address nothing); y [outer, depth, inner] = values[1] where j is the index (from the end when negative and
// `negative_from_end`), values[0] elsewhere. values: two elements of `elem_size` bytes, device memory.
Status LaunchOneHot(void* y, const void* indices, DType index_type, const void* values, int64_t outer, int64_t depth,
                    int64_t inner, bool negative_from_end, size_t elem_size, cudaStream_t stream);

}  // namespace onnxamp::cuda
