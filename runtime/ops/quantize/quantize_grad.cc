// The OpInfos of QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear. The converter keeps them in FP32: the
// scales were calibrated in FP32, and an fp16 scale moves QuantizeLinear's rounding boundaries (a value near a
// boundary lands on the neighbouring integer) and DequantizeLinear's levels.
//
// DequantizeLinear's gradient reaches its scale only (x and the zero point are integers): y = (x - zp) * scale, so
// dscale = the sum of dY * (x - zp) over the elements each scale covers; (x - zp) is DequantizeLinear(x, 1, zp). A
// scale trained this way is a learned step size (LSQ) with the rounding held fixed. The outputs of a QuantizeLinear are
// integers: the training graphs make each QuantizeLinear -> DequantizeLinear pair one com.onnxamp FakeQuantize
// (trainer/graph/fake_quantize.h), whose gradient (FakeQuantizeGrad) is the straight-through estimator for x and the
// learned-step-size gradient for the scale, so that quantization-aware training reaches the float weights.
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/op_info.h"

namespace onnxamp::ops {
namespace {

// The number of elements of `v`'s declared shape; -1 when a dim is unknown or it has none.
int64_t StaticElements(const ir::Value* v) {
  if (v->initializer()) return v->initializer()->num_elements();
  const auto& shape = v->type().shape();
  if (!shape) return -1;
  int64_t n = 1;
  for (const ir::Dim& d : *shape) {
    if (!d.is_value()) return -1;
    n *= d.value;
  }
  return n;
}

Status DequantizeLinearGradient(GradContext& ctx) {
  if (!ctx.NeedsDX(1) || !ctx.dY(0)) return Status::Ok();
  if (ctx.node().GetInt("block_size", 0) != 0) {
    return Unimplemented("no gradient for the scale of a blocked DequantizeLinear (block_size ",
                         ctx.node().GetInt("block_size", 0), ")");
  }
  ir::Value* scale = ctx.X(1);
  const DType t = ctx.TypeOf(scale);
  const int64_t scale_rank = ctx.RankOf(scale);
  const int64_t x_rank = ctx.RankOf(ctx.X(0));
  const bool per_tensor = scale_rank == 0 || StaticElements(scale) == 1;
  if (!per_tensor && (scale_rank != 1 || x_rank < 0)) {
    return Unimplemented("the scale's layout is unknown (rank ", scale_rank, " for x of rank ", x_rank,
                         "): no gradient for it");
  }
  // (x - zero_point) in the scale's type: the same node with a scale of ones.
  ir::Value* ones = ctx.Emit1("Expand", {ctx.Scalar(t, 1.0), ctx.ShapeOf(scale)});
  std::vector<ir::Value*> inputs = {ctx.X(0), ones};
  if (ctx.X(2)) inputs.push_back(ctx.X(2));
  std::vector<ir::Attribute> attributes;
  if (const ir::Attribute* axis = ctx.node().FindAttribute("axis")) attributes.push_back(*axis);
  ir::Value* centered = ctx.Emit("DequantizeLinear", inputs, 1, attributes, "", t)[0];
  ir::Value* dy = ctx.dY(0);
  if (ctx.TypeOf(dy) != t && ctx.TypeOf(dy) != DType::kUndefined) {
    dy = ctx.Emit1("Cast", {dy}, {ir::Attribute::Int("to", static_cast<int64_t>(t))});
  }
  ir::Value* product = ctx.Emit1("Mul", {dy, centered});
  if (per_tensor) {
    return ctx.SetDX(1, ctx.Emit1("Reshape", {ctx.EmitReduceSum(product, {}, false), ctx.ShapeOf(scale)}));
  }
  const int64_t axis =
      ctx.node().GetInt("axis", 1) < 0 ? ctx.node().GetInt("axis", 1) + x_rank : ctx.node().GetInt("axis", 1);
  std::vector<int64_t> others;
  for (int64_t d = 0; d < x_rank; ++d) {
    if (d != axis) others.push_back(d);
  }
  ir::Value* per_axis = others.empty() ? product : ctx.EmitReduceSum(product, others, false);
  // A rank-1 scale of unknown size may hold one value at run time (per tensor, broadcast along the axis): summed to
  // the scale's run-time shape.
  return ctx.SetDX(1, StaticElements(scale) < 0 ? ctx.SumToShape(per_axis, scale) : per_axis);
}

Status FakeQuantizeGradient(GradContext& ctx) {
  if (!ctx.dY(0) || (!ctx.NeedsDX(0) && !ctx.NeedsDX(1))) return Status::Ok();
  std::vector<ir::Value*> inputs = {ctx.dY(0), ctx.X(0), ctx.X(1)};
  if (ctx.X(2)) inputs.push_back(ctx.X(2));
  std::vector<ir::Attribute> attributes;
  for (const char* name : {"axis", "qmin", "qmax"}) {
    if (const ir::Attribute* a = ctx.node().FindAttribute(name)) attributes.push_back(*a);
  }
  // dScale only when the scale trains (QAT usually keeps the calibrated scales).
  const size_t outputs = ctx.NeedsDX(1) ? 2 : 1;
  std::vector<ir::Value*> grads = ctx.Emit(kFakeQuantizeGradOp, inputs, outputs, std::move(attributes),
                                           exec::kInternalDomain, ctx.TypeOf(ctx.X(0)));
  ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(0, grads[0]));
  return outputs == 2 ? ctx.SetDX(1, grads[1]) : Status::Ok();
}

}  // namespace

void RegisterQuantizeOpInfos(OpInfoRegistry& r) {
  constexpr char kCalibrated[] = "scales calibrated in FP32: an fp16 scale moves the quantization levels";
  r.Add("QuantizeLinear").Keep(kCalibrated).NotDifferentiable("integer outputs");
  r.Add("DequantizeLinear").Keep(kCalibrated).Gradient(10, INT64_MAX, &DequantizeLinearGradient);
  for (const char* op : {"MatMulInteger", "ConvInteger"}) r.Add(op).NotDifferentiable("integer operands and results");
  for (const char* op : {"QLinearMatMul", "QLinearConv"}) {
    r.Add(op).Keep(kCalibrated).NotDifferentiable("integer operands and results");
  }
  r.Add(kFakeQuantizeOp, exec::kInternalDomain).Gradient(1, 1, &FakeQuantizeGradient);
  r.Add(kFakeQuantizeGradOp, exec::kInternalDomain).NotDifferentiable(kBackwardOpReason);
  r.Add("DynamicQuantizeLinear")
      .Keep(kCalibrated)
      .NotDifferentiable("integer outputs, and a scale that is a statistic of the data's range");
}

}  // namespace onnxamp::ops
