// Det (CPU, opsets 11-25) and com.onnxamp DetGrad.
//
//   Det(X [..., M, M]) -> [...] the determinants (LU with partial pivoting, in double).
//   DetGrad(dY, X) -> dX = dY * adj(X)^T: det(X) * inv(X)^T for an invertible X, the cofactor matrix minor by minor
//     otherwise (a singular X of rank M - 1 has a non-zero gradient too).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/elementwise.h"
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/gradient_ops.h"

namespace onnxamp::ops {
namespace {

// LU with partial pivoting of the n x n matrix `a` (row-major, overwritten in place); returns the determinant.
double LuDeterminant(std::vector<double>& a, int64_t n) {
  double det = 1.0;
  for (int64_t c = 0; c < n; ++c) {
    int64_t pivot = c;
    for (int64_t r = c + 1; r < n; ++r) {
      if (std::fabs(a[r * n + c]) > std::fabs(a[pivot * n + c])) pivot = r;
    }
    if (a[pivot * n + c] == 0.0) return 0.0;
    if (pivot != c) {
      for (int64_t k = 0; k < n; ++k) std::swap(a[c * n + k], a[pivot * n + k]);
      det = -det;
    }
    const double p = a[c * n + c];
    det *= p;
    for (int64_t r = c + 1; r < n; ++r) {
      const double f = a[r * n + c] / p;
      for (int64_t k = c; k < n; ++k) a[r * n + k] -= f * a[c * n + k];
    }
  }
  return det;
}

// The cofactor matrix of `a` (C[i][j] = (-1)^(i+j) det of a without row i and column j): adj(a)^T, the gradient of
// det(a). det(a) * inv(a)^T by Gauss-Jordan elimination for an invertible a (O(n^3)); minor by minor for a singular
// one (O(n^5), whose gradient is still non-zero when its rank is n - 1).
std::vector<double> CofactorsByMinors(const std::vector<double>& a, int64_t n);

// The largest singular matrix whose cofactors are computed minor by minor (O(n^5)): 32^5 is 3.4e7 operations.
constexpr int64_t kMaxMinorsOrder = 32;

std::vector<double> Cofactors(const std::vector<double>& a, int64_t n) {
  std::vector<double> m = a, inv(static_cast<size_t>(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i) inv[static_cast<size_t>(i * n + i)] = 1.0;
  double det = 1.0;
  for (int64_t c = 0; c < n; ++c) {
    int64_t pivot = c;
    for (int64_t r = c + 1; r < n; ++r) {
      if (std::fabs(m[static_cast<size_t>(r * n + c)]) > std::fabs(m[static_cast<size_t>(pivot * n + c)])) pivot = r;
    }
    const double p = m[static_cast<size_t>(pivot * n + c)];
    if (p == 0.0) return n <= kMaxMinorsOrder ? CofactorsByMinors(a, n) : std::vector<double>();
    if (pivot != c) {
      for (int64_t k = 0; k < n; ++k) {
        std::swap(m[static_cast<size_t>(c * n + k)], m[static_cast<size_t>(pivot * n + k)]);
        std::swap(inv[static_cast<size_t>(c * n + k)], inv[static_cast<size_t>(pivot * n + k)]);
      }
      det = -det;
    }
    det *= p;
    for (int64_t k = 0; k < n; ++k) {
      m[static_cast<size_t>(c * n + k)] /= p;
      inv[static_cast<size_t>(c * n + k)] /= p;
    }
    for (int64_t r = 0; r < n; ++r) {
      const double f = m[static_cast<size_t>(r * n + c)];
      if (r == c || f == 0.0) continue;
      for (int64_t k = 0; k < n; ++k) {
        m[static_cast<size_t>(r * n + k)] -= f * m[static_cast<size_t>(c * n + k)];
        inv[static_cast<size_t>(r * n + k)] -= f * inv[static_cast<size_t>(c * n + k)];
      }
    }
  }
  std::vector<double> c(static_cast<size_t>(n * n));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) c[static_cast<size_t>(i * n + j)] = det * inv[static_cast<size_t>(j * n + i)];
  }
  return c;
}

std::vector<double> CofactorsByMinors(const std::vector<double>& a, int64_t n) {
  std::vector<double> c(static_cast<size_t>(n * n));
  if (n == 1) {
    c[0] = 1.0;
    return c;
  }
  std::vector<double> minor(static_cast<size_t>((n - 1) * (n - 1)));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      size_t k = 0;
      for (int64_t r = 0; r < n; ++r) {
        if (r == i) continue;
        for (int64_t s = 0; s < n; ++s) {
          if (s != j) minor[k++] = a[static_cast<size_t>(r * n + s)];
        }
      }
      c[static_cast<size_t>(i * n + j)] =
          ((i + j) % 2 ? -1.0 : 1.0) * LuDeterminant(minor, n - 1);  // minor is rebuilt for every entry
    }
  }
  return c;
}

class DetCpu : public exec::OpKernel {
 public:
  DetCpu(const exec::KernelInfo& info, Status*) : grad_(info.node.domain() == exec::kInternalDomain) {}

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* dy = nullptr;
    if (grad_) {
      ONNXAMP_ASSIGN_OR_RETURN(dy, RequireInput(ctx, 0, "dY"));
    }
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, grad_ ? 1 : 0, "X"));
    const std::string label = InputLabel(ctx, grad_ ? 1 : 0, "X");
    if (x->rank() < 2 || x->dims()[x->rank() - 1] != x->dims()[x->rank() - 2]) {
      return InvalidArgument(label, " must be [..., M, M], got ", ShapeToString(x->dims()));
    }
    const int64_t n = x->dims().back();
    const std::vector<int64_t> batch_dims(x->dims().begin(), x->dims().end() - 2);
    const int64_t batch = DimProduct(batch_dims, 0, batch_dims.size());
    if (dy && (dy->dims() != batch_dims || dy->dtype() != x->dtype())) {
      return InvalidArgument(InputLabel(ctx, 0, "dY"), " must be ", DTypeName(x->dtype()), " ",
                             ShapeToString(batch_dims), ", got ", DTypeName(dy->dtype()), " ",
                             ShapeToString(dy->dims()));
    }
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), grad_ ? x->dims() : batch_dims));
    return DispatchFloat(x->dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const T* px = x->values<T>().data();
      T* py = y->mutable_values<T>().data();
      std::atomic<int64_t> failed{-1};
      ParallelRanges(ctx.threads(), batch, 1, [&](int64_t b, int64_t e) {
        std::vector<double> a(static_cast<size_t>(n * n));
        for (int64_t m = b; m < e; ++m) {
          for (int64_t k = 0; k < n * n; ++k) a[static_cast<size_t>(k)] = static_cast<double>(Load(px[m * n * n + k]));
          if (!grad_) {
            py[m] = Store<T>(static_cast<ComputeType<T>>(LuDeterminant(a, n)));  // a is reloaded per matrix
            continue;
          }
          const double g = static_cast<double>(Load(dy->values<T>()[m]));
          const std::vector<double> c = Cofactors(a, n);
          if (c.empty()) {  // singular and too large for the minors
            failed = m;
            continue;
          }
          for (int64_t k = 0; k < n * n; ++k) {
            py[m * n * n + k] = Store<T>(static_cast<ComputeType<T>>(g * c[static_cast<size_t>(k)]));
          }
        }
      });
      if (failed >= 0) {
        return Unimplemented("matrix ", failed.load(), " of X is singular and larger than ", kMaxMinorsOrder, "x",
                             kMaxMinorsOrder, ": its cofactors (the gradient) are not computed");
      }
      return Status::Ok();
    });
  }

 private:
  bool grad_;
};

}  // namespace

void RegisterDetKernels(exec::KernelRegistry& r) {
  const std::vector<DType> floats = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64};
  r.Register({"Det", "", 11, 25, exec::Device::kCpu, floats, 0, &exec::MakeKernel<DetCpu>});
  r.Register({kDetGradOp, exec::kInternalDomain, 1, 1, exec::Device::kCpu, floats, 0, &exec::MakeKernel<DetCpu>});
}

}  // namespace onnxamp::ops
