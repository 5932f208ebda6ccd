// The OpInfos of NonMaxSuppression and RoiAlign, and RoiAlign's gradient builder: one com.onnxamp RoiAlignGrad(dY,
// Shape(X), rois, batch_indices) with the forward's attributes (the coordinate mode written out: opset 10's is
// output_half_pixel). The rois take no gradient (OpInfo::no_gradient_inputs), as torchvision's roi_align gives them
// none (detectors detach their proposals); mode max has no gradient.
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/op_info.h"

namespace onnxamp::ops {
namespace {

Status RoiAlignGradient(GradContext& ctx) {
  if (ctx.node().GetString("mode", "avg") == "max") {
    return Unimplemented("RoiAlign's gradient covers mode avg only (mode max picks one weighted tap per bin)");
  }
  if (!ctx.NeedsDX(0) || !ctx.dY(0)) return Status::Ok();
  std::vector<ir::Attribute> attributes;
  for (const ir::Attribute& a : ctx.node().attributes()) {
    if (a.name() != "coordinate_transformation_mode") attributes.push_back(a);
  }
  const std::string mode =
      ctx.opset() >= 16 ? ctx.node().GetString("coordinate_transformation_mode", "half_pixel") : "output_half_pixel";
  attributes.push_back(ir::Attribute::String("coordinate_transformation_mode", mode));
  const DType t = ctx.TypeOf(ctx.X(0));
  return ctx.SetDX(0, ctx.Emit(kRoiAlignGradOp, {ctx.dY(0), ctx.ShapeOf(ctx.X(0)), ctx.X(1), ctx.X(2)}, 1,
                               std::move(attributes), exec::kInternalDomain, t)[0]);
}

}  // namespace

void RegisterDetectionOpInfos(OpInfoRegistry& r) {
  r.Add("NonMaxSuppression").NotDifferentiable("int64 indices of the selected boxes");
  r.Add("RoiAlign")
      .Keep("box coordinates: fp16 resolves 1024-2048 px to whole pixels (onnxconverter-common keeps it in FP32)")
      .Gradient(10, INT64_MAX, &RoiAlignGradient)
      .NoGradientInputs({1}, "rois (detectors detach their proposals)");
  r.Add(kRoiAlignGradOp, exec::kInternalDomain).NotDifferentiable(kBackwardOpReason);
}

}  // namespace onnxamp::ops
