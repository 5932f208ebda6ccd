// ConstantOfShape: the `value` attribute and the output dims of a run (see constant.h).
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/constant/constant.h"

namespace onnxamp::ops {

StatusOr<ir::Tensor> ConstantOfShapeValue(const ir::Node& node) {
  const ir::Attribute* a = node.FindAttribute("value");
  if (!a) return ir::Tensor(DType::kFloat32, {1});
  if (a->type() != ir::AttrType::kTensor || !a->t.has_data() || a->t.num_elements() != 1) {
    return InvalidArgument("attribute 'value' must be a tensor of one element");
  }
  return a->t;
}

StatusOr<std::vector<int64_t>> ConstantOfShapeDims(const exec::KernelContext& ctx) {
  ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* s, RequireInput(ctx, 0, "input"));
  ONNXAMP_ASSIGN_OR_RETURN(std::vector<int64_t> dims, ReadInt64s(*s, InputLabel(ctx, 0, "input")));
  for (int64_t d : dims) {
    if (d < 0) return InvalidArgument(InputLabel(ctx, 0, "input"), " ", ShapeToString(dims), " has a negative dim");
  }
  return dims;
}

}  // namespace onnxamp::ops
