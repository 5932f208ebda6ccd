// Gradient builders of SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss (opsets 12+): the gradient of input 0
// (scores / input) only, from the com.onnxamp *LossGrad ops; labels are integers and weights are refused. The
// cross entropy's gradient reads the forward's log_prob (output 1, turned on by the builder), and a gradient reaching
// log_prob itself adds LogSoftmaxGrad along the class axis. Also the OpInfos of loss/.
#include <string>
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
  if (ctx.X(2) && ctx.NeedsDX(2)) {
    return Unimplemented("no gradient with respect to input 2 (", kSoftmax ? "weights" : "weight",
                         "): make it a constant");
  }
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

}  // namespace

void RegisterLossOpInfos(OpInfoRegistry& r) {
  // Opset 13 only widened the element types.
  r.Add("SoftmaxCrossEntropyLoss")
      .Keep("a loss: log-probabilities and a mean over the batch")
      .Gradient(12, INT64_MAX, &LossGradient<true>);
  r.Add("NegativeLogLikelihoodLoss")
      .Keep("a loss: a mean over the batch")
      .Gradient(12, INT64_MAX, &LossGradient<false>);
  r.Add(kSoftmaxCrossEntropyLossGradOp, exec::kInternalDomain).NotDifferentiable(kBackwardOpReason);
  r.Add(kNegativeLogLikelihoodLossGradOp, exec::kInternalDomain).NotDifferentiable(kBackwardOpReason);
}

}  // namespace onnxamp::ops
