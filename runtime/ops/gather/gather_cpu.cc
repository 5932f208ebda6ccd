// Gather and GatherElements (CPU): pick elements along an axis by int32/int64 indices; any data element type.
//
// Gather (opsets 1-25): out[o, j..., i] = data[o, indices[j...], i], shape data[:axis] + indices + data[axis+1:].
// GatherElements (opsets 11-25): out[p] = data[p with p[axis] replaced by indices[p]], shape of indices, which
// has data's rank and dims no larger than data's off the axis. Negative indices count from the end of the axis;
// an index out of [-dim, dim) is an error naming its position and value.
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/gather/gather.h"

namespace onnxamp::ops {
namespace {

class GatherCpu : public exec::OpKernel {
 public:
  GatherCpu(const exec::KernelInfo& info, Status*) : axis_(info.node.GetInt("axis", 0)) {}

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* data, RequireInput(ctx, 0, "data"));
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* indices, RequireInput(ctx, 1, "indices"));
    ONNXAMP_ASSIGN_OR_RETURN(const GatherShape shape, ResolveGather(*data, *indices, axis_));
    const std::vector<int64_t>& dd = data->dims();
    const int64_t axis = shape.axis, outer = shape.outer, inner = shape.inner;
    const int64_t dim = dd[axis];
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<int64_t> idx, ReadGatherIndices(ctx, *indices, dim, axis, dd, "indices"));
    const int64_t n = static_cast<int64_t>(idx.size());
    return DispatchByElementSize(data->dtype(), "Gather", [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, AllocateAnyOutput(ctx, 0, data->dtype(), shape.out_dims));
      const T* src = ElementsOf<T>(*data);
      T* dst = MutableElementsOf<T>(*y);
      // One unit: the inner block of one (outer, index) pair.
      auto run = [&](int64_t begin, int64_t end) {
        for (int64_t u = begin; u < end; ++u) {
          const int64_t o = u / n, j = u % n;
          CopyElements(dst + u * inner, src + (o * dim + idx[j]) * inner, inner);
        }
      };
      const int64_t units = outer * n;
      const int64_t grain = std::max<int64_t>(1, (1 << 15) / std::max<int64_t>(inner, 1));
      if (!std::is_same_v<T, std::string> && units >= 2 * grain) {
        ctx.threads().ParallelFor(units, grain, run);
      } else {
        run(0, units);
      }
      return Status::Ok();
    });
  }

 private:
  int64_t axis_;
};

class GatherElementsCpu : public exec::OpKernel {
 public:
  GatherElementsCpu(const exec::KernelInfo& info, Status*) : axis_(info.node.GetInt("axis", 0)) {}

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* data, RequireInput(ctx, 0, "data"));
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* indices, RequireInput(ctx, 1, "indices"));
    ONNXAMP_ASSIGN_OR_RETURN(const int64_t axis, ResolveGatherElements(ctx, *data, *indices, axis_));
    const std::vector<int64_t>& dd = data->dims();
    const std::vector<int64_t>& id = indices->dims();
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<int64_t> idx, ReadGatherIndices(ctx, *indices, dd[axis], axis, dd, "indices"));
    const std::vector<int64_t> offsets = ElementOffsets(id, ContiguousStrides(dd), axis, idx);
    return DispatchByElementSize(data->dtype(), "GatherElements", [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, AllocateAnyOutput(ctx, 0, data->dtype(), id));
      const T* src = ElementsOf<T>(*data);
      T* dst = MutableElementsOf<T>(*y);
      for (size_t e = 0; e < offsets.size(); ++e) dst[e] = src[offsets[e]];
      return Status::Ok();
    });
  }

 private:
  int64_t axis_;
};

}  // namespace

void RegisterGatherKernels(exec::KernelRegistry& r) {
  r.Register({"Gather", "", 1, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<GatherCpu>});
  r.Register({"GatherElements", "", 11, 25, exec::Device::kCpu, {}, 0, &exec::MakeKernel<GatherElementsCpu>});
}

}  // namespace onnxamp::ops
