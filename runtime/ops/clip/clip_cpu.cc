// Clip (CPU): y = min(max(x, min), max). Bounds are attributes before opset 11 and optional scalar inputs from 11;
// float types, integers from 12. NaN inputs stay NaN; when min > max every element becomes max (as ONNX says).
#include <limits>

#include "runtime/executor/kernel.h"
#include "runtime/ops/clip/clip.h"
#include "runtime/ops/common/elementwise.h"
#include "runtime/ops/common/elementwise_math.h"

namespace onnxamp::ops {
namespace {

class ClipCpu : public exec::OpKernel {
 public:
  ClipCpu(const exec::KernelInfo& info, Status* st) { *st = spec_.Init(info); }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor *x = nullptr, *lo = nullptr, *hi = nullptr;
    ONNXAMP_RETURN_IF_ERROR(spec_.Inputs(ctx, &x, &lo, &hi));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), x->dims()));
    return DispatchNumeric(x->dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = ComputeType<T>;
      C vmin = std::numeric_limits<C>::lowest();
      C vmax = std::numeric_limits<C>::max();
      if constexpr (!std::is_integral_v<C>) {
        vmin = -std::numeric_limits<C>::infinity();
        vmax = std::numeric_limits<C>::infinity();
      }
      if (lo) vmin = Load(lo->values<T>()[0]);
      if (hi) vmax = Load(hi->values<T>()[0]);
      if (spec_.attr_min()) vmin = static_cast<C>(*spec_.attr_min());
      if (spec_.attr_max()) vmax = static_cast<C>(*spec_.attr_max());
      UnaryMap(ctx.threads(), x->values<T>().data(), y->mutable_values<T>().data(), x->num_elements(), [=](C v) {
        v = Select(v < vmin, vmin, v);
        return Select(v > vmax, vmax, v);
      });
      return Status::Ok();
    });
  }

 private:
  ClipSpec spec_;
};

}  // namespace

void RegisterClipKernels(exec::KernelRegistry& r) {
  const std::vector<DType> types = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64,
                                    DType::kInt8,    DType::kInt16,   DType::kInt32,    DType::kInt64,
                                    DType::kUint8,   DType::kUint16,  DType::kUint32,   DType::kUint64};
  // 1-10: attributes min/max (1-5 also the ignored consumed_inputs); 11-23: optional inputs (12, 13 add types).
  r.Register({"Clip", "", 1, 23, exec::Device::kCpu, types, 0, &exec::MakeKernel<ClipCpu>});
}

}  // namespace onnxamp::ops
