// Where (CPU): out = condition ? X : Y with numpy broadcasting over the three inputs; any element type (strings
// included). Numeric elements are copied as raw bits, so one loop per element size serves every type.
#include <cstring>

#include "runtime/executor/kernel.h"
#include "runtime/ops/common/elementwise.h"
#include "runtime/ops/where/where.h"

namespace onnxamp::ops {
namespace {

template <typename U>
void SelectBits(exec::ThreadPool& pool, const BroadcastPlan& plan, const ir::Tensor& c, const ir::Tensor& x,
                const ir::Tensor& y, ir::Tensor& out) {
  TernaryBroadcast(pool, plan, c.values<bool>().data(), reinterpret_cast<const U*>(x.data()),
                   reinterpret_cast<const U*>(y.data()), reinterpret_cast<U*>(out.mutable_data()),
                   [](bool cond, U a, U b) { return cond ? a : b; });
}

class WhereCpu : public exec::OpKernel {
 public:
  WhereCpu(const exec::KernelInfo&, Status*) {}

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* c = ctx.input(0);
    const ir::Tensor* x = ctx.input(1);
    const ir::Tensor* y = ctx.input(2);
    ONNXAMP_ASSIGN_OR_RETURN(BroadcastPlan plan, PlanWhere(c, x, y));
    if (x->dtype() == DType::kString) {
      ir::Tensor out(DType::kString, plan.output_dims());
      const bool* pc = c->values<bool>().data();
      for (int64_t i = 0; i < plan.num_elements(); ++i) {
        const bool take_x = pc[BroadcastInputOffset(c->dims(), plan.output_dims(), i)];
        const ir::Tensor& src = take_x ? *x : *y;
        out.mutable_strings()[i] = src.strings()[BroadcastInputOffset(src.dims(), plan.output_dims(), i)];
      }
      return ctx.SetOutput(0, std::move(out));
    }
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * out, ctx.AllocateOutput(0, x->dtype(), plan.output_dims()));
    if (plan.num_elements() == 0) return Status::Ok();
    switch (DTypeBits(x->dtype())) {
      case 8:
        SelectBits<uint8_t>(ctx.threads(), plan, *c, *x, *y, *out);
        break;
      case 16:
        SelectBits<uint16_t>(ctx.threads(), plan, *c, *x, *y, *out);
        break;
      case 32:
        SelectBits<uint32_t>(ctx.threads(), plan, *c, *x, *y, *out);
        break;
      case 64:
        SelectBits<uint64_t>(ctx.threads(), plan, *c, *x, *y, *out);
        break;
      default:
        return Unimplemented("element type ", DTypeName(x->dtype()), " is not supported");
    }
    return Status::Ok();
  }
};

}  // namespace

void RegisterWhereKernels(exec::KernelRegistry& r) {
  // 9-15, and 16-23 which only adds bfloat16.
  r.Register({"Where", "", 9, 23, exec::Device::kCpu, {}, 0, &exec::MakeKernel<WhereCpu>});
}

}  // namespace onnxamp::ops
