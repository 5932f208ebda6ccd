// Slice: attribute parsing and the per-run resolution of starts/ends/axes/steps into a strided view of the input,
// shared by the CPU kernel, device kernels and the kernel of com.onnxamp SliceGrad (same checks, same messages, same
// view).
//
// See slice_cpu.cc for the semantics.
#pragma once

#include <cstdint>
#include <span>
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

// The view that slicing a tensor of shape `dims` by starts/ends along `axes` (null: 0, 1, ...) with `steps` (empty:
// all 1) takes. InvalidArgument on mismatched lengths, a bad or repeated axis, or a zero step.
StatusOr<SliceView> ResolveSliceView(std::span<const int64_t> dims, const std::vector<int64_t>& starts,
                                     const std::vector<int64_t>& ends, const std::vector<int64_t>* axes,
                                     std::vector<int64_t> steps);

// ResolveSliceView with Slice-10's inputs starts, ends and the optional axes and steps read from inputs `first` to
// `first + 3` of the node (host tensors, int32 or int64).
StatusOr<SliceView> ResolveSliceInputs(const exec::KernelContext& ctx, size_t first, std::span<const int64_t> dims);

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
  bool has_axes_ = false;  // (opsets 1-9)
};

}  // namespace onnxamp::ops
