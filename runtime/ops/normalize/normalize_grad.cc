// The OpInfos of MeanVarianceNormalization and LpNormalization (kept in FP32 by the converter: statistics over many
// elements) and their gradient builders: one com.onnxamp MeanVarianceNormalizationGrad or LpNormalizationGrad(dY, X)
// with the forward's attributes (runtime/ops/normalize/normalize_cpu.cc has the formulas).
#include "runtime/executor/graph_optimizer.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/op_info.h"

namespace onnxamp::ops {
namespace {

template <const char* kGradOp>
Status NormalizeGradient(GradContext& ctx) {
  if (!ctx.NeedsDX(0) || !ctx.dY(0)) return Status::Ok();
  return ctx.SetDX(0, ctx.Emit(kGradOp, {ctx.dY(0), ctx.X(0)}, 1, ctx.node().attributes(), exec::kInternalDomain,
                               ctx.TypeOf(ctx.X(0)))[0]);
}

}  // namespace

void RegisterNormalizeOpInfos(OpInfoRegistry& r) {
  r.Add("MeanVarianceNormalization")
      .Keep("mean and variance over many elements")
      .Gradient(9, INT64_MAX, &NormalizeGradient<kMeanVarianceNormalizationGradOp>);
  r.Add("LpNormalization")
      .Keep("a norm over many elements")
      .Gradient(1, INT64_MAX, &NormalizeGradient<kLpNormalizationGradOp>);
  r.Add(kMeanVarianceNormalizationGradOp, exec::kInternalDomain).NotDifferentiable(kBackwardOpReason);
  r.Add(kLpNormalizationGradOp, exec::kInternalDomain).NotDifferentiable(kBackwardOpReason);
}

}  // namespace onnxamp::ops
