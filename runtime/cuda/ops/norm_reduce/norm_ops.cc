// LayerNormalization, GroupNormalization and InstanceNormalization on CUDA: attributes, shapes and parameter types
// checked as the CPU kernels do (runtime/ops/layer_norm, group_norm, instance_norm), then the launchers of
// norm_kernels.cu. Scale and bias stay on the device and are read through a broadcast or group-to-channel view.
#include <string_view>
#include <vector>

#include "runtime/cuda/ops/norm_reduce/norm_reduce_host.h"
#include "runtime/cuda/ops/norm_reduce/norm_reduce_launch.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/reduce.h"
#include "runtime/ops/common/reduce_norm.h"

namespace onnxamp::cuda::norm_reduce {
namespace {

using ops::reduce::DimsToString;

// The view of LayerNormalization's Scale or B broadcast (NumPy rules, aligned at the back) to dims[first:] of X,
// refused as the CPU's BroadcastParam does when it does not broadcast or varies along an X dimension before `first`.
Status BroadcastView(const ir::Tensor* t, const std::vector<int64_t>& x_dims, int64_t first, std::string_view what,
                     ParamView* view) {
  const std::vector<int64_t> dims(x_dims.begin() + first, x_dims.end());
  const int64_t rank = static_cast<int64_t>(dims.size());
  const int64_t t_rank = t->rank();
  bool ok = t_rank <= static_cast<int64_t>(x_dims.size());
  for (int64_t k = 0; ok && k < t_rank; ++k) {
    const int64_t td = t->dims()[t_rank - 1 - k];
    const int64_t xd = x_dims[x_dims.size() - 1 - k];
    ok = td == 1 || (k < rank && td == xd);
  }
  if (!ok) {
    return InvalidArgument(what, ": shape ", DimsToString(t->dims()), " does not broadcast to the normalised shape ",
                           DimsToString(dims));
  }
  ONNXAMP_RETURN_IF_ERROR(CheckFloatParamType(t->dtype(), what));
  if (rank > kMaxParamDims) {
    return Unimplemented(what, ": normalising over ", rank, " dimensions; cuda takes at most ", kMaxParamDims);
  }
  view->dtype = t->dtype();
  view->data = t->data();
  view->rank = static_cast<int>(rank);
  int64_t s = 1;
  for (int64_t k = 0; k < rank; ++k) {
    view->dims[k] = dims[k];
    view->strides[k] = 0;
  }
  for (int64_t k = 0; k < t_rank && k < rank; ++k) {
    const int64_t td = t->dims()[t_rank - 1 - k];
    view->strides[rank - 1 - k] = td == 1 ? 0 : s;
    s *= td;
  }
  return Status::Ok();
}

class LayerNormCuda : public exec::OpKernel {
 public:
  LayerNormCuda(const exec::KernelInfo& info, Status* st) {
    const ir::Node& node = info.node;
    axis_ = node.GetInt("axis", -1);
    epsilon_ = node.GetFloat("epsilon", 1e-5f);
    const int64_t stash = node.GetInt("stash_type", 1);
    switch (stash) {
      case 1:
        stash_ = DType::kFloat32;
        break;
      case 10:
        stash_ = DType::kFloat16;
        break;
      case 11:
        stash_ = DType::kFloat64;
        break;
      case 16:
        stash_ = DType::kBFloat16;
        break;
      default:
        *st = InvalidArgument("attribute 'stash_type' must be a float type code (1, 10, 11, 16), got ", stash);
        return;
    }
    if (auto rank = ops::reduce::DeclaredRank(node, 0)) {
      Status s = ops::reduce::NormalizeAxis(axis_, *rank).status();
      if (!s.ok()) *st = s.WithContext("attribute 'axis'");
    }
  }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    if (!x) return InvalidArgument("input 0 (X) is missing");
    if (!ctx.input(1)) return InvalidArgument("input 1 (Scale) is missing");
    StatusOr<int64_t> axis_or = ops::reduce::NormalizeAxis(axis_, x->rank());
    if (!axis_or.ok()) return axis_or.status().WithContext("attribute 'axis'");
    const int64_t axis = *axis_or;
    LayerNormArgs a;
    a.dtype = x->dtype();
    a.x = x->data();
    a.rows = ops::reduce::Product(x->dims(), 0, axis);
    a.cols = ops::reduce::Product(x->dims(), axis);
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
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * mean, ctx.AllocateOutput(1, stash_, stat_dims));
      a.mean = mean->mutable_data();
    }
    if (ctx.output_requested(2)) {
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * inv, ctx.AllocateOutput(2, stash_, stat_dims));
      a.inv_std = inv->mutable_data();
    }
    a.epsilon = epsilon_;
    a.stats_double = stash_ == DType::kFloat64;
    a.stat_dtype = stash_;
    return LaunchLayerNorm(a, WorkspaceOf(ctx), StreamOf(ctx));
  }

 private:
  int64_t axis_ = -1;
  float epsilon_ = 1e-5f;
  DType stash_ = DType::kFloat32;
};

// GroupNormalization (groups from the attribute) and InstanceNormalization (a group per channel).
template <bool kInstance>
class GroupNormCuda : public exec::OpKernel {
 public:
  GroupNormCuda(const exec::KernelInfo& info, Status* st) : per_channel_(kInstance || info.opset >= 21) {
    const ir::Node& node = info.node;
    epsilon_ = node.GetFloat("epsilon", 1e-5f);
    if (kInstance) return;
    groups_ = node.GetInt("num_groups", 0);
    if (groups_ <= 0) {
      *st = InvalidArgument("attribute 'num_groups' must be given and positive, got ", groups_);
      return;
    }
    if (per_channel_) {
      const int64_t stash = node.GetInt("stash_type", 1);
      if (stash != 1) {
        *st = Unimplemented("attribute 'stash_type' = ", stash, " is not supported (1: float)");
        return;
      }
    }
  }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    if (!x) return InvalidArgument(kInstance ? "input 0 (input) is missing" : "input 0 (X) is missing");
    if (x->rank() < 2) {
      return InvalidArgument(kInstance ? "input 0 (input)" : "input 0 (X)",
                             ": expected rank >= 2 ([N, C, ...]), got shape ", DimsToString(x->dims()));
    }
    const int64_t channels = x->dims()[1];
    const int64_t groups = kInstance ? channels : groups_;
    if (!kInstance && channels % groups != 0) {
      return InvalidArgument("input 0 (X): channel count ", channels, " is not a multiple of attribute 'num_groups' ",
                             groups);
    }
    GroupNormArgs a;
    a.dtype = x->dtype();
    a.x = x->data();
    a.batch = x->dims()[0];
    a.groups = groups;
    a.channels_per_group = kInstance ? 1 : channels / groups;
    a.run = ops::reduce::Product(x->dims(), 2);
    a.epsilon = epsilon_;
    const int64_t param_count = per_channel_ ? channels : groups;
    ONNXAMP_RETURN_IF_ERROR(CheckFlatParam(ctx.input(1), param_count, "input 1 (scale)", &a.scale));
    ONNXAMP_RETURN_IF_ERROR(
        CheckFlatParam(ctx.input(2), param_count, kInstance ? "input 2 (B)" : "input 2 (bias)", &a.bias));
    if (!per_channel_) {
      // Per-group parameters (opsets 18-20) expanded to channels: channel c reads element c / channels_per_group.
      for (ParamView* v : {&a.scale, &a.bias}) {
        v->rank = 2;
        v->dims[0] = groups;
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
  bool per_channel_;
  float epsilon_ = 1e-5f;
  int64_t groups_ = 0;
};

}  // namespace

void RegisterCudaNormKernels(exec::KernelRegistry& r) {
  using exec::Device;
  const std::vector<DType> types = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64};
  r.Register({"LayerNormalization", "", 17, 23, Device::kCuda, types, 0, &exec::MakeKernel<LayerNormCuda>});
  r.Register({"GroupNormalization", "", 18, 23, Device::kCuda, types, 0, &exec::MakeKernel<GroupNormCuda<false>>});
  r.Register({"InstanceNormalization", "", 6, 23, Device::kCuda, types, 0, &exec::MakeKernel<GroupNormCuda<true>>});
}

}  // namespace onnxamp::cuda::norm_reduce
