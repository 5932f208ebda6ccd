// Concat: the axis attribute and the per-run checks of the inputs, shared by the CPU kernel and device kernels
// (same checks, same messages, same copy plans).
//
// See concat_cpu.cc for the semantics.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/executor/kernel.h"
#include "runtime/ir/tensor.h"
#include "runtime/ops/common/shape_util.h"

namespace onnxamp::ops {

// The `axis` attribute of a Concat node: required from opset 4 (InvalidArgument), 1 before.
StatusOr<int64_t> ParseConcatAxis(const ir::Node& node, int64_t opset);

// How one run joins its inputs: each output row of the dims before the axis is one block per input.
struct ConcatParts {
  std::vector<const ir::Tensor*> inputs;
  int64_t axis = 0;  // normalised
  std::vector<int64_t> out_dims;
  int64_t outer = 1;
  int64_t inner = 1;
  std::vector<int64_t> offsets;  // where input i's block starts inside an output row, in elements

  // The copy of input i (contiguous) into the output advanced by offsets[i].
  CopyPlan PartPlan(size_t i) const;
};

// The run's inputs checked against input 0 (same type; same rank and dims except along the axis), and the output
// dims. InvalidArgument naming the first input that does not match.
StatusOr<ConcatParts> ResolveConcat(const exec::KernelContext& ctx, int64_t axis_attr);

}  // namespace onnxamp::ops
