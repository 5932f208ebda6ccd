// ReduceProdGrad (CPU, com.onnxamp): the gradient of ReduceProd from exclusive products (contract in
// runtime/ops/gradient_ops.h). Each reduction group is walked twice: prefix products forwards, then suffix products
// backwards, so dX[i] = dY * prefix[i] * suffix[i] needs no division and zeros in X give exact results.
#include <algorithm>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/broadcast.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/reduce/reduce_spec.h"

namespace onnxamp::ops {
namespace {

// The row-major offsets (with X's strides `stride`) of every index over the dims selected by `take`.
std::vector<int64_t> Offsets(const std::vector<int64_t>& dims, const std::vector<int64_t>& stride,
                             const std::vector<bool>& take) {
  std::vector<int64_t> offsets = {0};
  for (size_t d = 0; d < dims.size(); ++d) {
    if (!take[d] || dims[d] == 1) continue;
    std::vector<int64_t> next;
    next.reserve(offsets.size() * static_cast<size_t>(dims[d]));
    for (int64_t base : offsets) {
      for (int64_t k = 0; k < dims[d]; ++k) next.push_back(base + k * stride[d]);
    }
    offsets = std::move(next);
  }
  return offsets;
}

class ReduceProdGradCpu : public exec::OpKernel {
 public:
  ReduceProdGradCpu(const exec::KernelInfo&, Status*) {}

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* dy = ctx.input(0);
    const ir::Tensor* x = ctx.input(1);
    ONNXAMP_ASSIGN_OR_RETURN(const std::vector<bool> reduced, ResolveReduceProdGrad(dy, x));
    const std::vector<int64_t>& xd = x->dims();
    const size_t rank = xd.size();
    std::vector<int64_t> stride(rank, 1);
    for (size_t d = rank; d-- > 1;) stride[d - 1] = stride[d] * xd[d];
    std::vector<bool> kept(rank);
    for (size_t d = 0; d < rank; ++d) kept[d] = !reduced[d];
    return DispatchFloat(x->dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * dx, ctx.AllocateOutput(0, x->dtype(), xd));
      if (x->num_elements() == 0) return Status::Ok();
      const std::vector<int64_t> group = Offsets(xd, stride, reduced);  // within one group
      const std::vector<int64_t> bases = Offsets(xd, stride, kept);     // one per dY element, in dY's order
      const auto g = dy->values<T>();
      const auto in = x->values<T>();
      auto out = dx->mutable_values<T>();
      const int64_t n = static_cast<int64_t>(group.size());
      ctx.threads().ParallelFor(static_cast<int64_t>(bases.size()), std::max<int64_t>(1, 4096 / n),
                                [&](int64_t begin, int64_t end) {
                                  std::vector<double> prefix(static_cast<size_t>(n));
                                  for (int64_t o = begin; o < end; ++o) {
                                    const int64_t base = bases[static_cast<size_t>(o)];
                                    double p = 1;
                                    for (int64_t k = 0; k < n; ++k) {
                                      prefix[k] = p;
                                      p *= static_cast<double>(Load<T>(in[base + group[k]]));
                                    }
                                    const double gy = static_cast<double>(Load<T>(g[o]));
                                    double s = 1;
                                    for (int64_t k = n; k-- > 0;) {
                                      const int64_t i = base + group[k];
                                      out[i] = Store<T>(static_cast<ComputeType<T>>(gy * prefix[k] * s));
                                      s *= static_cast<double>(Load<T>(in[i]));
                                    }
                                  }
                                });
      return Status::Ok();
    });
  }
};

}  // namespace

void RegisterReduceProdGradKernels(exec::KernelRegistry& r) {
  r.Register({kReduceProdGradOp,
              exec::kInternalDomain,
              1,
              1,
              exec::Device::kCpu,
              {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64},
              0,
              &exec::MakeKernel<ReduceProdGradCpu>});
}

}  // namespace onnxamp::ops
