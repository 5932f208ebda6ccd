// Gradient builders of SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss (opsets 12+): the gradient of input 0
// (scores / input) only, from the com.onnxamp *LossGrad ops; labels are integers and weights take none. The
// cross entropy's gradient reads the forward's log_prob (output 1, turned on by the builder), and a gradient reaching
// log_prob itself adds LogSoftmaxGrad along the class axis. Also the OpInfos of loss/.
#include <string>
#include <string_view>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/loss/loss.h"
#include "runtime/ops/op_info.h"

namespace onnxamp::ops {
namespace {

// The forward's reduction and ignore_index, parsed by ParseLossSpec, as the *LossGrad node's attributes.
StatusOr<std::vector<ir::Attribute>> LossAttributes(const GradContext& ctx, bool softmax) {
  LossSpec spec;
  ONNXAMP_RETURN_IF_ERROR(ParseLossSpec(exec::KernelInfo{ctx.node(), ctx.opset(), exec::Device::kCpu}, softmax, &spec));
  const char* reduction = spec.reduction == LossReduction::kNone  ? "none"
                          : spec.reduction == LossReduction::kSum ? "sum"
                                                                  : "mean";
  std::vector<ir::Attribute> attrs = {ir::Attribute::String("reduction", reduction)};
  if (spec.ignore_index) attrs.push_back(ir::Attribute::Int("ignore_index", *spec.ignore_index));
  return attrs;
}

template <bool kSoftmax>
Status LossGradient(GradContext& ctx) {
  if (!ctx.NeedsDX(0)) return Status::Ok();
  ONNXAMP_ASSIGN_OR_RETURN(std::vector<ir::Attribute> attrs, LossAttributes(ctx, kSoftmax));
  const DType type = ctx.TypeOf(ctx.X(0));
  ir::Value* dx = nullptr;
  if (kSoftmax) {
    ir::Value* log_prob = ctx.ForwardOutput(1);
    if (ctx.dY(0)) {
      std::vector<ir::Value*> inputs = {ctx.dY(0), log_prob, ctx.X(1)};
      if (ctx.X(2)) inputs.push_back(ctx.X(2));
      dx = ctx.Emit(kSoftmaxCrossEntropyLossGradOp, inputs, 1, attrs, exec::kInternalDomain, type)[0];
    }
    if (ctx.dY(1)) {
      // log_prob = LogSoftmax(scores) along the class axis 1.
      ir::Value* d_lp =
          ctx.Emit(kLogSoftmaxGradOp, {ctx.dY(1), log_prob}, 1,
                   {ir::Attribute::Int("axis", 1), ir::Attribute::Int("legacy", 0)}, exec::kInternalDomain, type)[0];
      dx = dx ? ctx.Emit("Add", {dx, d_lp}, 1, {}, "", type)[0] : d_lp;
    }
  } else if (ctx.dY(0)) {
    std::vector<ir::Value*> inputs = {ctx.dY(0), ctx.X(0), ctx.X(1)};
    if (ctx.X(2)) inputs.push_back(ctx.X(2));
    dx = ctx.Emit(kNegativeLogLikelihoodLossGradOp, inputs, 1, attrs, exec::kInternalDomain, type)[0];
  }
  if (!dx) return Status::Ok();
  return ctx.SetDX(0, dx);
}

// SoftmaxCrossEntropyLossGrad and NegativeLogLikelihoodLossGrad as ONNX ops, for their own gradients (second
// derivatives: the gradient of a loss's input gradient, as input-gradient regularisation asks). With t the labels
// (ignored positions read as class 0), the per-position factor f = w[t] (1 without weights), 0 where ignored, times
// dLoss (per position for "none"), divided by sum(f) for "mean"; with the classes on axis 1:
//   dScores = (exp(log_prob) - OneHot(t)) * f,  dInput = -OneHot(t) * f,
// ignored positions 0 (as the kernels leave them, even where a mean over no position divides by 0); in float32 for
// 16-bit types, as the kernels compute (their sums run in double).
template <bool kSoftmax>
Status DecomposeLossGrad(DecomposeContext& ctx) {
  ONNXAMP_ASSIGN_OR_RETURN(const DType c, ctx.ComputeTypeFor(ctx.X(1)));
  const std::string reduction = ctx.node().GetString("reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean") {
    return InvalidArgument("attribute 'reduction' is '", reduction, "'; expected none, sum or mean");
  }
  ir::Value* labels = ctx.X(2);
  const DType label_type = ctx.TypeOf(labels);
  if (label_type != DType::kInt64 && label_type != DType::kInt32) {
    return InvalidArgument("the labels' element type is ",
                           label_type == DType::kUndefined ? std::string_view("unknown") : DTypeName(label_type),
                           "; expected int32 or int64");
  }
  labels = ctx.CastTo(labels, DType::kInt64);
  auto op = [&](const char* type, ir::Value* a, ir::Value* b, DType t) { return ctx.Emit1(type, {a, b}, {}, "", t); };
  // keep: the positions that count; safe: the labels with the ignored ones at class 0 (a valid OneHot index).
  ir::Value* keep = nullptr;
  ir::Value* safe = labels;
  if (const ir::Attribute* ignore = ctx.node().FindAttribute("ignore_index")) {
    ir::Value* ignored = op("Equal", labels, ctx.Scalar(DType::kInt64, static_cast<double>(ignore->i)), DType::kBool);
    keep = ctx.Emit1("Not", {ignored}, {}, "", DType::kBool);
    safe = ctx.Emit1("Where", {ignored, ctx.Scalar(DType::kInt64, 0), labels}, {}, "", DType::kInt64);
  }
  ir::Value* f = nullptr;
  if (ctx.X(3)) f = ctx.Emit1("Gather", {ctx.CastTo(ctx.X(3), c), safe}, {ir::Attribute::Int("axis", 0)}, "", c);
  if (keep) {
    ir::Value* k = ctx.CastTo(keep, c);
    f = f ? op("Mul", f, k, c) : k;
  }
  if (!f) {
    ir::Value* labels_shape = ctx.Emit1("Shape", {labels}, {}, "", DType::kInt64);
    f = ctx.Emit1("Expand", {ctx.Scalar(c, 1.0), labels_shape}, {}, "", c);
  }
  ir::Value* factor = op("Mul", f, ctx.CastTo(ctx.X(0), c), c);
  if (reduction == "mean") factor = op("Div", factor, ctx.EmitReduceSum(f, {}, false, c), c);
  factor = ctx.EmitUnsqueeze(factor, {1}, c);
  ir::Value* x = ctx.CastTo(ctx.X(1), c);
  ir::Value* x_shape = ctx.Emit1("Shape", {x}, {}, "", DType::kInt64);
  ir::Value* classes =
      ctx.Emit1("Gather", {x_shape, ctx.Scalar(DType::kInt64, 1)}, {ir::Attribute::Int("axis", 0)}, "", DType::kInt64);
  ir::Tensor off_on(c, {2});
  if (c == DType::kFloat64) {
    off_on.mutable_values<double>()[1] = 1.0;
  } else {
    off_on.mutable_values<float>()[1] = 1.0f;
  }
  ir::Value* onehot =
      ctx.Emit1("OneHot", {safe, classes, ctx.Constant(std::move(off_on))}, {ir::Attribute::Int("axis", 1)}, "", c);
  ir::Value* d =
      kSoftmax ? op("Sub", ctx.Emit1("Exp", {x}, {}, "", c), onehot, c) : ctx.Emit1("Neg", {onehot}, {}, "", c);
  ir::Value* result = op("Mul", d, factor, c);
  // Ignored positions are 0 whatever the rest: the kernel skips them (a mean over none would be 0 / 0 here).
  if (keep)
    result = ctx.Emit1("Where", {ctx.EmitUnsqueeze(keep, {1}, DType::kBool), result, ctx.Scalar(c, 0.0)}, {}, "", c);
  const DType out = ctx.TypeOf(ctx.Y(0)) == DType::kUndefined ? ctx.TypeOf(ctx.X(1)) : ctx.TypeOf(ctx.Y(0));
  ctx.SetY(0, ctx.CastTo(result, out));
  return Status::Ok();
}

}  // namespace

void RegisterLossOpInfos(OpInfoRegistry& r) {
  // Opset 13 only widened the element types.
  r.Add("SoftmaxCrossEntropyLoss")
      .Keep("a loss: log-probabilities and a mean over the batch")
      .Gradient(12, INT64_MAX, &LossGradient<true>)
      .NoGradientInputs({2}, "class weights");
  r.Add("NegativeLogLikelihoodLoss")
      .Keep("a loss: a mean over the batch")
      .Gradient(12, INT64_MAX, &LossGradient<false>)
      .NoGradientInputs({2}, "class weights");
  // Their internal-domain versions, for models of opsets before 12 (gradient_ops.h): attached by the trainer after
  // the precision conversion, so no precision policy.
  r.Add("SoftmaxCrossEntropyLoss", exec::kInternalDomain)
      .Gradient(1, INT64_MAX, &LossGradient<true>)
      .NoGradientInputs({2}, "class weights");
  r.Add("NegativeLogLikelihoodLoss", exec::kInternalDomain)
      .Gradient(1, INT64_MAX, &LossGradient<false>)
      .NoGradientInputs({2}, "class weights");
  r.Add(kSoftmaxCrossEntropyLossGradOp, exec::kInternalDomain).Decompose(&DecomposeLossGrad<true>);
  r.Add(kNegativeLogLikelihoodLossGradOp, exec::kInternalDomain).Decompose(&DecomposeLossGrad<false>);
}

}  // namespace onnxamp::ops
