// What every implementation of the channels-last ops shares (the layout pass, the CPU reference kernels, the device
// kernels; the ops are described in runtime/executor/graph_optimizer.h): the permutations between the plain and the
// channels-last layout, the logical (NCHW-order) view of a channels-last tensor on which the plain ops' shape
// checks and geometry run, and the node and input checks with their messages.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/ir/graph.h"
#include "runtime/ir/tensor.h"
#include "runtime/ops/common/broadcast.h"

namespace onnxamp::ops {

// The Transpose perm from [N, C, spatial...] to [N, spatial..., C] (to_last) or back, at `rank` (>= 2). The same
// perm takes convolution weights [M, C / group, kernel...] to [M, kernel..., C / group] and back.
inline std::vector<int64_t> ChannelsPerm(int64_t rank, bool to_last) {
  std::vector<int64_t> perm = {0};
  if (to_last) {
    for (int64_t d = 2; d < rank; ++d) perm.push_back(d);
    perm.push_back(1);
  } else {
    perm.push_back(rank - 1);
    for (int64_t d = 1; d < rank - 1; ++d) perm.push_back(d);
  }
  return perm;
}

// [N, C, spatial...] from channels-last dims [N, spatial..., C] (a channels-last W [M, kernel..., C/g] gives
// [M, C/g, kernel...]); dims of rank < 3 are returned as they are (the shape checks then refuse them).
inline std::vector<int64_t> LogicalFromChannelsLast(const std::vector<int64_t>& dims) {
  if (dims.size() < 3) return dims;
  std::vector<int64_t> out = {dims[0], dims.back()};
  out.insert(out.end(), dims.begin() + 1, dims.end() - 1);
  return out;
}

// The stored dims of a tensor of logical dims [N, C, spatial...]: [N, spatial..., C] when `channels_last`, else as
// they are.
inline std::vector<int64_t> StoredDims(const std::vector<int64_t>& logical, bool channels_last) {
  if (!channels_last || logical.size() < 3) return logical;
  std::vector<int64_t> out = {logical[0]};
  out.insert(out.end(), logical.begin() + 2, logical.end());
  out.push_back(logical[1]);
  return out;
}

// A tensor without data, of `t`'s element type and logical dims, for the plain ops' shape checks (CheckConvInputs,
// ResolvePool, ResolveGlobalPool).
inline StatusOr<ir::Tensor> LogicalView(const ir::Tensor& t) {
  return ir::Tensor::WithoutData(t.dtype(), LogicalFromChannelsLast(t.dims()));
}

// The node checks: one output, and (`single_input`: the poolings) one input.
inline Status CheckChannelsLastNode(const ir::Node& node, bool single_input) {
  if (node.outputs().size() != 1) {
    return InvalidArgument(node.op_type(), " has one output, got ", node.outputs().size());
  }
  if (single_input && node.inputs().size() != 1) {
    return InvalidArgument(node.op_type(), " has one input, got ", node.inputs().size());
  }
  return Status::Ok();
}

// X of 1 to 3 spatial dims (rank 3 to 5).
inline Status CheckChannelsLastInput(const ir::Tensor* x) {
  if (!x) return InvalidArgument("input X is required");
  if (x->rank() < 3 || x->rank() > 5) {
    return InvalidArgument("input X has shape ", ShapeToString(x->dims()),
                           ", expected a channels-last tensor [N, spatial..., C] of 1 to 3 spatial dims");
  }
  return Status::Ok();
}

// ChannelsLastConv's Z: of X's rank (it broadcasts against Y in the channels-last order).
inline Status CheckChannelsLastZ(const ir::Tensor& z, const ir::Tensor& x) {
  if (z.rank() != x.rank()) {
    return InvalidArgument("input Z has shape ", ShapeToString(z.dims()), ", expected a channels-last tensor of ",
                           x.rank(), " dims like X");
  }
  return Status::Ok();
}

}  // namespace onnxamp::ops
