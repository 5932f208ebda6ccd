// CUDA GatherGrad, GatherElementsGrad, SliceGrad, PadGrad and ResizeGrad (com.onnxamp, runtime/ops/gradient_ops.h):
// the same checks as the CPU kernels (with the helpers of runtime/ops/<op>/<op>.h), the forward's own per-axis maps
// and tables built on the host, then the launchers of index_grad_kernels.cu. Shapes, starts/ends/axes/steps, pads
// and roi/scales/sizes are host inputs; dY and the indices stay on the device.
//
// The indices of GatherGrad and GatherElementsGrad are read on the device (as CUDA Gather reads them), so an index
// outside [-dim, dim) cannot be reported as the CPU kernel reports it without a host synchronisation: on CUDA it
// contributes nothing and the run succeeds. Every sum is in a fixed order (index_grad_launch.h): the same bits on
// every run.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/cuda_context.h"
#include "runtime/cuda/ops/register_like_cpu.h"
#include "runtime/cuda/ops/tensor/index_grad_launch.h"
#include "runtime/cuda/ops/tensor/tensor_util.h"
#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/gather/gather.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/pad/pad.h"
#include "runtime/ops/resize/resize.h"
#include "runtime/ops/slice/slice.h"

namespace onnxamp::cuda::tensor_ops {
namespace {

using ops::InputLabel;
using ops::RequireInput;
using ops::ShapeToString;

// The dims of a shape input (host int64), checked non-negative as the CPU kernels check them.
StatusOr<std::vector<int64_t>> ReadShapeInput(const exec::KernelContext& ctx, size_t i, std::string_view role) {
  ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* t, RequireInput(ctx, i, role));
  const std::string label = InputLabel(ctx, i, role);
  ONNXAMP_ASSIGN_OR_RETURN(std::vector<int64_t> dims, ops::ReadInt64s(*t, label));
  for (int64_t d : dims) {
    if (d < 0) return InvalidArgument(label, " has a negative dim: ", ShapeToString(dims));
  }
  return dims;
}

// The inverse of per-axis forward maps (output index -> input index, -1 for none) as MapAdjoint tables: per axis,
// in_dims[k] + 1 list bounds, then the output indices reading each input index in ascending order.
std::vector<int64_t> InverseMapTable(const std::vector<std::vector<int64_t>>& maps, const std::vector<int64_t>& in_dims,
                                     MapAdjointArgs* args) {
  std::vector<int64_t> table;
  for (size_t k = 0; k < maps.size(); ++k) {
    const int64_t n = in_dims[k];
    std::vector<int64_t> bounds(static_cast<size_t>(n) + 1, 0);
    for (int64_t v : maps[k]) {
      if (v >= 0) ++bounds[static_cast<size_t>(v) + 1];
    }
    for (int64_t v = 0; v < n; ++v) bounds[v + 1] += bounds[v];
    std::vector<int64_t> entries(static_cast<size_t>(bounds[n]));
    std::vector<int64_t> fill(bounds.begin(), bounds.end() - 1);
    for (size_t o = 0; o < maps[k].size(); ++o) {
      const int64_t v = maps[k][o];
      if (v >= 0) entries[static_cast<size_t>(fill[v]++)] = static_cast<int64_t>(o);
    }
    args->starts[k] = static_cast<int64_t>(table.size());
    table.insert(table.end(), bounds.begin(), bounds.end());
    args->offsets[k] = static_cast<int64_t>(table.size());
    table.insert(table.end(), entries.begin(), entries.end());
  }
  return table;
}

// dX (dims in_dims) = the adjoint of the per-axis maps applied to dY (dims out_dims): uploads the inverse tables
// through `cache` and launches MapAdjoint. Rank 0 copies the one element.
Status RunMapAdjoint(exec::KernelContext& ctx, const ir::Tensor& dy, ir::Tensor& dx,
                     const std::vector<std::vector<int64_t>>& maps, const DeviceTable& cache, std::string_view what) {
  const std::vector<int64_t>& in_dims = dx.dims();
  const size_t rank = in_dims.size();
  if (dx.num_elements() == 0) return Status::Ok();
  CudaContext& cc = GetCudaContext(ctx);
  if (rank == 0) return cc.CopyDeviceToDevice(dy.data(), dx.mutable_data(), dx.nbytes());
  if (rank > static_cast<size_t>(kMaxGradRank)) {
    return Unimplemented(what, ": rank ", rank, " is above the ", kMaxGradRank, " dims the cuda kernel takes");
  }
  MapAdjointArgs args;
  args.rank = static_cast<int>(rank);
  const std::vector<int64_t> dy_strides = ops::ContiguousStrides(dy.dims());
  for (size_t k = 0; k < rank; ++k) {
    args.in_dims[k] = in_dims[k];
    args.dy_strides[k] = dy_strides[k];
  }
  std::vector<std::byte> bytes;
  Append(bytes, InverseMapTable(maps, in_dims, &args));
  ONNXAMP_ASSIGN_OR_RETURN(std::shared_ptr<ir::Buffer> table, cache.Upload(ctx, std::move(bytes)));
  return LaunchMapAdjoint(dx.dtype(), dx.mutable_data(), dy.data(), reinterpret_cast<const int64_t*>(table->data()),
                          args, cc.stream());
}

class GatherGradCuda : public exec::OpKernel {
 public:
  GatherGradCuda(const exec::KernelInfo& info, Status*) : axis_(info.node.GetInt("axis", 0)) {}

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* dy, RequireInput(ctx, 0, "dY"));
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* indices, RequireInput(ctx, 1, "indices"));
    ONNXAMP_ASSIGN_OR_RETURN(const std::vector<int64_t> data_dims, ReadShapeInput(ctx, 2, "data_shape"));
    ONNXAMP_ASSIGN_OR_RETURN(const bool idx64, ops::IndicesAreInt64(ctx, *indices));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * dx, ctx.AllocateOutput(0, dy->dtype(), data_dims));
    ONNXAMP_ASSIGN_OR_RETURN(const ops::GatherShape shape, ops::ResolveGather(*dx, *indices, axis_));
    ONNXAMP_RETURN_IF_ERROR(ops::CheckGatherGradDy(ctx, *dy, *indices, shape, data_dims));
    return LaunchGatherGrad(dy->dtype(), dx->mutable_data(), dy->data(), indices->data(), idx64, shape.outer,
                            data_dims[shape.axis], indices->num_elements(), shape.inner, WorkspaceOf(ctx),
                            GetCudaContext(ctx).stream());
  }

 private:
  int64_t axis_;
};

class GatherElementsGradCuda : public exec::OpKernel {
 public:
  GatherElementsGradCuda(const exec::KernelInfo& info, Status*) : axis_(info.node.GetInt("axis", 0)) {}

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* dy, RequireInput(ctx, 0, "dY"));
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* indices, RequireInput(ctx, 1, "indices"));
    ONNXAMP_ASSIGN_OR_RETURN(const std::vector<int64_t> data_dims, ReadShapeInput(ctx, 2, "data_shape"));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * dx, ctx.AllocateOutput(0, dy->dtype(), data_dims));
    ONNXAMP_ASSIGN_OR_RETURN(const int64_t axis, ops::ResolveGatherElements(ctx, *dx, *indices, axis_));
    const std::vector<int64_t>& id = indices->dims();
    if (dy->dims() != id) {
      return InvalidArgument(InputLabel(ctx, 0, "dY"), " has shape ", ShapeToString(dy->dims()),
                             "; expected the indices' shape ", ShapeToString(id));
    }
    ONNXAMP_ASSIGN_OR_RETURN(const bool idx64, ops::IndicesAreInt64(ctx, *indices));
    if (data_dims.size() > static_cast<size_t>(kMaxGradRank)) {
      return Unimplemented("GatherElementsGrad: rank ", data_dims.size(), " is above the ", kMaxGradRank,
                           " dims the cuda kernel takes");
    }
    GatherElementsGradArgs args;
    args.rank = static_cast<int>(data_dims.size());
    args.axis = static_cast<int>(axis);
    args.dim = data_dims[axis];
    args.dx_count = dx->num_elements();
    const std::vector<int64_t> ds = ops::ContiguousStrides(data_dims);
    for (size_t k = 0; k < data_dims.size(); ++k) {
      args.idx_dims[k] = id[k];
      args.data_strides[k] = ds[k];
    }
    return LaunchGatherElementsGrad(dy->dtype(), dx->mutable_data(), dy->data(), indices->data(), idx64, args,
                                    WorkspaceOf(ctx), GetCudaContext(ctx).stream());
  }

 private:
  int64_t axis_;
};

class SliceGradCuda : public exec::OpKernel {
 public:
  SliceGradCuda(const exec::KernelInfo&, Status*) {}

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* dy, RequireInput(ctx, 0, "dY"));
    ONNXAMP_ASSIGN_OR_RETURN(const std::vector<int64_t> x_dims, ReadShapeInput(ctx, 1, "x_shape"));
    ONNXAMP_ASSIGN_OR_RETURN(const ops::SliceView v, ops::ResolveSliceInputs(ctx, 2, x_dims));
    if (dy->dims() != v.out_dims) {
      return InvalidArgument(InputLabel(ctx, 0, "dY"), " has shape ", ShapeToString(dy->dims()), "; expected ",
                             ShapeToString(v.out_dims), " (Slice's output for input ", ShapeToString(x_dims), ")");
    }
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * dx, ctx.AllocateOutput(0, dy->dtype(), x_dims));
    if (dx->num_elements() == 0) return Status::Ok();
    CudaContext& cc = GetCudaContext(ctx);
    ONNXAMP_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(dx->mutable_data(), 0, dx->nbytes(), cc.stream()), "SliceGrad");
    if (dy->num_elements() == 0) return Status::Ok();
    // dX's view (the forward's source view) receives dY, read contiguously. A slice never takes an element twice.
    const size_t e = ElementSize(dy->dtype());
    return CopyPlanOnDevice(
        static_cast<std::byte*>(dx->mutable_data()) + v.offset * static_cast<int64_t>(e), dy->data(),
        ops::MakeCopyPlan(v.out_dims, v.src_strides, ops::ContiguousStrides(v.out_dims)), e, cc.stream(), "SliceGrad");
  }
};

class PadGradCuda : public exec::OpKernel {
 public:
  // The mode as Pad-19 reads it (every mode), as the CPU kernel.
  PadGradCuda(const exec::KernelInfo& info, Status* status) { *status = spec_.Parse(info.node, 19); }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* dy, RequireInput(ctx, 0, "dY"));
    ONNXAMP_ASSIGN_OR_RETURN(const std::vector<int64_t> x_dims, ReadShapeInput(ctx, 1, "x_shape"));
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* p, RequireInput(ctx, 2, "pads"));
    ONNXAMP_ASSIGN_OR_RETURN(const std::vector<int64_t> pads, ops::ReadInt64s(*p, InputLabel(ctx, 2, "pads")));
    std::vector<int64_t> axes;
    const ir::Tensor* a = ctx.input(3);
    if (a) {
      ONNXAMP_ASSIGN_OR_RETURN(axes, ops::ReadInt64s(*a, InputLabel(ctx, 3, "axes")));
    }
    ONNXAMP_ASSIGN_OR_RETURN(const ops::PadShape shape,
                             ops::ResolvePadShape(x_dims, pads, a ? &axes : nullptr, spec_.mode()));
    if (dy->dims() != shape.out_dims) {
      return InvalidArgument(InputLabel(ctx, 0, "dY"), " has shape ", ShapeToString(dy->dims()), "; expected ",
                             ShapeToString(shape.out_dims), " (Pad's output for input ", ShapeToString(x_dims),
                             " and pads ", ShapeToString(pads), ")");
    }
    ONNXAMP_RETURN_IF_ERROR(ops::DispatchFloat(dy->dtype(), [](auto) { return Status::Ok(); }).WithContext("PadGrad"));
    std::vector<std::vector<int64_t>> maps(x_dims.size());
    for (size_t k = 0; k < x_dims.size(); ++k) {
      maps[k] = ops::PadAxisMap(x_dims[k], shape.begin[k], shape.end[k], spec_.mode());
    }
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * dx, ctx.AllocateOutput(0, dy->dtype(), x_dims));
    return RunMapAdjoint(ctx, *dy, *dx, maps, tables_, "PadGrad");
  }

 private:
  ops::PadSpec spec_;
  DeviceTable tables_;
};

class ResizeGradCuda : public exec::OpKernel {
 public:
  ResizeGradCuda(const exec::KernelInfo& info, Status* st) {
    const bool upsample = info.node.GetString("forward_op", "Resize") == "Upsample";
    *st = spec_.Parse(info.node, info.node.GetInt("forward_opset", 0), upsample);
  }

  Status Compute(exec::KernelContext& ctx) const override {
    const ops::ResizeAttrs& attrs = spec_.attrs();
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* shape_t, RequireInput(ctx, 0, "X_shape"));
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* dy, RequireInput(ctx, 4, "dY"));
    if (shape_t->dtype() != DType::kInt64 || shape_t->rank() != 1) {
      return InvalidArgument("input 0 (X_shape) must be a 1-D int64 tensor");
    }
    const std::vector<int64_t> in_dims(shape_t->values<int64_t>().begin(), shape_t->values<int64_t>().end());
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<ops::AxisPlan> plans, spec_.PlanAxes(ctx, in_dims));
    std::vector<int64_t> out_dims;
    for (const ops::AxisPlan& a : plans) out_dims.push_back(a.out);
    if (dy->dims() != out_dims) {
      return InvalidArgument("input 4 (dY) has shape ", ShapeToString(dy->dims()), ", expected ",
                             ShapeToString(out_dims), " (the forward's output for X ", ShapeToString(in_dims), ")");
    }
    ONNXAMP_RETURN_IF_ERROR(
        ops::DispatchFloat(dy->dtype(), [](auto) { return Status::Ok(); }).WithContext("ResizeGrad"));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * dx, ctx.AllocateOutput(0, dy->dtype(), in_dims));
    for (ops::AxisPlan& a : plans) ops::PlanAxis(attrs, a);
    if (dx->num_elements() == 0) return Status::Ok();
    if (attrs.mode == ops::InterpMode::kNearest) {
      // The forward's source index per output index, identity axes mapping to themselves.
      std::vector<std::vector<int64_t>> maps(plans.size());
      for (size_t k = 0; k < plans.size(); ++k) {
        if (plans[k].identity) {
          maps[k].resize(static_cast<size_t>(plans[k].out));
          for (int64_t o = 0; o < plans[k].out; ++o) maps[k][o] = o;
        } else {
          maps[k] = plans[k].src;
        }
      }
      return RunMapAdjoint(ctx, *dy, *dx, maps, nearest_tables_, "ResizeGrad");
    }
    return Weighted(ctx, *dy, *dx, plans, out_dims)
        .WithContext(attrs.mode == ops::InterpMode::kLinear ? "ResizeGrad mode 'linear'" : "ResizeGrad mode 'cubic'");
  }

 private:
  // The transposed separable passes, last axis first (as the CPU), intermediates in the compute type.
  Status Weighted(exec::KernelContext& ctx, const ir::Tensor& dy, ir::Tensor& dx,
                  const std::vector<ops::AxisPlan>& plans, const std::vector<int64_t>& out_dims) const {
    CudaContext& cc = GetCudaContext(ctx);
    const bool wide = dy.dtype() == DType::kFloat64;
    const DType compute = wide ? DType::kFloat64 : DType::kFloat32;
    std::vector<size_t> passes;
    for (size_t k = plans.size(); k-- > 0;) {
      if (!plans[k].identity) passes.push_back(k);
    }
    if (passes.empty()) return cc.CopyDeviceToDevice(dy.data(), dx.mutable_data(), dx.nbytes());
    if (dy.num_elements() == 0) {
      ONNXAMP_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(dx.mutable_data(), 0, dx.nbytes(), cc.stream()), "ResizeGrad");
      return Status::Ok();
    }
    // Per pass, the taps reading each input index in order of (output index, tap), zero weights and extrapolated
    // outputs left out as the CPU leaves them out.
    struct PassTables {
      size_t bounds, entry_o, entry_w;
    };
    std::vector<PassTables> offsets;
    std::vector<std::byte> bytes;
    for (size_t k : passes) {
      const ops::AxisPlan& a = plans[k];
      std::vector<std::vector<std::pair<int64_t, double>>> lists(static_cast<size_t>(a.in));
      for (int64_t o = 0; o < a.out; ++o) {
        if (a.extrapolate[o]) continue;
        for (int64_t t = 0; t < a.taps; ++t) {
          const double w = a.tap_weight[o * a.taps + t];
          const bool zero = wide ? w == 0.0 : static_cast<float>(w) == 0.0f;
          if (zero) continue;
          lists[static_cast<size_t>(a.tap_index[o * a.taps + t])].emplace_back(o, w);
        }
      }
      std::vector<int64_t> bounds(1, 0), entry_o;
      std::vector<double> wd;
      std::vector<float> wf;
      for (const auto& list : lists) {
        for (const auto& [o, w] : list) {
          entry_o.push_back(o);
          if (wide) {
            wd.push_back(w);
          } else {
            wf.push_back(static_cast<float>(w));
          }
        }
        bounds.push_back(static_cast<int64_t>(entry_o.size()));
      }
      PassTables t;
      t.bounds = Append(bytes, bounds);
      t.entry_o = Append(bytes, entry_o);
      t.entry_w = wide ? Append(bytes, wd) : Append(bytes, wf);
      offsets.push_back(t);
    }
    ONNXAMP_ASSIGN_OR_RETURN(std::shared_ptr<ir::Buffer> tables, weighted_tables_.Upload(ctx, std::move(bytes)));
    // Intermediates between passes in the compute type, two used alternately.
    std::shared_ptr<ir::Buffer> scratch[2];
    std::vector<int64_t> dims = out_dims;
    for (size_t p = 0; p + 1 < passes.size(); ++p) {
      dims[passes[p]] = plans[passes[p]].in;
      ONNXAMP_RETURN_IF_ERROR(ops::CheckFitsInMemory(compute, dims, "ResizeGrad intermediate"));
      ONNXAMP_ASSIGN_OR_RETURN(const size_t nbytes, ir::Tensor::ComputeByteSize(compute, dims));
      std::shared_ptr<ir::Buffer>& s = scratch[p % 2];
      if (!s || s->size() < nbytes) {
        ONNXAMP_ASSIGN_OR_RETURN(s, ctx.device_context()->Allocate(std::max<size_t>(nbytes, 1)));
      }
    }
    dims = out_dims;
    const void* src = dy.data();
    for (size_t p = 0; p < passes.size(); ++p) {
      const size_t k = passes[p];
      const ops::AxisPlan& a = plans[k];
      const bool last = p + 1 == passes.size();
      void* dst = last ? dx.mutable_data() : static_cast<void*>(scratch[p % 2]->data());
      ResizeAdjointPassArgs args;
      args.outer = ops::DimProduct(dims, 0, k);
      args.in = a.in;
      args.out = a.out;
      args.inner = ops::DimProduct(dims, k + 1, dims.size());
      args.bounds = reinterpret_cast<const int64_t*>(tables->data() + offsets[p].bounds);
      args.entry_o = reinterpret_cast<const int64_t*>(tables->data() + offsets[p].entry_o);
      args.entry_w = tables->data() + offsets[p].entry_w;
      args.src_is_storage = p == 0;
      args.dst_is_storage = last;
      ONNXAMP_RETURN_IF_ERROR(LaunchResizeAdjointPass(dy.dtype(), dst, src, args, cc.stream()));
      dims[k] = a.in;
      src = dst;
    }
    return Status::Ok();
  }

  ops::ResizeSpec spec_;
  DeviceTable nearest_tables_, weighted_tables_;
};

}  // namespace
}  // namespace onnxamp::cuda::tensor_ops

namespace onnxamp::cuda {

void RegisterCudaIndexGradKernels(exec::KernelRegistry& r) {
  RegisterLikeCpu(r, ops::kGatherGradOp, &exec::MakeKernel<tensor_ops::GatherGradCuda>, {2}, exec::kInternalDomain);
  RegisterLikeCpu(r, ops::kGatherElementsGradOp, &exec::MakeKernel<tensor_ops::GatherElementsGradCuda>, {2},
                  exec::kInternalDomain);
  RegisterLikeCpu(r, ops::kSliceGradOp, &exec::MakeKernel<tensor_ops::SliceGradCuda>, {1, 2, 3, 4, 5},
                  exec::kInternalDomain);
  RegisterLikeCpu(r, ops::kPadGradOp, &exec::MakeKernel<tensor_ops::PadGradCuda>, {1, 2, 3}, exec::kInternalDomain);
  RegisterLikeCpu(r, ops::kResizeGradOp, &exec::MakeKernel<tensor_ops::ResizeGradCuda>, {0, 1, 2, 3},
                  exec::kInternalDomain);
}

}  // namespace onnxamp::cuda
