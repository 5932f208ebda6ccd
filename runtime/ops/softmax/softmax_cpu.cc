// Softmax and LogSoftmax (CPU). Before opset 13 the input is coerced to 2-D at `axis` (default 1) and normalised
// over everything from `axis` on; from opset 13 it is normalised along the single axis `axis` (default -1).
// Numerically stable (the maximum is subtracted first); fp16/bf16 compute in float.
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/common/reduce.h"
#include "runtime/ops/common/reduce_softmax.h"

namespace onnxamp::ops {
namespace {

template <bool kLog>
class SoftmaxCpu : public exec::OpKernel {
 public:
  SoftmaxCpu(const exec::KernelInfo& info, Status* st) : coerce_2d_(info.opset < 13) {
    axis_ = info.node.GetInt("axis", coerce_2d_ ? 1 : -1);
    if (auto rank = reduce::DeclaredRank(info.node, 0)) {
      Status s = CheckAxis(*rank).status();
      if (!s.ok()) *st = s.WithContext("attribute 'axis'");
    }
  }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    if (!x) return InvalidArgument("input 0 (input) is missing");
    StatusOr<int64_t> axis = CheckAxis(x->rank());
    if (!axis.ok()) return axis.status().WithContext("attribute 'axis'");
    reduce::AxisView v;
    if (coerce_2d_) {
      v.outer = reduce::Product(x->dims(), 0, *axis);
      v.n = reduce::Product(x->dims(), *axis);
    } else {
      v = reduce::ViewAround(x->dims(), *axis);
    }
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), x->dims()));
    return DispatchFloat(x->dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      reduce::SoftmaxForward(x->values<T>().data(), y->mutable_values<T>().data(), v.outer, v.n, v.inner, kLog,
                             ctx.threads());
      return Status::Ok();
    });
  }

 private:
  // The axis as an index. Coerced to 2-D, `axis` == rank is accepted too (every row has one element).
  StatusOr<int64_t> CheckAxis(int64_t rank) const {
    if (coerce_2d_ && axis_ == rank) return axis_;
    return reduce::NormalizeAxis(axis_, rank);
  }

  bool coerce_2d_;
  int64_t axis_ = -1;
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
