// InstanceNormalization (CPU), opsets 6-23. X is [N, C, D1..Dk]; each (sample, channel) is normalised over its
// positions: Y = scale[c] * (X - mean) / sqrt(var + epsilon) + B[c]. Statistics accumulate in float (double for
// double X).
#include <vector>

#include "runtime/executor/kernel.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/common/reduce.h"
#include "runtime/ops/common/reduce_norm.h"
#include "runtime/ops/group_norm/group_norm.h"

namespace onnxamp::ops {
namespace {

class InstanceNormCpu : public exec::OpKernel {
 public:
  InstanceNormCpu(const exec::KernelInfo& info, Status* st) { *st = ParseGroupNormSpec(info, true, &spec_); }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    ONNXAMP_ASSIGN_OR_RETURN(const GroupNormShape shape, ResolveGroupNormShape(spec_, x));
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<double> scale,
                             reduce::ReadParam(ctx.input(1), shape.param_count, spec_.scale_name()));
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<double> bias,
                             reduce::ReadParam(ctx.input(2), shape.param_count, spec_.bias_name()));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), x->dims()));
    return DispatchFloat(x->dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using A = reduce::NormAcc<T>;
      const std::vector<A> s(scale.begin(), scale.end()), b(bias.begin(), bias.end());
      reduce::GroupNormalize<T, A>(x->values<T>().data(), y->mutable_values<T>().data(), shape.batch, shape.groups, 1,
                                   shape.run, s, b, spec_.epsilon, ctx.threads());
      return Status::Ok();
    });
  }

 private:
  GroupNormSpec spec_;
};

}  // namespace

void RegisterInstanceNormKernels(exec::KernelRegistry& r) {
  using exec::Device;
  const std::vector<DType> types = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64};
  r.Register({"InstanceNormalization", "", 6, 23, Device::kCpu, types, 0, &exec::MakeKernel<InstanceNormCpu>});
}

}  // namespace onnxamp::ops
