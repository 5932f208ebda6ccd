// MaxUnpool's and MaxUnpoolGrad's input checks and shapes, shared by the CPU kernel (unpool_cpu.cc) and the CUDA one
// (runtime/cuda/ops/dnn/unpool_cuda.cc), with the same messages.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/executor/kernel.h"
#include "runtime/ir/tensor.h"
#include "runtime/ops/common/conv_geometry.h"

namespace onnxamp::ops {

// The shape MaxPool's indices address (`inferred`: per spatial dim (in - 1) * stride + kernel - pad_begin - pad_end)
// and the actual output (`out`: the inferred one padded at the end of each spatial dim to output_shape, when given).
struct UnpoolShape {
  std::vector<int64_t> inferred, out;
};

// MaxUnpool(X, I[, output_shape]) or (grad) MaxUnpoolGrad(dY, I, X_shape[, output_shape]): input 0 and I present, I
// int64 of X's shape (the gradient's X is I's shape), output_shape (read: a host tensor) keeping N and C and at least
// the unpooled shape, and the output fits in memory. The values of I are not read.
StatusOr<UnpoolShape> ResolveUnpool(const exec::KernelContext& ctx, const WindowAttrs& attrs, bool grad);

// MaxUnpoolGrad's dY (input 0): the output's shape.
Status CheckUnpoolDy(const exec::KernelContext& ctx, const UnpoolShape& s);

}  // namespace onnxamp::ops
