// Host entry points of the CUDA QuantizeLinear and DequantizeLinear kernels (quantize.cu). The OpKernel classes, with
// the CPU kernels' checks (runtime/ops/quantize/quant_spec.h), are in quantize_cuda.cc.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string_view>

#include "runtime/common/dtype.h"
#include "runtime/common/status.h"

namespace onnxamp::cuda::ew {

// Where element k of x finds its scale and zero point (runtime/ops/quantize/quant_spec.h's QuantLayout): x viewed as
// [outer, dim, inner] around the axis; index 0 per tensor, a per axis, (o * ceil(dim / block) + a / block) * inner + i
// for blocks.
struct QuantIndex {
  int64_t n = 0;
  int64_t outer = 1, dim = 1, inner = 1;
  int64_t block = 0;
  bool per_tensor = true;
};

// y (of quantized type `y_type`: int8, uint8, int16, uint16) = saturate(nearbyint(x / scale) + zero_point) in float,
// NaN -> the type's lowest value, as the CPU. x: float, float16, bfloat16 or int32; scale (`scale_type`): float,
// float16 or bfloat16; zero point (null: 0) of y_type, indexed like the scale. The scale is not checked for zeros
// (the CPU's error): a zero scale saturates.
Status LaunchQuantizeLinear(DType x_type, const void* x, DType scale_type, const void* scale, const void* zero_point,
                            DType y_type, void* y, const QuantIndex& l, cudaStream_t stream, std::string_view what);

// y (of `y_type`: float, float16, bfloat16 or double) = (x - zero_point) * scale in y's compute type (float for
// float16 and bfloat16), the scale read as double first, as the CPU. x and the zero point (null: 0): int8, uint8,
// int16, uint16 or int32; scale (`scale_type`): float, float16, bfloat16 or double.
Status LaunchDequantizeLinear(DType x_type, const void* x, DType scale_type, const void* scale, const void* zero_point,
                              DType y_type, void* y, const QuantIndex& l, cudaStream_t stream, std::string_view what);

// DynamicQuantizeLinear of n floats x: the range [min(x, 0), max(x, 0)] (order-free, so exactly the CPU's), scale
// (hi - lo) / 255 (1 when the range is empty), zero point nearbyint(-lo / scale) clamped to [0, 255], y =
// clamp(nearbyint(x / scale) + zero point, 0, 255) as uint8, in float as the CPU. `scale` (one float) and
// `zero_point` (one uint8) are device memory written here (either may be null: not wanted); `workspace` holds
// 2 * DynamicQuantizeBlocks(n) floats. x is not checked for NaN and infinities (the CPU's error): a NaN is skipped
// by the range and quantizes to 0, an infinite range gives an infinite scale.
Status LaunchDynamicQuantize(const float* x, int64_t n, uint8_t* y, float* scale, uint8_t* zero_point, float* workspace,
                             cudaStream_t stream, std::string_view what);
int DynamicQuantizeBlocks(int64_t n);

}  // namespace onnxamp::cuda::ew
