// Reduce*: attribute parsing and the axes reduced, shared by every backend (see reduce_spec.h).
#include "runtime/ops/reduce/reduce_spec.h"

#include <utility>

#include "runtime/ops/common/broadcast.h"
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

StatusOr<SumToShapePlan> ResolveSumToShape(const ir::Tensor* g, const ir::Tensor* shape) {
  if (!g || !shape) return InvalidArgument("input ", g ? 1 : 0, " is missing");
  if (shape->dtype() != DType::kInt64 || shape->dims().size() != 1) {
    return InvalidArgument("input 1 (shape) must be a 1-D int64 tensor");
  }
  SumToShapePlan plan;
  plan.out_dims.assign(shape->values<int64_t>().begin(), shape->values<int64_t>().end());
  const std::vector<int64_t>& out_dims = plan.out_dims;
  const std::vector<int64_t>& in_dims = g->dims();
  plan.same = out_dims == in_dims;
  if (plan.same) return plan;
  const size_t rank = in_dims.size();
  if (out_dims.size() > rank) {
    return InvalidArgument("cannot sum ", ShapeToString(in_dims), " to ", ShapeToString(out_dims),
                           ": the target has more dims");
  }
  const size_t lead = rank - out_dims.size();
  plan.reduced.assign(rank, true);
  for (size_t d = rank; d-- > lead;) {  // from the right: an error names the rightmost dim that does not fit
    const int64_t od = out_dims[d - lead];
    if (od != in_dims[d] && od != 1) {
      return InvalidArgument("cannot sum ", ShapeToString(in_dims), " to ", ShapeToString(out_dims), ": dim ", d,
                             " is ", in_dims[d], ", target ", od);
    }
    plan.reduced[d] = od != in_dims[d];
  }
  return plan;
}

StatusOr<std::vector<bool>> ResolveReduceProdGrad(const ir::Tensor* dy, const ir::Tensor* x) {
  if (!dy || !x) return InvalidArgument("input ", dy ? 1 : 0, " is missing");
  if (dy->dtype() != x->dtype()) {
    return InvalidArgument("dY has element type ", DTypeName(dy->dtype()), ", X ", DTypeName(x->dtype()));
  }
  const std::vector<int64_t>& xd = x->dims();
  const size_t rank = xd.size();
  if (dy->dims().size() > rank) {
    return InvalidArgument("dY ", ShapeToString(dy->dims()), " has more dims than X ", ShapeToString(xd));
  }
  std::vector<int64_t> gd(rank - dy->dims().size(), 1);  // dY's dims right-aligned against X's
  gd.insert(gd.end(), dy->dims().begin(), dy->dims().end());
  std::vector<bool> reduced(rank, false);
  for (size_t d = 0; d < rank; ++d) {
    if (gd[d] != xd[d] && gd[d] != 1) {
      return InvalidArgument("dY ", ShapeToString(dy->dims()), " is not a reduction of X ", ShapeToString(xd), ": dim ",
                             d, " is ", gd[d], ", X has ", xd[d]);
    }
    reduced[d] = gd[d] == 1 && xd[d] != 1;
  }
  return reduced;
}

}  // namespace onnxamp::ops
