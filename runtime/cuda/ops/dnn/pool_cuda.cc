// MaxPool (with the optional Indices output), AveragePool, GlobalMaxPool and GlobalAveragePool on CUDA. Attribute
// parsing, checks and messages are the CPU kernel's (runtime/ops/pool/pool_cpu.cc); the kernels (pool_kernels.cu)
// are direct loops that take every window ONNX describes (asymmetric pads, ceil_mode, dilations), which cuDNN's
// pooling does not.
#include <vector>

#include "runtime/cuda/cuda_context.h"
#include "runtime/cuda/ops/dnn/dnn_launch.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/pool/pool.h"

namespace onnxamp::cuda::dnn {
namespace {

class PoolCuda : public exec::OpKernel {
 public:
  PoolCuda(const exec::KernelInfo& info, bool max, Status* st) {
    if (!(*st = ops::ParsePoolAttrs(info.node, max, &attrs_)).ok()) return;
    mode_.max = max;
    mode_.storage_order = attrs_.storage_order;
    mode_.count_include_pad = attrs_.count_include_pad;
  }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    ops::WindowGeometry g;
    std::vector<int64_t> out_dims;
    ONNXAMP_RETURN_IF_ERROR(ops::ResolvePool(attrs_, x, &g, &out_dims));
    ONNXAMP_ASSIGN_OR_RETURN(const WindowParams params, MakeWindowParams(g));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), out_dims));
    int64_t* indices = nullptr;
    if (mode_.max && ctx.num_outputs() > 1 && ctx.output_requested(1)) {
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * ind, ctx.AllocateOutput(1, DType::kInt64, out_dims));
      indices = reinterpret_cast<int64_t*>(ind->mutable_data());
    }
    if (y->num_elements() == 0) return Status::Ok();
    const int64_t planes = x->dims()[0] * x->dims()[1];
    return LaunchPool(GetCudaContext(ctx).stream(), x->dtype(), mode_, planes, params, x->data(), y->mutable_data(),
                      indices);
  }

 private:
  PoolMode mode_;
  ops::PoolAttrs attrs_;
};

class MaxPoolCuda : public PoolCuda {
 public:
  MaxPoolCuda(const exec::KernelInfo& info, Status* st) : PoolCuda(info, true, st) {}
};

class AveragePoolCuda : public PoolCuda {
 public:
  AveragePoolCuda(const exec::KernelInfo& info, Status* st) : PoolCuda(info, false, st) {}
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

}  // namespace

void RegisterCudaPoolKernels(exec::KernelRegistry& r) {
  using exec::Device;
  const std::vector<DType> floats = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64};
  std::vector<DType> max_types = floats;
  max_types.push_back(DType::kInt8);
  max_types.push_back(DType::kUint8);
  // The CPU's registrations: one kernel per op for opsets 1-23.
  r.Register({"MaxPool", "", 1, 23, Device::kCuda, max_types, 0, &exec::MakeKernel<MaxPoolCuda>});
  r.Register({"AveragePool", "", 1, 23, Device::kCuda, floats, 0, &exec::MakeKernel<AveragePoolCuda>});
  r.Register({"GlobalAveragePool", "", 1, 23, Device::kCuda, floats, 0, &exec::MakeKernel<GlobalAveragePoolCuda>});
  r.Register({"GlobalMaxPool", "", 1, 23, Device::kCuda, floats, 0, &exec::MakeKernel<GlobalMaxPoolCuda>});
}

}  // namespace onnxamp::cuda::dnn
