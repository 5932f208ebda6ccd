// Host entry points of the CUDA FakeQuantize and FakeQuantizeGrad kernels (fake_quantize.cu; contracts in
// runtime/ops/gradient_ops.h). The OpKernel classes are in fake_quantize_cuda.cc.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string_view>

#include "runtime/common/dtype.h"
#include "runtime/common/status.h"

namespace onnxamp::cuda::ew {

// x viewed as [outer, dim, inner] around the quantization axis; per tensor: one scale (dim and inner unused).
struct FakeQuantLayout {
  int64_t n = 0;
  int64_t outer = 1, dim = 1, inner = 1;
  bool per_tensor = true;
};

// The scale (of x's type, `channels` values) and the zero point (int8, uint8, int16 or uint16; null: 0; one per scale:
// a per-tensor scale's zero point is one value too, whatever its shape) on the device.
struct FakeQuantParams {
  const void* scale = nullptr;
  const void* zero_point = nullptr;
  DType zero_point_type = DType::kUndefined;
  float qmin = 0, qmax = 255;
};

// y = (clamp(nearbyint(x / scale) + zp, qmin, qmax) - zp) * scale in float (double for double), NaN -> qmin, as the
// CPU kernel. Asynchronous on `stream`; nothing for n == 0.
Status LaunchFakeQuantize(DType dtype, const void* x, const FakeQuantParams& p, void* y, const FakeQuantLayout& l,
                          cudaStream_t stream, std::string_view what);

// dx (null: not wanted) = dy inside the range, 0 outside; dscale (null: not wanted; `channels` values of x's type) the
// step-size sums, in double: per axis one block per scale in a fixed order, per tensor `partial_blocks` partial sums
// into `workspace` (partial_blocks doubles) and one block adding them in order, so that the result is deterministic.
Status LaunchFakeQuantizeGrad(DType dtype, const void* dy, const void* x, const FakeQuantParams& p, void* dx,
                              void* dscale, double* workspace, int partial_blocks, const FakeQuantLayout& l,
                              cudaStream_t stream, std::string_view what);

// The number of partial sums LaunchFakeQuantizeGrad uses for a per-tensor dscale over n elements.
int FakeQuantizePartialBlocks(int64_t n);

}  // namespace onnxamp::cuda::ew
