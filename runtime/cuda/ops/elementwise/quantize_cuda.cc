// CUDA kernels (host side) of QuantizeLinear and DequantizeLinear (device work in quantize.cu), so that QDQ models and
// the eval graphs of quantization-aware training run on the device. Attributes, layouts (per tensor, per axis,
// blocked), types and messages are the CPU kernels' (runtime/ops/quantize/quant_spec.h), except that QuantizeLinear's
// scale is not read back to check it for zeros and non-finite values (that would wait for the device): a zero scale
// saturates where the CPU kernel stops with an error. Also DynamicQuantizeLinear, computing its range on the device.
#include <cstdint>
#include <string>

#include "runtime/cuda/cuda_context.h"
#include "runtime/cuda/ops/elementwise/elementwise_kernels.h"
#include "runtime/cuda/ops/elementwise/quantize_launch.h"
#include "runtime/cuda/ops/register_like_cpu.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/quantize/quant_spec.h"
#include "runtime/ops/quantize/quantized_types.h"

namespace onnxamp::cuda {
namespace {

ew::QuantIndex IndexOf(const ops::QuantLayout& l, int64_t n) {
  return ew::QuantIndex{n, l.outer, l.dim, l.inner, l.block, l.per_tensor};
}

// The CPU's message for a type DispatchQuantized does not take.
Status CheckQuantizedType(DType t, bool with_int32, std::string_view what) {
  return ops::DispatchQuantized(t, with_int32, what, [](auto) { return Status::Ok(); });
}

class CudaQuantizeLinear : public exec::OpKernel {
 public:
  CudaQuantizeLinear(const exec::KernelInfo& info, Status* st) { *st = spec_.Init(info); }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, ops::RequireInput(ctx, 0, "x"));
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* scale, ops::RequireInput(ctx, 1, "y_scale"));
    const ir::Tensor* zp = ctx.input(2);
    ONNXAMP_ASSIGN_OR_RETURN(const ops::QuantLayout l, spec_.Layout(ctx, *x, *scale, zp));
    ONNXAMP_ASSIGN_OR_RETURN(const DType out, ops::QuantizeOutputType(ctx, spec_.output_dtype(), zp));
    ONNXAMP_RETURN_IF_ERROR(ops::CheckQuantFloatType(*x, true, false, ops::InputLabel(ctx, 0, "x")));
    ONNXAMP_RETURN_IF_ERROR(ops::CheckQuantFloatType(*scale, false, false, ops::InputLabel(ctx, 1, "y_scale")));
    ONNXAMP_RETURN_IF_ERROR(CheckQuantizedType(out, false, "the output type"));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, out, x->dims()));
    return ew::LaunchQuantizeLinear(x->dtype(), x->data(), scale->dtype(), scale->data(), zp ? zp->data() : nullptr,
                                    out, y->mutable_data(), IndexOf(l, x->num_elements()), GetCudaContext(ctx).stream(),
                                    ctx.node().op_type());
  }

 private:
  ops::QuantSpec spec_;
};

class CudaDequantizeLinear : public exec::OpKernel {
 public:
  CudaDequantizeLinear(const exec::KernelInfo& info, Status* st) { *st = spec_.Init(info); }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, ops::RequireInput(ctx, 0, "x"));
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* scale, ops::RequireInput(ctx, 1, "x_scale"));
    const ir::Tensor* zp = ctx.input(2);
    ONNXAMP_RETURN_IF_ERROR(ops::CheckDequantizeZeroPoint(ctx, *x, zp));
    ONNXAMP_ASSIGN_OR_RETURN(const ops::QuantLayout l, spec_.Layout(ctx, *x, *scale, zp));
    ONNXAMP_ASSIGN_OR_RETURN(const DType out, ops::DequantizeOutputType(spec_.output_dtype(), *scale));
    ONNXAMP_RETURN_IF_ERROR(ops::CheckQuantFloatType(*scale, false, true, ops::InputLabel(ctx, 1, "x_scale")));
    ONNXAMP_RETURN_IF_ERROR(CheckQuantizedType(x->dtype(), true, ops::InputLabel(ctx, 0, "x")));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, out, x->dims()));
    return ew::LaunchDequantizeLinear(x->dtype(), x->data(), scale->dtype(), scale->data(), zp ? zp->data() : nullptr,
                                      out, y->mutable_data(), IndexOf(l, x->num_elements()),
                                      GetCudaContext(ctx).stream(), ctx.node().op_type());
  }

 private:
  ops::QuantSpec spec_;
};

// DynamicQuantizeLinear(x) -> y (uint8), y_scale, y_zero_point: the range, scale and zero point computed on the
// device (quantize.cu), so nothing waits for the device; x is not checked for non-finite values (the CPU's error).
class CudaDynamicQuantizeLinear : public exec::OpKernel {
 public:
  CudaDynamicQuantizeLinear(const exec::KernelInfo&, Status*) {}

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* x, ops::RequireInput(ctx, 0, "x"));
    if (x->dtype() != DType::kFloat32) {
      return InvalidArgument(ops::InputLabel(ctx, 0, "x"), " is ", DTypeName(x->dtype()), ", expected float");
    }
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, DType::kUint8, x->dims()));
    float* scale = nullptr;
    uint8_t* zero = nullptr;
    if (ctx.num_outputs() > 1 && ctx.output_requested(1)) {
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * s, ctx.AllocateOutput(1, DType::kFloat32, {}));
      scale = reinterpret_cast<float*>(s->mutable_data());
    }
    if (ctx.num_outputs() > 2 && ctx.output_requested(2)) {
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * z, ctx.AllocateOutput(2, DType::kUint8, {}));
      zero = reinterpret_cast<uint8_t*>(z->mutable_data());
    }
    const int64_t n = x->num_elements();
    CudaContext& cuda = GetCudaContext(ctx);
    ONNXAMP_ASSIGN_OR_RETURN(void* workspace,
                             cuda.Workspace(static_cast<size_t>(2 * ew::DynamicQuantizeBlocks(n)) * sizeof(float)));
    return ew::LaunchDynamicQuantize(reinterpret_cast<const float*>(x->data()), n,
                                     reinterpret_cast<uint8_t*>(y->mutable_data()), scale, zero,
                                     static_cast<float*>(workspace), cuda.stream(), ctx.node().op_type());
  }
};

}  // namespace

void RegisterCudaQuantizeKernels(exec::KernelRegistry& r) {
  RegisterLikeCpu(r, "DynamicQuantizeLinear", &exec::MakeKernel<CudaDynamicQuantizeLinear>);
  RegisterLikeCpu(r, "QuantizeLinear", &exec::MakeKernel<CudaQuantizeLinear>);
  RegisterLikeCpu(r, "DequantizeLinear", &exec::MakeKernel<CudaDequantizeLinear>);
}

}  // namespace onnxamp::cuda
