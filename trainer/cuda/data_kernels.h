// Small device kernels of CUDA training's data path and buffer bookkeeping.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/common/status.h"

typedef struct CUstream_st* cudaStream_t;

namespace onnxamp::trainer::cuda {

// dst[r] = src[indices[r]] for r in [0, rows): rows of `row_bytes` bytes; `indices` (int64, on the device) must lie
// in [0, src_rows) (the sampler guarantees it; an index outside is clamped, never read out of bounds).
Status GatherRows(const void* src, int64_t src_rows, size_t row_bytes, const int64_t* indices, int64_t rows, void* dst,
                  cudaStream_t stream);

// When *found_inf is 0 (the step was taken) and, given a weight, *weight is not 0: dst = src (`bytes` bytes). Else
// dst is left as it is. For committing BatchNormalization statistics only on taken steps, without the host knowing
// which; with the EMA weight, for the moving average's counts (not updated before stochastic weight averaging starts).
Status CopyIfTaken(const int32_t* found_inf, const void* src, void* dst, size_t bytes, cudaStream_t stream,
                   const float* weight = nullptr);

// When *found_inf is 0 and *weight is not: dst[i] = optim_math::Lerp(dst[i], src[i], *weight) for the n floats (the
// moving average of a buffer, with the weight the optimizer's step used: FusedOptimizer::ema_weight). Else dst is left
// as it is.
Status LerpIfTaken(const int32_t* found_inf, const float* weight, const float* src, float* dst, int64_t n,
                   cudaStream_t stream);

}  // namespace onnxamp::trainer::cuda
