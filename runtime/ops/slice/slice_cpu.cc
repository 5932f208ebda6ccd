// Slice (CPU): takes starts:ends:steps along chosen axes, any element type (strings included), opsets 1-25.
//
// Opsets 1-9 read `starts`, `ends` and `axes` attributes (step 1); from opset 10 they are inputs (int32 or int64)
// with optional `axes` and `steps`. Per axis, as in numpy: negative starts/ends count from the end; then for a
// positive step start and end are clamped to [0, dim], for a negative step to [0, dim-1] and [-1, dim-1], so
// ends like INT64_MAX or INT64_MIN mean "to the end"/"to the beginning". A zero step or a repeated axis is an
// error. The copy is a strided view of the input (negative strides for negative steps).
#include <limits>

#include "runtime/executor/kernel.h"
#include "runtime/ops/common/shape_util.h"

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

class SliceCpu : public exec::OpKernel {
 public:
  SliceCpu(const exec::KernelInfo& info, Status* status) : opset_(info.opset) {
    if (opset_ >= 10) return;
    const ir::Attribute* starts = info.node.FindAttribute("starts");
    const ir::Attribute* ends = info.node.FindAttribute("ends");
    if (!starts || !ends) {
      *status = InvalidArgument("Slice-", opset_, " needs the attributes 'starts' and 'ends'");
      return;
    }
    starts_ = starts->ints;
    ends_ = ends->ints;
    const ir::Attribute* axes = info.node.FindAttribute("axes");
    if (axes) {
      axes_ = axes->ints;
      has_axes_ = true;
    }
  }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, 0, "data"));
    std::vector<int64_t> starts = starts_, ends = ends_, axes = axes_, steps;
    bool has_axes = has_axes_;
    if (opset_ >= 10) {
      ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* s, RequireInput(ctx, 1, "starts"));
      ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* e, RequireInput(ctx, 2, "ends"));
      ONNXAMP_ASSIGN_OR_RETURN(starts, ReadInt64s(*s, InputLabel(ctx, 1, "starts")));
      ONNXAMP_ASSIGN_OR_RETURN(ends, ReadInt64s(*e, InputLabel(ctx, 2, "ends")));
      if (const ir::Tensor* a = ctx.input(3)) {
        ONNXAMP_ASSIGN_OR_RETURN(axes, ReadInt64s(*a, InputLabel(ctx, 3, "axes")));
        has_axes = true;
      }
      if (const ir::Tensor* st = ctx.input(4)) {
        ONNXAMP_ASSIGN_OR_RETURN(steps, ReadInt64s(*st, InputLabel(ctx, 4, "steps")));
      }
    }
    if (starts.size() != ends.size()) {
      return InvalidArgument("starts ", ShapeToString(starts), " and ends ", ShapeToString(ends),
                             " have different lengths");
    }
    if (!has_axes) {
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
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<int64_t> norm_axes, NormalizeAxes(axes, x->rank()));
    const size_t rank = x->dims().size();
    std::vector<AxisSlice> per_axis(rank);
    for (size_t k = 0; k < rank; ++k) per_axis[k] = {0, 1, x->dims()[k]};
    for (size_t i = 0; i < norm_axes.size(); ++i) {
      if (steps[i] == 0) return InvalidArgument("steps ", ShapeToString(steps), " has a zero step for axis ", axes[i]);
      per_axis[norm_axes[i]] = ResolveAxis(x->dims()[norm_axes[i]], starts[i], ends[i], steps[i]);
    }
    std::vector<int64_t> out_dims(rank), src_strides(rank);
    const std::vector<int64_t> in_strides = ContiguousStrides(x->dims());
    int64_t offset = 0;
    for (size_t k = 0; k < rank; ++k) {
      out_dims[k] = per_axis[k].count;
      offset += per_axis[k].start * in_strides[k];
      src_strides[k] = per_axis[k].step * in_strides[k];
    }
    return DispatchByElementSize(x->dtype(), "Slice", [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, AllocateAnyOutput(ctx, 0, x->dtype(), out_dims));
      StridedCopy(MutableElementsOf<T>(*y), ElementsOf<T>(*x) + offset,
                  MakeCopyPlan(out_dims, ContiguousStrides(out_dims), src_strides),
                  std::is_same_v<T, std::string> ? nullptr : &ctx.threads());
      return Status::Ok();
    });
  }

 private:
  int64_t opset_;
  std::vector<int64_t> starts_, ends_, axes_;
  bool has_axes_ = false;
};

}  // namespace

void RegisterSliceKernels(exec::KernelRegistry& r) {
  r.Register({"Slice", "", 1, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<SliceCpu>});
}

}  // namespace onnxamp::ops
