// Host entry points of the CUDA random ops (random.cu): the counter-based numbers of runtime/ops/random/
// random_numbers.h, so that a CUDA and a CPU session with the same seed draw the same values.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string_view>

#include "runtime/common/dtype.h"
#include "runtime/common/status.h"

namespace onnxamp::cuda::ew {

// y[i] = a + (b - a) * UniformDouble(seed, i) (`normal` false) or a + b * NormalDouble(seed, i), computed in double
// and rounded once to `dtype` (a float type; fp16/bf16 through float, as the CPU). With `half_open` (a uniform
// with low = a < high = b), a value that rounded to high or above becomes the largest value of the type below it (low
// when that is below low). `device_step` (CudaContext::device_rng_step, null: none): the seed used is
// DropoutSeedForStep(seed, *device_step), read when the kernel runs.
Status LaunchRandomFill(DType dtype, void* y, int64_t n, uint64_t seed, bool normal, double a, double b, bool half_open,
                        cudaStream_t stream, std::string_view what, const uint64_t* device_step = nullptr);

// y[i] = UniformDouble(seed, i) < p[i] ? 1 : 0 for probabilities `p` of float type `p_type`, stored as `y_type` (a
// numeric type or bool). `device_step` as for LaunchRandomFill.
Status LaunchBernoulli(DType p_type, const void* p, DType y_type, void* y, int64_t n, uint64_t seed,
                       cudaStream_t stream, std::string_view what, const uint64_t* device_step = nullptr);

}  // namespace onnxamp::cuda::ew
