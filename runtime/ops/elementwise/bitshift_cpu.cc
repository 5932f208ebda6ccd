// BitShift (CPU, opsets 11-25): BitShift(X, Y; direction LEFT or RIGHT) -> X << Y or X >> Y elementwise with numpy
// broadcasting, on unsigned integers; a shift of the type's width or more gives 0.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/elementwise.h"
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/elementwise/binary_attr.h"
#include "runtime/ops/gradient_ops.h"

namespace onnxamp::ops {
namespace {

class BitShiftCpu : public exec::OpKernel {
 public:
  BitShiftCpu(const exec::KernelInfo& info, Status* st) {
    StatusOr<bool> left = ReadShiftLeft(info.node);
    if (!left.ok()) {
      *st = left.status();
    } else {
      left_ = *left;
    }
  }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(BroadcastPlan plan, PlanBitShiftInputs(ctx));
    const ir::Tensor* x = ctx.input(0);
    const ir::Tensor* y = ctx.input(1);
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * z, ctx.AllocateOutput(0, x->dtype(), plan.output_dims()));
    const bool left = left_;
    auto run = [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      constexpr T kBits = static_cast<T>(sizeof(T) * 8);
      BinaryBroadcast<T, T, T>(ctx.threads(), plan, x->values<T>().data(), y->values<T>().data(),
                               z->mutable_values<T>().data(), [left](T a, T s) -> T {
                                 if (s >= kBits) return T(0);
                                 return left ? static_cast<T>(a << s) : static_cast<T>(a >> s);
                               });
      return Status::Ok();
    };
    switch (x->dtype()) {
      case DType::kUint8:
        return run(TypeTag<uint8_t>{});
      case DType::kUint16:
        return run(TypeTag<uint16_t>{});
      case DType::kUint32:
        return run(TypeTag<uint32_t>{});
      case DType::kUint64:
        return run(TypeTag<uint64_t>{});
      default:
        return Internal("BitShift of ", DTypeName(x->dtype()));  // PlanBitShiftInputs refuses it
    }
  }

 private:
  bool left_ = true;
};

}  // namespace

void RegisterBitShiftKernels(exec::KernelRegistry& r) {
  r.Register({"BitShift", "", 11, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<BitShiftCpu>});
}

}  // namespace onnxamp::ops
