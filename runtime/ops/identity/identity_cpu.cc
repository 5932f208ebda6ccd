// Identity (CPU): copies its input, any element type (strings included).
#include <cstring>

#include "runtime/executor/kernel.h"

namespace onnxamp::ops {
namespace {

class IdentityCpu : public exec::OpKernel {
 public:
  IdentityCpu(const exec::KernelInfo&, Status*) {}

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    if (!x) return InvalidArgument("input 0 is missing");
    // A copy of the tensor object shares x's bytes (copy on write), so this costs no memcpy.
    return ctx.SetOutput(0, *x);
  }
};

}  // namespace

void RegisterIdentityKernels(exec::KernelRegistry& r) {
  r.Register({"Identity", "", 1, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<IdentityCpu>});
}

}  // namespace onnxamp::ops
