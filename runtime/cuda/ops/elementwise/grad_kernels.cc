// CUDA kernels (host side) of the elementwise gradient ops of com.onnxamp: ReluGrad, EluGrad, GeluGrad (device work
// in activation_grad.cu), FakeQuantize and FakeQuantizeGrad (fake_quantize_cuda.cc) and DropoutGrad (the Dropout kernel
// of select.cu applied to dY: the same hash of seed and index as the CPU's DropoutGrad and the CPU and CUDA Dropout, so
// the recomputed mask is the forward's). Attributes, checks and messages are the CPU kernels'
// (runtime/ops/elementwise/, runtime/ops/dropout/).
#include <cstdint>
#include <string>

#include "runtime/cuda/cuda_context.h"
#include "runtime/cuda/ops/elementwise/activation_grad_launch.h"
#include "runtime/cuda/ops/elementwise/elementwise_kernels.h"
#include "runtime/cuda/ops/register_like_cpu.h"
#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/broadcast.h"
#include "runtime/ops/common/elementwise.h"
#include "runtime/ops/dropout/dropout.h"
#include "runtime/ops/gradient_ops.h"

namespace onnxamp::cuda {
namespace {

using ew::ActivationGradOp;

template <ActivationGradOp kOp>
class CudaActivationGrad : public exec::OpKernel {
 public:
  CudaActivationGrad(const exec::KernelInfo& info, Status* st) { *st = Init(info); }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* dy = ctx.input(0);
    const ir::Tensor* x = ctx.input(1);
    if (!dy || !x) return InvalidArgument("input ", dy ? 1 : 0, " is missing");
    if (dy->dtype() != x->dtype() || dy->dims() != x->dims()) {
      if (kOp == ActivationGradOp::kRelu) return InvalidArgument("dY and Y must have the same type and shape");
      return InvalidArgument("dY ", DTypeName(dy->dtype()), ops::ShapeToString(dy->dims()), " and X ",
                             DTypeName(x->dtype()), ops::ShapeToString(x->dims()),
                             " must have the same type and shape");
    }
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * dx, ctx.AllocateOutput(0, dy->dtype(), dy->dims()));
    return ew::LaunchActivationGrad(op_, dy->dtype(), dy->data(), x->data(), dx->mutable_data(), dy->num_elements(),
                                    alpha_, GetCudaContext(ctx).stream(), ctx.node().op_type());
  }

 private:
  Status Init(const exec::KernelInfo& info) {
    if constexpr (kOp == ActivationGradOp::kElu) {
      ONNXAMP_ASSIGN_OR_RETURN(alpha_, ops::FloatAttribute(info.node, "alpha", 1.0f));
    } else if constexpr (kOp == ActivationGradOp::kGelu) {
      ONNXAMP_ASSIGN_OR_RETURN(std::string a, ops::StringAttribute(info.node, "approximate", "none"));
      if (a == "tanh") {
        op_ = ActivationGradOp::kGeluTanh;
      } else if (a != "none") {
        return InvalidArgument("attribute 'approximate' must be \"none\" or \"tanh\", got \"", a, "\"");
      }
    }
    return Status::Ok();
  }

  ActivationGradOp op_ = kOp;
  float alpha_ = 1.0f;
};

// DropoutGrad(dY, ratio, training_mode): ratio and training_mode are host inputs read as Dropout-12 reads them; the
// seed is the forward's (attribute `seed` mixed with the run's rng_step, or the session's seed of the node named by
// `seed_from`), resolved by DropoutSpec exactly as on the CPU.
class CudaDropoutGrad : public exec::OpKernel {
 public:
  CudaDropoutGrad(const exec::KernelInfo& info, Status* st) {
    *st = spec_.Init(exec::KernelInfo{info.node, 12, info.device});
  }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* dy = nullptr;
    double ratio = 0.5;
    bool training = false;
    ONNXAMP_RETURN_IF_ERROR(spec_.Resolve(ctx, &dy, &ratio, &training));
    if (!training || ratio == 0.0) return ctx.SetOutput(0, *dy);
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * dx, ctx.AllocateOutput(0, dy->dtype(), dy->dims()));
    // The device-resident RNG step of a captured training step, as Dropout mixes it in.
    ONNXAMP_ASSIGN_OR_RETURN(const uint64_t* device_step, DeviceRngStep(ctx));
    return ew::LaunchDropout(dy->dtype(), dy->data(), dx->mutable_data(), dy->num_elements(), spec_.Seed(ctx), ratio,
                             /*mask_bool=*/nullptr, /*mask_typed=*/nullptr, GetCudaContext(ctx).stream(),
                             ctx.node().op_type(), device_step);
  }

 private:
  ops::DropoutSpec spec_;
};

}  // namespace

void RegisterCudaFakeQuantizeKernels(exec::KernelRegistry& r);  // fake_quantize_cuda.cc

void RegisterCudaElementwiseGradKernels(exec::KernelRegistry& r) {
  const char* d = exec::kInternalDomain;
  RegisterLikeCpu(r, ops::kReluGradOp, &exec::MakeKernel<CudaActivationGrad<ActivationGradOp::kRelu>>, {}, d);
  RegisterLikeCpu(r, ops::kEluGradOp, &exec::MakeKernel<CudaActivationGrad<ActivationGradOp::kElu>>, {}, d);
  RegisterLikeCpu(r, ops::kGeluGradOp, &exec::MakeKernel<CudaActivationGrad<ActivationGradOp::kGelu>>, {}, d);
  // ratio (1) and training_mode (2) are read on the host, as Dropout's.
  RegisterLikeCpu(r, ops::kDropoutGradOp, &exec::MakeKernel<CudaDropoutGrad>, {1, 2}, d);
  RegisterCudaFakeQuantizeKernels(r);
}

}  // namespace onnxamp::cuda
