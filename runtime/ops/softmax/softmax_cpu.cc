// Softmax and LogSoftmax (CPU). Before opset 13 the input is coerced to 2-D at `axis` (default 1) and normalised
// over everything from `axis` on; from opset 13 it is normalised along the single axis `axis` (default -1).
// Numerically stable (the maximum is subtracted first); fp16/bf16 compute in float.
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/common/reduce.h"
#include "runtime/ops/common/reduce_softmax.h"
#include "runtime/ops/softmax/softmax.h"

namespace onnxamp::ops {
namespace {

template <bool kLog>
class SoftmaxCpu : public exec::OpKernel {
 public:
  SoftmaxCpu(const exec::KernelInfo& info, Status* st) { *st = ParseSoftmaxSpec(info, &spec_); }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    ONNXAMP_ASSIGN_OR_RETURN(const reduce::AxisView v, ResolveSoftmaxView(spec_, x));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), x->dims()));
    return DispatchFloat(x->dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      reduce::SoftmaxForward(x->values<T>().data(), y->mutable_values<T>().data(), v.outer, v.n, v.inner, kLog,
                             ctx.threads());
      return Status::Ok();
    });
  }

 private:
  SoftmaxSpec spec_;
};

}  // namespace

void RegisterSoftmaxKernels(exec::KernelRegistry& r) {
  using exec::Device;
  const std::vector<DType> types = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64};
  // One kernel each for opsets 1-23; it switches from 2-D coercion to single-axis semantics at opset 13.
  r.Register({"Softmax", "", 1, 23, Device::kCpu, types, 0, &exec::MakeKernel<SoftmaxCpu<false>>});
  r.Register({"LogSoftmax", "", 1, 23, Device::kCpu, types, 0, &exec::MakeKernel<SoftmaxCpu<true>>});
}

}  // namespace onnxamp::ops
