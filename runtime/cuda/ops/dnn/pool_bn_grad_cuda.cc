// MaxPoolGrad, AveragePoolGrad, BatchNormTraining and BatchNormalizationGrad (com.onnxamp) on CUDA, with the CPU
// kernels' input checks and messages (runtime/ops/pool/pool_grad_cpu.cc, runtime/ops/batch_norm/batch_norm_grad_cpu.cc;
// contracts in runtime/ops/gradient_ops.h) and their arithmetic (dnn_grad_kernels.cu):
// - MaxPoolGrad: the Indices are sorted stably by the X position they name, then every dX element sums its run in the
//   order of the dY elements, as the CPU adds them. Indices are device data, so one outside X cannot be reported as
//   the CPU reports it without a host synchronisation: on CUDA it adds nothing (as -1, a window in the padding, does).
// - AveragePoolGrad: every dX element gathers the shares (dY / the window's count) of the windows that cover it.
// - BatchNormTraining: per channel the batch mean and biased variance (double accumulation, as on the CPU), Y with
//   coefficients cast to float (double for double X), the running statistics with the unbiased variance, and
//   saved_mean / saved_inv_std in float32.
// - BatchNormalizationGrad: per-channel sums in double, then dX elementwise.
// X_shape inputs are read on the host.
#include <string_view>
#include <vector>

#include "runtime/cuda/cuda_context.h"
#include "runtime/cuda/ops/dnn/batch_norm_host.h"
#include "runtime/cuda/ops/dnn/dnn_grad_launch.h"
#include "runtime/cuda/ops/dnn/dnn_launch.h"
#include "runtime/cuda/ops/norm_reduce/norm_reduce_host.h"
#include "runtime/cuda/ops/register_like_cpu.h"
#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/batch_norm/batch_norm.h"
#include "runtime/ops/common/broadcast.h"
#include "runtime/ops/common/conv_geometry.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/common/reduce_norm.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/pool/pool.h"

namespace onnxamp::cuda::dnn {
namespace {

// ---- pooling ------------------------------------------------------------------------------------------------------

int64_t Product(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

class MaxPoolGradCuda : public exec::OpKernel {
 public:
  MaxPoolGradCuda(const exec::KernelInfo&, Status*) {}

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* dy = ctx.input(0);
    const ir::Tensor* indices = ctx.input(1);
    ONNXAMP_RETURN_IF_ERROR(ops::CheckPoolGradInput(dy));
    ONNXAMP_RETURN_IF_ERROR(ops::CheckMaxPoolGradIndices(dy, indices));
    ONNXAMP_ASSIGN_OR_RETURN(const std::vector<int64_t> x_dims, ops::ReadPoolShapeInput(ctx.input(2), 2, "X_shape"));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * dx, ctx.AllocateOutput(0, dy->dtype(), x_dims));
    CudaContext& cuda = GetCudaContext(ctx);
    return LaunchMaxPoolGrad(cuda.stream(), dy->dtype(), dy->num_elements(), Product(x_dims), dy->data(),
                             reinterpret_cast<const int64_t*>(indices->data()), dx->mutable_data(), WorkspaceOf(ctx));
  }
};

class AveragePoolGradCuda : public exec::OpKernel {
 public:
  AveragePoolGradCuda(const exec::KernelInfo& info, Status* st) {
    *st = ops::ParsePoolAttrs(info.node, /*max=*/false, &pool_);
  }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* dy = ctx.input(0);
    ONNXAMP_RETURN_IF_ERROR(ops::CheckPoolGradInput(dy));
    ONNXAMP_ASSIGN_OR_RETURN(const std::vector<int64_t> x_dims, ops::ReadPoolShapeInput(ctx.input(1), 1, "X_shape"));
    ops::WindowGeometry g;
    ONNXAMP_RETURN_IF_ERROR(ops::ResolveAveragePoolGrad(pool_, dy, x_dims, &g));
    ONNXAMP_ASSIGN_OR_RETURN(const WindowParams params, MakeWindowParams(g));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * dx, ctx.AllocateOutput(0, dy->dtype(), x_dims));
    CudaContext& cuda = GetCudaContext(ctx);
    return LaunchAveragePoolGrad(cuda.stream(), dy->dtype(), x_dims[0] * x_dims[1], params, pool_.count_include_pad,
                                 dy->data(), dx->mutable_data());
  }

 private:
  ops::PoolAttrs pool_;
};

// ---- batch normalization ------------------------------------------------------------------------------------------

// Per-channel inputs are checked as the CPU's reduce::ReadParam checks them, without reading them.
using norm_reduce::CheckParam;

// Writes params doubles into output i, a new tensor of `dtype` and `dims`, when the output is requested.
Status WriteOutput(exec::KernelContext& ctx, cudaStream_t stream, size_t i, DType dtype,
                   const std::vector<int64_t>& dims, int64_t params, const double* values) {
  if (i >= ctx.num_outputs() || !ctx.output_requested(i)) return Status::Ok();
  ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * t, ctx.AllocateOutput(i, dtype, dims));
  return LaunchFromDouble(stream, dtype, params, values, t->mutable_data());
}

class BatchNormTrainingCuda : public exec::OpKernel {
 public:
  BatchNormTrainingCuda(const exec::KernelInfo& info, Status* st) {
    // BatchNormalization-9's attributes (epsilon, momentum), as the CPU kernel reads them.
    *st = ops::ParseBatchNormSpec(exec::KernelInfo{info.node, 9, info.device}, &spec_);
  }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    ONNXAMP_ASSIGN_OR_RETURN(const ops::BatchNormShape shape, ops::ResolveBatchNormShape(x, spec_));
    const int64_t batch = shape.batch, params = shape.params, run = shape.run;
    if (batch * run < 2) {
      return InvalidArgument("input 0 (X) of shape ", ops::ShapeToString(x->dims()),
                             " gives fewer than 2 values per channel: training-mode statistics need at least 2");
    }
    const char* names[] = {"input 1 (scale)", "input 2 (B)", "input 3 (running_mean)", "input 4 (running_var)"};
    for (int i = 0; i < 4; ++i) ONNXAMP_RETURN_IF_ERROR(CheckParam(ctx.input(1 + i), params, names[i]));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), x->dims()));
    CudaContext& cuda = GetCudaContext(ctx);
    const cudaStream_t stream = cuda.stream();

    // Doubles in the workspace: the four inputs, then mean, inv_std, scale_eff, new running mean and variance.
    enum { kScale, kBias, kRunningMean, kRunningVar, kMean, kInvStd, kScaleEff, kNewMean, kNewVar, kArrays };
    ChannelArrays arr;
    ONNXAMP_RETURN_IF_ERROR(arr.Init(ctx, cuda, kArrays, params, 1, 4));
    BatchNormTrainingParams bp;
    bp.scale = arr(kScale);
    bp.running_mean = arr(kRunningMean);
    bp.running_var = arr(kRunningVar);
    bp.mean = arr(kMean);
    bp.inv_std = arr(kInvStd);
    bp.scale_eff = arr(kScaleEff);
    bp.new_running_mean = arr(kNewMean);
    bp.new_running_var = arr(kNewVar);
    ONNXAMP_RETURN_IF_ERROR(LaunchBatchNormTrainingStatistics(stream, x->dtype(), batch, params, run, x->data(),
                                                              static_cast<double>(spec_.momentum),
                                                              static_cast<double>(spec_.epsilon), bp));
    ONNXAMP_RETURN_IF_ERROR(LaunchBatchNormApply(stream, x->dtype(), batch, params, run, x->data(), arr(kMean),
                                                 arr(kScaleEff), arr(kBias), y->mutable_data()));
    const ir::Tensor* rm = ctx.input(3);
    const ir::Tensor* rv = ctx.input(4);
    ONNXAMP_RETURN_IF_ERROR(WriteOutput(ctx, stream, 1, rm->dtype(), rm->dims(), params, arr(kNewMean)));
    ONNXAMP_RETURN_IF_ERROR(WriteOutput(ctx, stream, 2, rv->dtype(), rv->dims(), params, arr(kNewVar)));
    ONNXAMP_RETURN_IF_ERROR(WriteOutput(ctx, stream, 3, DType::kFloat32, {params}, params, arr(kMean)));
    return WriteOutput(ctx, stream, 4, DType::kFloat32, {params}, params, arr(kInvStd));
  }

 private:
  ops::BatchNormSpec spec_;
};

class BatchNormalizationGradCuda : public exec::OpKernel {
 public:
  BatchNormalizationGradCuda(const exec::KernelInfo&, Status*) {}

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* dy = ctx.input(0);
    const ir::Tensor* x = ctx.input(1);
    const ops::BatchNormSpec spec;  // per channel
    ONNXAMP_ASSIGN_OR_RETURN(const ops::BatchNormShape shape, ops::ResolveBatchNormShape(x, spec));
    if (!dy || dy->dtype() != x->dtype() || dy->dims() != x->dims()) {
      return InvalidArgument("input 0 (dY) must have X's element type and shape (", DTypeName(x->dtype()), " ",
                             ops::ShapeToString(x->dims()), "), got ", dy ? DTypeName(dy->dtype()) : "none", " ",
                             dy ? ops::ShapeToString(dy->dims()) : "");
    }
    const int64_t batch = shape.batch, params = shape.params, run = shape.run;
    const char* names[] = {"input 2 (scale)", "input 3 (saved_mean)", "input 4 (saved_inv_std)"};
    for (int i = 0; i < 3; ++i) ONNXAMP_RETURN_IF_ERROR(CheckParam(ctx.input(2 + i), params, names[i]));
    CudaContext& cuda = GetCudaContext(ctx);
    const cudaStream_t stream = cuda.stream();
    ir::Tensor* dx = nullptr;
    if (ctx.output_requested(0)) {
      ONNXAMP_ASSIGN_OR_RETURN(dx, ctx.AllocateOutput(0, x->dtype(), x->dims()));
    }
    // Doubles in the workspace: scale, saved_mean, saved_inv_std, then the sums of dY and of dY * x_hat.
    enum { kScale, kMean, kInvStd, kSumDy, kSumDyXhat, kArrays };
    ChannelArrays arr;
    ONNXAMP_RETURN_IF_ERROR(arr.Init(ctx, cuda, kArrays, params, 2, 3));
    ONNXAMP_RETURN_IF_ERROR(LaunchBatchNormGradSums(stream, x->dtype(), batch, params, run, dy->data(), x->data(),
                                                    arr(kMean), arr(kInvStd), arr(kSumDy), arr(kSumDyXhat)));
    if (dx) {
      ONNXAMP_RETURN_IF_ERROR(LaunchBatchNormGradInput(stream, x->dtype(), batch, params, run, dy->data(), x->data(),
                                                       arr(kScale), arr(kMean), arr(kInvStd), arr(kSumDy),
                                                       arr(kSumDyXhat), dx->mutable_data()));
    }
    const ir::Tensor* s = ctx.input(2);
    ONNXAMP_RETURN_IF_ERROR(WriteOutput(ctx, stream, 1, s->dtype(), s->dims(), params, arr(kSumDyXhat)));
    return WriteOutput(ctx, stream, 2, s->dtype(), s->dims(), params, arr(kSumDy));
  }
};

}  // namespace

void RegisterCudaPoolBatchNormGradKernels(exec::KernelRegistry& r) {
  RegisterLikeCpu(r, ops::kMaxPoolGradOp, &exec::MakeKernel<MaxPoolGradCuda>, {2}, exec::kInternalDomain);
  RegisterLikeCpu(r, ops::kAveragePoolGradOp, &exec::MakeKernel<AveragePoolGradCuda>, {1}, exec::kInternalDomain);
  RegisterLikeCpu(r, ops::kBatchNormTrainingOp, &exec::MakeKernel<BatchNormTrainingCuda>, {}, exec::kInternalDomain);
  RegisterLikeCpu(r, ops::kBatchNormalizationGradOp, &exec::MakeKernel<BatchNormalizationGradCuda>, {},
                  exec::kInternalDomain);
}

}  // namespace onnxamp::cuda::dnn
