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
#include "runtime/ops/group_norm/group_norm.h"

namespace onnxamp::ops {
namespace {

class GroupNormCpu : public exec::OpKernel {
 public:
  GroupNormCpu(const exec::KernelInfo& info, Status* st) { *st = ParseGroupNormSpec(info, false, &spec_); }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    ONNXAMP_ASSIGN_OR_RETURN(const GroupNormShape shape, ResolveGroupNormShape(spec_, x));
    const int64_t channels = shape.channels, groups = shape.groups, cpg = shape.channels_per_group;
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<double> scale,
                             reduce::ReadParam(ctx.input(1), shape.param_count, spec_.scale_name()));
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<double> bias,
                             reduce::ReadParam(ctx.input(2), shape.param_count, spec_.bias_name()));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), x->dims()));
    return DispatchFloat(x->dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using A = reduce::NormAcc<T>;
      std::vector<A> s(static_cast<size_t>(channels)), b(s.size());
      for (int64_t c = 0; c < channels; ++c) {
        const int64_t p = spec_.per_channel ? c : c / cpg;
        s[c] = static_cast<A>(scale[p]);
        b[c] = static_cast<A>(bias[p]);
      }
      reduce::GroupNormalize<T, A>(x->values<T>().data(), y->mutable_values<T>().data(), shape.batch, groups, cpg,
                                   shape.run, s, b, spec_.epsilon, ctx.threads());
      return Status::Ok();
    });
  }

 private:
  GroupNormSpec spec_;
};

}  // namespace

void RegisterGroupNormKernels(exec::KernelRegistry& r) {
  using exec::Device;
  const std::vector<DType> types = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64};
  r.Register({"GroupNormalization", "", 18, 23, Device::kCpu, types, 0, &exec::MakeKernel<GroupNormCpu>});
}

}  // namespace onnxamp::ops
