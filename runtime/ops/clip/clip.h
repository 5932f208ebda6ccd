// Clip's bounds: attributes before opset 11, optional scalar inputs from 11. Shared by the CPU kernel and device
// kernels, so every backend checks the bounds with the same messages.
#pragma once

#include <optional>

#include "runtime/common/status.h"
#include "runtime/executor/kernel.h"

namespace onnxamp::ops {

class ClipSpec {
 public:
  // Reads attributes min and max of `info.node` before opset 11; from 11 the bounds are inputs 1 and 2.
  Status Init(const exec::KernelInfo& info);

  // The inputs of one run: `x` (required) and the bounds (null where absent, always null before opset 11), which
  // must have x's element type and one element each.
  Status Inputs(const exec::KernelContext& ctx, const ir::Tensor** x, const ir::Tensor** lo,
                const ir::Tensor** hi) const;

  // The attribute bounds (before opset 11; empty where absent).
  const std::optional<float>& attr_min() const { return attr_min_; }
  const std::optional<float>& attr_max() const { return attr_max_; }

 private:
  bool bounds_as_inputs_ = true;
  std::optional<float> attr_min_, attr_max_;
};

}  // namespace onnxamp::ops
