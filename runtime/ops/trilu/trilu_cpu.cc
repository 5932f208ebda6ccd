// Trilu (CPU, opset 14): the upper (upper = 1) or lower triangle of each matrix in the last two dims, the other
// elements zero (the element type's zero: 0, false, ""). Element (i, j) is kept when j - i >= k (upper) or
// j - i <= k (lower); k is the optional scalar input 1 (default 0). Any element type.
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/elementwise.h"
#include "runtime/ops/common/shape_util.h"

namespace onnxamp::ops {
namespace {

class TriluCpu : public exec::OpKernel {
 public:
  TriluCpu(const exec::KernelInfo& info, Status* st) {
    auto u = IntAttribute(info.node, "upper", 1);
    if (!u.ok()) {
      *st = u.status();
    } else if (*u != 0 && *u != 1) {
      *st = InvalidArgument("attribute 'upper' must be 0 or 1, got ", *u);
    } else {
      upper_ = *u == 1;
    }
  }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, 0, "input"));
    if (x->rank() < 2) return InvalidArgument("input 0 (input) has rank ", x->rank(), ", expected at least 2");
    int64_t k = 0;
    if (const ir::Tensor* kt = ctx.input(1)) {
      ONNXAMP_ASSIGN_OR_RETURN(std::vector<int64_t> ks, ReadInt64s(*kt, InputLabel(ctx, 1, "k"), true));
      if (ks.size() != 1) return InvalidArgument(InputLabel(ctx, 1, "k"), " must hold one value, got ", ks.size());
      k = ks[0];
    }
    const int64_t rows = x->dims()[x->rank() - 2], cols = x->dims()[x->rank() - 1];
    const int64_t matrices = rows * cols == 0 ? 0 : x->num_elements() / (rows * cols);
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
