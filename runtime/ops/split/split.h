// Split: attribute parsing and the per-run part sizes, shared by the CPU kernel and device kernels (same checks,
// same messages, same copy plans).
//
// See split_cpu.cc for where the sizes come from at each opset.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/executor/kernel.h"
#include "runtime/ir/tensor.h"
#include "runtime/ops/common/shape_util.h"

namespace onnxamp::ops {

// How one run cuts its input: the (normalised) axis, the size of each part along it, and the input viewed as
// [outer, dim * inner] rows.
struct SplitParts {
  int64_t axis = 0;
  std::vector<int64_t> sizes;
  int64_t outer = 1;
  int64_t inner = 1;
  int64_t in_row = 0;            // dim * inner
  std::vector<int64_t> offsets;  // where part i starts inside an input row, in elements

  // Output i's dims: the input's dims with the axis set to sizes[i].
  std::vector<int64_t> PartDims(const std::vector<int64_t>& in_dims, size_t i) const;
  // The copy of part i from the input (advanced by offsets[i]) to its contiguous output.
  CopyPlan PartPlan(size_t i) const;
};

// The parsed attributes of one Split node.
class SplitSpec {
 public:
  // Reads `axis`, the `split` attribute (opsets 1-12) and `num_outputs` (18+), checking them against the node's
  // output count (InvalidArgument).
  Status Parse(const ir::Node& node, int64_t opset);

  // The parts of `x` (input 0) for this run, from the split input, the attribute, num_outputs or an even split
  // over `num_outputs` outputs. InvalidArgument when the sizes do not fit the axis.
  StatusOr<SplitParts> Resolve(const exec::KernelContext& ctx, const ir::Tensor& x) const;

 private:
  int64_t opset_ = 0;
  int64_t axis_ = 0;
  bool has_split_attr_ = false;
  std::vector<int64_t> split_attr_;
  int64_t num_outputs_ = 0;
};

}  // namespace onnxamp::ops
