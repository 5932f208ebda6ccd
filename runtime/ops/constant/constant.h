// ConstantOfShape: the `value` attribute and the per-run output dims, shared by the CPU kernel and device kernels
// (same checks, same messages).
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/executor/kernel.h"
#include "runtime/ir/tensor.h"

namespace onnxamp::ops {

// The fill element of a ConstantOfShape node: its `value` attribute (a tensor of one element), or float 0 when
// the attribute is absent. InvalidArgument when the attribute is not a one-element tensor.
StatusOr<ir::Tensor> ConstantOfShapeValue(const ir::Node& node);

// The output dims of a ConstantOfShape run: the int values of input 0, which must not be negative
// (InvalidArgument).
StatusOr<std::vector<int64_t>> ConstantOfShapeDims(const exec::KernelContext& ctx);

}  // namespace onnxamp::ops
