// TopK: attribute parsing and the checks of k and the axis, shared by every backend (see topk.h).
#include "runtime/ops/topk/topk.h"

namespace onnxamp::ops {

Status ParseTopKSpec(const exec::KernelInfo& info, TopKSpec* spec) {
  const ir::Node& node = info.node;
  spec->k_from_input = info.opset >= 10;
  spec->axis = node.GetInt("axis", -1);
  if (!spec->k_from_input) {
    spec->k = node.GetInt("k", -1);
    if (spec->k < 0) {
      return InvalidArgument("attribute 'k' must be given and non-negative before opset 10, got ", spec->k);
    }
  }
  // `sorted` (opset 11+) needs no handling: the output is sorted either way.
  if (info.opset >= 11) spec->largest = node.GetInt("largest", 1) != 0;
  if (auto rank = reduce::DeclaredRank(node, 0)) {
    Status s = reduce::NormalizeAxis(spec->axis, *rank).status();
    if (!s.ok()) return s.WithContext("attribute 'axis'");
  }
  return Status::Ok();
}

StatusOr<TopKShape> ResolveTopKShape(const TopKSpec& spec, const ir::Tensor* x, const ir::Tensor* k_input) {
  if (!x) return InvalidArgument("input 0 (X) is missing");
  StatusOr<int64_t> axis = reduce::NormalizeAxis(spec.axis, x->rank());
  if (!axis.ok()) return axis.status().WithContext("attribute 'axis'");
  int64_t k = spec.k;
  if (spec.k_from_input) {
    if (!k_input) return InvalidArgument("input 1 (K) is missing");
    if (k_input->dtype() != DType::kInt64 || k_input->num_elements() != 1) {
      return InvalidArgument("input 1 (K): expected one int64 value, got ", DTypeName(k_input->dtype()), " with ",
                             k_input->num_elements(), " elements");
    }
    k = k_input->values<int64_t>()[0];
  }
  TopKShape shape;
  shape.axis = *axis;
  shape.view = reduce::ViewAround(x->dims(), *axis);
  if (k < 0 || k > shape.view.n) {
    return InvalidArgument(spec.k_from_input ? "input 1 (K)" : "attribute 'k'", ": k = ", k, " is outside 0..",
                           shape.view.n, " (dimension ", *axis, " of input 0)");
  }
  shape.k = k;
  shape.out_dims = x->dims();
  shape.out_dims[*axis] = k;
  return shape;
}

}  // namespace onnxamp::ops
