// BatchNormalization on CUDA, opsets 6-23, inference and training mode, with the CPU kernel's attributes, modes,
// outputs and messages (the helpers of runtime/ops/batch_norm/batch_norm.h). X is viewed as [batch, params, run]
// (params = C, or C * spatial with `spatial` = 0 before opset 9). The parameters, of any float type each, are converted
// to double on the device; training computes the batch statistics (batch_norm_kernels.cu), then the running statistics
// and the per-parameter coefficients, then Y.
#include <vector>

#include "runtime/cuda/cuda_context.h"
#include "runtime/cuda/ops/dnn/batch_norm_host.h"
#include "runtime/cuda/ops/dnn/dnn_launch.h"
#include "runtime/cuda/ops/norm_reduce/norm_reduce_host.h"
#include "runtime/cuda/ops/register_like_cpu.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/batch_norm/batch_norm.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/common/reduce.h"
#include "runtime/ops/common/reduce_norm.h"

namespace onnxamp::cuda::dnn {
namespace {

// Per-parameter inputs are checked as the CPU's reduce::ReadParam checks them, without reading them.
using norm_reduce::CheckParam;

class BatchNormCuda : public exec::OpKernel {
 public:
  BatchNormCuda(const exec::KernelInfo& info, Status* st) { *st = ops::ParseBatchNormSpec(info, &spec_); }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    ONNXAMP_ASSIGN_OR_RETURN(const ops::BatchNormShape shape, ops::ResolveBatchNormShape(x, spec_));
    const int64_t batch = shape.batch, params = shape.params, run = shape.run;
    const char* names[] = {"input 1 (scale)", "input 2 (B)", "input 3 (mean)", "input 4 (var)"};
    for (int i = 0; i < 4; ++i) ONNXAMP_RETURN_IF_ERROR(CheckParam(ctx.input(1 + i), params, names[i]));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), x->dims()));
    CudaContext& cuda = GetCudaContext(ctx);
    const cudaStream_t stream = cuda.stream();

    // Doubles in the workspace: scale, bias, mean, var, batch mean, batch var, scale_eff, running mean, running var.
    constexpr int kScale = 0, kBias = 1, kMean = 2, kVar = 3, kBatchMean = 4, kBatchVar = 5, kScaleEff = 6,
                  kRunningMean = 7, kRunningVar = 8, kArrays = 9;
    ChannelArrays arr;
    ONNXAMP_RETURN_IF_ERROR(arr.Init(ctx, cuda, kArrays, params, 1, 4));
    if (spec_.training) {
      ONNXAMP_RETURN_IF_ERROR(
          LaunchBatchStatistics(stream, x->dtype(), batch, params, run, x->data(), arr(kBatchMean), arr(kBatchVar)));
    }
    BatchNormParams bp;
    bp.scale = arr(kScale);
    bp.mean = arr(kMean);
    bp.var = arr(kVar);
    bp.batch_mean = arr(kBatchMean);
    bp.batch_var = arr(kBatchVar);
    bp.scale_eff = arr(kScaleEff);
    bp.running_mean = arr(kRunningMean);
    bp.running_var = arr(kRunningVar);
    ONNXAMP_RETURN_IF_ERROR(LaunchBatchNormFinalize(stream, params, spec_.training, static_cast<double>(spec_.momentum),
                                                    static_cast<double>(spec_.epsilon), bp));
    if (spec_.training) {
      // Opset 14+: running_mean, running_var; before: those, then saved_mean, saved_var (the batch statistics).
      const double* values[] = {arr(kRunningMean), arr(kRunningVar), arr(kBatchMean), arr(kBatchVar)};
      const size_t last = spec_.opset >= 14 ? 2 : 4;
      for (size_t i = 1; i <= last && i < ctx.num_outputs(); ++i) {
        if (!ctx.output_requested(i)) continue;
        // Running statistics keep the type of input_mean / input_var; the saved batch statistics take X's type.
        const ir::Tensor* like = i <= 2 ? ctx.input(2 + i) : x;
        ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * t, ctx.AllocateOutput(i, like->dtype(), ctx.input(3)->dims()));
        ONNXAMP_RETURN_IF_ERROR(LaunchFromDouble(stream, t->dtype(), params, values[i - 1], t->mutable_data()));
      }
    }
    return LaunchBatchNormApply(stream, x->dtype(), batch, params, run, x->data(),
                                spec_.training ? arr(kBatchMean) : arr(kMean), arr(kScaleEff), arr(kBias),
                                y->mutable_data());
  }

 private:
  ops::BatchNormSpec spec_;
};

}  // namespace

void RegisterCudaBatchNormKernels(exec::KernelRegistry& r) {
  RegisterLikeCpu(r, "BatchNormalization", &exec::MakeKernel<BatchNormCuda>);
}

}  // namespace onnxamp::cuda::dnn
