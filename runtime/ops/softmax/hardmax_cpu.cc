// Hardmax (CPU, opsets 1-25): 1 at the first maximum along the axis, 0 elsewhere; NaN counts as the maximum (the
// first NaN wins), as numpy's argmax (the ONNX reference) and PyTorch's have it. Axis semantics as Softmax's
// (softmax.h): before opset 13 the input is coerced to 2-D at `axis` (default 1), from 13 one axis (default -1). Float
// types.
#include <vector>

#include "runtime/executor/kernel.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/softmax/softmax.h"

namespace onnxamp::ops {
namespace {

class HardmaxCpu : public exec::OpKernel {
 public:
  HardmaxCpu(const exec::KernelInfo& info, Status* st) { *st = ParseSoftmaxSpec(info, &spec_); }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    ONNXAMP_ASSIGN_OR_RETURN(const reduce::AxisView v, ResolveSoftmaxView(spec_, x));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), x->dims()));
    return DispatchFloat(x->dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const T* px = x->values<T>().data();
      T* py = y->mutable_values<T>().data();
      for (int64_t o = 0; o < v.outer; ++o) {
        for (int64_t i = 0; i < v.inner; ++i) {
          const int64_t base = o * v.n * v.inner + i;
          int64_t best = 0;
          for (int64_t k = 1; k < v.n; ++k) {
            const auto cur = Load<T>(px[base + k * v.inner]), top = Load<T>(px[base + best * v.inner]);
            if (top == top && (cur > top || cur != cur)) best = k;  // NaN is the maximum, the first one wins
          }
          for (int64_t k = 0; k < v.n; ++k) {
            py[base + k * v.inner] = Store<T>(static_cast<ComputeType<T>>(k == best ? 1 : 0));
          }
        }
      }
      return Status::Ok();
    });
  }

 private:
  SoftmaxSpec spec_;
};

}  // namespace

void RegisterHardmaxKernels(exec::KernelRegistry& r) {
  const std::vector<DType> types = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64};
  r.Register({"Hardmax", "", 1, 25, exec::Device::kCpu, types, 0, &exec::MakeKernel<HardmaxCpu>});
}

}  // namespace onnxamp::ops
