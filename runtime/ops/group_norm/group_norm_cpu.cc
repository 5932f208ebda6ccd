// GroupNormalization (CPU), opsets 18-23. X is [N, C, D1..Dk]; the C channels form `num_groups` groups, and each
// (sample, group) is normalised over its channels and positions: Y = (X - mean) / sqrt(var + epsilon) * scale + bias.
// The semantics changed at opset 21: opsets 18-20 take scale and bias per group ([num_groups]); opset 21 takes them
// per channel ([C]) and adds `stash_type` (only float statistics, the default, are accepted). Statistics accumulate
// in float (double for double X).
#include <vector>

#include "runtime/executor/kernel.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/common/reduce.h"
#include "runtime/ops/common/reduce_norm.h"

namespace onnxamp::ops {
namespace {

class GroupNormCpu : public exec::OpKernel {
 public:
  GroupNormCpu(const exec::KernelInfo& info, Status* st) : per_channel_(info.opset >= 21) {
    const ir::Node& node = info.node;
    epsilon_ = node.GetFloat("epsilon", 1e-5f);
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
    if (!x) return InvalidArgument("input 0 (X) is missing");
    if (x->rank() < 2) {
      return InvalidArgument("input 0 (X): expected rank >= 2 ([N, C, ...]), got shape ",
                             reduce::DimsToString(x->dims()));
    }
    const int64_t channels = x->dims()[1];
    if (channels % groups_ != 0) {
      return InvalidArgument("input 0 (X): channel count ", channels, " is not a multiple of attribute 'num_groups' ",
                             groups_);
    }
    const int64_t cpg = channels / groups_;
    const int64_t param_count = per_channel_ ? channels : groups_;
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<double> scale,
                             reduce::ReadParam(ctx.input(1), param_count, "input 1 (scale)"));
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<double> bias, reduce::ReadParam(ctx.input(2), param_count, "input 2 (bias)"));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), x->dims()));
    return DispatchFloat(x->dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using A = reduce::NormAcc<T>;
      std::vector<A> s(static_cast<size_t>(channels)), b(s.size());
      for (int64_t c = 0; c < channels; ++c) {
        const int64_t p = per_channel_ ? c : c / cpg;
        s[c] = static_cast<A>(scale[p]);
        b[c] = static_cast<A>(bias[p]);
      }
      reduce::GroupNormalize<T, A>(x->values<T>().data(), y->mutable_values<T>().data(), x->dims()[0], groups_, cpg,
                                   reduce::Product(x->dims(), 2), s, b, epsilon_, ctx.threads());
      return Status::Ok();
    });
  }

 private:
  bool per_channel_;
  float epsilon_ = 1e-5f;
  int64_t groups_ = 0;
};

}  // namespace

void RegisterGroupNormKernels(exec::KernelRegistry& r) {
  using exec::Device;
  const std::vector<DType> types = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64};
  r.Register({"GroupNormalization", "", 18, 23, Device::kCpu, types, 0, &exec::MakeKernel<GroupNormCpu>});
}

}  // namespace onnxamp::ops
