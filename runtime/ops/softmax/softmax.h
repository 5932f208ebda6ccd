// Softmax and LogSoftmax: the `axis` attribute and the [outer, n, inner] view of the input, shared by the CPU kernel
// (softmax_cpu.cc) and device kernels, so that every backend checks the same things with the same messages.
#pragma once

#include <cstdint>

#include "runtime/common/status.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/reduce.h"

namespace onnxamp::ops {

// Softmax's attributes at the node's opset.
struct SoftmaxSpec {
  bool coerce_2d = false;  // before opset 13: normalise over everything from `axis` on
  int64_t axis = -1;       // default 1 before opset 13, -1 from 13
};

// Parses `axis` and checks it against input 0's declared rank where it is known.
Status ParseSoftmaxSpec(const exec::KernelInfo& info, SoftmaxSpec* spec);

// Input 0 viewed as [outer, n, inner] with the normalised values along n (inner = 1 when coerced to 2-D); refused
// when the input is missing or the axis is outside its rank.
StatusOr<reduce::AxisView> ResolveSoftmaxView(const SoftmaxSpec& spec, const ir::Tensor* x);

}  // namespace onnxamp::ops
