// MaxPool (with the optional Indices output), AveragePool, GlobalMaxPool and GlobalAveragePool on CUDA. Attribute
// parsing, checks and messages are the CPU kernel's (runtime/ops/pool/pool_cpu.cc); the kernels (pool_kernels.cu)
// are direct loops that take every window ONNX describes (asymmetric pads, ceil_mode, dilations), which cuDNN's
// pooling does not.
#include <vector>

#include "runtime/cuda/cuda_context.h"
#include "runtime/cuda/ops/dnn/dnn_launch.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/broadcast.h"
#include "runtime/ops/common/conv_geometry.h"

namespace onnxamp::cuda::dnn {
namespace {

class PoolCuda : public exec::OpKernel {
 public:
  PoolCuda(const exec::KernelInfo& info, bool max, Status* st) {
    mode_.max = max;
    ops::WindowAttrSpec wspec;
    wspec.kernel_shape_required = true;
    if (!(*st = ops::ParseWindowAttrs(info.node, wspec, &attrs_)).ok()) return;
    int64_t ceil_mode = 0, count_include_pad = 0;
    if (!(*st = ops::GetIntAttr(info.node, "ceil_mode", 0, &ceil_mode)).ok()) return;
    if (max) {
      if (!(*st = ops::GetIntAttr(info.node, "storage_order", 0, &mode_.storage_order)).ok()) return;
      if (mode_.storage_order != 0 && mode_.storage_order != 1) {
        *st = InvalidArgument("attribute 'storage_order' must be 0 or 1, got ", mode_.storage_order);
        return;
      }
    } else {
      if (!(*st = ops::GetIntAttr(info.node, "count_include_pad", 0, &count_include_pad)).ok()) return;
    }
    if ((ceil_mode != 0 && ceil_mode != 1) || (count_include_pad != 0 && count_include_pad != 1)) {
      *st = InvalidArgument("attributes 'ceil_mode' and 'count_include_pad' must be 0 or 1");
      return;
    }
    ceil_mode_ = ceil_mode == 1;
    mode_.count_include_pad = count_include_pad == 1;
  }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    if (!x) return InvalidArgument("input X is required");
    if (x->rank() < 3) {
      return InvalidArgument("input X must have rank >= 3 ([N, C, spatial...]), got ", ops::ShapeToString(x->dims()));
    }
    const std::vector<int64_t> in(x->dims().begin() + 2, x->dims().end());
    if (attrs_.kernel_shape.size() != in.size()) {
      return InvalidArgument("attribute 'kernel_shape' ", ops::ShapeToString(attrs_.kernel_shape), " has ",
                             attrs_.kernel_shape.size(), " dims but input X ", ops::ShapeToString(x->dims()), " has ",
                             in.size(), " spatial dims");
    }
    ONNXAMP_ASSIGN_OR_RETURN(const ops::WindowGeometry g,
                             ops::ForwardGeometry(attrs_, in, attrs_.kernel_shape, ceil_mode_));
    ONNXAMP_ASSIGN_OR_RETURN(const WindowParams params, MakeWindowParams(g));
    std::vector<int64_t> out_dims = {x->dims()[0], x->dims()[1]};
    out_dims.insert(out_dims.end(), g.out.begin(), g.out.end());
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
  ops::WindowAttrs attrs_;
  bool ceil_mode_ = false;
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
    if (!x) return InvalidArgument("input X is required");
    if (x->rank() < 2) {
      return InvalidArgument("input X must have rank >= 2 ([N, C, ...]), got ", ops::ShapeToString(x->dims()));
    }
    std::vector<int64_t> out_dims = x->dims();
    for (size_t d = 2; d < out_dims.size(); ++d) out_dims[d] = 1;
    const int64_t planes = x->dims()[0] * x->dims()[1];
    const int64_t size = planes == 0 ? 0 : x->num_elements() / planes;
    if (size == 0 && planes > 0) {
      return InvalidArgument("input X ", ops::ShapeToString(x->dims()), " has no spatial elements to pool");
    }
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
