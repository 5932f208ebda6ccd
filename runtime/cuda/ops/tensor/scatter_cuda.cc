// CUDA GatherND, ScatterND, ScatterElements, Scatter (opsets 9-10) and com.onnxamp GatherNDGrad: the checks of the CPU
// kernels (runtime/ops/gather/gather.h, runtime/ops/scatter/scatter.h: same messages), registered for what the CPU
// kernels take (RegisterLikeCpu), then the launchers of scatter_kernels.cu. GatherNDGrad's data_shape is a host input;
// data, indices, updates and dY stay on the device.
//
// The indices are read on the device (as CUDA Gather, GatherElements and GatherGrad read theirs), so an index outside
// [-dim, dim) cannot be reported as the CPU kernel reports it (OutOfRange at run time) without a host
// synchronisation: on CUDA it addresses nothing and the run succeeds. GatherND writes zero bytes for its slice,
// ScatterND and ScatterElements drop its update (the output keeps data's value there), GatherNDGrad drops its dY
// slice. Repeated destinations are applied in index order, as on the CPU (scatter_launch.h): the same bits.
#include "runtime/cuda/ops/register_like_cpu.h"
#include "runtime/cuda/ops/tensor/scatter_launch.h"
#include "runtime/cuda/ops/tensor/tensor_util.h"
#include "runtime/executor/graph_optimizer.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/gather/gather.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/scatter/scatter.h"

namespace onnxamp::cuda::tensor_ops {
namespace {

using ops::RequireInput;

// The tuple addressing of `s` over data of `data_dims` viewed as [rows, s.slice] (s.slice > 0).
StatusOr<NdIndexArgs> MakeNdArgs(const std::vector<int64_t>& data_dims, const ops::NdShape& s, std::string_view op) {
  if (s.m > kMaxGradRank) {
    return Unimplemented(op, ": index tuples of ", s.m, " coordinates are above the ", kMaxGradRank,
                         " the cuda kernel takes");
  }
  const std::vector<int64_t> strides = ops::ContiguousStrides(data_dims);
  NdIndexArgs a;
  a.m = static_cast<int>(s.m);
  a.tuples = s.tuples;
  a.batch_rows = s.batch_dims == 0 ? 0 : strides[static_cast<size_t>(s.batch_dims - 1)] / s.slice;
  a.rows = ops::DimProduct(data_dims, 0, data_dims.size()) / s.slice;
  for (int64_t j = 0; j < s.m; ++j) {
    const size_t d = static_cast<size_t>(s.batch_dims + j);
    a.dims[j] = data_dims[d];
    a.row_strides[j] = strides[d] / s.slice;
  }
  return a;
}

class GatherNDCuda : public exec::OpKernel {
 public:
  GatherNDCuda(const exec::KernelInfo& info, Status*) : batch_dims_(info.node.GetInt("batch_dims", 0)) {}

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* data, RequireInput(ctx, 0, "data"));
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* indices, RequireInput(ctx, 1, "indices"));
    ONNXAMP_ASSIGN_OR_RETURN(const ops::NdShape s, ops::ResolveNdShape(ctx, data->dims(), *indices, batch_dims_));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, data->dtype(), s.out_dims));
    ONNXAMP_RETURN_IF_ERROR(CheckMovableLikeCpu(data->dtype(), "GatherND"));
    if (y->num_elements() == 0) return Status::Ok();
    ONNXAMP_ASSIGN_OR_RETURN(const NdIndexArgs args, MakeNdArgs(data->dims(), s, "GatherND"));
    const size_t e = ElementSize(data->dtype());
    const size_t unit = WidestUnit(e, static_cast<size_t>(s.slice) * e, DeviceData(*data), MutableDeviceData(*y));
    return LaunchGatherND(MutableDeviceData(*y), DeviceData(*data), DeviceData(*indices),
                          indices->dtype() == DType::kInt64, args, s.batch * s.tuples,
                          static_cast<int64_t>(static_cast<size_t>(s.slice) * e / unit), unit,
                          GetCudaContext(ctx).stream());
  }

 private:
  int64_t batch_dims_;
};

class GatherNDGradCuda : public exec::OpKernel {
 public:
  GatherNDGradCuda(const exec::KernelInfo& info, Status*) : batch_dims_(info.node.GetInt("batch_dims", 0)) {}

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ops::NdGradShape g,
                             ops::ResolveGatherNDGrad(ctx, batch_dims_, /*read_indices=*/false));
    const ir::Tensor* dy = ctx.input(0);
    const ir::Tensor* indices = ctx.input(1);
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * dx, ctx.AllocateOutput(0, dy->dtype(), g.data_dims));
    if (dx->num_elements() == 0) return Status::Ok();
    ONNXAMP_ASSIGN_OR_RETURN(const NdIndexArgs args, MakeNdArgs(g.data_dims, g.nd, "GatherNDGrad"));
    return LaunchGatherNDGrad(dy->dtype(), MutableDeviceData(*dx), DeviceData(*dy), DeviceData(*indices),
                              indices->dtype() == DType::kInt64, args, g.nd.batch * g.nd.tuples, g.nd.slice,
                              WorkspaceOf(ctx), GetCudaContext(ctx).stream());
  }

 private:
  int64_t batch_dims_;
};

// ScatterElements and Scatter (one element per index, along `axis`), or ScatterND (one slice per index tuple).
class ScatterCuda : public exec::OpKernel {
 public:
  ScatterCuda(const exec::KernelInfo& info, Status* status)
      : nd_(info.node.op_type() == "ScatterND"), axis_(info.node.GetInt("axis", 0)) {
    StatusOr<ops::ScatterReduction> r = ops::ParseScatterReduction(info);
    if (!r.ok()) {
      *status = r.status();
      return;
    }
    static_assert(static_cast<int>(ops::ScatterReduction::kMin) == static_cast<int>(ScatterCombine::kMin));
    combine_ = static_cast<ScatterCombine>(static_cast<int>(*r));
  }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* data, RequireInput(ctx, 0, "data"));
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* indices, RequireInput(ctx, 1, "indices"));
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* updates, RequireInput(ctx, 2, "updates"));
    const std::vector<int64_t>& dd = data->dims();
    const char* op = nd_ ? "ScatterND" : "ScatterElements";
    ops::NdShape nd;
    int64_t axis = 0;
    if (nd_) {
      ONNXAMP_ASSIGN_OR_RETURN(nd, ops::ResolveNdShape(ctx, dd, *indices, 0));
      ONNXAMP_RETURN_IF_ERROR(ops::CheckScatterUpdates(ctx, *data, *updates, nd.out_dims));
    } else {
      ONNXAMP_ASSIGN_OR_RETURN(axis, ops::ResolveGatherElements(ctx, *data, *indices, axis_));
      ONNXAMP_RETURN_IF_ERROR(ops::CheckScatterUpdates(ctx, *data, *updates, indices->dims()));
      ONNXAMP_RETURN_IF_ERROR(ops::IndicesAreInt64(ctx, *indices).status());
    }
    const bool idx64 = indices->dtype() == DType::kInt64;
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * out, ctx.AllocateOutput(0, data->dtype(), dd));
    // The CPU's refusals: sub-byte types without a reduction, non-numeric types with one.
    if (combine_ == ScatterCombine::kNone) {
      ONNXAMP_RETURN_IF_ERROR(CheckMovableLikeCpu(data->dtype(), op));
    } else {
      ONNXAMP_RETURN_IF_ERROR(ops::DispatchNumericOrBool(data->dtype(), [](auto) { return Status::Ok(); }));
    }
    if (out->num_elements() == 0) return Status::Ok();
    CudaContext& cc = GetCudaContext(ctx);
    ONNXAMP_RETURN_IF_ERROR(cc.CopyDeviceToDevice(DeviceData(*data), MutableDeviceData(*out), data->nbytes()));
    if (updates->num_elements() == 0) return Status::Ok();
    if (nd_) {
      ONNXAMP_ASSIGN_OR_RETURN(const NdIndexArgs args, MakeNdArgs(dd, nd, op));
      return LaunchScatterND(data->dtype(), combine_, MutableDeviceData(*out), DeviceData(*updates),
                             DeviceData(*indices), idx64, args, nd.batch * nd.tuples, nd.slice, WorkspaceOf(ctx),
                             cc.stream());
    }
    if (dd.size() > static_cast<size_t>(kMaxGradRank)) {
      return Unimplemented(op, ": rank ", dd.size(), " is above the ", kMaxGradRank, " dims the cuda kernel takes");
    }
    GatherElementsGradArgs args;
    args.rank = static_cast<int>(dd.size());
    args.axis = static_cast<int>(axis);
    args.dim = dd[static_cast<size_t>(axis)];
    args.dx_count = data->num_elements();
    const std::vector<int64_t> strides = ops::ContiguousStrides(dd);
    for (size_t k = 0; k < dd.size(); ++k) {
      args.idx_dims[k] = indices->dims()[k];
      args.data_strides[k] = strides[k];
    }
    return LaunchScatterElements(data->dtype(), combine_, MutableDeviceData(*out), DeviceData(*updates),
                                 DeviceData(*indices), idx64, args, WorkspaceOf(ctx), cc.stream());
  }

 private:
  bool nd_;
  int64_t axis_;
  ScatterCombine combine_ = ScatterCombine::kNone;
};

}  // namespace

void RegisterScatterKernels(exec::KernelRegistry& r) {
  RegisterLikeCpu(r, "GatherND", &exec::MakeKernel<GatherNDCuda>);
  RegisterLikeCpu(r, ops::kGatherNDGradOp, &exec::MakeKernel<GatherNDGradCuda>, {2}, exec::kInternalDomain);
  RegisterLikeCpu(r, "ScatterElements", &exec::MakeKernel<ScatterCuda>);
  RegisterLikeCpu(r, "Scatter", &exec::MakeKernel<ScatterCuda>);
  RegisterLikeCpu(r, "ScatterND", &exec::MakeKernel<ScatterCuda>);
}

}  // namespace onnxamp::cuda::tensor_ops
