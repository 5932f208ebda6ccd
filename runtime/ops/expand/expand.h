// Expand: the per-run output shape and broadcast strides, shared by the CPU kernel and device kernels (same checks,
// same messages).
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/executor/kernel.h"
#include "runtime/ir/tensor.h"

namespace onnxamp::ops {

// The output dims of one run (the broadcast of the input's dims and the `shape` input) and the input's stride per
// output dim (0 along broadcast dims).
struct ExpandShape {
  std::vector<int64_t> out_dims;
  std::vector<int64_t> src_strides;
};

// Reads the `shape` input (input 1) and broadcasts `x` (input 0) to it: InvalidArgument on a negative dim or
// shapes that do not broadcast.
StatusOr<ExpandShape> ResolveExpand(const exec::KernelContext& ctx, const ir::Tensor& x);

}  // namespace onnxamp::ops
