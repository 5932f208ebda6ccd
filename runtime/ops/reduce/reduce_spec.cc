// Reduce*: attribute parsing and the axes reduced, shared by every backend (see reduce_spec.h).
#include "runtime/ops/reduce/reduce_spec.h"

#include <utility>

#include "runtime/ops/common/reduce.h"

namespace onnxamp::ops {

Status ParseReduceSpec(const exec::KernelInfo& info, int64_t axes_input_since, ReduceSpec* spec) {
  const ir::Node& node = info.node;
  spec->keepdims = node.GetInt("keepdims", 1) != 0;
  spec->axes_input = info.opset >= axes_input_since;
  if (spec->axes_input) {
    if (node.FindAttribute("axes")) {
      return InvalidArgument("attribute 'axes' is not allowed at opset ", info.opset, ": from opset ", axes_input_since,
                             " the axes are input 1");
    }
    const int64_t noop = node.GetInt("noop_with_empty_axes", 0);
    if (noop != 0 && noop != 1) return InvalidArgument("attribute 'noop_with_empty_axes' must be 0 or 1, got ", noop);
    spec->noop_with_empty_axes = noop == 1;
  } else {
    spec->axes = node.GetInts("axes");
    if (auto rank = reduce::DeclaredRank(node, 0)) {
      StatusOr<std::vector<bool>> mask = reduce::AxesMask(spec->axes, *rank);
      if (!mask.ok()) return mask.status().WithContext("attribute 'axes'");
    }
  }
  return Status::Ok();
}

StatusOr<std::vector<bool>> ResolveReduceMask(const ReduceSpec& spec, const ir::Tensor* x, const ir::Tensor* axes_t) {
  if (!x) return InvalidArgument("input 0 (data) is missing");
  std::vector<int64_t> axes = spec.axes;
  bool noop = false;
  if (spec.axes_input) {
    if (axes_t) {
      if (axes_t->dtype() != DType::kInt64) {
        return InvalidArgument("input 1 (axes): expected int64, got ", DTypeName(axes_t->dtype()));
      }
      if (axes_t->rank() > 1)
        return InvalidArgument("input 1 (axes): expected a 1-D tensor, got rank ", axes_t->rank());
      const auto values = axes_t->values<int64_t>();
      axes.assign(values.begin(), values.end());
    }
    noop = axes.empty() && spec.noop_with_empty_axes;
  }
  std::vector<bool> mask(static_cast<size_t>(x->rank()), !noop);
  if (!axes.empty()) {
    StatusOr<std::vector<bool>> m = reduce::AxesMask(axes, x->rank());
    if (!m.ok()) return m.status().WithContext(spec.axes_input ? "input 1 (axes)" : "attribute 'axes'");
    mask = *std::move(m);
  }
  return mask;
}

}  // namespace onnxamp::ops
