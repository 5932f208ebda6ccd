// CUDA Transpose, Concat, Split, Slice, Expand and Tile: the host checks attributes and shapes exactly as the CPU
// kernels do (same messages), builds the same copy plan (ops::MakeCopyPlan) and runs it on the device by element
// size. Transpose of the last two dims (after merging) goes through shared-memory tiles.
#include <limits>

#include "runtime/cuda/ops/tensor/tensor_launch.h"
#include "runtime/cuda/ops/tensor/tensor_util.h"
#include "runtime/ops/common/broadcast.h"

namespace onnxamp::cuda::tensor_ops {
namespace {

using ops::ContiguousStrides;
using ops::DimProduct;
using ops::InputLabel;
using ops::MakeCopyPlan;
using ops::NormalizeAxis;
using ops::ReadInt64s;
using ops::RequireInput;
using ops::ShapeToString;

// `base` advanced by `elements` elements of `elem_size` bytes (pointer arithmetic only: device memory is not read).
inline const void* Advance(const void* base, int64_t elements, size_t elem_size) {
  return static_cast<const std::byte*>(base) + elements * static_cast<int64_t>(elem_size);
}
inline void* Advance(void* base, int64_t elements, size_t elem_size) {
  return static_cast<std::byte*>(base) + elements * static_cast<int64_t>(elem_size);
}

class TransposeCuda : public exec::OpKernel {
 public:
  TransposeCuda(const exec::KernelInfo& info, Status* status) {
    const ir::Attribute* a = info.node.FindAttribute("perm");
    if (!a) return;
    has_perm_ = true;
    perm_ = a->ints;
    std::vector<bool> seen(perm_.size(), false);
    for (int64_t p : perm_) {
      if (p < 0 || p >= static_cast<int64_t>(perm_.size()) || seen[p]) {
        *status = InvalidArgument("attribute 'perm' ", ShapeToString(perm_), " is not a permutation of 0..",
                                  static_cast<int64_t>(perm_.size()) - 1);
        return;
      }
      seen[p] = true;
    }
  }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, 0, "data"));
    const size_t rank = x->dims().size();
    std::vector<int64_t> perm = perm_;
    if (!has_perm_) {
      for (size_t k = rank; k-- > 0;) perm.push_back(static_cast<int64_t>(k));
    } else if (perm.size() != rank) {
      return InvalidArgument("attribute 'perm' ", ShapeToString(perm), " has ", perm.size(),
                             " entries but the input has rank ", rank, " (shape ", ShapeToString(x->dims()), ")");
    }
    std::vector<int64_t> out_dims(rank), src_strides(rank);
    const std::vector<int64_t> in_strides = ContiguousStrides(x->dims());
    for (size_t k = 0; k < rank; ++k) {
      out_dims[k] = x->dims()[perm[k]];
      src_strides[k] = in_strides[perm[k]];
    }
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), out_dims));
    if (y->num_elements() == 0) return Status::Ok();
    const size_t e = ElementSize(x->dtype());
    const cudaStream_t stream = GetCudaContext(ctx).stream();
    const ops::CopyPlan plan = MakeCopyPlan(out_dims, ContiguousStrides(out_dims), src_strides);
    // After merging, a transpose of the two innermost dims is output [batch, cols, rows] reading input
    // [batch, rows, cols]: the output's last dim walks the input with stride cols, the one before with stride 1.
    const size_t m = plan.dims.size();
    if (m >= 2 && m <= 3 && plan.src_strides[m - 2] == 1 && plan.src_strides[m - 1] == plan.dims[m - 2] &&
        (m == 2 || plan.src_strides[0] == plan.dims[1] * plan.dims[2])) {
      const int64_t batch = m == 3 ? plan.dims[0] : 1;
      return LaunchTranspose2D(MutableDeviceData(*y), DeviceData(*x), batch, /*rows=*/plan.dims[m - 1],
                               /*cols=*/plan.dims[m - 2], e, stream, "Transpose");
    }
    return CopyPlanOnDevice(MutableDeviceData(*y), DeviceData(*x), plan, e, stream, "Transpose");
  }

 private:
  bool has_perm_ = false;
  std::vector<int64_t> perm_;
};

class ConcatCuda : public exec::OpKernel {
 public:
  ConcatCuda(const exec::KernelInfo& info, Status* status) {
    const ir::Attribute* a = info.node.FindAttribute("axis");
    if (!a && info.opset >= 4) {
      *status = InvalidArgument("attribute 'axis' is required");
      return;
    }
    axis_ = a ? a->i : 1;
  }

  Status Compute(exec::KernelContext& ctx) const override {
    std::vector<const ir::Tensor*> ins;
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* t, RequireInput(ctx, i, "inputs"));
      ins.push_back(t);
    }
    if (ins.empty()) return InvalidArgument("Concat needs at least one input");
    const ir::Tensor& first = *ins[0];
    ONNXAMP_ASSIGN_OR_RETURN(const int64_t axis, NormalizeAxis(axis_, first.rank()));
    std::vector<int64_t> out_dims = first.dims();
    out_dims[axis] = 0;
    for (size_t i = 0; i < ins.size(); ++i) {
      const ir::Tensor& t = *ins[i];
      if (t.dtype() != first.dtype()) {
        return InvalidArgument(InputLabel(ctx, i, "inputs"), " has type ", DTypeName(t.dtype()), ", expected ",
                               DTypeName(first.dtype()), " like input 0");
      }
      bool ok = t.rank() == first.rank();
      for (int64_t k = 0; ok && k < first.rank(); ++k) ok = k == axis || t.dims()[k] == first.dims()[k];
      if (!ok) {
        return InvalidArgument(InputLabel(ctx, i, "inputs"), " has shape ", ShapeToString(t.dims()),
                               ", which does not match input 0's shape ", ShapeToString(first.dims()),
                               " except along axis ", axis);
      }
      out_dims[axis] += t.dims()[axis];
    }
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, first.dtype(), out_dims));
    if (y->num_elements() == 0) return Status::Ok();
    const int64_t outer = DimProduct(first.dims(), 0, axis);
    const int64_t inner = DimProduct(first.dims(), axis + 1, first.dims().size());
    const size_t e = ElementSize(first.dtype());
    const cudaStream_t stream = GetCudaContext(ctx).stream();
    const int64_t out_row = out_dims[axis] * inner;
    int64_t col = 0;  // where input i's block starts inside an output row
    for (const ir::Tensor* t : ins) {
      const int64_t block = t->dims()[axis] * inner;
      if (block > 0) {
        const std::vector<int64_t> dims = {outer, block};
        ONNXAMP_RETURN_IF_ERROR(CopyPlanOnDevice(
            Advance(MutableDeviceData(*y), col, e), DeviceData(*t),
            MakeCopyPlan(dims, std::vector<int64_t>{out_row, 1}, std::vector<int64_t>{block, 1}), e, stream, "Concat"));
      }
      col += block;
    }
    return Status::Ok();
  }

 private:
  int64_t axis_ = 1;
};

class SplitCuda : public exec::OpKernel {
 public:
  SplitCuda(const exec::KernelInfo& info, Status* status) : opset_(info.opset) {
    axis_ = info.node.GetInt("axis", 0);
    const size_t outputs = info.node.outputs().size();
    if (outputs == 0) {
      *status = InvalidArgument("Split needs at least one output");
      return;
    }
    if (opset_ < 13) {
      const ir::Attribute* a = info.node.FindAttribute("split");
      if (a) {
        has_split_attr_ = true;
        split_attr_ = a->ints;
        if (split_attr_.size() != outputs) {
          *status = InvalidArgument("attribute 'split' ", ShapeToString(split_attr_), " has ", split_attr_.size(),
                                    " entries but the node has ", outputs, " outputs");
          return;
        }
      }
    }
    if (opset_ >= 18) {
      const ir::Attribute* n = info.node.FindAttribute("num_outputs");
      if (n) {
        num_outputs_ = n->i;
        if (num_outputs_ < 1 || static_cast<size_t>(num_outputs_) != outputs) {
          *status =
              InvalidArgument("attribute 'num_outputs' is ", num_outputs_, " but the node has ", outputs, " outputs");
          return;
        }
      }
    }
  }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, 0, "input"));
    ONNXAMP_ASSIGN_OR_RETURN(const int64_t axis, NormalizeAxis(axis_, x->rank()));
    const int64_t dim = x->dims()[axis];
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
        return InvalidArgument("cannot split axis ", axis, " of size ", dim, " (input ", ShapeToString(x->dims()),
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
                             ShapeToString(x->dims()), " has size ", dim);
    }
    const int64_t outer = DimProduct(x->dims(), 0, axis);
    const int64_t inner = DimProduct(x->dims(), axis + 1, x->dims().size());
    const size_t e = ElementSize(x->dtype());
    const cudaStream_t stream = GetCudaContext(ctx).stream();
    const int64_t in_row = dim * inner;
    int64_t col = 0;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t block = split[i] * inner;
      if (ctx.output_requested(i)) {
        std::vector<int64_t> dims = x->dims();
        dims[axis] = split[i];
        ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(i, x->dtype(), dims));
        if (y->num_elements() > 0) {
          const std::vector<int64_t> copy_dims = {outer, block};
          ONNXAMP_RETURN_IF_ERROR(
              CopyPlanOnDevice(MutableDeviceData(*y), Advance(DeviceData(*x), col, e),
                               MakeCopyPlan(copy_dims, std::vector<int64_t>{block, 1}, std::vector<int64_t>{in_row, 1}),
                               e, stream, "Split"));
        }
      }
      col += block;
    }
    return Status::Ok();
  }

 private:
  int64_t opset_;
  int64_t axis_ = 0;
  bool has_split_attr_ = false;
  std::vector<int64_t> split_attr_;
  int64_t num_outputs_ = 0;
};

// One axis of a slice: first index, step and element count (the arithmetic of runtime/ops/slice/slice_cpu.cc).
struct AxisSlice {
  int64_t start = 0;
  int64_t step = 1;
  int64_t count = 0;
};

AxisSlice ResolveAxis(int64_t dim, int64_t start, int64_t end, int64_t step) {
  AxisSlice s;
  s.step = step;
  if (dim == 0) return s;
  if (start < 0) start += dim;
  if (end < 0) end += dim;
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
  if (s.count <= 1) s.step = 1;
  return s;
}

class SliceCuda : public exec::OpKernel {
 public:
  SliceCuda(const exec::KernelInfo& info, Status* status) : opset_(info.opset) {
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
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<int64_t> norm_axes, ops::NormalizeAxes(axes, x->rank()));
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
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), out_dims));
    if (y->num_elements() == 0) return Status::Ok();
    const size_t e = ElementSize(x->dtype());
    return CopyPlanOnDevice(MutableDeviceData(*y), Advance(DeviceData(*x), offset, e),
                            MakeCopyPlan(out_dims, ContiguousStrides(out_dims), src_strides), e,
                            GetCudaContext(ctx).stream(), "Slice");
  }

 private:
  int64_t opset_;
  std::vector<int64_t> starts_, ends_, axes_;
  bool has_axes_ = false;
};

class ExpandCuda : public exec::OpKernel {
 public:
  ExpandCuda(const exec::KernelInfo&, Status*) {}

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, 0, "input"));
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* s, RequireInput(ctx, 1, "shape"));
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<int64_t> shape, ReadInt64s(*s, InputLabel(ctx, 1, "shape")));
    for (int64_t d : shape) {
      if (d < 0) return InvalidArgument(InputLabel(ctx, 1, "shape"), " ", ShapeToString(shape), " has a negative dim");
    }
    StatusOr<std::vector<int64_t>> out = ops::BroadcastShapes(x->dims(), shape);
    if (!out.ok()) {
      return InvalidArgument("cannot expand input ", ShapeToString(x->dims()), " to ", ShapeToString(shape), ": ",
                             out.status().message());
    }
    const std::vector<int64_t> src_strides = ops::BroadcastStrides(x->dims(), *out);
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), *out));
    if (y->num_elements() == 0) return Status::Ok();
    return CopyPlanOnDevice(MutableDeviceData(*y), DeviceData(*x),
                            MakeCopyPlan(*out, ContiguousStrides(*out), src_strides), ElementSize(x->dtype()),
                            GetCudaContext(ctx).stream(), "Expand");
  }
};

// A scalar (or one-element) int tensor's value (Tile-1..5's tiles and axis).
StatusOr<int64_t> ReadScalar(const exec::KernelContext& ctx, size_t i, std::string_view role) {
  ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* t, RequireInput(ctx, i, role));
  ONNXAMP_ASSIGN_OR_RETURN(std::vector<int64_t> v, ReadInt64s(*t, InputLabel(ctx, i, role), /*allow_scalar=*/true));
  if (v.size() != 1) return InvalidArgument(InputLabel(ctx, i, role), " must hold one value, got ", v.size());
  return v[0];
}

class TileCuda : public exec::OpKernel {
 public:
  TileCuda(const exec::KernelInfo& info, Status*) : opset_(info.opset) {}

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, 0, "input"));
    const size_t rank = x->dims().size();
    std::vector<int64_t> repeats;
    if (opset_ < 6) {
      ONNXAMP_ASSIGN_OR_RETURN(const int64_t tiles, ReadScalar(ctx, 1, "tiles"));
      ONNXAMP_ASSIGN_OR_RETURN(const int64_t axis_in, ReadScalar(ctx, 2, "axis"));
      ONNXAMP_ASSIGN_OR_RETURN(const int64_t axis, NormalizeAxis(axis_in, x->rank()));
      repeats.assign(rank, 1);
      repeats[axis] = tiles;
    } else {
      ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* r, RequireInput(ctx, 1, "repeats"));
      ONNXAMP_ASSIGN_OR_RETURN(repeats, ReadInt64s(*r, InputLabel(ctx, 1, "repeats")));
    }
    if (repeats.size() != rank) {
      return InvalidArgument("repeats ", ShapeToString(repeats), " has ", repeats.size(), " entries but the input ",
                             ShapeToString(x->dims()), " has rank ", rank);
    }
    std::vector<int64_t> out_dims(rank);
    for (size_t k = 0; k < rank; ++k) {
      if (repeats[k] < 0) return InvalidArgument("repeats ", ShapeToString(repeats), " has a negative count");
      if (repeats[k] != 0 && x->dims()[k] > std::numeric_limits<int64_t>::max() / repeats[k]) {
        return OutOfRange("tiling ", ShapeToString(x->dims()), " by ", ShapeToString(repeats),
                          " overflows the size of dim ", k);
      }
      out_dims[k] = x->dims()[k] * repeats[k];
    }
    // Allocation first: it refuses sizes that do not fit, so the stride arithmetic below cannot overflow.
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), out_dims));
    if (y->num_elements() == 0) return Status::Ok();
    // The output viewed as [r0, d0, r1, d1, ...], reading the input with stride 0 along every repeat dim.
    const std::vector<int64_t> in_strides = ContiguousStrides(x->dims());
    const std::vector<int64_t> out_strides = ContiguousStrides(out_dims);
    std::vector<int64_t> dims, dst_strides, src_strides;
    for (size_t k = 0; k < rank; ++k) {
      dims.insert(dims.end(), {repeats[k], x->dims()[k]});
      dst_strides.insert(dst_strides.end(), {x->dims()[k] * out_strides[k], out_strides[k]});
      src_strides.insert(src_strides.end(), {0, in_strides[k]});
    }
    return CopyPlanOnDevice(MutableDeviceData(*y), DeviceData(*x), MakeCopyPlan(dims, dst_strides, src_strides),
                            ElementSize(x->dtype()), GetCudaContext(ctx).stream(), "Tile");
  }

 private:
  int64_t opset_;
};

}  // namespace

void RegisterMovementKernels(exec::KernelRegistry& r) {
  const std::vector<DType> movable = MovableDTypes();
  auto add = [&](const char* op, int64_t since, exec::KernelFactory f, std::vector<int> host_inputs) {
    exec::KernelDef d{op, "", since, 25, exec::Device::kCuda, movable, 0, f};
    d.host_inputs = std::move(host_inputs);
    r.Register(std::move(d));
  };
  add("Transpose", 1, &exec::MakeKernel<TransposeCuda>, {});
  add("Concat", 1, &exec::MakeKernel<ConcatCuda>, {});
  add("Split", 1, &exec::MakeKernel<SplitCuda>, {1});
  add("Slice", 1, &exec::MakeKernel<SliceCuda>, {1, 2, 3, 4});
  add("Expand", 8, &exec::MakeKernel<ExpandCuda>, {1});
  add("Tile", 1, &exec::MakeKernel<TileCuda>, {1, 2});
}

}  // namespace onnxamp::cuda::tensor_ops
