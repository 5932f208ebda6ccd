// Split: attribute parsing and the part sizes of a run (see split.h).
#include "runtime/ops/split/split.h"

namespace onnxamp::ops {

std::vector<int64_t> SplitParts::PartDims(const std::vector<int64_t>& in_dims, size_t i) const {
  std::vector<int64_t> dims = in_dims;
  dims[axis] = sizes[i];
  return dims;
}

CopyPlan SplitParts::PartPlan(size_t i) const {
  const int64_t block = sizes[i] * inner;
  const std::vector<int64_t> copy_dims = {outer, block};
  return MakeCopyPlan(copy_dims, std::vector<int64_t>{block, 1}, std::vector<int64_t>{in_row, 1});
}

Status SplitSpec::Parse(const ir::Node& node, int64_t opset) {
  opset_ = opset;
  axis_ = node.GetInt("axis", 0);
  const size_t outputs = node.outputs().size();
  if (outputs == 0) return InvalidArgument("Split needs at least one output");
  if (opset_ < 13) {
    const ir::Attribute* a = node.FindAttribute("split");
    if (a) {
      has_split_attr_ = true;
      split_attr_ = a->ints;
      if (split_attr_.size() != outputs) {
        return InvalidArgument("attribute 'split' ", ShapeToString(split_attr_), " has ", split_attr_.size(),
                               " entries but the node has ", outputs, " outputs");
      }
    }
  }
  if (opset_ >= 18) {
    const ir::Attribute* n = node.FindAttribute("num_outputs");
    if (n) {
      num_outputs_ = n->i;
      if (num_outputs_ < 1 || static_cast<size_t>(num_outputs_) != outputs) {
        return InvalidArgument("attribute 'num_outputs' is ", num_outputs_, " but the node has ", outputs, " outputs");
      }
    }
  }
  return Status::Ok();
}

StatusOr<SplitParts> SplitSpec::Resolve(const exec::KernelContext& ctx, const ir::Tensor& x) const {
  ONNXAMP_ASSIGN_OR_RETURN(const int64_t axis, NormalizeAxis(axis_, x.rank()));
  const int64_t dim = x.dims()[axis];
  const int64_t n = static_cast<int64_t>(ctx.num_outputs());
  std::vector<int64_t> split;
  const ir::Tensor* split_input = (opset_ >= 13 || opset_ == 1) ? ctx.input(1) : nullptr;
  if (split_input && split_input->num_elements() == 0) split_input = nullptr;  // empty: not given
  if (split_input) {
    if (num_outputs_ > 0) return InvalidArgument("input 'split' and attribute 'num_outputs' are both given");
    ONNXAMP_ASSIGN_OR_RETURN(split, ReadInt64s(*split_input, InputLabel(ctx, 1, "split")));
  } else if (has_split_attr_) {
    split = split_attr_;
  } else if (num_outputs_ > 0) {
    const int64_t part = (dim + n - 1) / n;
    split.assign(static_cast<size_t>(n), part);
    split.back() = dim - part * (n - 1);
    if (split.back() < 0) {
      return InvalidArgument("cannot split a dim of ", dim, " into ", n, " outputs of ", part,
                             " (num_outputs leaves the last output a negative size)");
    }
  } else {
    if (dim % n != 0) {
      return InvalidArgument("cannot split axis ", axis, " of size ", dim, " (input ", ShapeToString(x.dims()),
                             ") evenly into ", n, " outputs");
    }
    split.assign(static_cast<size_t>(n), dim / n);
  }
  if (static_cast<int64_t>(split.size()) != n) {
    return InvalidArgument("split ", ShapeToString(split), " has ", split.size(), " entries but the node has ", n,
                           " outputs");
  }
  int64_t total = 0;
  for (int64_t s : split) {
    if (s < 0) return InvalidArgument("split ", ShapeToString(split), " has a negative size");
    total += s;
  }
  if (total != dim) {
    return InvalidArgument("split ", ShapeToString(split), " sums to ", total, " but axis ", axis, " of input ",
                           ShapeToString(x.dims()), " has size ", dim);
  }
  SplitParts parts;
  parts.axis = axis;
  parts.sizes = std::move(split);
  parts.outer = DimProduct(x.dims(), 0, axis);
  parts.inner = DimProduct(x.dims(), axis + 1, x.dims().size());
  parts.in_row = dim * parts.inner;
  int64_t col = 0;
  for (int64_t s : parts.sizes) {
    parts.offsets.push_back(col);
    col += s * parts.inner;
  }
  return parts;
}

}  // namespace onnxamp::ops
