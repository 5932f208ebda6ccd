// SoftmaxGrad and LogSoftmaxGrad (CPU), com.onnxamp version 1: the backward of Softmax and LogSoftmax from their
// output Y (runtime/ops/gradient_ops.h).
//
// Over each slice the forward normalised (attribute `axis`; `legacy` 1: the input coerced to 2-D at `axis`, as
// Softmax before opset 13): SoftmaxGrad dX = Y * (dY - sum(dY * Y)); LogSoftmaxGrad dX = dY - exp(Y) * sum(dY).
// dY and Y have one shape and one float type; fp16/bf16 compute in float, sums in the compute type.
#include <cmath>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/common/reduce.h"
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/softmax/softmax.h"

namespace onnxamp::ops {
namespace {

template <bool kLog>
class SoftmaxGradCpu : public exec::OpKernel {
 public:
  SoftmaxGradCpu(const exec::KernelInfo& info, Status* st) {
    const int64_t legacy = info.node.GetInt("legacy", 0);
    if (legacy != 0 && legacy != 1) {
      *st = InvalidArgument("attribute 'legacy' must be 0 or 1, got ", legacy);
      return;
    }
    // The forward's attribute parsing, at an opset with the same semantics: 2-D coercion before 13.
    *st = ParseSoftmaxSpec(exec::KernelInfo{info.node, legacy ? 12 : 13, info.device}, &spec_);
  }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* dy, RequireInput(ctx, 0, "dY"));
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* y, RequireInput(ctx, 1, "Y"));
    if (y->dtype() != dy->dtype() || y->dims() != dy->dims()) {
      return InvalidArgument(InputLabel(ctx, 1, "Y"), " is ", DTypeName(y->dtype()), " ", ShapeToString(y->dims()),
                             "; expected dY's type and shape, ", DTypeName(dy->dtype()), " ",
                             ShapeToString(dy->dims()));
    }
    ONNXAMP_ASSIGN_OR_RETURN(const reduce::AxisView v, ResolveSoftmaxView(spec_, dy));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * dx, ctx.AllocateOutput(0, dy->dtype(), dy->dims()));
    return DispatchFloat(dy->dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using A = ComputeType<T>;
      const T* g = dy->values<T>().data();
      const T* out = y->values<T>().data();
      T* d = dx->mutable_values<T>().data();
      const int64_t n = v.n, inner = v.inner;
      // One unit: the n values of one (outer, inner) position, stride `inner` apart.
      reduce::ParallelOver(ctx.threads(), v.outer * inner, n, [&](int64_t b, int64_t e) {
        for (int64_t u = b; u < e; ++u) {
          const int64_t base = (u / inner) * n * inner + u % inner;
          A s = 0;
          for (int64_t j = 0; j < n; ++j) {
            const int64_t k = base + j * inner;
            s += kLog ? Load<T>(g[k]) : Load<T>(g[k]) * Load<T>(out[k]);
          }
          for (int64_t j = 0; j < n; ++j) {
            const int64_t k = base + j * inner;
            const A gy = Load<T>(g[k]), yk = Load<T>(out[k]);
            d[k] = Store<T>(kLog ? gy - std::exp(yk) * s : yk * (gy - s));
          }
        }
      });
      return Status::Ok();
    });
  }

 private:
  SoftmaxSpec spec_;
};

}  // namespace

void RegisterSoftmaxGradKernels(exec::KernelRegistry& r) {
  using exec::Device;
  const std::vector<DType> types = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64};
  const char* d = exec::kInternalDomain;
  r.Register({kSoftmaxGradOp, d, 1, 1, Device::kCpu, types, 0, &exec::MakeKernel<SoftmaxGradCpu<false>>});
  r.Register({kLogSoftmaxGradOp, d, 1, 1, Device::kCpu, types, 0, &exec::MakeKernel<SoftmaxGradCpu<true>>});
}

}  // namespace onnxamp::ops
