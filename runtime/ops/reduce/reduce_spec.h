// Reduce* (ReduceSum, ReduceMean, ...): attribute parsing and the axes reduced, shared by the CPU kernels
// (reduce_cpu.cc) and device kernels, so that every backend checks the same things with the same messages.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/executor/kernel.h"

namespace onnxamp::ops {

// The attributes of a Reduce* node at its opset.
struct ReduceSpec {
  bool keepdims = true;
  bool axes_input = false;            // the axes are input 1 (from opset 18; 13 for ReduceSum)
  bool noop_with_empty_axes = false;  // with axes_input: empty axes reduce nothing
  std::vector<int64_t> axes;          // the `axes` attribute (before axes_input)
};

// Parses `keepdims` and, by opset, `axes` (checked against input 0's declared rank where it is known) or
// `noop_with_empty_axes`. `axes_input_since` is the opset from which the axes are input 1.
Status ParseReduceSpec(const exec::KernelInfo& info, int64_t axes_input_since, ReduceSpec* spec);

// Which dimensions of input 0 (`x`) are reduced, from the attribute or from `axes` (input 1, int64, 1-D, may be
// absent); refused when `x` is missing or an axis is out of range or repeated.
StatusOr<std::vector<bool>> ResolveReduceMask(const ReduceSpec& spec, const ir::Tensor* x, const ir::Tensor* axes);

// ---- SumToShape / ReduceProdGrad (com.onnxamp, runtime/ops/gradient_ops.h) --------------------------------------

// SumToShape's inputs: G (input 0) summed to the dims that `shape` (input 1, a 1-D int64 host tensor) holds.
// `same` when those are G's dims (G passes through and nothing more is checked); else `reduced` marks, per dim of G,
// the ones summed away: the leading dims the target lacks and those where the target has 1 and G does not.
struct SumToShapePlan {
  std::vector<int64_t> out_dims;
  bool same = false;
  std::vector<bool> reduced;
};
StatusOr<SumToShapePlan> ResolveSumToShape(const ir::Tensor* g, const ir::Tensor* shape);

// ReduceProdGrad's inputs: dY (input 0) and X (input 1) present with one element type, and dY's dims, right-aligned
// against X's, each X's or 1. Gives per dim of X whether it was reduced (dY has 1 there and X does not).
StatusOr<std::vector<bool>> ResolveReduceProdGrad(const ir::Tensor* dy, const ir::Tensor* x);

}  // namespace onnxamp::ops
