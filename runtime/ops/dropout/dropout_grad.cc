// Gradient builder of Dropout (every opset). In inference mode dX = dY (Identity): opsets before 12 with is_test
// (default 0 before opset 7, 1 after: dropout.h), and from 12 without a training_mode input or with a constant false
// one. In training mode DropoutGrad
// recomputes the forward's mask: attribute seed_from names the forward's first output, so the session gives it the
// forward's per-node seed, and the forward's `seed` attribute is copied when it has one. The ratio and training_mode
// are the forward's own inputs from opset 12, constants before.
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/dropout/dropout.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/op_info.h"

namespace onnxamp::ops {
namespace {

ir::Tensor BoolScalar(bool v) {
  ir::Tensor t(DType::kBool, {});
  t.mutable_values<bool>()[0] = v;
  return t;
}

// True when `v` is a constant (an initializer no graph input overrides) holding false.
bool IsConstantFalse(const ir::Value* v) {
  const ir::Tensor* t = v ? v->initializer() : nullptr;
  return t && !v->is_graph_input() && t->dtype() == DType::kBool && t->num_elements() == 1 && !t->values<bool>()[0];
}

Status DropoutGradient(GradContext& ctx) {
  if (!ctx.NeedsDX(0) || !ctx.dY(0)) return Status::Ok();
  const ir::Node& node = ctx.node();
  const int64_t opset = ctx.opset();
  // The forward's attributes checked as its kernel checks them.
  DropoutSpec spec;
  ONNXAMP_RETURN_IF_ERROR(spec.Init(exec::KernelInfo{node, opset, exec::Device::kCpu}));
  const DType type = ctx.TypeOf(ctx.X(0));
  std::vector<ir::Value*> inputs = {ctx.dY(0)};
  bool training = false;
  if (opset >= 12) {
    training = ctx.X(2) && !IsConstantFalse(ctx.X(2));
    inputs.push_back(ctx.X(1));
    inputs.push_back(ctx.X(2));
  } else {
    training = node.GetInt("is_test", opset < 7 ? 0 : 1) == 0;
    inputs.push_back(ctx.Scalar(DType::kFloat32, node.GetFloat("ratio", 0.5f)));
    inputs.push_back(ctx.Constant(BoolScalar(true)));
  }
  if (!training) return ctx.SetDX(0, ctx.Emit("Identity", {ctx.dY(0)}, 1, {}, "", type)[0]);
  std::vector<ir::Attribute> attrs = {ir::Attribute::String("seed_from", ctx.Y(0)->name())};
  if (const ir::Attribute* seed = node.FindAttribute("seed")) attrs.push_back(ir::Attribute::Int("seed", seed->i));
  return ctx.SetDX(0, ctx.Emit(kDropoutGradOp, inputs, 1, std::move(attrs), exec::kInternalDomain, type)[0]);
}

// DropoutGrad's own gradient (second derivatives: a gradient penalty through a Dropout layer). Linear in dY, a mask
// times a constant: its adjoint is DropoutGrad again, drawing the same mask (the same seed_from and seed).
Status DropoutGradGradient(GradContext& ctx) {
  if (!ctx.NeedsDX(0)) return Status::Ok();
  if (!ctx.dY(0)) return ctx.SetDX(0, ctx.Zeros(ctx.TypeOf(ctx.X(0)), ctx.X(0)));
  std::vector<ir::Value*> inputs = {ctx.dY(0), ctx.X(1), ctx.X(2)};
  while (!inputs.back()) inputs.pop_back();
  return ctx.SetDX(
      0, ctx.Emit(kDropoutGradOp, inputs, 1, ctx.node().attributes(), exec::kInternalDomain, ctx.TypeOf(ctx.X(0)))[0]);
}

}  // namespace

void RegisterDropoutOpInfos(OpInfoRegistry& r) {
  // Before 7: attributes is_test and ratio; 7-11 inference only; from 12 inputs ratio and training_mode, attribute
  // seed. One builder reads each form. Random: a fresh mask every run in training mode.
  r.Add("Dropout")
      .Random()
      .Gradient(1, 6, &DropoutGradient)
      .Gradient(7, 11, &DropoutGradient)
      .Gradient(12, INT64_MAX, &DropoutGradient)
      .NoGradientInputs({1, 2}, "ratio and training_mode");
  r.Add(kDropoutGradOp, exec::kInternalDomain)
      .Gradient(1, INT64_MAX, &DropoutGradGradient)
      .NoGradientInputs({1, 2}, "ratio and training_mode");
}

}  // namespace onnxamp::ops
