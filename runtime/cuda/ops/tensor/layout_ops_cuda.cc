// CUDA CumSum, Trilu, EyeLike, OneHot, DepthToSpace, SpaceToDepth and com.onnxamp DepthToSpaceGrad: the attributes
// and checks of the CPU kernels (runtime/ops/<op>/<op>.h: same messages), registered for what the CPU kernels take
// (RegisterLikeCpu), then one launch (layout_launch.h) or a strided copy.
//
// - CumSum: one thread per line scanning it in the CPU's order and compute type (double for float32, float for
//   fp16/bf16, wrapping integers): the CPU's bits. The axis is a host input.
// - Trilu, EyeLike, OneHot: byte moves by element size (EyeLike's one is the CPU's Store of 1 for the output type).
//   Trilu's k and OneHot's depth are host inputs; OneHot's indices (any numeric type) and values stay on the device,
//   and an index that addresses no position (outside [-depth, depth), NaN, ...) sets no element, as on the CPU.
// - DepthToSpace, SpaceToDepth, DepthToSpaceGrad: the CPU's 6-D view and permutation as one strided copy.
#include <cstring>

#include "runtime/cuda/ops/register_like_cpu.h"
#include "runtime/cuda/ops/tensor/layout_launch.h"
#include "runtime/cuda/ops/tensor/tensor_util.h"
#include "runtime/executor/graph_optimizer.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/compress/eye_like.h"
#include "runtime/ops/cumsum/cumsum.h"
#include "runtime/ops/depth_space/depth_space.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/one_hot/one_hot.h"
#include "runtime/ops/trilu/trilu.h"

namespace onnxamp::cuda::tensor_ops {
namespace {

using ops::InputLabel;
using ops::RequireInput;

class CumSumCuda : public exec::OpKernel {
 public:
  CumSumCuda(const exec::KernelInfo& info, Status* status) { *status = spec_.Parse(info.node); }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, 0, "x"));
    ONNXAMP_ASSIGN_OR_RETURN(const ops::CumSumShape s, ops::ResolveCumSum(ctx, *x));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), x->dims()));
    if (y->num_elements() == 0) return Status::Ok();
    return LaunchCumSum(x->dtype(), MutableDeviceData(*y), DeviceData(*x), s.outer, s.len, s.inner, spec_.exclusive,
                        spec_.reverse, GetCudaContext(ctx).stream());
  }

 private:
  ops::CumSumSpec spec_;
};

class TriluCuda : public exec::OpKernel {
 public:
  TriluCuda(const exec::KernelInfo& info, Status* status) {
    StatusOr<bool> upper = ops::ParseTriluUpper(info.node);
    if (!upper.ok()) {
      *status = upper.status();
      return;
    }
    upper_ = *upper;
  }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, 0, "input"));
    ONNXAMP_ASSIGN_OR_RETURN(const ops::TriluShape s, ops::ResolveTrilu(ctx, *x));
    ONNXAMP_RETURN_IF_ERROR(CheckMovableLikeCpu(x->dtype(), "Trilu"));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), x->dims()));
    if (y->num_elements() == 0) return Status::Ok();
    return LaunchTrilu(MutableDeviceData(*y), DeviceData(*x), s.matrices, s.rows, s.cols, s.k, upper_,
                       ElementSize(x->dtype()), GetCudaContext(ctx).stream());
  }

 private:
  bool upper_ = true;
};

class EyeLikeCuda : public exec::OpKernel {
 public:
  EyeLikeCuda(const exec::KernelInfo& info, Status* status) { *status = spec_.Parse(info.node); }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, 0, "input"));
    ONNXAMP_ASSIGN_OR_RETURN(const DType t, spec_.Resolve(ctx, *x));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, t, x->dims()));
    // The CPU's one of type t (and its refusal of types it has no one for).
    unsigned char one[16] = {};
    size_t elem_size = 0;
    ONNXAMP_RETURN_IF_ERROR(ops::DispatchNumericOrBool(t, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const T value = ops::Store<T>(ops::ComputeType<T>(1));
      std::memcpy(one, &value, sizeof(T));
      elem_size = sizeof(T);
      return Status::Ok();
    }));
    if (y->num_elements() == 0) return Status::Ok();
    return LaunchEyeLike(MutableDeviceData(*y), x->dims()[0], x->dims()[1], spec_.k, one, elem_size,
                         GetCudaContext(ctx).stream());
  }

 private:
  ops::EyeLikeSpec spec_;
};

class OneHotCuda : public exec::OpKernel {
 public:
  OneHotCuda(const exec::KernelInfo& info, Status* status) : negative_from_end_(info.opset >= 11) {
    StatusOr<int64_t> axis = ops::IntAttribute(info.node, "axis", -1);
    if (!axis.ok()) {
      *status = axis.status();
      return;
    }
    axis_ = *axis;
  }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ops::OneHotShape s, ops::ResolveOneHot(ctx, axis_));
    const ir::Tensor* indices = ctx.input(0);
    const ir::Tensor* values = ctx.input(2);
    ONNXAMP_RETURN_IF_ERROR(ops::CheckOneHotNumeric(indices->dtype(), InputLabel(ctx, 0, "indices")));
    ONNXAMP_RETURN_IF_ERROR(CheckMovableLikeCpu(values->dtype(), "OneHot"));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, values->dtype(), s.dims));
    if (y->num_elements() == 0) return Status::Ok();
    return LaunchOneHot(MutableDeviceData(*y), DeviceData(*indices), indices->dtype(), DeviceData(*values), s.outer,
                        s.depth, s.inner, negative_from_end_, ElementSize(values->dtype()),
                        GetCudaContext(ctx).stream());
  }

 private:
  bool negative_from_end_;
  int64_t axis_ = -1;
};

class DepthSpaceCuda : public exec::OpKernel {
 public:
  DepthSpaceCuda(const exec::KernelInfo& info, Status* status) { *status = spec_.Parse(info.node); }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, 0, spec_.input_role()));
    ONNXAMP_ASSIGN_OR_RETURN(const ops::DepthSpaceShape s, spec_.Resolve(ctx, *x));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), s.out_dims));
    // The CPU moves the elements with TransposeElements, whose refusal names Transpose.
    ONNXAMP_RETURN_IF_ERROR(CheckMovableLikeCpu(x->dtype(), "Transpose"));
    if (y->num_elements() == 0) return Status::Ok();
    // Output index (in the transposed 6-D view) k reads the view's dim perm[k].
    std::vector<int64_t> dims(6), src_strides(6);
    const std::vector<int64_t> view_strides = ops::ContiguousStrides(s.view);
    for (size_t k = 0; k < 6; ++k) {
      dims[k] = s.view[static_cast<size_t>(s.perm[k])];
      src_strides[k] = view_strides[static_cast<size_t>(s.perm[k])];
    }
    return CopyPlanOnDevice(MutableDeviceData(*y), DeviceData(*x),
                            ops::MakeCopyPlan(dims, ops::ContiguousStrides(dims), src_strides), ElementSize(x->dtype()),
                            GetCudaContext(ctx).stream(), ctx.node().op_type());
  }

 private:
  ops::DepthSpaceSpec spec_;
};

}  // namespace

void RegisterLayoutKernels(exec::KernelRegistry& r) {
  RegisterLikeCpu(r, "CumSum", &exec::MakeKernel<CumSumCuda>, {1});
  RegisterLikeCpu(r, "Trilu", &exec::MakeKernel<TriluCuda>, {1});
  RegisterLikeCpu(r, "EyeLike", &exec::MakeKernel<EyeLikeCuda>);
  RegisterLikeCpu(r, "OneHot", &exec::MakeKernel<OneHotCuda>, {1});
  RegisterLikeCpu(r, "DepthToSpace", &exec::MakeKernel<DepthSpaceCuda>);
  RegisterLikeCpu(r, "SpaceToDepth", &exec::MakeKernel<DepthSpaceCuda>);
  RegisterLikeCpu(r, ops::kDepthToSpaceGradOp, &exec::MakeKernel<DepthSpaceCuda>, {}, exec::kInternalDomain);
}

}  // namespace onnxamp::cuda::tensor_ops
