// The requantization of the QLinear ops on the device, shared by QLinearMatMul (integer_matmul.cu) and QLinearConv
// (runtime/cuda/ops/dnn/conv_integer_kernels.cu): the CPU's Requantize (runtime/ops/quantize/qlinear_cpu.cc), in its
// float arithmetic without FMA contraction. Included by .cu files only.
#pragma once

#include <cstdint>

namespace onnxamp::cuda {

// round_half_even(float(acc) * scale) + zero_point, saturated to [lo, hi] (NaN: lo), as the 8-bit output's value.
__device__ __forceinline__ double RequantizeValue(int32_t acc, float scale, double zero_point, double lo, double hi) {
  const float v = nearbyintf(__fmul_rn(static_cast<float>(acc), scale));
  return isnan(v) ? lo : fmin(fmax(static_cast<double>(v) + zero_point, lo), hi);
}

}  // namespace onnxamp::cuda
