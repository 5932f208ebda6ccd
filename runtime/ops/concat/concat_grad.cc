// Gradient builder of Concat: dY split back along the axis into pieces the sizes of the inputs, read from their
// run-time shapes (Split with its `split` input, so opset 13 or later).
#include "runtime/ops/op_info.h"

namespace onnxamp::ops {
namespace {

Status Concat(GradContext& ctx) {
  if (ctx.onnx_opset() < 13)
    return Unimplemented("the gradient of Concat needs ONNX opset 13 or later (Split's input)");
  const ir::Attribute* axis_attr = ctx.node().FindAttribute("axis");
  if (!axis_attr || axis_attr->type() != ir::AttrType::kInt) return InvalidArgument("attribute 'axis' is missing");
  const int64_t axis = axis_attr->i;
  // Each input's extent along the axis: Gather(Shape(X_i), [axis]) (a negative axis counts from the end, as Gather's
  // index does).
  std::vector<ir::Value*> sizes;
  for (size_t i = 0; i < ctx.node().inputs().size(); ++i) {
    sizes.push_back(ctx.Emit1("Gather", {ctx.ShapeOf(ctx.X(i)), ctx.Ints({axis})}, {ir::Attribute::Int("axis", 0)}));
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
