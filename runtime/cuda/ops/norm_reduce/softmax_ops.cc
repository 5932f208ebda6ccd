// Softmax / LogSoftmax and SoftmaxCrossEntropyLoss / NegativeLogLikelihoodLoss on CUDA: attributes and shapes
// checked by the helpers the CPU kernels use (runtime/ops/softmax/softmax.h, runtime/ops/loss/loss.h), then the
// launchers of softmax_kernels.cu. Labels and weights stay on the device: a label outside [0, C) that is not
// ignore_index gives a NaN loss there instead of the CPU's error (finding it would need a host synchronisation).
#include <optional>
#include <string>
#include <vector>

#include "runtime/cuda/ops/norm_reduce/norm_reduce_host.h"
#include "runtime/cuda/ops/norm_reduce/norm_reduce_launch.h"
#include "runtime/cuda/ops/register_like_cpu.h"
#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/common/reduce.h"
#include "runtime/ops/loss/loss.h"
#include "runtime/ops/softmax/softmax.h"

namespace onnxamp::cuda::norm_reduce {
namespace {

template <bool kLog>
class SoftmaxCuda : public exec::OpKernel {
 public:
  SoftmaxCuda(const exec::KernelInfo& info, Status* st) { *st = ops::ParseSoftmaxSpec(info, &spec_); }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    ONNXAMP_ASSIGN_OR_RETURN(const ops::reduce::AxisView v, ops::ResolveSoftmaxView(spec_, x));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), x->dims()));
    if (x->num_elements() == 0) return Status::Ok();
    return LaunchSoftmax(kLog, x->dtype(), x->data(), y->mutable_data(), v.outer, v.n, v.inner, StreamOf(ctx));
  }

 private:
  ops::SoftmaxSpec spec_;
};

template <bool kSoftmax>
class LossCuda : public exec::OpKernel {
 public:
  LossCuda(const exec::KernelInfo& info, Status* st) { *st = ops::ParseLossSpec(info, kSoftmax, &spec_); }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    const ir::Tensor* labels = ctx.input(1);
    ONNXAMP_ASSIGN_OR_RETURN(const ops::LossShape shape, ops::ResolveLossShape(spec_, x, labels));
    LossArgs a;
    ONNXAMP_RETURN_IF_ERROR(FillLossInputs(spec_, kSoftmax, shape, *x, *labels, ctx.input(2), spec_.weight_name(), &a));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * loss, ctx.AllocateOutput(0, x->dtype(), shape.loss_dims));
    a.loss = loss->mutable_data();
    const cudaStream_t stream = StreamOf(ctx);
    if (kSoftmax && ctx.output_requested(1)) {
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * log_prob, ctx.AllocateOutput(1, x->dtype(), x->dims()));
      if (x->num_elements() > 0) {
        ONNXAMP_RETURN_IF_ERROR(
            LaunchSoftmax(true, x->dtype(), x->data(), log_prob->mutable_data(), a.batch, a.classes, a.inner, stream));
      }
    }
    return LaunchLoss(a, WorkspaceOf(ctx), stream);
  }

 private:
  ops::LossSpec spec_;
};

}  // namespace

void RegisterCudaSoftmaxKernels(exec::KernelRegistry& r) {
  RegisterLikeCpu(r, "Softmax", &exec::MakeKernel<SoftmaxCuda<false>>);
  RegisterLikeCpu(r, "LogSoftmax", &exec::MakeKernel<SoftmaxCuda<true>>);
  RegisterLikeCpu(r, "SoftmaxCrossEntropyLoss", &exec::MakeKernel<LossCuda<true>>);
  RegisterLikeCpu(r, "NegativeLogLikelihoodLoss", &exec::MakeKernel<LossCuda<false>>);
  RegisterLikeCpu(r, "SoftmaxCrossEntropyLoss", &exec::MakeKernel<LossCuda<true>>, {}, exec::kInternalDomain);
  RegisterLikeCpu(r, "NegativeLogLikelihoodLoss", &exec::MakeKernel<LossCuda<false>>, {}, exec::kInternalDomain);
}

}  // namespace onnxamp::cuda::norm_reduce
