// Trilu (CPU, opset 14): the upper (upper = 1) or lower triangle of each matrix in the last two dims, the other
// elements zero (the element type's zero: 0, false, ""). Element (i, j) is kept when j - i >= k (upper) or
// j - i <= k (lower); k is the optional scalar input 1 (default 0). Any element type.
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/elementwise.h"
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/trilu/trilu.h"

namespace onnxamp::ops {
namespace {

class TriluCpu : public exec::OpKernel {
 public:
  TriluCpu(const exec::KernelInfo& info, Status* st) {
    StatusOr<bool> upper = ParseTriluUpper(info.node);
    if (!upper.ok()) {
      *st = upper.status();
    } else {
      upper_ = *upper;
    }
  }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, 0, "input"));
    ONNXAMP_ASSIGN_OR_RETURN(const TriluShape shape, ResolveTrilu(ctx, *x));
    const int64_t k = shape.k, rows = shape.rows, cols = shape.cols, matrices = shape.matrices;
    const bool upper = upper_;
    return DispatchByElementSize(x->dtype(), "Trilu", [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, AllocateAnyOutput(ctx, 0, x->dtype(), x->dims()));
      const T* in = ElementsOf<T>(*x);
      T* out = MutableElementsOf<T>(*y);
      auto run = [&](int64_t r0, int64_t r1) {  // rows [r0, r1) over all matrices
        for (int64_t r = r0; r < r1; ++r) {
          const int64_t i = r % rows;
          const T* src = in + r * cols;
          T* dst = out + r * cols;
          for (int64_t j = 0; j < cols; ++j) {
            const int64_t d = j - i;  // |d| below the dims, so no overflow for any k
            const bool keep = upper ? d >= k : d <= k;
            dst[j] = keep ? src[j] : T{};
          }
        }
      };
      if constexpr (std::is_same_v<T, std::string>) {
        run(0, matrices * rows);
      } else {
        ParallelRanges(ctx.threads(), matrices * rows,
                       std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(cols, 1)), run);
      }
      return Status::Ok();
    });
  }

 private:
  bool upper_ = true;
};

}  // namespace

void RegisterTriluKernels(exec::KernelRegistry& r) {
  r.Register({"Trilu", "", 14, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<TriluCpu>});
}

}  // namespace onnxamp::ops
