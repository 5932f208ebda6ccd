// Gradient builders of batch normalization.
//
// com.onnxamp BatchNormTraining (what the trainer rewrites a training BatchNormalization into): one
// BatchNormalizationGrad(dY, X, scale, saved_mean, saved_inv_std) node, the saved statistics being the forward's
// outputs 3 and 4 (turned on when absent). The running statistics are buffers, not parameters: they get no
// gradient, and a gradient reaching the statistics outputs is refused.
//
// BatchNormalization in inference mode (a frozen layer; running statistics as constants): Y = (X - mean) * scale /
// sqrt(var + eps) + B is affine in X, so dX = BatchNormalization(dY, scale, 0, 0, var) (the same node in inference
// mode, mean and B zero), and dScale, dB = BatchNormalizationGrad's (sums of dY * x_hat and dY with x_hat from the
// running statistics, inv_std = 1 / sqrt(var + eps)). Training mode is refused: the trainer rewrites it first.
// Keyed by opset: 6-8 (`spatial`, is_test), 9-13 (training chosen by the outputs), 14+ (training_mode).
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/batch_norm/batch_norm.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/op_info.h"

namespace onnxamp::ops {
namespace {

// Emits BatchNormalizationGrad with the outputs (dX, dScale, dB) in `wanted` and sets the gradients of inputs 0, 1, 2
// from them; outputs no input needs are left unrequested.
Status EmitBatchNormGrad(GradContext& ctx, ir::Value* mean, ir::Value* inv_std, const bool wanted[3]) {
  return ctx.EmitInputGradients(kBatchNormalizationGradOp, {ctx.dY(0), ctx.X(0), ctx.X(1), mean, inv_std},
                                {wanted[0], wanted[1], wanted[2]}, {});
}

Status RefuseStatisticsGradients(GradContext& ctx, const char* mean_name, const char* var_name) {
  if (ctx.NeedsDX(3) || ctx.NeedsDX(4)) {
    return InvalidArgument("inputs 3 (", mean_name, ") and 4 (", var_name,
                           ") are running statistics, not parameters: they get no gradient (leave them untrained)");
  }
  return Status::Ok();
}

Status BatchNormTrainingGradient(GradContext& ctx) {
  ONNXAMP_RETURN_IF_ERROR(RefuseStatisticsGradients(ctx, "running_mean", "running_var"));
  for (size_t i = 1; i < 5; ++i) {
    if (ctx.dY(i)) {
      return InvalidArgument("output ", i,
                             " (a running or saved statistic) reaches the loss: only Y's gradient is supported");
    }
  }
  if (!ctx.dY(0)) return Status::Ok();
  const bool wanted[3] = {ctx.NeedsDX(0), ctx.NeedsDX(1), ctx.NeedsDX(2)};
  return EmitBatchNormGrad(ctx, ctx.ForwardOutput(3), ctx.ForwardOutput(4), wanted);
}

Status BatchNormInferenceGradient(GradContext& ctx) {
  BatchNormSpec spec;
  ONNXAMP_RETURN_IF_ERROR(ParseBatchNormSpec(exec::KernelInfo{ctx.node(), ctx.opset(), exec::Device::kCpu}, &spec));
  if (spec.training) {
    return InvalidArgument(
        "BatchNormalization in training mode has no gradient builder: the trainer rewrites it into com.onnxamp "
        "BatchNormTraining, whose builder handles it");
  }
  if (!spec.spatial)
    return InvalidArgument("attribute 'spatial' = 0 (statistics per channel and position) is not supported");
  ONNXAMP_RETURN_IF_ERROR(RefuseStatisticsGradients(ctx, "input_mean", "input_var"));
  ir::Value* scale = ctx.X(1);
  ir::Value* bias = ctx.X(2);
  ir::Value* mean = ctx.X(3);
  ir::Value* var = ctx.X(4);
  if (ctx.NeedsDX(0)) {
    // The same normalisation without its shift: dY * scale / sqrt(var + eps).
    ir::Value* zero_bias = ctx.Emit1("Sub", {bias, bias});
    ir::Value* zero_mean = ctx.Emit1("Sub", {mean, mean});
    ir::Value* dx =
        ctx.Emit1("BatchNormalization", {ctx.dY(0), scale, zero_bias, zero_mean, var}, ctx.node().attributes());
    ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(0, dx));
  }
  if (!ctx.NeedsDX(1) && !ctx.NeedsDX(2)) return Status::Ok();
  const DType var_type = ctx.TypeOf(var);
  if (var_type == DType::kUndefined) return InvalidArgument("the element type of input 4 (input_var) is unknown");
  ir::Value* inv_std =
      ctx.Emit1("Reciprocal", {ctx.Emit1("Sqrt", {ctx.Emit1("Add", {var, ctx.Scalar(var_type, spec.epsilon)})})});
  const bool wanted[3] = {false, ctx.NeedsDX(1), ctx.NeedsDX(2)};
  return EmitBatchNormGrad(ctx, mean, inv_std, wanted);
}

}  // namespace

void RegisterBatchNormOpInfos(OpInfoRegistry& r) {
  // The inference form at each opset's signature: 6-8 (`spatial`, is_test), 9-13 (extra outputs mean training),
  // 14+ (training_mode; 15 lets the parameters and statistics have their own float types).
  r.Add("BatchNormalization")
      .Keep("statistics and a variance fp16 cannot hold")
      .Gradient(6, 8, &BatchNormInferenceGradient)
      .Gradient(9, 13, &BatchNormInferenceGradient)
      .Gradient(14, INT64_MAX, &BatchNormInferenceGradient);
  r.Add(kBatchNormTrainingOp, exec::kInternalDomain).Gradient(1, 1, &BatchNormTrainingGradient);
  r.Add(kBatchNormalizationGradOp, exec::kInternalDomain).NotDifferentiable(kBackwardOpReason);
}

}  // namespace onnxamp::ops
