// Slice: attribute parsing and the per-run resolution of starts/ends/axes/steps into a strided view of the input,
// shared by the CPU kernel and device kernels (same checks, same messages, same view).
//
// See slice_cpu.cc for the semantics.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/executor/kernel.h"
#include "runtime/ir/tensor.h"

namespace onnxamp::ops {

// A resolved slice: the output dims and, in input elements, where the first output element is read and the input
// stride of each output dim (negative for negative steps).
struct SliceView {
  std::vector<int64_t> out_dims;
  int64_t offset = 0;
  std::vector<int64_t> src_strides;
};

// The parsed attributes of one Slice node.
class SliceSpec {
 public:
  // Reads the `starts`, `ends` and `axes` attributes of opsets 1-9 (InvalidArgument when starts or ends is
  // missing); from opset 10 they are inputs and there is nothing to parse.
  Status Parse(const ir::Node& node, int64_t opset);

  // The view of `x` (input 0) the node takes, from the attributes or the host inputs starts/ends/axes/steps.
  // InvalidArgument on mismatched lengths, a bad or repeated axis, or a zero step.
  StatusOr<SliceView> Resolve(const exec::KernelContext& ctx, const ir::Tensor& x) const;

 private:
  int64_t opset_ = 0;
  std::vector<int64_t> starts_, ends_, axes_;
  bool has_axes_ = false;
};

}  // namespace onnxamp::ops
