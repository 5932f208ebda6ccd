// SumToShape (CPU, com.onnxamp): a broadcast gradient summed back to the shape of the tensor that was broadcast
// (contract in runtime/ops/gradient_ops.h). Accumulates in double in element order; passes G through unchanged when
// it already has the shape.
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/broadcast.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/reduce/reduce_spec.h"

namespace onnxamp::ops {
namespace {

class SumToShapeCpu : public exec::OpKernel {
 public:
  SumToShapeCpu(const exec::KernelInfo&, Status*) {}

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* g = ctx.input(0);
    ONNXAMP_ASSIGN_OR_RETURN(const SumToShapePlan plan, ResolveSumToShape(g, ctx.input(1)));
    if (plan.same) return ctx.SetOutput(0, *g);
    const std::vector<int64_t>& out_dims = plan.out_dims;
    const std::vector<int64_t>& in_dims = g->dims();
    const size_t rank = in_dims.size();
    // Per input dim: the stride of the output element it maps to (0 for a dim summed away).
    const size_t lead = rank - out_dims.size();
    std::vector<int64_t> out_stride(rank, 0);
    int64_t stride = 1;
    for (size_t d = rank; d-- > lead;) {
      out_stride[d] = plan.reduced[d] ? 0 : stride;
      stride *= out_dims[d - lead];
    }
    return DispatchFloat(g->dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, g->dtype(), out_dims));
      std::vector<double> acc(static_cast<size_t>(y->num_elements()), 0.0);
      const auto in = g->values<T>();
      std::vector<int64_t> index(rank, 0);
      int64_t o = 0;  // output offset of `index`
      for (size_t i = 0; i < in.size(); ++i) {
        acc[static_cast<size_t>(o)] += static_cast<double>(Load<T>(in[i]));
        for (size_t d = rank; d-- > 0;) {  // next index, keeping the output offset up to date
          o += out_stride[d];
          if (++index[d] < in_dims[d]) break;
          o -= out_stride[d] * in_dims[d];
          index[d] = 0;
        }
      }
      auto out = y->mutable_values<T>();
      for (size_t i = 0; i < acc.size(); ++i) out[i] = Store<T>(static_cast<ComputeType<T>>(acc[i]));
      return Status::Ok();
    });
  }
};

}  // namespace

void RegisterSumToShapeKernels(exec::KernelRegistry& r) {
  r.Register({kSumToShapeOp,
              exec::kInternalDomain,
              1,
              1,
              exec::Device::kCpu,
              {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64},
              0,
              &exec::MakeKernel<SumToShapeCpu>});
}

}  // namespace onnxamp::ops
