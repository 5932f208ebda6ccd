// The OpInfos of the signal ops: DFT's and STFT's gradients are the adjoints of their linear maps (com.onnxamp DFTGrad
// and STFTGrad, spectral/spectral_cpu.cc); the windows and MelWeightMatrix are computed from integer sizes.
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/op_info.h"

namespace onnxamp::ops {
namespace {

Status DftGradient(GradContext& ctx) {
  if (!ctx.NeedsDX(0) || !ctx.dY(0)) return Status::Ok();
  // DFTGrad(dY, X, dft_length?, axis?) with the forward's attributes and opset (whether axis is an attribute).
  std::vector<ir::Value*> inputs = {ctx.dY(0), ctx.X(0), ctx.X(1)};
  if (ctx.opset() >= 20) inputs.push_back(ctx.X(2));
  while (!inputs.empty() && inputs.back() == nullptr) inputs.pop_back();
  std::vector<ir::Attribute> attributes = ctx.node().attributes();
  attributes.push_back(ir::Attribute::Int("opset", ctx.opset()));
  return ctx.SetDX(
      0, ctx.Emit(kDftGradOp, inputs, 1, std::move(attributes), exec::kInternalDomain, ctx.TypeOf(ctx.X(0)))[0]);
}

Status StftGradient(GradContext& ctx) {
  if (!ctx.dY(0)) return Status::Ok();
  std::vector<ir::Value*> inputs = {ctx.dY(0), ctx.X(0), ctx.X(1), ctx.X(2), ctx.X(3)};
  while (!inputs.empty() && inputs.back() == nullptr) inputs.pop_back();
  return ctx.EmitInputGradients(kStftGradOp, inputs, {ctx.NeedsDX(0), false, ctx.NeedsDX(2)}, ctx.node().attributes(),
                                ctx.TypeOf(ctx.X(0)));
}

}  // namespace

void RegisterSpectralOpInfos(OpInfoRegistry& r) {
  constexpr char kSums[] = "sums over a whole signal: fp16 loses the small frequency components";
  r.Add("DFT").Keep(kSums).Gradient(17, INT64_MAX, &DftGradient);
  r.Add("STFT").Keep(kSums).Gradient(17, INT64_MAX, &StftGradient);
  for (const char* op : {"HannWindow", "HammingWindow", "BlackmanWindow", "MelWeightMatrix"}) {
    r.Add(op).NotDifferentiable("computed from integer sizes and constants");
  }
  r.Add(kDftGradOp, exec::kInternalDomain).NotDifferentiable(kBackwardOpReason);
  r.Add(kStftGradOp, exec::kInternalDomain).NotDifferentiable(kBackwardOpReason);
}

}  // namespace onnxamp::ops
