// Comparison of a runtime output with a reference tensor, as the ONNX backend test runner does it.
#pragma once

#include <string>

#include "runtime/common/status.h"
#include "runtime/ir/tensor.h"

namespace onnxamp::conformance {

struct Tolerance {
  double rtol = 1e-3;  // ONNX backend test defaults
  double atol = 1e-7;
};

// Compares `got` with `want`: dtypes and shapes must be equal; floating-point elements (float, double,
// float16, bfloat16, complex parts) must satisfy |got - want| <= atol + rtol * |want|, with NaN matching NaN
// and infinities matching infinities of the same sign; integers, bool and strings must be equal. On a
// mismatch, returns InvalidArgument describing the first differing element and how many differ.
Status CompareTensors(const ir::Tensor& got, const ir::Tensor& want, const Tolerance& tol = {});

// "[2,3,4]".
std::string DimsToString(const std::vector<int64_t>& dims);

}  // namespace onnxamp::conformance
