// LRN, LpNormalization, MeanVarianceNormalization and Hardmax on CUDA, with the com.onnxamp gradients LRNGrad,
// LpNormalizationGrad and MeanVarianceNormalizationGrad: attributes and shapes checked by the helpers the CPU kernels
// use (runtime/ops/lrn/lrn.h, runtime/ops/normalize/normalize.h, runtime/ops/softmax/softmax.h), then the launchers
// of norm_more_kernels.cu. Opset ranges and element types are the CPU registrations' (RegisterLikeCpu).
#include <vector>

#include "runtime/cuda/ops/norm_reduce/norm_more_launch.h"
#include "runtime/cuda/ops/norm_reduce/norm_reduce_host.h"
#include "runtime/cuda/ops/norm_reduce/reduce_layout.h"
#include "runtime/cuda/ops/register_like_cpu.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/lrn/lrn.h"
#include "runtime/ops/normalize/normalize.h"
#include "runtime/ops/softmax/softmax.h"

namespace onnxamp::cuda::norm_reduce {
namespace {

class LrnCuda : public exec::OpKernel {
 public:
  LrnCuda(const exec::KernelInfo& info, Status* st) { *st = ops::ParseLrnSpec(info, &spec_); }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ops::LrnShape shape, ops::ResolveLrnShape(ctx, spec_));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, shape.x->dtype(), shape.x->dims()));
    LrnArgs a;
    a.dtype = shape.x->dtype();
    a.x = shape.x->data();
    a.dy = shape.dy ? shape.dy->data() : nullptr;
    a.y = y->mutable_data();
    a.n = shape.n;
    a.c = shape.c;
    a.run = shape.run;
    a.lo = shape.lo;
    a.hi = shape.hi;
    a.scale = shape.scale;
    a.beta = spec_.beta;
    a.bias = spec_.bias;
    return LaunchLrn(a, WorkspaceOf(ctx), StreamOf(ctx));
  }

 private:
  ops::LrnSpec spec_;
};

// Runs the grouped normalisation of `kind` over X's `reduced` axes (dY for the gradient).
Status RunGroupNormalize(exec::KernelContext& ctx, GroupNormKind kind, const ops::NormalizeInputs& in,
                         const std::vector<bool>& reduced) {
  GroupNormalizeArgs a;
  ONNXAMP_RETURN_IF_ERROR(MakeReduceLayout(in.x->dims(), reduced, &a.layout));
  ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, in.x->dtype(), in.x->dims()));
  if (in.x->num_elements() == 0) return Status::Ok();
  a.kind = kind;
  a.dtype = in.x->dtype();
  a.x = in.x->data();
  a.dy = in.dy ? in.dy->data() : nullptr;
  a.y = y->mutable_data();
  a.epsilon = ops::kMvnEpsilon;
  return LaunchGroupNormalize(a, StreamOf(ctx));
}

class MeanVarianceNormalizationCuda : public exec::OpKernel {
 public:
  MeanVarianceNormalizationCuda(const exec::KernelInfo& info, Status* st) { *st = ops::ParseMvnSpec(info, &spec_); }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ops::NormalizeInputs in, ops::ResolveNormalizeInputs(ctx, spec_.grad, "X"));
    ONNXAMP_ASSIGN_OR_RETURN(const std::vector<bool> reduced, ops::MvnReducedAxes(spec_, in.x->rank()));
    return RunGroupNormalize(ctx, GroupNormKind::kMeanVariance, in, reduced);
  }

 private:
  ops::MvnSpec spec_;
};

class LpNormalizationCuda : public exec::OpKernel {
 public:
  LpNormalizationCuda(const exec::KernelInfo& info, Status* st) { *st = ops::ParseLpNormSpec(info, &spec_); }

  Status Compute(exec::KernelContext& ctx) const override {
    ONNXAMP_ASSIGN_OR_RETURN(const ops::NormalizeInputs in, ops::ResolveNormalizeInputs(ctx, spec_.grad, "input"));
    ONNXAMP_ASSIGN_OR_RETURN(const std::vector<bool> reduced, ops::LpNormReducedAxes(spec_, in.x->rank()));
    return RunGroupNormalize(ctx, spec_.p == 1 ? GroupNormKind::kLp1 : GroupNormKind::kLp2, in, reduced);
  }

 private:
  ops::LpNormSpec spec_;
};

class HardmaxCuda : public exec::OpKernel {
 public:
  HardmaxCuda(const exec::KernelInfo& info, Status* st) { *st = ops::ParseSoftmaxSpec(info, &spec_); }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    ONNXAMP_ASSIGN_OR_RETURN(const ops::reduce::AxisView v, ops::ResolveSoftmaxView(spec_, x));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), x->dims()));
    return LaunchHardmax(x->dtype(), x->data(), y->mutable_data(), v.outer, v.n, v.inner, WorkspaceOf(ctx),
                         StreamOf(ctx));
  }

 private:
  ops::SoftmaxSpec spec_;
};

}  // namespace

void RegisterCudaNormMoreKernels(exec::KernelRegistry& r) {
  RegisterLikeCpu(r, "LRN", &exec::MakeKernel<LrnCuda>);
  RegisterLikeCpu(r, ops::kLrnGradOp, &exec::MakeKernel<LrnCuda>, {}, exec::kInternalDomain);
  RegisterLikeCpu(r, "LpNormalization", &exec::MakeKernel<LpNormalizationCuda>);
  RegisterLikeCpu(r, ops::kLpNormalizationGradOp, &exec::MakeKernel<LpNormalizationCuda>, {}, exec::kInternalDomain);
  RegisterLikeCpu(r, "MeanVarianceNormalization", &exec::MakeKernel<MeanVarianceNormalizationCuda>);
  RegisterLikeCpu(r, ops::kMeanVarianceNormalizationGradOp, &exec::MakeKernel<MeanVarianceNormalizationCuda>, {},
                  exec::kInternalDomain);
  RegisterLikeCpu(r, "Hardmax", &exec::MakeKernel<HardmaxCuda>);
}

}  // namespace onnxamp::cuda::norm_reduce
