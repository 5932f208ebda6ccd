// Gradient builders of Softmax and LogSoftmax (every opset): SoftmaxGrad / LogSoftmaxGrad of the forward's output,
// with the forward's axis resolved by ParseSoftmaxSpec and `legacy` 1 before opset 13 (the 2-D coercion).
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/op_info.h"
#include "runtime/ops/softmax/softmax.h"

namespace onnxamp::ops {
namespace {

template <bool kLog>
Status SoftmaxGradient(GradContext& ctx) {
  if (!ctx.NeedsDX(0) || !ctx.dY(0)) return Status::Ok();
  SoftmaxSpec spec;
  ONNXAMP_RETURN_IF_ERROR(ParseSoftmaxSpec(exec::KernelInfo{ctx.node(), ctx.opset(), exec::Device::kCpu}, &spec));
  ir::Value* dx = ctx.Emit(kLog ? kLogSoftmaxGradOp : kSoftmaxGradOp, {ctx.dY(0), ctx.Y(0)}, 1,
                           {ir::Attribute::Int("axis", spec.axis), ir::Attribute::Int("legacy", spec.coerce_2d)},
                           exec::kInternalDomain, ctx.TypeOf(ctx.X(0)))[0];
  return ctx.SetDX(0, dx);
}

// The dims SoftmaxGrad / LogSoftmaxGrad `node` reduces: its axis, or with legacy 1 that axis and every later one.
StatusOr<std::vector<int64_t>> ReducedAxes(GradContext& ctx) {
  int64_t axis = ctx.node().GetInt("axis", -1);
  if (ctx.node().GetInt("legacy", 0) == 0) return std::vector<int64_t>{axis};
  const int64_t rank = ctx.RankOf(ctx.X(1));
  if (rank < 0) return InvalidArgument("the rank of Y is unknown: the reduced dims of the 2-D coercion need it");
  if (axis < 0) axis += rank;
  std::vector<int64_t> axes;
  for (int64_t d = axis; d < rank; ++d) axes.push_back(d);
  return axes;
}

// The backward ops' own gradients (second derivatives; G reaches dX, sums over the reduced dims, kept):
// SoftmaxGrad, dX = Y (dY - sum(dY Y)): symmetric in dY, whose gradient is SoftmaxGrad(G, Y) again; in Y,
// G (dY - sum(dY Y)) - dY sum(G Y). LogSoftmaxGrad, dX = dY - exp(Y) sum(dY): in dY, G - sum(G exp(Y)); in Y,
// -G exp(Y) sum(dY).
template <bool kLog>
Status SoftmaxGradGradient(GradContext& ctx) {
  ir::Value* g = ctx.dY(0);
  ir::Value* dy = ctx.X(0);
  ir::Value* y = ctx.X(1);
  ONNXAMP_ASSIGN_OR_RETURN(std::vector<int64_t> axes, ReducedAxes(ctx));
  auto sum = [&](ir::Value* v) { return ctx.EmitReduceSum(v, axes, /*keepdims=*/true); };
  if (kLog) {
    ir::Value* e = ctx.Emit1("Exp", {y});
    if (ctx.NeedsDX(0)) {
      ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(0, ctx.Emit1("Sub", {g, sum(ctx.Emit1("Mul", {g, e}))})));
    }
    if (ctx.NeedsDX(1)) {
      ir::Value* ge = ctx.Emit1("Mul", {g, e});
      ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(1, ctx.Emit1("Neg", {ctx.Emit1("Mul", {ge, sum(dy)})})));
    }
    return Status::Ok();
  }
  if (ctx.NeedsDX(0)) {
    ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(
        0, ctx.Emit(kSoftmaxGradOp, {g, y}, 1, ctx.node().attributes(), exec::kInternalDomain, ctx.TypeOf(y))[0]));
  }
  if (ctx.NeedsDX(1)) {
    ir::Value* centered = ctx.Emit1("Sub", {dy, sum(ctx.Emit1("Mul", {dy, y}))});
    ir::Value* term = ctx.Emit1("Mul", {dy, sum(ctx.Emit1("Mul", {g, y}))});
    ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(1, ctx.Emit1("Sub", {ctx.Emit1("Mul", {g, centered}), term})));
  }
  return Status::Ok();
}

}  // namespace

void RegisterSoftmaxOpInfos(OpInfoRegistry& r) {
  r.Add("Hardmax")
      .Gradient(8, INT64_MAX, &ZeroGradient)  // piecewise constant, as PyTorch's one-hot of an argmax
      .GradientFloor("its zero gradient is Expand(0, Shape(x)), and Expand needs opset 8");
  // Opsets 1-12 coerce the input to 2-D at `axis` (default 1); from 13 one axis (default -1). One builder each way.
  r.Add("Softmax")
      .Keep("exp and a sum along the axis")
      .Gradient(1, 12, &SoftmaxGradient<false>)
      .Gradient(13, INT64_MAX, &SoftmaxGradient<false>);
  r.Add("LogSoftmax")
      .Keep("exp, a sum and a log along the axis")
      .Gradient(1, 12, &SoftmaxGradient<true>)
      .Gradient(13, INT64_MAX, &SoftmaxGradient<true>);
  r.Add(kSoftmaxGradOp, exec::kInternalDomain).Gradient(1, INT64_MAX, &SoftmaxGradGradient<false>);
  r.Add(kLogSoftmaxGradOp, exec::kInternalDomain).Gradient(1, INT64_MAX, &SoftmaxGradGradient<true>);
}

}  // namespace onnxamp::ops
