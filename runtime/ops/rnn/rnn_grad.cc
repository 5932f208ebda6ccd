// Gradient builders of RNN, GRU and LSTM: one com.onnxamp RNNGrad node (runtime/ops/gradient_ops.h) that takes the
// forward's inputs and the gradients of its outputs, and whose outputs are requested only for the inputs that need
// a gradient. A dedicated kernel: the recurrence cannot be written as ONNX ops without a Loop. It recomputes the
// forward unless a training session's stash_recurrent_traces pass gave it the forward's trace.
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/op_info.h"
#include "runtime/ops/rnn/rnn.h"

namespace onnxamp::ops {
namespace {

Status RecurrentGradient(GradContext& ctx) {
  ONNXAMP_ASSIGN_OR_RETURN(const rnn::Cell cell, rnn::CellOf(ctx.node().op_type()));
  rnn::Spec spec;
  ONNXAMP_RETURN_IF_ERROR(rnn::ParseSpec(ctx.node(), cell, &spec));
  if (!ctx.dY(0) && !ctx.dY(1) && !ctx.dY(2)) return Status::Ok();
  std::vector<ir::Value*> inputs;
  std::vector<bool> wanted;
  for (size_t k = 0; k < 8; ++k) {
    inputs.push_back(ctx.X(k));
    wanted.push_back(k != 4 && ctx.X(k) != nullptr && ctx.NeedsDX(k));
  }
  for (size_t k = 0; k < 3; ++k) inputs.push_back(ctx.dY(k));
  while (!inputs.empty() && !inputs.back()) inputs.pop_back();
  std::vector<ir::Attribute> attrs = ctx.node().attributes();
  attrs.push_back(ir::Attribute::String("forward_op", ctx.node().op_type()));
  return ctx.EmitInputGradients(kRnnGradOp, inputs, wanted, std::move(attrs), ctx.TypeOf(ctx.X(0)));
}

}  // namespace

void RegisterRecurrentOpInfos(OpInfoRegistry& r) {
  for (const char* op : {"RNN", "GRU", "LSTM"}) {
    r.Add(op)
        .Low("GEMM-bound; torch.autocast runs them in FP16 (cuDNN); the kernels keep the states in FP32")
        .Gradient(7, INT64_MAX, &RecurrentGradient);
  }
  r.Add(kRnnGradOp, exec::kInternalDomain).NotDifferentiable(kBackwardOpReason);
  r.Add(kRnnTrainingOp, exec::kInternalDomain)
      .NotDifferentiable("made by a training session from a forward node whose gradient is already built");
}

}  // namespace onnxamp::ops
