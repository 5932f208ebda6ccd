// GatherND (CPU, opsets 11-25; batch_dims from 12) and its backward, com.onnxamp GatherNDGrad. indices [..., m]
// name, per batch item (the first batch_dims dims, shared by data and indices), slices of data at the m coordinates
// that follow; out = indices[:-1] + data[batch_dims + m:]. Negative coordinates count from the end. GatherND copies
// any element type. GatherNDGrad(dY, indices, data_shape: int64) adds each dY slice into zeros of data_shape at the
// slice it came from, in index order (repeated tuples sum deterministically), in float (double for float64).
#include <algorithm>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/gather/gather.h"
#include "runtime/ops/gradient_ops.h"

namespace onnxamp::ops {
namespace {

class GatherNDCpu : public exec::OpKernel {
 public:
  GatherNDCpu(const exec::KernelInfo& info, Status*) : batch_dims_(info.node.GetInt("batch_dims", 0)) {}

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* data, RequireInput(ctx, 0, "data"));
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* indices, RequireInput(ctx, 1, "indices"));
    ONNXAMP_ASSIGN_OR_RETURN(const NdShape s, ResolveNd(ctx, data->dims(), *indices, batch_dims_));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, AllocateAnyOutput(ctx, 0, data->dtype(), s.out_dims));
    return DispatchByElementSize(data->dtype(), "GatherND", [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const T* src = ElementsOf<T>(*data);
      T* dst = MutableElementsOf<T>(*y);
      for (size_t i = 0; i < s.offsets.size(); ++i) {
        std::copy(src + s.offsets[i], src + s.offsets[i] + s.slice, dst + static_cast<int64_t>(i) * s.slice);
      }
      return Status::Ok();
    });
  }

 private:
  int64_t batch_dims_;
};

class GatherNDGradCpu : public exec::OpKernel {
 public:
  GatherNDGradCpu(const exec::KernelInfo& info, Status*) : batch_dims_(info.node.GetInt("batch_dims", 0)) {}

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const NdGradShape g, ResolveGatherNDGrad(ctx, batch_dims_, /*read_indices=*/true));
    const ir::Tensor* dy = ctx.input(0);
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * dx, ctx.AllocateOutput(0, dy->dtype(), g.data_dims));
    return AddRunsAt(*dy, g.nd.offsets, g.nd.slice, dx);
  }

 private:
  int64_t batch_dims_;
};

}  // namespace

void RegisterGatherNDKernels(exec::KernelRegistry& r) {
  r.Register({"GatherND", "", 11, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<GatherNDCpu>});
  r.Register({kGatherNDGradOp,
              exec::kInternalDomain,
              1,
              1,
              exec::Device::kCpu,
              {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64},
              0,
              &exec::MakeKernel<GatherNDGradCpu>});
}

}  // namespace onnxamp::ops
