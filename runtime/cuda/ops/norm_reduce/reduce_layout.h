// The reduce engine's layout of a reduction (norm_reduce_launch.h's ReduceLayout) built from a shape and the
// dimensions it reduces, shared by Reduce* (reduce_ops.cc) and SumToShape (grad_ops.cc).
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/cuda/ops/norm_reduce/norm_reduce_launch.h"

namespace onnxamp::cuda::norm_reduce {

// The engine's layout of reducing `dims` over the flagged dimensions: size-1 dimensions dropped, neighbours that are
// both reduced or both kept merged (as reduce::MakeReducePlan does). Unimplemented beyond kMaxMergedDims per side.
Status MakeReduceLayout(const std::vector<int64_t>& dims, const std::vector<bool>& reduced, ReduceLayout* layout);

}  // namespace onnxamp::cuda::norm_reduce
