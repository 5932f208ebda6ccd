// LayerNormalizationGrad and GroupNormalizationGrad (com.onnxamp, runtime/ops/gradient_ops.h) on CUDA: attributes,
// shapes and parameter types checked as the CPU kernels check them (runtime/ops/layer_norm/layer_norm.h,
// group_norm/group_norm.h, reduce::ReadParam's messages), then the launchers of norm_grad_kernels.cu. Scale, Mean
// and InvStdDev stay on the device, read through a broadcast or flat view.
#include <string>
#include <vector>

#include "runtime/cuda/ops/norm_reduce/norm_grad_launch.h"
#include "runtime/cuda/ops/norm_reduce/norm_reduce_host.h"
#include "runtime/cuda/ops/register_like_cpu.h"
#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/reduce_norm.h"
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/group_norm/group_norm.h"
#include "runtime/ops/layer_norm/layer_norm.h"

namespace onnxamp::cuda::norm_reduce {
namespace {

using ops::InputLabel;

class LayerNormGradCuda : public exec::OpKernel {
 public:
  LayerNormGradCuda(const exec::KernelInfo& info, Status* st) { *st = ops::ParseLayerNormSpec(info, &spec_); }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ops::LayerNormGradInputs in, ops::ResolveLayerNormGradInputs(ctx, spec_));
    const ir::Tensor* x = in.x;
    const ir::Tensor* dy = in.dy;
    const ir::Tensor* scale = in.scale;
    const ir::Tensor* mean_t = in.mean;
    const ir::Tensor* inv_t = in.inv_std;
    const ops::LayerNormShape& shape = in.shape;
    const std::string scale_label = InputLabel(ctx, 2, "Scale");
    LayerNormGradArgs a;
    a.dtype = x->dtype();
    a.dy = dy->data();
    a.x = x->data();
    a.rows = shape.rows;
    a.cols = shape.cols;
    ONNXAMP_RETURN_IF_ERROR(CheckFlatParam(mean_t, shape.rows, InputLabel(ctx, 3, "Mean"), &a.mean));
    ONNXAMP_RETURN_IF_ERROR(CheckFlatParam(inv_t, shape.rows, InputLabel(ctx, 4, "InvStdDev"), &a.inv_std));
    // Scale broadcast over the normalised dims.
    const std::vector<int64_t> norm_dims(x->dims().begin() + shape.axis, x->dims().end());
    const int64_t rank = static_cast<int64_t>(norm_dims.size());
    if (rank > kMaxParamDims) {
      return Unimplemented(scale_label, ": normalising over ", rank, " dimensions; cuda takes at most ", kMaxParamDims);
    }
    const std::vector<int64_t> strides = ops::NormalisedBroadcastStrides(*scale, rank);
    a.scale.dtype = scale->dtype();
    a.scale.data = scale->data();
    a.scale.rank = static_cast<int>(rank);
    for (int64_t k = 0; k < rank; ++k) {
      a.scale.dims[k] = norm_dims[k];
      a.scale.strides[k] = strides[k];
    }
    a.scale_count = scale->num_elements();
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * dx, ctx.AllocateOutput(0, x->dtype(), x->dims()));
    a.dx = dx->mutable_data();
    if (ctx.output_requested(1)) {
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * dscale, ctx.AllocateOutput(1, scale->dtype(), scale->dims()));
      a.dscale = dscale->mutable_data();
    }
    if (ctx.output_requested(2)) {
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * dbias, ctx.AllocateOutput(2, scale->dtype(), scale->dims()));
      a.dbias = dbias->mutable_data();
    }
    return LaunchLayerNormGrad(a, WorkspaceOf(ctx), StreamOf(ctx));
  }

 private:
  ops::LayerNormSpec spec_;
};

class GroupNormGradCuda : public exec::OpKernel {
 public:
  GroupNormGradCuda(const exec::KernelInfo& info, Status* st) { *st = ops::ParseGroupNormGradSpec(info, &spec_); }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* dy = ctx.input(0);
    const ir::Tensor* x = ctx.input(1);
    ONNXAMP_ASSIGN_OR_RETURN(const ops::GroupNormShape shape, ops::ResolveGroupNormGradShape(spec_, dy, x));
    GroupNormGradArgs a;
    ONNXAMP_RETURN_IF_ERROR(CheckFlatParam(ctx.input(2), shape.param_count, "input 2 (scale)", &a.scale));
    a.dtype = x->dtype();
    a.dy = dy->data();
    a.x = x->data();
    a.batch = shape.batch;
    a.groups = shape.groups;
    a.channels_per_group = shape.channels_per_group;
    a.run = shape.run;
    a.per_channel = spec_.per_channel;
    a.param_count = shape.param_count;
    a.epsilon = spec_.epsilon;
    if (ctx.output_requested(0)) {
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * dx, ctx.AllocateOutput(0, x->dtype(), x->dims()));
      a.dx = dx->mutable_data();
    }
    for (size_t i = 1; i <= 2; ++i) {
      if (!ctx.output_requested(i)) continue;
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * out, ctx.AllocateOutput(i, x->dtype(), ctx.input(2)->dims()));
      (i == 1 ? a.dscale : a.dbias) = out->mutable_data();
    }
    return LaunchGroupNormGrad(a, WorkspaceOf(ctx), StreamOf(ctx));
  }

 private:
  ops::GroupNormSpec spec_;
};

}  // namespace
}  // namespace onnxamp::cuda::norm_reduce

namespace onnxamp::cuda {

void RegisterCudaNormGradKernels(exec::KernelRegistry& r) {
  RegisterLikeCpu(r, ops::kLayerNormalizationGradOp, &exec::MakeKernel<norm_reduce::LayerNormGradCuda>, {},
                  exec::kInternalDomain);
  RegisterLikeCpu(r, ops::kGroupNormalizationGradOp, &exec::MakeKernel<norm_reduce::GroupNormGradCuda>, {},
                  exec::kInternalDomain);
}

}  // namespace onnxamp::cuda
