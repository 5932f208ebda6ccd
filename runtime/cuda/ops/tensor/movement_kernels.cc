// CUDA Transpose, Concat, Split, Slice, Expand and Tile: the host checks attributes and shapes with the helpers the
// CPU kernels use (runtime/ops/<op>/<op>.h: same checks, same messages), builds the same copy plan and runs it on
// the device by element size. Transpose of the last two dims (after merging) goes through shared-memory tiles.
#include "runtime/cuda/ops/tensor/tensor_launch.h"
#include "runtime/cuda/ops/tensor/tensor_util.h"
#include "runtime/ops/concat/concat.h"
#include "runtime/ops/expand/expand.h"
#include "runtime/ops/slice/slice.h"
#include "runtime/ops/split/split.h"
#include "runtime/ops/tile/tile.h"
#include "runtime/ops/transpose/transpose.h"

namespace onnxamp::cuda::tensor_ops {
namespace {

using ops::ContiguousStrides;
using ops::MakeCopyPlan;
using ops::RequireInput;

// `base` advanced by `elements` elements of `elem_size` bytes (pointer arithmetic only: device memory is not read).
inline const void* Advance(const void* base, int64_t elements, size_t elem_size) {
  return static_cast<const std::byte*>(base) + elements * static_cast<int64_t>(elem_size);
}
inline void* Advance(void* base, int64_t elements, size_t elem_size) {
  return static_cast<std::byte*>(base) + elements * static_cast<int64_t>(elem_size);
}

class TransposeCuda : public exec::OpKernel {
 public:
  TransposeCuda(const exec::KernelInfo& info, Status* status) { *status = spec_.Parse(info.node); }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, 0, "data"));
    const size_t rank = x->dims().size();
    ONNXAMP_ASSIGN_OR_RETURN(const std::vector<int64_t> perm, spec_.Perm(*x));
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
  ops::TransposeSpec spec_;
};

class ConcatCuda : public exec::OpKernel {
 public:
  ConcatCuda(const exec::KernelInfo& info, Status* status) {
    StatusOr<int64_t> axis = ops::ParseConcatAxis(info.node, info.opset);
    if (!axis.ok()) {
      *status = axis.status();
      return;
    }
    axis_ = *axis;
  }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ops::ConcatParts parts, ops::ResolveConcat(ctx, axis_));
    const DType dtype = parts.inputs[0]->dtype();
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, dtype, parts.out_dims));
    if (y->num_elements() == 0) return Status::Ok();
    const size_t e = ElementSize(dtype);
    const cudaStream_t stream = GetCudaContext(ctx).stream();
    for (size_t i = 0; i < parts.inputs.size(); ++i) {
      if (parts.inputs[i]->dims()[parts.axis] == 0) continue;
      ONNXAMP_RETURN_IF_ERROR(CopyPlanOnDevice(Advance(MutableDeviceData(*y), parts.offsets[i], e),
                                               DeviceData(*parts.inputs[i]), parts.PartPlan(i), e, stream, "Concat"));
    }
    return Status::Ok();
  }

 private:
  int64_t axis_ = 1;
};

class SplitCuda : public exec::OpKernel {
 public:
  SplitCuda(const exec::KernelInfo& info, Status* status) { *status = spec_.Parse(info.node, info.opset); }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, 0, "input"));
    ONNXAMP_ASSIGN_OR_RETURN(const ops::SplitParts parts, spec_.Resolve(ctx, *x));
    const size_t e = ElementSize(x->dtype());
    const cudaStream_t stream = GetCudaContext(ctx).stream();
    for (size_t i = 0; i < parts.sizes.size(); ++i) {
      if (!ctx.output_requested(i)) continue;
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(i, x->dtype(), parts.PartDims(x->dims(), i)));
      if (y->num_elements() == 0) continue;
      ONNXAMP_RETURN_IF_ERROR(CopyPlanOnDevice(MutableDeviceData(*y), Advance(DeviceData(*x), parts.offsets[i], e),
                                               parts.PartPlan(i), e, stream, "Split"));
    }
    return Status::Ok();
  }

 private:
  ops::SplitSpec spec_;
};

class SliceCuda : public exec::OpKernel {
 public:
  SliceCuda(const exec::KernelInfo& info, Status* status) { *status = spec_.Parse(info.node, info.opset); }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, 0, "data"));
    ONNXAMP_ASSIGN_OR_RETURN(const ops::SliceView v, spec_.Resolve(ctx, *x));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), v.out_dims));
    if (y->num_elements() == 0) return Status::Ok();
    const size_t e = ElementSize(x->dtype());
    return CopyPlanOnDevice(MutableDeviceData(*y), Advance(DeviceData(*x), v.offset, e),
                            MakeCopyPlan(v.out_dims, ContiguousStrides(v.out_dims), v.src_strides), e,
                            GetCudaContext(ctx).stream(), "Slice");
  }

 private:
  ops::SliceSpec spec_;
};

class ExpandCuda : public exec::OpKernel {
 public:
  ExpandCuda(const exec::KernelInfo&, Status*) {}

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, 0, "input"));
    ONNXAMP_ASSIGN_OR_RETURN(const ops::ExpandShape shape, ops::ResolveExpand(ctx, *x));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), shape.out_dims));
    if (y->num_elements() == 0) return Status::Ok();
    return CopyPlanOnDevice(MutableDeviceData(*y), DeviceData(*x),
                            MakeCopyPlan(shape.out_dims, ContiguousStrides(shape.out_dims), shape.src_strides),
                            ElementSize(x->dtype()), GetCudaContext(ctx).stream(), "Expand");
  }
};

class TileCuda : public exec::OpKernel {
 public:
  TileCuda(const exec::KernelInfo& info, Status*) : opset_(info.opset) {}

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, 0, "input"));
    ONNXAMP_ASSIGN_OR_RETURN(const ops::TileShape shape, ops::ResolveTile(ctx, *x, opset_));
    // Allocation first: it refuses sizes that do not fit, so the stride arithmetic of the plan cannot overflow.
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), shape.out_dims));
    if (y->num_elements() == 0) return Status::Ok();
    return CopyPlanOnDevice(MutableDeviceData(*y), DeviceData(*x), ops::TileCopyPlan(x->dims(), shape),
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
