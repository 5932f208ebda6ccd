// Det (CPU, opsets 11-25) and com.onnxamp DetGrad.
//
//   Det(X [..., M, M]) -> [...] the determinants (LU with partial pivoting, in double).
//   DetGrad(dY, X) -> dX = dY * adj(X)^T: det(X) * inv(X)^T for an invertible X, the cofactor matrix minor by minor
//     otherwise (a singular X of rank M - 1 has a non-zero gradient too).
#include <atomic>
#include <limits>
#include <string>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/elementwise.h"
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/det/det.h"
#include "runtime/ops/det/det_math.h"
#include "runtime/ops/gradient_ops.h"

namespace onnxamp::ops {

StatusOr<det::DetShape> det::ResolveDet(const exec::KernelContext& ctx, bool grad) {
  const ir::Tensor* dy = nullptr;
  if (grad) {
    ONNXAMP_ASSIGN_OR_RETURN(dy, RequireInput(ctx, 0, "dY"));
  }
  ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, RequireInput(ctx, grad ? 1 : 0, "X"));
  const std::string label = InputLabel(ctx, grad ? 1 : 0, "X");
  if (x->rank() < 2 || x->dims()[x->rank() - 1] != x->dims()[x->rank() - 2]) {
    return InvalidArgument(label, " must be [..., M, M], got ", ShapeToString(x->dims()));
  }
  DetShape s;
  s.n = x->dims().back();
  s.batch_dims.assign(x->dims().begin(), x->dims().end() - 2);
  s.batch = DimProduct(s.batch_dims, 0, s.batch_dims.size());
  if (dy && (dy->dims() != s.batch_dims || dy->dtype() != x->dtype())) {
    return InvalidArgument(InputLabel(ctx, 0, "dY"), " must be ", DTypeName(x->dtype()), " ",
                           ShapeToString(s.batch_dims), ", got ", DTypeName(dy->dtype()), " ",
                           ShapeToString(dy->dims()));
  }
  return s;
}

namespace {

class DetCpu : public exec::OpKernel {
 public:
  DetCpu(const exec::KernelInfo& info, Status*) : grad_(info.node.domain() == exec::kInternalDomain) {}

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const det::DetShape shape, det::ResolveDet(ctx, grad_));
    const ir::Tensor* dy = grad_ ? ctx.input(0) : nullptr;
    const ir::Tensor* x = ctx.input(grad_ ? 1 : 0);
    const int64_t n = shape.n, batch = shape.batch;
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), grad_ ? x->dims() : shape.batch_dims));
    return DispatchFloat(x->dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const T* px = x->values<T>().data();
      T* py = y->mutable_values<T>().data();
      // The first matrix (by index) that fails, whatever the threads' order: the CUDA kernel reports the same one.
      std::atomic<int64_t> failed{std::numeric_limits<int64_t>::max()};
      ParallelRanges(ctx.threads(), batch, 1, [&](int64_t b, int64_t e) {
        std::vector<double> a(static_cast<size_t>(n * n)), m(grad_ ? a.size() : 0), inv(m.size()), c(m.size());
        std::vector<double> minor(grad_ && n > 0 && n <= det::kMaxMinorsOrder ? static_cast<size_t>((n - 1) * (n - 1))
                                                                              : 0);
        for (int64_t i = b; i < e; ++i) {
          for (int64_t k = 0; k < n * n; ++k) a[static_cast<size_t>(k)] = static_cast<double>(Load(px[i * n * n + k]));
          if (!grad_) {
            py[i] = Store<T>(static_cast<ComputeType<T>>(det::LuDeterminant(a.data(), n)));  // a is reloaded
            continue;
          }
          const double g = static_cast<double>(Load(dy->values<T>()[i]));
          if (!det::Cofactors(a.data(), n, m.data(), inv.data(), minor.data(), c.data())) {
            int64_t first = failed.load();  // singular and too large for the minors
            while (i < first && !failed.compare_exchange_weak(first, i)) {
            }
            continue;
          }
          for (int64_t k = 0; k < n * n; ++k) {
            py[i * n * n + k] = Store<T>(static_cast<ComputeType<T>>(g * c[static_cast<size_t>(k)]));
          }
        }
      });
      if (failed.load() != std::numeric_limits<int64_t>::max()) {
        return Unimplemented("matrix ", failed.load(), " of X is singular and larger than ", det::kMaxMinorsOrder, "x",
                             det::kMaxMinorsOrder, ": its cofactors (the gradient) are not computed");
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
