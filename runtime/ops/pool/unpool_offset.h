// Where MaxUnpool puts an element, for host and device code: the CPU kernel (unpool_cpu.cc) and the CUDA one
// (runtime/cuda/ops/dnn/unpool_kernels.cu) map an index the same way.
#pragma once

#include <cstdint>

#include "runtime/common/host_device.h"

namespace onnxamp::ops {

// The output offset of the position that flat index `idx` names in the unpooled shape (`size` elements, contiguous
// strides `from`), whose element at those coordinates lies at strides `to` in the output (rank dims each); -1 when
// idx is outside [0, size).
ONNXAMP_HOST_DEVICE inline int64_t UnpoolOffset(int64_t idx, int rank, const int64_t* from, const int64_t* to,
                                                int64_t size) {
  if (idx < 0 || idx >= size) return -1;
  int64_t rest = idx, offset = 0;
  for (int d = 0; d < rank; ++d) {
    offset += rest / from[d] * to[d];
    rest %= from[d];
  }
  return offset;
}

}  // namespace onnxamp::ops
