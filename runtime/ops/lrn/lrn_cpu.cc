// LRN (CPU, opsets 1-25) and its backward, com.onnxamp LRNGrad. X is [N, C, D1..Dk]; over a window of `size` channels
// around c (from c - floor((size - 1) / 2) to c + ceil((size - 1) / 2), clipped to [0, C)),
//   s_c = bias + alpha / size * sum of X_i^2 over the window,  Y_c = X_c / s_c^beta.
// LRNGrad(dY, X) -> dX with the same attributes: with W'(i) the channels whose window holds i (from
// i - ceil((size - 1) / 2) to i + floor((size - 1) / 2)),
//   dX_i = dY_i / s_i^beta - 2 alpha beta / size * X_i * sum over c in W'(i) of dY_c X_c / s_c^(beta + 1).
// Both compute in double (the window sums of squares and the powers) and round once; float types.
#include <algorithm>
#include <cmath>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/gradient_ops.h"

namespace onnxamp::ops {
namespace {

class LrnCpu : public exec::OpKernel {
 public:
  LrnCpu(const exec::KernelInfo& info, Status* st)
      : grad_(info.node.op_type() == kLrnGradOp),
        size_(info.node.GetInt("size", 0)),
        alpha_(info.node.GetFloat("alpha", 1e-4f)),
        beta_(info.node.GetFloat("beta", 0.75f)),
        bias_(info.node.GetFloat("bias", 1.0f)) {
    if (size_ <= 0) *st = InvalidArgument("attribute 'size' must be given and positive, got ", size_);
  }

  Status Compute(exec::KernelContext& ctx) const override {
    const size_t xi = grad_ ? 1 : 0;
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, xi, "X"));
    const ir::Tensor* dy = nullptr;
    if (grad_) {
      ONNXAMP_ASSIGN_OR_RETURN(dy, RequireInput(ctx, 0, "dY"));
      if (dy->dtype() != x->dtype() || dy->dims() != x->dims()) {
        return InvalidArgument(InputLabel(ctx, 0, "dY"), " must have X's type and shape ", ShapeToString(x->dims()));
      }
    }
    if (x->rank() < 2) {
      return InvalidArgument(InputLabel(ctx, xi, "X"), " must be [N, C, ...], got ", ShapeToString(x->dims()));
    }
    const int64_t n = x->dims()[0], c = x->dims()[1], run = DimProduct(x->dims(), 2, x->dims().size());
    const int64_t lo = (size_ - 1) / 2, hi = size_ - 1 - lo;  // window of channel ch: [ch - lo, ch + hi]
    const double scale = static_cast<double>(alpha_) / static_cast<double>(size_);
    const double beta = beta_, bias = bias_;
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * out, ctx.AllocateOutput(0, x->dtype(), x->dims()));
    return DispatchFloat(x->dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const T* px = x->values<T>().data();
      const T* pg = dy ? dy->values<T>().data() : nullptr;
      T* po = out->mutable_values<T>().data();
      ctx.threads().ParallelFor(n * run, 64, [&](int64_t p0, int64_t p1) {
        std::vector<double> xs(static_cast<size_t>(c)), s(xs.size()), t(xs.size());
        for (int64_t p = p0; p < p1; ++p) {
          const int64_t base = (p / run) * c * run + p % run;  // element (sample, channel 0, position)
          for (int64_t ch = 0; ch < c; ++ch) xs[ch] = static_cast<double>(Load<T>(px[base + ch * run]));
          for (int64_t ch = 0; ch < c; ++ch) {
            double sum = 0;
            for (int64_t i = std::max<int64_t>(0, ch - lo); i <= std::min(c - 1, ch + hi); ++i) sum += xs[i] * xs[i];
            s[ch] = bias + scale * sum;
          }
          if (!grad_) {
            for (int64_t ch = 0; ch < c; ++ch) {
              po[base + ch * run] = Store<T>(static_cast<ComputeType<T>>(xs[ch] * std::pow(s[ch], -beta)));
            }
            continue;
          }
          for (int64_t ch = 0; ch < c; ++ch) {
            t[ch] = static_cast<double>(Load<T>(pg[base + ch * run])) * xs[ch] * std::pow(s[ch], -beta - 1);
          }
          for (int64_t i = 0; i < c; ++i) {
            double sum = 0;
            for (int64_t ch = std::max<int64_t>(0, i - hi); ch <= std::min(c - 1, i + lo); ++ch) sum += t[ch];
            const double g = static_cast<double>(Load<T>(pg[base + i * run]));
            po[base + i * run] =
                Store<T>(static_cast<ComputeType<T>>(g * std::pow(s[i], -beta) - 2 * scale * beta * xs[i] * sum));
          }
        }
      });
      return Status::Ok();
    });
  }

 private:
  bool grad_;
  int64_t size_;
  float alpha_, beta_, bias_;
};

}  // namespace

void RegisterLrnKernels(exec::KernelRegistry& r) {
  const std::vector<DType> types = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64};
  r.Register({"LRN", "", 1, 25, exec::Device::kCpu, types, 0, &exec::MakeKernel<LrnCpu>});
  r.Register({kLrnGradOp, exec::kInternalDomain, 1, 1, exec::Device::kCpu, types, 0, &exec::MakeKernel<LrnCpu>});
}

}  // namespace onnxamp::ops
