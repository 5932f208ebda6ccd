// TopK: attribute parsing and the checks of k and the axis, shared by the CPU kernel (topk_cpu.cc) and device
// kernels, so that every backend checks the same things with the same messages.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/reduce.h"

namespace onnxamp::ops {

// TopK's attributes at the node's opset.
struct TopKSpec {
  bool k_from_input = true;  // k is input 1 (opset 10+), else attribute `k`
  int64_t k = -1;            // attribute `k` (before opset 10)
  int64_t axis = -1;
  bool largest = true;  // `largest` (opset 11+)
};

// Parses the attributes; checks `axis` against input 0's declared rank where it is known.
Status ParseTopKSpec(const exec::KernelInfo& info, TopKSpec* spec);

// k, input 0 around the axis, and the shape of both outputs.
struct TopKShape {
  int64_t axis = 0;  // normalised to 0..rank-1
  int64_t k = 0;
  reduce::AxisView view;
  std::vector<int64_t> out_dims;
};

// Reads k (from `k_input`, input 1, a host tensor of one int64, when spec.k_from_input) and checks it against the
// axis' length; refused when `x` or `k_input` is missing, or the axis is outside x's rank.
StatusOr<TopKShape> ResolveTopKShape(const TopKSpec& spec, const ir::Tensor* x, const ir::Tensor* k_input);

}  // namespace onnxamp::ops
