// CUDA kernels (host side) of com.onnxamp FakeQuantize and FakeQuantizeGrad (device work in fake_quantize.cu): the
// training graphs' QuantizeLinear -> DequantizeLinear pairs (trainer/graph/fake_quantize.h), so that
// quantization-aware training on the GPU keeps its activations and weights on the device. Attributes, layouts and
// messages are the CPU kernels' (runtime/ops/quantize/quantize_cpu.cc), except that the scale is not read back to
// check it for zeros and non-finite values (that would wait for the device in every step): a zero scale gives
// infinities or NaN, which the GradScaler's check catches, where the CPU kernel stops with an error.
#include <cstdint>
#include <string>

#include "runtime/cuda/cuda_context.h"
#include "runtime/cuda/ops/elementwise/fake_quantize_launch.h"
#include "runtime/cuda/ops/register_like_cpu.h"
#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/elementwise.h"
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/quantize/quant_spec.h"

namespace onnxamp::cuda {
namespace {

// The kernels' layout and device parameters for x (input x_input), its scale and zero point (the next two inputs), by
// the CPU kernels' rules and messages.
StatusOr<ew::FakeQuantLayout> DeviceLayout(const ops::FakeQuantSpec& spec, const exec::KernelContext& ctx,
                                           size_t x_input, const ir::Tensor& x, ew::FakeQuantParams* p) {
  const ir::Tensor* scale = ctx.input(x_input + 1);
  if (!scale) return InvalidArgument(ops::InputLabel(ctx, x_input + 1, "scale"), " is missing");
  ONNXAMP_ASSIGN_OR_RETURN(const ops::QuantLayout q, spec.Layout(ctx, x_input, x, *scale));
  const ir::Tensor* zp = ctx.input(x_input + 2);
  p->scale = scale->data();
  p->zero_point = zp ? zp->data() : nullptr;
  p->zero_point_type = zp ? zp->dtype() : DType::kUndefined;
  p->qmin = spec.qmin();
  p->qmax = spec.qmax();
  return ew::FakeQuantLayout{x.num_elements(), q.outer, q.dim, q.inner, q.per_tensor};
}

class CudaFakeQuantize : public exec::OpKernel {
 public:
  CudaFakeQuantize(const exec::KernelInfo& info, Status* st) { *st = spec_.Init(info); }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    if (!x) return InvalidArgument(ops::InputLabel(ctx, 0, "x"), " is missing");
    ew::FakeQuantParams p;
    ONNXAMP_ASSIGN_OR_RETURN(ew::FakeQuantLayout l, DeviceLayout(spec_, ctx, 0, *x, &p));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), x->dims()));
    return ew::LaunchFakeQuantize(x->dtype(), x->data(), p, y->mutable_data(), l, GetCudaContext(ctx).stream(),
                                  ctx.node().op_type());
  }

 private:
  ops::FakeQuantSpec spec_;
};

class CudaFakeQuantizeGrad : public exec::OpKernel {
 public:
  CudaFakeQuantizeGrad(const exec::KernelInfo& info, Status* st) { *st = spec_.Init(info); }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* dy = ctx.input(0);
    const ir::Tensor* x = ctx.input(1);
    if (!dy || !x) return InvalidArgument(ops::InputLabel(ctx, dy ? 1 : 0, dy ? "x" : "dY"), " is missing");
    if (dy->dims() != x->dims() || dy->dtype() != x->dtype()) {
      return InvalidArgument(ops::InputLabel(ctx, 0, "dY"), " is ", DTypeName(dy->dtype()), " ",
                             ops::ShapeToString(dy->dims()), ", expected x's ", DTypeName(x->dtype()), " ",
                             ops::ShapeToString(x->dims()));
    }
    ew::FakeQuantParams p;
    ONNXAMP_ASSIGN_OR_RETURN(ew::FakeQuantLayout l, DeviceLayout(spec_, ctx, 1, *x, &p));
    CudaContext& cuda = GetCudaContext(ctx);
    void* dx = nullptr;
    if (ctx.output_requested(0)) {
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * t, ctx.AllocateOutput(0, x->dtype(), x->dims()));
      dx = t->mutable_data();
    }
    void* dscale = nullptr;
    double* workspace = nullptr;
    int partials = 0;
    if (ctx.num_outputs() > 1 && ctx.output_requested(1)) {
      const ir::Tensor* scale = ctx.input(2);
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * t, ctx.AllocateOutput(1, scale->dtype(), scale->dims()));
      dscale = t->mutable_data();
      if (l.per_tensor) {
        partials = ew::FakeQuantizePartialBlocks(l.n);
        ONNXAMP_ASSIGN_OR_RETURN(void* w, cuda.Workspace(sizeof(double) * static_cast<size_t>(partials)));
        workspace = static_cast<double*>(w);
      }
    }
    return ew::LaunchFakeQuantizeGrad(x->dtype(), dy->data(), x->data(), p, dx, dscale, workspace, partials, l,
                                      cuda.stream(), ctx.node().op_type());
  }

 private:
  ops::FakeQuantSpec spec_;
};

}  // namespace

void RegisterCudaFakeQuantizeKernels(exec::KernelRegistry& r) {
  RegisterLikeCpu(r, ops::kFakeQuantizeOp, &exec::MakeKernel<CudaFakeQuantize>, {}, exec::kInternalDomain);
  RegisterLikeCpu(r, ops::kFakeQuantizeGradOp, &exec::MakeKernel<CudaFakeQuantizeGrad>, {}, exec::kInternalDomain);
}

}  // namespace onnxamp::cuda
