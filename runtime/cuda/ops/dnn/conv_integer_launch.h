// Launchers of the element-wise parts of the CUDA ConvInteger and QLinearConv (conv_integer_kernels.cu): the operands
// minus their zero points in double, and the output from the exact integer accumulators. conv_integer_cuda.cc runs the
// convolution between them on the direct kernel in double, which is exact for 8-bit operands (every product and every
// sum below 2^53), as the CPU kernel's double GEMM is: the CPU's bits.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "runtime/common/dtype.h"
#include "runtime/common/status.h"

namespace onnxamp::cuda::dnn {

// dst[e] = src[e] - zp[groups == 1 ? 0 : (e / run) % groups] for e < count; src int8 or uint8 (`dtype`), zp doubles
// (device memory).
// (The integer matmuls center into int32 instead: LaunchCenterEightBit in runtime/cuda/ops/linalg/linalg_device.h.)
Status LaunchCenterToDouble(DType dtype, const void* src, int64_t count, const double* zp, int64_t groups, int64_t run,
                            double* dst, cudaStream_t stream);

// y from acc (exact integers; element e of output channel (e / plane) % channels): with scales null, int32 (wrapping
// as a 32-bit accumulator would); else `out` (int8 or uint8) = round_half_even(float(int32(acc)) * scale) +
// zero_point, saturated, with scale = scales[channel] (scale_count == channels) or scales[0], as the CPU's Requantize
// (requantize_device.cuh, shared with QLinearMatMul).
Status LaunchIntegerConvOutput(const double* acc, int64_t count, int64_t plane, int64_t channels, const float* scales,
                               int64_t scale_count, DType out, double zero_point, void* y, cudaStream_t stream);

}  // namespace onnxamp::cuda::dnn
