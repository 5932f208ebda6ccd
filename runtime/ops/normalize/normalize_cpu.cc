// MeanVarianceNormalization (CPU, opsets 9-25) and LpNormalization (1-25), with their com.onnxamp gradient kernels.
//
//   MeanVarianceNormalization(X; axes = [0, 2, 3]) -> (X - mean) / (sqrt(variance) + 1e-9), mean and variance over
//     `axes`. The variance is the two-pass mean((X - mean)^2), never negative: a constant slice gives 0 (ONNX Runtime's
//     E[X^2] - E[X]^2 can go below 0 there and give NaN).
//   LpNormalization(X; axis = -1, p = 2) -> X / ||X||_p along `axis` (p 1 or 2); a zero vector stays 0, as in ONNX
//     Runtime.
//   MeanVarianceNormalizationGrad(dY, X; axes) -> dX = (dY - mean(dY)) / d - Xc * mean(dY * Xc) / (d^2 s), with Xc =
//     X - mean, s = sqrt(variance), d = s + 1e-9 (the second term is 0 where s = 0).
//   LpNormalizationGrad(dY, X; axis, p) -> dX = (dY - g * sum(dY * Y)) / n with n the norm, Y = X / n, and g = Y (p 2)
//     or sign(X) (p 1); 0 where n = 0.
// Statistics and results in double; stored to the input's type.
#include <cmath>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/elementwise.h"
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/normalize/normalize.h"

namespace onnxamp::ops {
namespace {

// The groups a reduction over some axes of a shape forms: the offsets of a group's elements relative to its first one
// (`members`), and each group's first element (`bases`).
struct Groups {
  std::vector<int64_t> members, bases;
};

Groups MakeGroups(const std::vector<int64_t>& dims, const std::vector<bool>& reduced) {
  const std::vector<int64_t> strides = ContiguousStrides(dims);
  Groups g;
  g.members = {0};
  g.bases = {0};
  for (size_t d = 0; d < dims.size(); ++d) {
    std::vector<int64_t>& list = reduced[d] ? g.members : g.bases;
    std::vector<int64_t> next;
    next.reserve(list.size() * static_cast<size_t>(dims[d]));
    for (int64_t o : list) {
      for (int64_t i = 0; i < dims[d]; ++i) next.push_back(o + i * strides[d]);
    }
    list = std::move(next);
  }
  return g;
}

// Reads X (and dY, for the gradients) as double per group and writes the result: f(x, dy, n, out) computes one group
// of n elements (dy null for the forward).
template <typename F>
Status RunGrouped(exec::KernelContext& ctx, const ir::Tensor& x, const ir::Tensor* dy, const Groups& g, F&& f) {
  ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x.dtype(), x.dims()));
  return DispatchFloat(x.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    const T* px = x.values<T>().data();
    const T* pd = dy ? dy->values<T>().data() : nullptr;
    T* py = y->mutable_values<T>().data();
    const int64_t n = static_cast<int64_t>(g.members.size());
    const int64_t groups = x.num_elements() == 0 ? 0 : static_cast<int64_t>(g.bases.size());
    ParallelRanges(ctx.threads(), groups, std::max<int64_t>(1, 4096 / std::max<int64_t>(n, 1)),
                   [&](int64_t b, int64_t e) {
                     std::vector<double> xs(static_cast<size_t>(n)), ds(pd ? static_cast<size_t>(n) : 0),
                         out(static_cast<size_t>(n));
                     for (int64_t k = b; k < e; ++k) {
                       const int64_t base = g.bases[static_cast<size_t>(k)];
                       for (int64_t i = 0; i < n; ++i) {
                         const int64_t at = base + g.members[static_cast<size_t>(i)];
                         xs[static_cast<size_t>(i)] = static_cast<double>(Load(px[at]));
                         if (pd) ds[static_cast<size_t>(i)] = static_cast<double>(Load(pd[at]));
                       }
                       f(xs.data(), pd ? ds.data() : nullptr, n, out.data());
                       for (int64_t i = 0; i < n; ++i) {
                         py[base + g.members[static_cast<size_t>(i)]] =
                             Store<T>(static_cast<ComputeType<T>>(out[static_cast<size_t>(i)]));
                       }
                     }
                   });
    return Status::Ok();
  });
}

class MeanVarianceNormalizationCpu : public exec::OpKernel {
 public:
  MeanVarianceNormalizationCpu(const exec::KernelInfo& info, Status* st) { *st = ParseMvnSpec(info, &spec_); }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const NormalizeInputs in, ResolveNormalizeInputs(ctx, spec_.grad, "X"));
    const ir::Tensor* x = in.x;
    const ir::Tensor* dy = in.dy;
    ONNXAMP_ASSIGN_OR_RETURN(const std::vector<bool> reduced, MvnReducedAxes(spec_, x->rank()));
    const Groups g = MakeGroups(x->dims(), reduced);
    return RunGrouped(ctx, *x, dy, g, [](const double* xs, const double* ds, int64_t n, double* out) {
      double mean = 0;
      for (int64_t i = 0; i < n; ++i) mean += xs[i];
      mean /= static_cast<double>(n);
      double var = 0;
      for (int64_t i = 0; i < n; ++i) var += (xs[i] - mean) * (xs[i] - mean);
      const double s = std::sqrt(var / static_cast<double>(n)), d = s + kMvnEpsilon;
      if (!ds) {
        for (int64_t i = 0; i < n; ++i) out[i] = (xs[i] - mean) / d;
        return;
      }
      double mean_dy = 0, mean_dyxc = 0;
      for (int64_t i = 0; i < n; ++i) {
        mean_dy += ds[i];
        mean_dyxc += ds[i] * (xs[i] - mean);
      }
      mean_dy /= static_cast<double>(n);
      mean_dyxc /= static_cast<double>(n);
      const double k = s > 0 ? mean_dyxc / (d * d * s) : 0.0;
      for (int64_t i = 0; i < n; ++i) out[i] = (ds[i] - mean_dy) / d - (xs[i] - mean) * k;
    });
  }

 private:
  MvnSpec spec_;
};

class LpNormalizationCpu : public exec::OpKernel {
 public:
  LpNormalizationCpu(const exec::KernelInfo& info, Status* st) { *st = ParseLpNormSpec(info, &spec_); }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const NormalizeInputs in, ResolveNormalizeInputs(ctx, spec_.grad, "input"));
    const ir::Tensor* x = in.x;
    const ir::Tensor* dy = in.dy;
    ONNXAMP_ASSIGN_OR_RETURN(const std::vector<bool> reduced, LpNormReducedAxes(spec_, x->rank()));
    const Groups g = MakeGroups(x->dims(), reduced);
    const bool l1 = spec_.p == 1;
    return RunGrouped(ctx, *x, dy, g, [l1](const double* xs, const double* ds, int64_t n, double* out) {
      double norm = 0;
      for (int64_t i = 0; i < n; ++i) norm += l1 ? std::fabs(xs[i]) : xs[i] * xs[i];
      if (!l1) norm = std::sqrt(norm);
      if (norm == 0) {
        for (int64_t i = 0; i < n; ++i) out[i] = 0;
        return;
      }
      if (!ds) {
        for (int64_t i = 0; i < n; ++i) out[i] = xs[i] / norm;
        return;
      }
      double dot = 0;  // sum(dY * Y)
      for (int64_t i = 0; i < n; ++i) dot += ds[i] * xs[i] / norm;
      for (int64_t i = 0; i < n; ++i) {
        const double gi = l1 ? (xs[i] > 0 ? 1.0 : xs[i] < 0 ? -1.0 : 0.0) : xs[i] / norm;
        out[i] = (ds[i] - gi * dot) / norm;
      }
    });
  }

 private:
  LpNormSpec spec_;
};

}  // namespace

void RegisterNormalizeKernels(exec::KernelRegistry& r) {
  const std::vector<DType> types = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64};
  r.Register({"MeanVarianceNormalization", "", 9, 25, exec::Device::kCpu, types, 0,
              &exec::MakeKernel<MeanVarianceNormalizationCpu>});
  r.Register({kMeanVarianceNormalizationGradOp, exec::kInternalDomain, 1, 1, exec::Device::kCpu, types, 0,
              &exec::MakeKernel<MeanVarianceNormalizationCpu>});
  r.Register({"LpNormalization", "", 1, 25, exec::Device::kCpu, types, 0, &exec::MakeKernel<LpNormalizationCpu>});
  r.Register({kLpNormalizationGradOp, exec::kInternalDomain, 1, 1, exec::Device::kCpu, types, 0,
              &exec::MakeKernel<LpNormalizationCpu>});
}

}  // namespace onnxamp::ops
