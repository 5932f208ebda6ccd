// Det's and DetGrad's input checks, shared by the CPU kernel (det_cpu.cc) and the CUDA one
// (runtime/cuda/ops/linalg/det_cuda.cc), with the same messages. The arithmetic is det_math.h.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/executor/kernel.h"

namespace onnxamp::ops::det {

// X [..., n, n]: `batch` matrices of batch_dims.
struct DetShape {
  int64_t n = 0, batch = 0;
  std::vector<int64_t> batch_dims;
};

// Det(X) or (grad) DetGrad(dY, X): X present and square in its last two dims; dY of X's type and batch_dims.
StatusOr<DetShape> ResolveDet(const exec::KernelContext& ctx, bool grad);

}  // namespace onnxamp::ops::det
