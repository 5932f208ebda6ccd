// ArgMax and ArgMin: attribute parsing and the view of the input along `axis`, shared by the CPU kernel
// (argmax_cpu.cc) and device kernels, so that every backend checks the same things with the same messages.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/reduce.h"

namespace onnxamp::ops {

// ArgMax's and ArgMin's attributes.
struct ArgExtremeSpec {
  int64_t axis = 0;
  bool keepdims = true;
  bool select_last = false;  // `select_last_index`: the last of equal values wins
};

// Parses the attributes; checks `axis` against input 0's declared rank where it is known.
Status ParseArgExtremeSpec(const exec::KernelInfo& info, ArgExtremeSpec* spec);

// Input 0 around the axis, and the shape of the int64 output.
struct ArgExtremeShape {
  int64_t axis = 0;  // normalised to 0..rank-1
  reduce::AxisView view;
  std::vector<int64_t> out_dims;
};

// Refused when input 0 is missing, the axis is outside its rank, or the axis is empty while other dimensions are not
// (no maximum, or minimum for !`max`).
StatusOr<ArgExtremeShape> ResolveArgExtremeShape(const ArgExtremeSpec& spec, const ir::Tensor* x, bool max);

}  // namespace onnxamp::ops
