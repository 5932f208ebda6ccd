// ReluGrad (CPU, com.onnxamp): dX = dY where Y > 0, else 0 (contract in runtime/ops/gradient_ops.h).
#include <cstdint>
#include <type_traits>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/gradient_ops.h"

namespace onnxamp::ops {
namespace {

class ReluGradCpu : public exec::OpKernel {
 public:
  ReluGradCpu(const exec::KernelInfo&, Status*) {}

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* dy = ctx.input(0);
    const ir::Tensor* y = ctx.input(1);
    if (!dy || !y) return InvalidArgument("input ", dy ? 1 : 0, " is missing");
    if (dy->dtype() != y->dtype() || dy->dims() != y->dims()) {
      return InvalidArgument("dY and Y must have the same type and shape");
    }
    return DispatchFloat(dy->dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * dx, ctx.AllocateOutput(0, dy->dtype(), dy->dims()));
      const auto g = dy->values<T>();
      const auto v = y->values<T>();
      auto out = dx->mutable_values<T>();
      const int64_t n = static_cast<int64_t>(out.size());
      ctx.threads().ParallelFor(n, 1 << 14, [&](int64_t begin, int64_t end) {
        if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
          // Branch-free over raw pointers, a form the compiler vectorizes (a compare and a mask).
          const T* __restrict gp = g.data();
          const T* __restrict vp = v.data();
          T* __restrict op = out.data();
          for (int64_t i = begin; i < end; ++i) {
            const T gi = gp[i];  // loaded unconditionally, so the select needs no branch
            op[i] = vp[i] > T(0) ? gi : T(0);
          }
        } else {
          // fp16/bf16 compared on their bit patterns, not converted to float (a branchy conversion per element):
          // Y > 0 exactly when the sign is clear and the bits are neither zero nor a NaN, i.e. they lie in
          // [1, +inf]. bits - 1 wraps zero to 0xFFFF, so that is one unsigned compare; its result, widened to a
          // mask, selects dY's bits or +0 (Store<T>(0)), which the compiler vectorizes.
          constexpr uint16_t kPosInf = std::is_same_v<T, Float16> ? 0x7C00 : 0x7F80;
          const T* __restrict gp = g.data();
          const T* __restrict vp = v.data();
          T* __restrict op = out.data();
          for (int64_t i = begin; i < end; ++i) {
            const bool positive = static_cast<uint16_t>(vp[i].bits - 1u) < kPosInf;
            op[i].bits = static_cast<uint16_t>(gp[i].bits & (0u - static_cast<unsigned>(positive)));
          }
        }
      });
      return Status::Ok();
    });
  }
};

}  // namespace

void RegisterReluGradKernels(exec::KernelRegistry& r) {
  r.Register({kReluGradOp,
              exec::kInternalDomain,
              1,
              1,
              exec::Device::kCpu,
              {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64},
              0,
              &exec::MakeKernel<ReluGradCpu>});
}

}  // namespace onnxamp::ops
