// CumSum's attributes and per-run checks (the axis input and the [outer, len, inner] view of x), shared by the CPU
// kernel (cumsum_cpu.cc) and the CUDA kernel (runtime/cuda/ops/tensor/layout_ops_cuda.cc): same checks, same
// messages. See cumsum_cpu.cc for the semantics.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/executor/kernel.h"
#include "runtime/ops/common/elementwise.h"
#include "runtime/ops/common/shape_util.h"

namespace onnxamp::ops {

// The attributes `exclusive` and `reverse` of one CumSum node.
struct CumSumSpec {
  bool exclusive = false;
  bool reverse = false;

  Status Parse(const ir::Node& node) {
    ONNXAMP_ASSIGN_OR_RETURN(const int64_t e, IntAttribute(node, "exclusive", 0));
    ONNXAMP_ASSIGN_OR_RETURN(const int64_t r, IntAttribute(node, "reverse", 0));
    exclusive = e != 0;
    reverse = r != 0;
    return Status::Ok();
  }
};

// x viewed as [outer, len, inner] around the summed axis: outer * inner lines of len elements `inner` apart.
struct CumSumShape {
  int64_t outer = 1;
  int64_t len = 1;
  int64_t inner = 1;
};

// Reads the axis (input 1: one int32/int64 value, a scalar or a one-element tensor, negative from the end; a scalar x
// takes axis 0 or -1) and views x around it. InvalidArgument for a missing, multi-valued or out-of-range axis.
inline StatusOr<CumSumShape> ResolveCumSum(const exec::KernelContext& ctx, const ir::Tensor& x) {
  ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* axis_t, RequireInput(ctx, 1, "axis"));
  const std::string label = InputLabel(ctx, 1, "axis");
  ONNXAMP_ASSIGN_OR_RETURN(std::vector<int64_t> axes, ReadInt64s(*axis_t, label, true));
  if (axes.size() != 1) return InvalidArgument(label, " must hold one value, got ", axes.size());
  const int64_t rank = x.rank();
  int64_t axis = axes[0];
  if (axis < -std::max<int64_t>(rank, 1) || axis >= std::max<int64_t>(rank, 1)) {
    return InvalidArgument(label, " is ", axis, ", outside [", -rank, ", ", rank - 1, "]");
  }
  if (axis < 0) axis += std::max<int64_t>(rank, 1);
  CumSumShape s;
  for (int64_t d = 0; d < rank; ++d) {
    (d < axis ? s.outer : d == axis ? s.len : s.inner) *= x.dims()[static_cast<size_t>(d)];
  }
  return s;
}

}  // namespace onnxamp::ops
