// Slice: attribute parsing and the resolution of a run's starts/ends/axes/steps (see slice.h).
#include <algorithm>

#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/slice/slice.h"

namespace onnxamp::ops {
namespace {

struct AxisSlice {
  int64_t start = 0;
  int64_t step = 1;
  int64_t count = 0;
};

// Clamps one axis's start/end for `step` as ONNX specifies and counts the elements taken.
AxisSlice ResolveAxis(int64_t dim, int64_t start, int64_t end, int64_t step) {
  AxisSlice s;
  s.step = step;
  if (dim == 0) return s;
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  // Distances are at most dim; steps may be as large as INT64_MAX or as small as INT64_MIN, so divide unsigned.
  uint64_t dist = 0, mag = 0;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
    dist = end > start ? static_cast<uint64_t>(end - start) : 0;
    mag = static_cast<uint64_t>(step);
  } else {
    start = std::clamp<int64_t>(start, 0, dim - 1);
    end = std::clamp<int64_t>(end, -1, dim - 1);
    dist = start > end ? static_cast<uint64_t>(start - end) : 0;
    mag = static_cast<uint64_t>(-(step + 1)) + 1;
  }
  s.count = static_cast<int64_t>(dist / mag + (dist % mag != 0 ? 1 : 0));
  s.start = s.count > 0 ? start : 0;
  // With a single element the step is never applied; keep it small so that stride arithmetic cannot overflow.
  if (s.count <= 1) s.step = 1;
  return s;
}

}  // namespace

Status SliceSpec::Parse(const ir::Node& node, int64_t opset) {
  opset_ = opset;
  if (opset_ >= 10) return Status::Ok();
  const ir::Attribute* starts = node.FindAttribute("starts");
  const ir::Attribute* ends = node.FindAttribute("ends");
  if (!starts || !ends) return InvalidArgument("Slice-", opset_, " needs the attributes 'starts' and 'ends'");
  starts_ = starts->ints;
  ends_ = ends->ints;
  const ir::Attribute* axes = node.FindAttribute("axes");
  if (axes) {
    axes_ = axes->ints;
    has_axes_ = true;
  }
  return Status::Ok();
}

StatusOr<SliceView> SliceSpec::Resolve(const exec::KernelContext& ctx, const ir::Tensor& x) const {
  if (opset_ >= 10) return ResolveSliceInputs(ctx, 1, x.dims());
  return ResolveSliceView(x.dims(), starts_, ends_, has_axes_ ? &axes_ : nullptr, {});
}

StatusOr<SliceView> ResolveSliceInputs(const exec::KernelContext& ctx, size_t first, std::span<const int64_t> dims) {
  std::vector<int64_t> starts, ends, axes, steps;
  ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* s, RequireInput(ctx, first, "starts"));
  ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* e, RequireInput(ctx, first + 1, "ends"));
  ONNXAMP_ASSIGN_OR_RETURN(starts, ReadInt64s(*s, InputLabel(ctx, first, "starts")));
  ONNXAMP_ASSIGN_OR_RETURN(ends, ReadInt64s(*e, InputLabel(ctx, first + 1, "ends")));
  const ir::Tensor* a = ctx.input(first + 2);
  if (a) {
    ONNXAMP_ASSIGN_OR_RETURN(axes, ReadInt64s(*a, InputLabel(ctx, first + 2, "axes")));
  }
  if (const ir::Tensor* st = ctx.input(first + 3)) {
    ONNXAMP_ASSIGN_OR_RETURN(steps, ReadInt64s(*st, InputLabel(ctx, first + 3, "steps")));
  }
  return ResolveSliceView(dims, starts, ends, a ? &axes : nullptr, std::move(steps));
}

StatusOr<SliceView> ResolveSliceView(std::span<const int64_t> dims, const std::vector<int64_t>& starts,
                                     const std::vector<int64_t>& ends, const std::vector<int64_t>* given_axes,
                                     std::vector<int64_t> steps) {
  std::vector<int64_t> axes;
  if (given_axes) axes = *given_axes;
  if (starts.size() != ends.size()) {
    return InvalidArgument("starts ", ShapeToString(starts), " and ends ", ShapeToString(ends),
                           " have different lengths");
  }
  if (!given_axes) {
    axes.resize(starts.size());
    for (size_t i = 0; i < axes.size(); ++i) axes[i] = static_cast<int64_t>(i);
  }
  if (axes.size() != starts.size()) {
    return InvalidArgument("axes ", ShapeToString(axes), " and starts ", ShapeToString(starts),
                           " have different lengths");
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (steps.size() != starts.size()) {
    return InvalidArgument("steps ", ShapeToString(steps), " and starts ", ShapeToString(starts),
                           " have different lengths");
  }
  const size_t rank = dims.size();
  ONNXAMP_ASSIGN_OR_RETURN(std::vector<int64_t> norm_axes, NormalizeAxes(axes, static_cast<int64_t>(rank)));
  std::vector<AxisSlice> per_axis(rank);
  for (size_t k = 0; k < rank; ++k) per_axis[k] = {0, 1, dims[k]};
  for (size_t i = 0; i < norm_axes.size(); ++i) {
    if (steps[i] == 0) return InvalidArgument("steps ", ShapeToString(steps), " has a zero step for axis ", axes[i]);
    per_axis[norm_axes[i]] = ResolveAxis(dims[norm_axes[i]], starts[i], ends[i], steps[i]);
  }
  SliceView view;
  view.out_dims.resize(rank);
  view.src_strides.resize(rank);
  const std::vector<int64_t> in_strides = ContiguousStrides(dims);
  for (size_t k = 0; k < rank; ++k) {
    view.out_dims[k] = per_axis[k].count;
    view.offset += per_axis[k].start * in_strides[k];
    view.src_strides[k] = per_axis[k].step * in_strides[k];
  }
  return view;
}

}  // namespace onnxamp::ops
