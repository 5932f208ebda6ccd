// The gradient ops of the norm_reduce CUDA family (com.onnxamp, contracts in runtime/ops/gradient_ops.h):
// SoftmaxGrad / LogSoftmaxGrad, SoftmaxCrossEntropyLossGrad / NegativeLogLikelihoodLossGrad, SumToShape (on the
// reduce engine's fixed-order sum) and ReduceProdGrad. Attributes, shapes and messages are the CPU kernels'
// (runtime/ops/softmax/, loss/, reduce/); the device work is in softmax_grad_kernels.cu, reduce_grad_kernels.cu and
// reduce_kernels.cu. Labels and weights stay on the device, so a label outside [0, C) that is not ignore_index gives
// NaN gradients at its position instead of the CPU's error (finding it would need a host synchronisation).
#include <cuda_runtime_api.h>

#include <vector>

#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/ops/norm_reduce/grad_launch.h"
#include "runtime/cuda/ops/norm_reduce/norm_reduce_host.h"
#include "runtime/cuda/ops/norm_reduce/norm_reduce_launch.h"
#include "runtime/cuda/ops/norm_reduce/reduce_layout.h"
#include "runtime/cuda/ops/register_like_cpu.h"
#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/broadcast.h"
#include "runtime/ops/common/reduce.h"
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/loss/loss.h"
#include "runtime/ops/reduce/reduce_spec.h"
#include "runtime/ops/softmax/softmax.h"

namespace onnxamp::cuda::norm_reduce {
namespace {

// ---- SoftmaxGrad / LogSoftmaxGrad ------------------------------------------------------------------------------

template <bool kLog>
class SoftmaxGradCuda : public exec::OpKernel {
 public:
  SoftmaxGradCuda(const exec::KernelInfo& info, Status* st) {
    const int64_t legacy = info.node.GetInt("legacy", 0);
    if (legacy != 0 && legacy != 1) {
      *st = InvalidArgument("attribute 'legacy' must be 0 or 1, got ", legacy);
      return;
    }
    // The forward's attribute parsing, at an opset with the same semantics: 2-D coercion before 13.
    *st = ops::ParseSoftmaxSpec(exec::KernelInfo{info.node, legacy ? 12 : 13, info.device}, &spec_);
  }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* dy, ops::RequireInput(ctx, 0, "dY"));
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* y, ops::RequireInput(ctx, 1, "Y"));
    if (y->dtype() != dy->dtype() || y->dims() != dy->dims()) {
      return InvalidArgument(ops::InputLabel(ctx, 1, "Y"), " is ", DTypeName(y->dtype()), " ",
                             ops::ShapeToString(y->dims()), "; expected dY's type and shape, ", DTypeName(dy->dtype()),
                             " ", ops::ShapeToString(dy->dims()));
    }
    ONNXAMP_ASSIGN_OR_RETURN(const ops::reduce::AxisView v, ops::ResolveSoftmaxView(spec_, dy));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * dx, ctx.AllocateOutput(0, dy->dtype(), dy->dims()));
    return LaunchSoftmaxGrad(kLog, dy->dtype(), dy->data(), y->data(), dx->mutable_data(), v.outer, v.n, v.inner,
                             StreamOf(ctx));
  }

 private:
  ops::SoftmaxSpec spec_;
};

// ---- SoftmaxCrossEntropyLossGrad / NegativeLogLikelihoodLossGrad ------------------------------------------------

template <bool kSoftmax>
class LossGradCuda : public exec::OpKernel {
 public:
  LossGradCuda(const exec::KernelInfo& info, Status* st) { *st = ops::ParseLossSpec(info, kSoftmax, &spec_); }

  Status Compute(exec::KernelContext& ctx) const override {
    const char* x_role = kSoftmax ? "log_prob" : "input";
    const char* label_role = kSoftmax ? "labels" : "target";
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* dloss, ops::RequireInput(ctx, 0, "dLoss"));
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, ops::RequireInput(ctx, 1, x_role));
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* labels, ops::RequireInput(ctx, 2, label_role));
    StatusOr<ops::LossShape> shape_or = ops::ResolveLossShape(spec_, x, labels);
    if (!shape_or.ok()) {
      // The forward's checks name the forward's inputs 0 and 1: these are inputs 1 and 2 here.
      return shape_or.status().WithContext(StrCat(ops::InputLabel(ctx, 1, x_role), " and ",
                                                  ops::InputLabel(ctx, 2, label_role), ", checked as the forward's"));
    }
    const ops::LossShape& shape = *shape_or;
    if (dloss->dtype() != x->dtype() || dloss->dims() != shape.loss_dims) {
      return InvalidArgument(ops::InputLabel(ctx, 0, "dLoss"), " is ", DTypeName(dloss->dtype()), " ",
                             ops::ShapeToString(dloss->dims()), "; expected ", DTypeName(x->dtype()), " ",
                             ops::ShapeToString(shape.loss_dims), " (the loss's type and shape)");
    }
    LossGradArgs a;
    const ir::Tensor* weights = ctx.input(3);
    ONNXAMP_RETURN_IF_ERROR(FillLossInputs(spec_, kSoftmax, shape, *x, *labels, weights,
                                           weights ? ops::InputLabel(ctx, 3, "weights") : "", &a));
    a.dloss = dloss->data();
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * dx, ctx.AllocateOutput(0, x->dtype(), x->dims()));
    a.dx = dx->mutable_data();
    return LaunchLossGrad(a, WorkspaceOf(ctx), StreamOf(ctx));
  }

 private:
  ops::LossSpec spec_;
};

// ---- SumToShape ------------------------------------------------------------------------------------------------

// G summed over the dims along which `shape` was broadcast: ReduceSum on the engine (float accumulation, double for
// double, in a fixed order), over the leading extra dims and the dims where the target has 1 and G does not.
size_t ZeroBytes(const ir::Tensor& t) {
  return static_cast<size_t>(t.num_elements()) * static_cast<size_t>(DTypeBits(t.dtype()) / 8);
}

class SumToShapeCuda : public exec::OpKernel {
 public:
  SumToShapeCuda(const exec::KernelInfo&, Status*) {}

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* g = ctx.input(0);
    ONNXAMP_ASSIGN_OR_RETURN(const ops::SumToShapePlan plan, ops::ResolveSumToShape(g, ctx.input(1)));
    if (plan.same) return ctx.SetOutput(0, *g);
    const std::vector<int64_t>& out_dims = plan.out_dims;
    const std::vector<int64_t>& in_dims = g->dims();
    const std::vector<bool>& reduced = plan.reduced;
    ONNXAMP_RETURN_IF_ERROR(CheckFloatParamType(g->dtype(), "SumToShape"));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, g->dtype(), out_dims));
    if (y->num_elements() == 0) return Status::Ok();
    const cudaStream_t stream = StreamOf(ctx);
    if (g->num_elements() == 0) {  // nothing to sum: zeros (all-zero bits in every float type)
      ONNXAMP_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(y->mutable_data(), 0, ZeroBytes(*y), stream), "SumToShape");
      return Status::Ok();
    }
    ReduceLayout layout;
    ONNXAMP_RETURN_IF_ERROR(MakeReduceLayout(in_dims, reduced, &layout));
    return LaunchReduce(ReduceKind::kSum, g->dtype(), g->data(), y->mutable_data(), layout, WorkspaceOf(ctx), stream);
  }
};

// ---- ReduceProdGrad --------------------------------------------------------------------------------------------

class ReduceProdGradCuda : public exec::OpKernel {
 public:
  ReduceProdGradCuda(const exec::KernelInfo&, Status*) {}

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* dy = ctx.input(0);
    const ir::Tensor* x = ctx.input(1);
    ONNXAMP_ASSIGN_OR_RETURN(const std::vector<bool> reduced, ops::ResolveReduceProdGrad(dy, x));
    const std::vector<int64_t>& xd = x->dims();
    ONNXAMP_RETURN_IF_ERROR(CheckFloatParamType(x->dtype(), "ReduceProdGrad"));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * dx, ctx.AllocateOutput(0, x->dtype(), xd));
    if (x->num_elements() == 0) return Status::Ok();
    const ops::reduce::MergedReduceDims merged = ops::reduce::MergeReduceDims(xd, reduced);
    ReduceProdGradArgs a;
    a.dtype = x->dtype();
    a.dy = dy->data();
    a.x = x->data();
    a.dx = dx->mutable_data();
    a.groups = merged.out_count;
    a.group_size = merged.reduce_count;
    for (size_t d = 0; d < merged.dims.size(); ++d) {
      const bool red = merged.reduced[d];
      int& r = red ? a.red_rank : a.kept_rank;
      if (r == kMaxMergedDims) {
        return Unimplemented("ReduceProdGrad over more than ", kMaxMergedDims, " separate dimension groups (X ",
                             ops::ShapeToString(xd), ")");
      }
      (red ? a.red_dims : a.kept_dims)[r] = merged.dims[d];
      (red ? a.red_strides : a.kept_strides)[r] = merged.strides[d];
      ++r;
    }
    return LaunchReduceProdGrad(a, WorkspaceOf(ctx), StreamOf(ctx));
  }
};

}  // namespace
}  // namespace onnxamp::cuda::norm_reduce

namespace onnxamp::cuda {

void RegisterCudaNormReduceGradKernels(exec::KernelRegistry& r) {
  const char* d = exec::kInternalDomain;
  RegisterLikeCpu(r, ops::kSoftmaxGradOp, &exec::MakeKernel<norm_reduce::SoftmaxGradCuda<false>>, {}, d);
  RegisterLikeCpu(r, ops::kLogSoftmaxGradOp, &exec::MakeKernel<norm_reduce::SoftmaxGradCuda<true>>, {}, d);
  RegisterLikeCpu(r, ops::kSoftmaxCrossEntropyLossGradOp, &exec::MakeKernel<norm_reduce::LossGradCuda<true>>, {}, d);
  RegisterLikeCpu(r, ops::kNegativeLogLikelihoodLossGradOp, &exec::MakeKernel<norm_reduce::LossGradCuda<false>>, {}, d);
  // The target shape (input 1) is read on the host.
  RegisterLikeCpu(r, ops::kSumToShapeOp, &exec::MakeKernel<norm_reduce::SumToShapeCuda>, {1}, d);
  RegisterLikeCpu(r, ops::kReduceProdGradOp, &exec::MakeKernel<norm_reduce::ReduceProdGradCuda>, {}, d);
}

}  // namespace onnxamp::cuda
