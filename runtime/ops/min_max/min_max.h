// The variadic elementwise ops' input checks (Min, Max, Sum, Mean), shared by the CPU kernels and device kernels.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/executor/kernel.h"

namespace onnxamp::ops {

// Checks the inputs of one Min, Max, Sum or Mean run (at least one, none missing, one element type) and returns their
// element type and shapes.
Status MinMaxInputs(const exec::KernelContext& ctx, DType* dtype, std::vector<std::vector<int64_t>>* shapes);

}  // namespace onnxamp::ops
