// Gradient builder of Concat: dY split back along the axis into pieces the sizes of the inputs, read from their
// run-time shapes: one Split with its `split` input from opset 13; before (opsets 10-12, whose Split takes its sizes
// as an attribute), one Slice per input between the running sums of the sizes (Slice's inputs, opset 10).
#include "runtime/ops/op_info.h"

namespace onnxamp::ops {
namespace {

Status Concat(GradContext& ctx) {
  const int64_t opset = ctx.onnx_opset();
  if (opset < 10) return Unimplemented("the gradient of Concat needs ONNX opset 10 or later (Slice's inputs)");
  const ir::Attribute* axis_attr = ctx.node().FindAttribute("axis");
  if (!axis_attr || axis_attr->type() != ir::AttrType::kInt) return InvalidArgument("attribute 'axis' is missing");
  int64_t axis = axis_attr->i;
  // Gather's and Slice's negative indices and axes start at opset 11: before, counted from the front where the rank
  // is known.
  if (axis < 0 && opset < 11) {
    const int64_t rank = ctx.RankOf(ctx.X(0));
    if (rank < 0) return Unimplemented("the gradient of Concat on axis ", axis, " at opset 10 needs its rank");
    axis += rank;
  }
  // Each input's extent along the axis: Gather(Shape(X_i), [axis]).
  std::vector<ir::Value*> sizes;
  for (size_t i = 0; i < ctx.node().inputs().size(); ++i) {
    sizes.push_back(ctx.Emit1("Gather", {ctx.ShapeOf(ctx.X(i)), ctx.Ints({axis})}, {ir::Attribute::Int("axis", 0)}));
  }
  if (opset < 13) {
    ir::Value* begin = ctx.Ints({0});
    for (size_t i = 0; i < sizes.size(); ++i) {
      ir::Value* end = ctx.Emit1("Add", {begin, sizes[i]});
      if (ctx.NeedsDX(i)) {
        ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(i, ctx.Emit1("Slice", {ctx.dY(0), begin, end, ctx.Ints({axis})})));
      }
      begin = end;
    }
    return Status::Ok();
  }
  ir::Value* split = ctx.Emit1("Concat", sizes, {ir::Attribute::Int("axis", 0)});
  std::vector<ir::Value*> parts =
      ctx.Emit("Split", {ctx.dY(0), split}, sizes.size(), {ir::Attribute::Int("axis", axis)});
  for (size_t i = 0; i < parts.size(); ++i) {
    if (ctx.NeedsDX(i)) ONNXAMP_RETURN_IF_ERROR(ctx.SetDX(i, parts[i]));
  }
  return Status::Ok();
}

}  // namespace

void RegisterConcatOpInfos(OpInfoRegistry& r) { r.Add("Concat").Gradient(4, INT64_MAX, &Concat); }

}  // namespace onnxamp::ops
