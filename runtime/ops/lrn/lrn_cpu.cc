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
#include "runtime/ops/lrn/lrn.h"

namespace onnxamp::ops {
namespace {

class LrnCpu : public exec::OpKernel {
 public:
  LrnCpu(const exec::KernelInfo& info, Status* st) { *st = ParseLrnSpec(info, &spec_); }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const LrnShape shape, ResolveLrnShape(ctx, spec_));
    const ir::Tensor* x = shape.x;
    const ir::Tensor* dy = shape.dy;
    const bool grad = spec_.grad;
    const int64_t n = shape.n, c = shape.c, run = shape.run;
    const int64_t lo = shape.lo, hi = shape.hi;  // window of channel ch: [ch - lo, ch + hi]
    const double scale = shape.scale;
    const double beta = spec_.beta, bias = spec_.bias;
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
          if (!grad) {
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
  LrnSpec spec_;
};

}  // namespace

void RegisterLrnKernels(exec::KernelRegistry& r) {
  const std::vector<DType> types = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64};
  r.Register({"LRN", "", 1, 25, exec::Device::kCpu, types, 0, &exec::MakeKernel<LrnCpu>});
  r.Register({kLrnGradOp, exec::kInternalDomain, 1, 1, exec::Device::kCpu, types, 0, &exec::MakeKernel<LrnCpu>});
}

}  // namespace onnxamp::ops
