// GatherGrad and GatherElementsGrad (CPU), com.onnxamp version 1: the backwards of Gather and GatherElements
// (runtime/ops/gradient_ops.h). Both read and check the indices as the forwards do (ReadGatherIndices, gather.h).
//
// GatherGrad(dY, indices, data_shape: int64[r]) -> dData of shape data_shape and dY's type, attribute axis as
// Gather's: zero, but for the slices `indices` selected, which receive the matching slices of dY summed. Repeated
// indices accumulate in index order, in the compute type (float for fp16/bf16), so the result does not depend on the
// thread count (no atomics). Negative indices count from the end of the axis; one out of range is an error naming
// its position and value.
//
// GatherElementsGrad(dY, indices, data_shape: int64[r]) -> dData of shape data_shape and dY's type, attribute axis as
// GatherElements': zero, plus each dY element added at the position of data its index picked (dY has the indices'
// shape). Elements are added in row-major order of dY, on one thread, in the compute type: a fixed summation order.
#include <algorithm>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/common/reduce.h"
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/gather/gather.h"
#include "runtime/ops/gradient_ops.h"

namespace onnxamp::ops {
namespace {

// Positions along the axis handled by one parallel unit's inner block.
constexpr int64_t kInnerBlock = 1024;

// The inputs GatherGrad and GatherElementsGrad share: dY, the indices and the forward data's shape (checked).
struct ScatterGradInputs {
  const ir::Tensor* dy = nullptr;
  const ir::Tensor* indices = nullptr;
  std::vector<int64_t> data_dims;
};

StatusOr<ScatterGradInputs> ReadScatterGradInputs(exec::KernelContext& ctx) {
  ScatterGradInputs in;
  ONNXAMP_ASSIGN_OR_RETURN(in.dy, RequireInput(ctx, 0, "dY"));
  ONNXAMP_ASSIGN_OR_RETURN(in.indices, RequireInput(ctx, 1, "indices"));
  ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* shape_t, RequireInput(ctx, 2, "data_shape"));
  const std::string shape_label = InputLabel(ctx, 2, "data_shape");
  ONNXAMP_ASSIGN_OR_RETURN(in.data_dims, ReadInt64s(*shape_t, shape_label));
  for (int64_t d : in.data_dims) {
    if (d < 0) return InvalidArgument(shape_label, " has a negative dim: ", ShapeToString(in.data_dims));
  }
  return in;
}

class GatherGradCpu : public exec::OpKernel {
 public:
  GatherGradCpu(const exec::KernelInfo& info, Status*) : axis_(info.node.GetInt("axis", 0)) {}

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ScatterGradInputs in, ReadScatterGradInputs(ctx));
    const ir::Tensor* dy = in.dy;
    const ir::Tensor* indices = in.indices;
    const std::vector<int64_t>& data_dims = in.data_dims;
    ONNXAMP_RETURN_IF_ERROR(IndicesAreInt64(ctx, *indices).status());
    // The output has data's dims: Gather's shape checks run on it.
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * dx, ctx.AllocateOutput(0, dy->dtype(), data_dims));
    ONNXAMP_ASSIGN_OR_RETURN(const GatherShape shape, ResolveGather(*dx, *indices, axis_));
    ONNXAMP_RETURN_IF_ERROR(CheckGatherGradDy(ctx, *dy, *indices, shape, data_dims));
    const int64_t dim = data_dims[shape.axis], outer = shape.outer, inner = shape.inner;
    ONNXAMP_ASSIGN_OR_RETURN(
        const std::vector<int64_t> idx,
        ReadGatherIndices(ctx, *indices, dim, shape.axis, data_dims, InputLabel(ctx, 1, "indices")));
    const int64_t n = static_cast<int64_t>(idx.size());
    return DispatchFloat(dy->dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using A = ComputeType<T>;
      const T* g = dy->values<T>().data();
      T* out = dx->mutable_values<T>().data();
      std::vector<A> acc(static_cast<size_t>(dx->num_elements()), A(0));
      // One unit: one outer slice and one block of the inner dims; every index in order.
      const int64_t blocks = (inner + kInnerBlock - 1) / kInnerBlock;
      reduce::ParallelOver(ctx.threads(), outer * blocks, n * std::min(inner, kInnerBlock), [&](int64_t b, int64_t e) {
        for (int64_t u = b; u < e; ++u) {
          const int64_t o = u / blocks, i0 = (u % blocks) * kInnerBlock, i1 = std::min(inner, i0 + kInnerBlock);
          for (int64_t j = 0; j < n; ++j) {
            A* dst = acc.data() + (o * dim + idx[j]) * inner;
            const T* src = g + (o * n + j) * inner;
            for (int64_t i = i0; i < i1; ++i) dst[i] += Load<T>(src[i]);
          }
        }
      });
      for (size_t k = 0; k < acc.size(); ++k) out[k] = Store<T>(acc[k]);
      return Status::Ok();
    });
  }

 private:
  int64_t axis_;
};

class GatherElementsGradCpu : public exec::OpKernel {
 public:
  GatherElementsGradCpu(const exec::KernelInfo& info, Status*) : axis_(info.node.GetInt("axis", 0)) {}

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ScatterGradInputs in, ReadScatterGradInputs(ctx));
    const ir::Tensor* dy = in.dy;
    const ir::Tensor* indices = in.indices;
    const std::vector<int64_t>& data_dims = in.data_dims;
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * dx, ctx.AllocateOutput(0, dy->dtype(), data_dims));
    // GatherElements' shape checks, on the output (which has data's dims).
    ONNXAMP_ASSIGN_OR_RETURN(const int64_t axis, ResolveGatherElements(ctx, *dx, *indices, axis_));
    const std::vector<int64_t>& id = indices->dims();
    if (dy->dims() != id) {
      return InvalidArgument(InputLabel(ctx, 0, "dY"), " has shape ", ShapeToString(dy->dims()),
                             "; expected the indices' shape ", ShapeToString(id));
    }
    ONNXAMP_ASSIGN_OR_RETURN(
        const std::vector<int64_t> idx,
        ReadGatherIndices(ctx, *indices, data_dims[axis], axis, data_dims, InputLabel(ctx, 1, "indices")));
    return AddRunsAt(*dy, ElementOffsets(id, ContiguousStrides(data_dims), axis, idx), 1, dx);
  }

 private:
  int64_t axis_;
};

}  // namespace

void RegisterGatherGradKernels(exec::KernelRegistry& r) {
  const std::vector<DType> types = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64};
  r.Register(
      {kGatherGradOp, exec::kInternalDomain, 1, 1, exec::Device::kCpu, types, 0, &exec::MakeKernel<GatherGradCpu>});
  r.Register({kGatherElementsGradOp, exec::kInternalDomain, 1, 1, exec::Device::kCpu, types, 0,
              &exec::MakeKernel<GatherElementsGradCpu>});
}

}  // namespace onnxamp::ops
