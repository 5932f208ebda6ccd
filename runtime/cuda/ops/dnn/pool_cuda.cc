// MaxPool (with the optional Indices output), AveragePool, GlobalMaxPool and GlobalAveragePool on CUDA, and their
// channels-last forms of the internal domain (ChannelsLastMaxPool, ChannelsLastAveragePool: X [N, spatial..., C] ->
// Y [N, out spatial..., C]; ChannelsLastGlobalAveragePool: X [N, spatial..., C] -> Y [N, C, 1, ...]; see
// graph_optimizer.h). Attribute parsing, checks and messages are the CPU kernel's (runtime/ops/pool/pool_cpu.cc),
// for the channels-last ops on the logical (NCHW-order) dims; the kernels (pool_kernels.cu) are direct loops that
// take every window ONNX describes (asymmetric pads, ceil_mode, dilations), which cuDNN's pooling does not, in
// either layout.
#include <vector>

#include "runtime/cuda/cuda_context.h"
#include "runtime/cuda/ops/dnn/dnn_launch.h"
#include "runtime/cuda/ops/register_like_cpu.h"
#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/layout/channels_last.h"
#include "runtime/ops/pool/pool.h"

namespace onnxamp::cuda::dnn {
namespace {

// MaxPool / AveragePool, and with channels_last ChannelsLastMaxPool / ChannelsLastAveragePool (no Indices).
class PoolCuda : public exec::OpKernel {
 public:
  PoolCuda(const exec::KernelInfo& info, bool max, bool channels_last, Status* st) {
    if (channels_last && !(*st = ops::CheckChannelsLastNode(info.node, /*single_input=*/true)).ok()) return;
    if (!(*st = ops::ParsePoolAttrs(info.node, max, &attrs_)).ok()) return;
    mode_.max = max;
    mode_.storage_order = attrs_.storage_order;
    mode_.count_include_pad = attrs_.count_include_pad;
    mode_.channels_last = channels_last;
  }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    ir::Tensor x_view;
    const ir::Tensor* logical = x;
    if (mode_.channels_last) {
      ONNXAMP_RETURN_IF_ERROR(ops::CheckChannelsLastInput(x));
      ONNXAMP_ASSIGN_OR_RETURN(x_view, ops::LogicalView(*x));
      logical = &x_view;
    }
    ops::WindowGeometry g;
    std::vector<int64_t> out_dims;
    ONNXAMP_RETURN_IF_ERROR(ops::ResolvePool(attrs_, logical, &g, &out_dims));
    ONNXAMP_ASSIGN_OR_RETURN(const WindowParams params, MakeWindowParams(g));
    PoolMode mode = mode_;
    if (mode_.channels_last) {
      // Y [N, out..., C].
      mode.channels = out_dims[1];
      out_dims.erase(out_dims.begin() + 1);
      out_dims.push_back(mode.channels);
    }
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), out_dims));
    int64_t* indices = nullptr;
    if (mode_.max && !mode_.channels_last && ctx.num_outputs() > 1 && ctx.output_requested(1)) {
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * ind, ctx.AllocateOutput(1, DType::kInt64, out_dims));
      indices = reinterpret_cast<int64_t*>(ind->mutable_data());
    }
    if (y->num_elements() == 0) return Status::Ok();
    const int64_t planes = logical->dims()[0] * logical->dims()[1];
    return LaunchPool(GetCudaContext(ctx).stream(), x->dtype(), mode, planes, params, x->data(), y->mutable_data(),
                      indices);
  }

 private:
  PoolMode mode_;
  ops::PoolAttrs attrs_;
};

class MaxPoolCuda : public PoolCuda {
 public:
  MaxPoolCuda(const exec::KernelInfo& info, Status* st) : PoolCuda(info, true, false, st) {}
};

class AveragePoolCuda : public PoolCuda {
 public:
  AveragePoolCuda(const exec::KernelInfo& info, Status* st) : PoolCuda(info, false, false, st) {}
};

class ChannelsLastMaxPoolCuda : public PoolCuda {
 public:
  ChannelsLastMaxPoolCuda(const exec::KernelInfo& info, Status* st) : PoolCuda(info, true, true, st) {}
};

class ChannelsLastAveragePoolCuda : public PoolCuda {
 public:
  ChannelsLastAveragePoolCuda(const exec::KernelInfo& info, Status* st) : PoolCuda(info, false, true, st) {}
};

class GlobalPoolCuda : public exec::OpKernel {
 public:
  explicit GlobalPoolCuda(bool max) : max_(max) {}

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    std::vector<int64_t> out_dims;
    int64_t planes = 0, size = 0;
    ONNXAMP_RETURN_IF_ERROR(ops::ResolveGlobalPool(x, &out_dims, &planes, &size));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), out_dims));
    return LaunchGlobalPool(GetCudaContext(ctx).stream(), x->dtype(), max_, planes, size, x->data(), y->mutable_data());
  }

 private:
  bool max_;
};

class GlobalAveragePoolCuda : public GlobalPoolCuda {
 public:
  GlobalAveragePoolCuda(const exec::KernelInfo&, Status*) : GlobalPoolCuda(false) {}
};

class GlobalMaxPoolCuda : public GlobalPoolCuda {
 public:
  GlobalMaxPoolCuda(const exec::KernelInfo&, Status*) : GlobalPoolCuda(true) {}
};

// ChannelsLastGlobalAveragePool: X [N, spatial..., C] (1 to 3 spatial dims) -> Y [N, C, 1, ...] (the rank of X).
class ChannelsLastGlobalAveragePoolCuda : public exec::OpKernel {
 public:
  ChannelsLastGlobalAveragePoolCuda(const exec::KernelInfo& info, Status* st) {
    *st = ops::CheckChannelsLastNode(info.node, /*single_input=*/true);
  }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    ONNXAMP_RETURN_IF_ERROR(ops::CheckChannelsLastInput(x));
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor logical, ops::LogicalView(*x));
    std::vector<int64_t> out_dims;
    int64_t planes = 0, size = 0;
    ONNXAMP_RETURN_IF_ERROR(ops::ResolveGlobalPool(&logical, &out_dims, &planes, &size));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), out_dims));
    if (y->num_elements() == 0) return Status::Ok();
    return LaunchGlobalAveragePoolChannelsLast(GetCudaContext(ctx).stream(), x->dtype(), logical.dims()[0],
                                               logical.dims()[1], size, x->data(), y->mutable_data());
  }
};

}  // namespace

void RegisterCudaPoolKernels(exec::KernelRegistry& r) {
  RegisterLikeCpu(r, "MaxPool", &exec::MakeKernel<MaxPoolCuda>);
  RegisterLikeCpu(r, "AveragePool", &exec::MakeKernel<AveragePoolCuda>);
  RegisterLikeCpu(r, "GlobalAveragePool", &exec::MakeKernel<GlobalAveragePoolCuda>);
  RegisterLikeCpu(r, "GlobalMaxPool", &exec::MakeKernel<GlobalMaxPoolCuda>);
  const char* d = exec::kInternalDomain;
  RegisterLikeCpu(r, exec::kChannelsLastMaxPoolOp, &exec::MakeKernel<ChannelsLastMaxPoolCuda>, {}, d);
  RegisterLikeCpu(r, exec::kChannelsLastAveragePoolOp, &exec::MakeKernel<ChannelsLastAveragePoolCuda>, {}, d);
  RegisterLikeCpu(r, exec::kChannelsLastGlobalAveragePoolOp, &exec::MakeKernel<ChannelsLastGlobalAveragePoolCuda>, {},
                  d);
}

}  // namespace onnxamp::cuda::dnn
