// The input check of variadic ops whose inputs share one element type (Einsum, Min, Max, ...).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/executor/kernel.h"

namespace onnxamp::ops {

// Checks the inputs of one run: at least one (else `none_message`), none missing, all of input 0's element type
// (else "input i has element type X, expected Y" followed by `type_suffix`). Returns the type and the shapes.
Status SameTypeInputs(const exec::KernelContext& ctx, std::string_view none_message, std::string_view type_suffix,
                      DType* dtype, std::vector<std::vector<int64_t>>* shapes);

}  // namespace onnxamp::ops
