// CumSum (CPU, opsets 11-14): the running sum of x along `axis` (input 1, a scalar or one-element int32/int64
// tensor, negative from the end); `exclusive` leaves each element out of its own sum, `reverse` sums from the end.
// float sums in double and fp16/bf16 in float (as PyTorch's CPU kernel), each output rounded once; the other types
// sum in their own type (integers wrap).
#include <type_traits>

#include "runtime/executor/kernel.h"
#include "runtime/ops/common/elementwise.h"
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/common/wrap_arith.h"
#include "runtime/ops/cumsum/cumsum.h"

namespace onnxamp::ops {
namespace {

class CumSumCpu : public exec::OpKernel {
 public:
  CumSumCpu(const exec::KernelInfo& info, Status* st) { *st = spec_.Parse(info.node); }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, 0, "x"));
    ONNXAMP_ASSIGN_OR_RETURN(const CumSumShape shape, ResolveCumSum(ctx, *x));
    const int64_t outer = shape.outer, len = shape.len, inner = shape.inner;
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), x->dims()));
    if (x->num_elements() == 0) return Status::Ok();
    const bool exclusive = spec_.exclusive, reverse = spec_.reverse;
    return DispatchNumeric(x->dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C =
          std::conditional_t<std::is_same_v<T, float>, double, std::conditional_t<kIsFloatLike<T>, ComputeType<T>, T>>;
      const T* in = x->values<T>().data();
      T* out = y->mutable_values<T>().data();
      // Lines (o, i) for o in outer and i in inner, each of `len` elements `inner` apart.
      ParallelRanges(ctx.threads(), outer * inner, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(len, 1)),
                     [&](int64_t l0, int64_t l1) {
                       for (int64_t l = l0; l < l1; ++l) {
                         const int64_t base = (l / inner) * len * inner + l % inner;
                         C sum = C(0);
                         for (int64_t s = 0; s < len; ++s) {
                           const int64_t at = base + (reverse ? len - 1 - s : s) * inner;
                           const C v = static_cast<C>(Load(in[at]));
                           if (exclusive) {
                             out[at] = Store<T>(static_cast<ComputeType<T>>(sum));
                             sum = WrapAdd(sum, v);
                           } else {
                             sum = WrapAdd(sum, v);
                             out[at] = Store<T>(static_cast<ComputeType<T>>(sum));
                           }
                         }
                       }
                     });
      return Status::Ok();
    });
  }

 private:
  CumSumSpec spec_;
};

}  // namespace

void RegisterCumSumKernels(exec::KernelRegistry& r) {
  // 14 adds fp16 and bf16.
  r.Register({"CumSum",
              "",
              11,
              25,
              exec::Device::kCpu,
              {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64, DType::kInt32, DType::kInt64,
               DType::kUint32, DType::kUint64},
              0,
              &exec::MakeKernel<CumSumCpu>});
}

}  // namespace onnxamp::ops
