// BatchNormalization (CPU), opsets 6-23, inference and training mode.
//
// X is [N, C, D1..Dk]; scale, B, input_mean and input_var hold one value per channel (per channel and position
// with `spatial` = 0, opsets 6-8). Inference: Y = (X - mean) * scale / sqrt(var + epsilon) + B.
// Training (opset 14+: training_mode = 1; before 14: when any output beyond Y is requested, which opset 6 forbids
// with is_test = 1): the statistics are the batch's (population variance over N and D1..Dk), and the running
// statistics are updated as running = input * momentum + batch * (1 - momentum). Outputs in training mode: opset 14+ Y,
// running_mean, running_var; before 14 Y, mean, var (the running updates), saved_mean, saved_var (the batch mean and
// variance). The parameters may have their own float types (opset 15+ T1/T2); statistics accumulate in float (double
// for double X).
#include <vector>

#include "runtime/executor/kernel.h"
#include "runtime/ops/batch_norm/batch_norm.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/common/reduce.h"
#include "runtime/ops/common/reduce_norm.h"

namespace onnxamp::ops {
namespace {

class BatchNormCpu : public exec::OpKernel {
 public:
  BatchNormCpu(const exec::KernelInfo& info, Status* st) { *st = ParseBatchNormSpec(info, &spec_); }

  Status Compute(exec::KernelContext& ctx) const override {
    const ir::Tensor* x = ctx.input(0);
    ONNXAMP_ASSIGN_OR_RETURN(const BatchNormShape shape, ResolveBatchNormShape(x, spec_));
    const int64_t batch = shape.batch, params = shape.params, run = shape.run;
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<double> scale, reduce::ReadParam(ctx.input(1), params, "input 1 (scale)"));
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<double> bias, reduce::ReadParam(ctx.input(2), params, "input 2 (B)"));
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<double> mean, reduce::ReadParam(ctx.input(3), params, "input 3 (mean)"));
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<double> var, reduce::ReadParam(ctx.input(4), params, "input 4 (var)"));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * y, ctx.AllocateOutput(0, x->dtype(), x->dims()));
    return DispatchFloat(x->dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using A = reduce::NormAcc<T>;
      const T* xd = x->values<T>().data();
      T* yd = y->mutable_values<T>().data();
      std::vector<double> use_mean = mean, use_var = var;
      if (spec_.training) {
        BatchStatistics<T, A>(xd, batch, params, run, ctx.threads(), &use_mean, &use_var);
        ONNXAMP_RETURN_IF_ERROR(WriteTrainingOutputs(ctx, *x, mean, var, use_mean, use_var));
      }
      std::vector<A> a(static_cast<size_t>(params)), m(a.size()), b(a.size());
      for (int64_t p = 0; p < params; ++p) {
        a[p] = static_cast<A>(scale[p] / std::sqrt(use_var[p] + static_cast<double>(spec_.epsilon)));
        m[p] = static_cast<A>(use_mean[p]);
        b[p] = static_cast<A>(bias[p]);
      }
      reduce::ParallelOver(ctx.threads(), batch * params, run, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          const int64_t p = r % params;
          reduce::NormalizeRun<A>(xd + r * run, yd + r * run, run, m[p], a[p], b[p]);
        }
      });
      return Status::Ok();
    });
  }

 private:
  // Per-parameter mean and population variance over the batch and the run (two passes).
  template <typename T, typename A>
  static void BatchStatistics(const T* x, int64_t batch, int64_t params, int64_t run, exec::ThreadPool& pool,
                              std::vector<double>* mean, std::vector<double>* var) {
    const int64_t count = batch * run;
    reduce::ParallelOver(pool, params, count, [&](int64_t p0, int64_t p1) {
      for (int64_t p = p0; p < p1; ++p) {
        A sum = 0;
        for (int64_t n = 0; n < batch; ++n) sum += reduce::SumRun<A>(x + (n * params + p) * run, run);
        const A mu = sum / static_cast<A>(count);
        A dev = 0;
        for (int64_t n = 0; n < batch; ++n)
          dev += reduce::SumSquaredDeviationRun<A>(x + (n * params + p) * run, run, mu);
        (*mean)[p] = static_cast<double>(mu);
        (*var)[p] = static_cast<double>(dev / static_cast<A>(count));
      }
    });
  }

  // The running statistics (and, before opset 14, the saved batch statistics) of a training step.
  Status WriteTrainingOutputs(exec::KernelContext& ctx, const ir::Tensor& x, const std::vector<double>& mean,
                              const std::vector<double>& var, const std::vector<double>& batch_mean,
                              const std::vector<double>& batch_var) const {
    const double mom = spec_.momentum;
    std::vector<double> running_mean(mean.size()), running_var(var.size());
    for (size_t p = 0; p < mean.size(); ++p) {
      running_mean[p] = mean[p] * mom + batch_mean[p] * (1 - mom);
      running_var[p] = var[p] * mom + batch_var[p] * (1 - mom);
    }
    const std::vector<const std::vector<double>*> outputs = {&running_mean, &running_var, &batch_mean, &batch_var};
    const size_t last = spec_.opset >= 14 ? 2 : 4;
    for (size_t i = 1; i <= last && i < ctx.num_outputs(); ++i) {
      if (!ctx.output_requested(i)) continue;
      // Running statistics keep the type of input_mean / input_var; the saved batch statistics take X's type.
      const ir::Tensor* like = i <= 2 ? ctx.input(2 + i) : &x;
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor * t, ctx.AllocateOutput(i, like->dtype(), ctx.input(3)->dims()));
      ONNXAMP_RETURN_IF_ERROR(reduce::WriteParam(t, *outputs[i - 1]));
    }
    return Status::Ok();
  }

  BatchNormSpec spec_;
};

}  // namespace

void RegisterBatchNormKernels(exec::KernelRegistry& r) {
  using exec::Device;
  const std::vector<DType> types = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64};
  // One kernel for opsets 6-23: is_test exists in 6, `spatial` before 9, training_mode from 14, mixed parameter
  // types from 15.
  r.Register({"BatchNormalization", "", 6, 23, Device::kCpu, types, 0, &exec::MakeKernel<BatchNormCpu>});
}

}  // namespace onnxamp::ops
