// Gradient builders of Min and Max (variadic, numpy broadcasting): dY goes to the inputs holding the extremum, split
// evenly between the inputs that hold it at the same position. For two inputs that is PyTorch's rule for
// torch.maximum/torch.minimum (dY / 2 to each of two equal inputs); for N inputs each of the k inputs equal to the
// result gets dY / k. Broadcast inputs get their share summed back to their shape (SumToShape). Where the result is
// NaN every input counts as holding it (each gets dY / N).
#include "runtime/ops/op_info.h"

namespace onnxamp::ops {
namespace {

// Cast `v` to `t` at the model's opset (Cast-1 names the type with a string).
ir::Value* CastTo(GradContext& ctx, ir::Value* v, DType t) {
  if (ctx.onnx_opset() >= 6) return ctx.Emit1("Cast", {v}, {ir::Attribute::Int("to", static_cast<int64_t>(t))});
  const char* name = t == DType::kFloat64 ? "DOUBLE" : t == DType::kFloat16 ? "FLOAT16" : "FLOAT";
  return ctx.Emit1("Cast", {v}, {ir::Attribute::String("to", name)});
}

template <bool kMax>
Status MinMax(GradContext& ctx) {
  const size_t n = ctx.node().inputs().size();
  if (n == 1) return ctx.SetDX(0, ctx.dY(0));
  const DType t = ctx.TypeOf(ctx.X(0));
  if (t == DType::kUndefined) return InvalidArgument("the element type of input 0 is unknown");
  // hit[i] = 1 where X_i equals the result: for Max, not X_i < Y (Y >= X_i everywhere), which every opset has for
  // floats (Equal takes floats only from opset 11).
  std::vector<ir::Value*> hit(n);
  for (size_t i = 0; i < n; ++i) {
    if (!ctx.X(i)) return InvalidArgument("input ", i, " is missing");
    ir::Value* beaten = ctx.Emit1(kMax ? "Less" : "Greater", {ctx.X(i), ctx.Y(0)});
    hit[i] = CastTo(ctx, ctx.Emit1("Not", {beaten}), t);
  }
  ir::Value* count = hit[0];  // broadcast to the result's shape by the Adds (every input's shape before opset 8)
  for (size_t i = 1; i < n; ++i) count = ctx.Emit1("Add", {count, hit[i]});
  ir::Value* share = ctx.Emit1("Div", {ctx.dY(0), count});
  for (size_t i = 0; i < n; ++i) {
    if (!ctx.NeedsDX(i)) continue;
    ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(i, ctx.SumToShape(ctx.Emit1("Mul", {share, hit[i]}), ctx.X(i))));
  }
  return Status::Ok();
}

// Sum: dY to every input; Mean: dY / N. Summed back to each input's shape.
template <bool kMean>
Status SumMean(GradContext& ctx) {
  const size_t n = ctx.node().inputs().size();
  ir::Value* g = ctx.dY(0);
  if (kMean && n > 1) {
    const DType t = ctx.TypeOf(ctx.X(0));
    if (t == DType::kUndefined) return InvalidArgument("the element type of input 0 is unknown");
    g = ctx.Emit1("Div", {g, ctx.Scalar(t, static_cast<double>(n))});
  }
  for (size_t i = 0; i < n; ++i) {
    if (ctx.NeedsDX(i)) ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(i, ctx.SumToShape(g, ctx.X(i))));
  }
  return Status::Ok();
}

}  // namespace

void RegisterMinMaxOpInfos(OpInfoRegistry& r) {
  // Before opset 8 every input has the result's shape; later versions broadcast (12 and 13 only add types).
  r.Add("Min").Gradient(1, INT64_MAX, &MinMax<false>);
  r.Add("Max").Gradient(1, INT64_MAX, &MinMax<true>);
  r.Add("Sum").Gradient(1, INT64_MAX, &SumMean<false>);
  r.Add("Mean").Gradient(1, INT64_MAX, &SumMean<true>);
}

}  // namespace onnxamp::ops
