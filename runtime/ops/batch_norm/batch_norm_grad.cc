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
#include <string>
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
// `batch`: the statistics are the batch's (BatchNormTraining's saved ones), which the decomposition computes again
// from X with `epsilon`; else running statistics, constants.
Status EmitBatchNormGrad(GradContext& ctx, ir::Value* mean, ir::Value* inv_std, const bool wanted[3], bool batch,
                         float epsilon) {
  std::vector<ir::Attribute> attrs;
  if (batch) {
    attrs.push_back(ir::Attribute::Int("batch_statistics", 1));
    attrs.push_back(ir::Attribute::Float("epsilon", epsilon));
  }
  return ctx.EmitInputGradients(kBatchNormalizationGradOp, {ctx.dY(0), ctx.X(0), ctx.X(1), mean, inv_std},
                                {wanted[0], wanted[1], wanted[2]}, std::move(attrs));
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
  return EmitBatchNormGrad(ctx, ctx.ForwardOutput(3), ctx.ForwardOutput(4), wanted, /*batch=*/true,
                           ctx.node().GetFloat("epsilon", 1e-5f));
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
  return EmitBatchNormGrad(ctx, mean, inv_std, wanted, /*batch=*/false, spec.epsilon);
}

// BatchNormalizationGrad as ONNX ops, for its own gradient (second derivatives: a gradient penalty through a
// BatchNormalization in training mode, as PyTorch's double backward in train() mode computes it). Per channel over N
// and the spatial dims, X as [N, C, S] (Reshape to [0, 0, -1]), in float32 for 16-bit types as the kernel computes.
// With batch statistics (attribute batch_statistics, from BatchNormTraining) they are computed again from X with the
// forward's epsilon, so that the gradient reaches X through them too; else (an inference-mode BatchNormalization's
// running statistics) the mean and inv_std inputs are used as they are. With g = dY * scale, as the kernel computes:
//   xhat = (x - mean) * inv_std, dScale = sum(dY * xhat), dB = sum(dY),
//   dX = inv_std * (g - mean(g) - xhat * mean(g * xhat)).
Status DecomposeBatchNormGrad(DecomposeContext& ctx) {
  const bool batch = ctx.node().GetInt("batch_statistics", 0) != 0;
  const ir::Attribute* epsilon = ctx.node().FindAttribute("epsilon");
  if (batch && (!epsilon || epsilon->type() != ir::AttrType::kFloat)) {
    return InvalidArgument("has no float attribute 'epsilon' (the forward's), which its decomposition needs");
  }
  const DType x_type = ctx.TypeOf(ctx.X(1));
  ONNXAMP_ASSIGN_OR_RETURN(const DType c, ctx.ComputeTypeFor(ctx.X(1)));
  auto op = [&](const char* type, ir::Value* a, ir::Value* b) { return ctx.Emit1(type, {a, b}, {}, "", c); };
  auto reshape = [&](ir::Value* v, const std::vector<int64_t>& dims) {
    return ctx.Emit1("Reshape", {ctx.CastTo(v, c), ctx.Ints(dims)}, {}, "", c);
  };
  const std::vector<int64_t> rows = {0, 0, -1}, channel = {1, -1, 1}, axes = {0, 2};
  ir::Value* dy = reshape(ctx.X(0), rows);
  ir::Value* x = reshape(ctx.X(1), rows);
  ir::Value* mean = nullptr;
  ir::Value* inv_std = nullptr;
  if (batch) {
    mean = ctx.EmitReduceMean(x, axes, true, c);
  } else {
    mean = reshape(ctx.X(3), channel);
    inv_std = reshape(ctx.X(4), channel);
  }
  ir::Value* xc = op("Sub", x, mean);
  if (batch) {
    ir::Value* var = ctx.EmitReduceMean(op("Mul", xc, xc), axes, true, c);
    ir::Value* stdev = ctx.Emit1("Sqrt", {op("Add", var, ctx.Scalar(c, epsilon->f))}, {}, "", c);
    inv_std = ctx.Emit1("Reciprocal", {stdev}, {}, "", c);
  }
  ir::Value* xhat = op("Mul", xc, inv_std);
  // dX in X's type, dScale and dB in scale's (BatchNormalization-15 lets them differ), as the kernel writes them.
  auto out_type = [&](size_t i) {
    const DType t = ctx.TypeOf(ctx.Y(i));
    return t != DType::kUndefined ? t : i == 0 ? x_type : ctx.TypeOf(ctx.X(2));
  };
  if (ctx.Y(0)) {
    ir::Value* g = op("Mul", dy, reshape(ctx.X(2), channel));
    ir::Value* centred = op("Sub", g, ctx.EmitReduceMean(g, axes, true, c));
    ir::Value* dx = op("Sub", centred, op("Mul", xhat, ctx.EmitReduceMean(op("Mul", g, xhat), axes, true, c)));
    ir::Value* x_shape = ctx.Emit1("Shape", {ctx.X(1)}, {}, "", DType::kInt64);
    ctx.SetY(0, ctx.CastTo(ctx.Emit1("Reshape", {op("Mul", dx, inv_std), x_shape}, {}, "", c), out_type(0)));
  }
  if (ctx.Y(1)) ctx.SetY(1, ctx.CastTo(ctx.EmitReduceSum(op("Mul", dy, xhat), axes, false, c), out_type(1)));
  if (ctx.Y(2)) ctx.SetY(2, ctx.CastTo(ctx.EmitReduceSum(dy, axes, false, c), out_type(2)));
  return Status::Ok();
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
  r.Add(kBatchNormalizationGradOp, exec::kInternalDomain).Decompose(&DecomposeBatchNormGrad);
}

}  // namespace onnxamp::ops
