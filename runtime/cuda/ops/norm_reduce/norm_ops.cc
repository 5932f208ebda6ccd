// LayerNormalization, GroupNormalization and InstanceNormalization on CUDA: attributes, shapes and parameter types
// checked by the helpers the CPU kernels use (runtime/ops/layer_norm/layer_norm.h, group_norm/group_norm.h), then the
// launchers of norm_kernels.cu. Scale and bias stay on the device and are read through a broadcast or
// group-to-channel view.
#include <string_view>
#include <vector>

#include "runtime/cuda/ops/norm_reduce/norm_reduce_host.h"
#include "runtime/cuda/ops/norm_reduce/norm_reduce_launch.h"
#include "runtime/cuda/ops/register_like_cpu.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/reduce.h"
#include "runtime/ops/common/reduce_norm.h"
#include "runtime/ops/group_norm/group_norm.h"
#include "runtime/ops/layer_norm/layer_norm.h"

namespace onnxamp::cuda::norm_reduce {
namespace {

// The view of LayerNormalization's Scale or B broadcast (NumPy rules, aligned at the back) to dims[first:] of X,
// refused (ops::CheckNormalisedBroadcast) when it does not broadcast or varies along an X dimension before `first`.
Status BroadcastView(const ir::Tensor* t, const std::vector<int64_t>& x_dims, int64_t first, std::string_view what,
                     ParamView* view) {
  const std::vector<int64_t> dims(x_dims.begin() + first, x_dims.end());
  const int64_t rank = static_cast<int64_t>(dims.size());
  ONNXAMP_RETURN_IF_ERROR(ops::CheckNormalisedBroadcast(*t, x_dims, first, what));
  ONNXAMP_RETURN_IF_ERROR(CheckFloatParamType(t->dtype(), what));
  if (rank > kMaxParamDims) {
    return Unimplemented(what, ": normalising over ", rank, " dimensions; cuda takes at most ", kMaxParamDims);
  }
  view->dtype = t->dtype();
  view->data = t->data();
  view->rank = static_cast<int>(rank);
  const std::vector<int64_t> strides = ops::NormalisedBroadcastStrides(*t, rank);
  for (int64_t k = 0; k < rank; ++k) {
    view->dims[k] = dims[k];
    view->strides[k] = strides[k];
  }
  return Status::Ok();
}

class LayerNormCuda : public exec::OpKernel {
 public:
  LayerNormCuda(const exec::KernelInfo& info, Status* st) { *st = ops::ParseLayerNormSpec(info, &spec_); }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    ONNXAMP_ASSIGN_OR_RETURN(const ops::LayerNormShape shape, ops::ResolveLayerNormShape(spec_, x, ctx.input(1)));
    const int64_t axis = shape.axis, rows = shape.rows, cols = shape.cols;
    LayerNormArgs a;
    a.dtype = x->dtype();
    a.x = x->data();
    a.rows = rows;
    a.cols = cols;
    ONNXAMP_RETURN_IF_ERROR(BroadcastView(ctx.input(1), x->dims(), axis, "input 1 (Scale)", &a.scale));
    if (const ir::Tensor* b = ctx.input(2)) {
      a.has_bias = true;
      ONNXAMP_RETURN_IF_ERROR(BroadcastView(b, x->dims(), axis, "input 2 (B)", &a.bias));
    }
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), x->dims()));
    a.y = y->mutable_data();
    std::vector<int64_t> stat_dims = x->dims();
    for (int64_t d = axis; d < x->rank(); ++d) stat_dims[d] = 1;
    if (ctx.output_requested(1)) {
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * mean, ctx.AllocateOutput(1, spec_.stash, stat_dims));
      a.mean = mean->mutable_data();
    }
    if (ctx.output_requested(2)) {
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * inv, ctx.AllocateOutput(2, spec_.stash, stat_dims));
      a.inv_std = inv->mutable_data();
    }
    a.epsilon = spec_.epsilon;
    a.stats_double = spec_.stash == DType::kFloat64;
    a.stat_dtype = spec_.stash;
    return LaunchLayerNorm(a, WorkspaceOf(ctx), StreamOf(ctx));
  }

 private:
  ops::LayerNormSpec spec_;
};

// GroupNormalization (groups from the attribute) and InstanceNormalization (a group per channel).
template <bool kInstance>
class GroupNormCuda : public exec::OpKernel {
 public:
  GroupNormCuda(const exec::KernelInfo& info, Status* st) { *st = ops::ParseGroupNormSpec(info, kInstance, &spec_); }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    ONNXAMP_ASSIGN_OR_RETURN(const ops::GroupNormShape shape, ops::ResolveGroupNormShape(spec_, x));
    GroupNormArgs a;
    a.dtype = x->dtype();
    a.x = x->data();
    a.batch = shape.batch;
    a.groups = shape.groups;
    a.channels_per_group = shape.channels_per_group;
    a.run = shape.run;
    a.epsilon = spec_.epsilon;
    ONNXAMP_RETURN_IF_ERROR(CheckFlatParam(ctx.input(1), shape.param_count, spec_.scale_name(), &a.scale));
    ONNXAMP_RETURN_IF_ERROR(CheckFlatParam(ctx.input(2), shape.param_count, spec_.bias_name(), &a.bias));
    if (!spec_.per_channel) {
      // Per-group parameters (opsets 18-20) expanded to channels: channel c reads element c / channels_per_group.
      for (ParamView* v : {&a.scale, &a.bias}) {
        v->rank = 2;
        v->dims[0] = shape.groups;
        v->dims[1] = a.channels_per_group;
        v->strides[0] = 1;
        v->strides[1] = 0;
      }
    }
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), x->dims()));
    a.y = y->mutable_data();
    if (x->num_elements() == 0) return Status::Ok();
    return LaunchGroupNorm(a, WorkspaceOf(ctx), StreamOf(ctx));
  }

 private:
  ops::GroupNormSpec spec_;
};

}  // namespace

void RegisterCudaNormKernels(exec::KernelRegistry& r) {
  RegisterLikeCpu(r, "LayerNormalization", &exec::MakeKernel<LayerNormCuda>);
  RegisterLikeCpu(r, "GroupNormalization", &exec::MakeKernel<GroupNormCuda<false>>);
  RegisterLikeCpu(r, "InstanceNormalization", &exec::MakeKernel<GroupNormCuda<true>>);
}

}  // namespace onnxamp::cuda::norm_reduce
