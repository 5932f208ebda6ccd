// Concat: the axis attribute and the checks of a run's inputs (see concat.h).
#include "runtime/ops/concat/concat.h"

namespace onnxamp::ops {

StatusOr<int64_t> ParseConcatAxis(const ir::Node& node, int64_t opset) {
  const ir::Attribute* a = node.FindAttribute("axis");
  if (!a && opset >= 4) return InvalidArgument("attribute 'axis' is required");
  return a ? a->i : 1;
}

CopyPlan ConcatParts::PartPlan(size_t i) const {
  const int64_t block = inputs[i]->dims()[axis] * inner;
  const int64_t out_row = out_dims[axis] * inner;
  const std::vector<int64_t> dims = {outer, block};
  return MakeCopyPlan(dims, std::vector<int64_t>{out_row, 1}, std::vector<int64_t>{block, 1});
}

StatusOr<ConcatParts> ResolveConcat(const exec::KernelContext& ctx, int64_t axis_attr) {
  ConcatParts p;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* t, RequireInput(ctx, i, "inputs"));
    p.inputs.push_back(t);
  }
  if (p.inputs.empty()) return InvalidArgument("Concat needs at least one input");
  const ir::Tensor& first = *p.inputs[0];
  ONNXAMP_ASSIGN_OR_RETURN(const int64_t axis, NormalizeAxis(axis_attr, first.rank()));
  p.axis = axis;
  p.out_dims = first.dims();
  p.out_dims[axis] = 0;
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    const ir::Tensor& t = *p.inputs[i];
    if (t.dtype() != first.dtype()) {
      return InvalidArgument(InputLabel(ctx, i, "inputs"), " has type ", DTypeName(t.dtype()), ", expected ",
                             DTypeName(first.dtype()), " like input 0");
    }
    bool ok = t.rank() == first.rank();
    for (int64_t k = 0; ok && k < first.rank(); ++k) ok = k == axis || t.dims()[k] == first.dims()[k];
    if (!ok) {
      return InvalidArgument(InputLabel(ctx, i, "inputs"), " has shape ", ShapeToString(t.dims()),
                             ", which does not match input 0's shape ", ShapeToString(first.dims()),
                             " except along axis ", axis);
    }
    p.out_dims[axis] += t.dims()[axis];
  }
  p.outer = DimProduct(first.dims(), 0, axis);
  p.inner = DimProduct(first.dims(), axis + 1, first.dims().size());
  int64_t col = 0;
  for (const ir::Tensor* t : p.inputs) {
    p.offsets.push_back(col);
    col += t->dims()[axis] * p.inner;
  }
  return p;
}

}  // namespace onnxamp::ops
