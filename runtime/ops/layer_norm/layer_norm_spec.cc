// LayerNormalization: attribute parsing and the view of X shared by every backend (see layer_norm.h).
#include "runtime/ops/common/reduce.h"
#include "runtime/ops/common/reduce_norm.h"
#include "runtime/ops/layer_norm/layer_norm.h"

namespace onnxamp::ops {

Status ParseLayerNormSpec(const exec::KernelInfo& info, LayerNormSpec* spec) {
  const ir::Node& node = info.node;
  spec->axis = node.GetInt("axis", -1);
  spec->epsilon = node.GetFloat("epsilon", 1e-5f);
  const int64_t stash = node.GetInt("stash_type", 1);
  switch (stash) {
    case 1:
      spec->stash = DType::kFloat32;
      break;
    case 10:
      spec->stash = DType::kFloat16;
      break;
    case 11:
      spec->stash = DType::kFloat64;
      break;
    case 16:
      spec->stash = DType::kBFloat16;
      break;
    default:
      return InvalidArgument("attribute 'stash_type' must be a float type code (1, 10, 11, 16), got ", stash);
  }
  if (auto rank = reduce::DeclaredRank(node, 0)) {
    Status s = reduce::NormalizeAxis(spec->axis, *rank).status();
    if (!s.ok()) return s.WithContext("attribute 'axis'");
  }
  return Status::Ok();
}

StatusOr<LayerNormShape> ResolveLayerNormShape(const LayerNormSpec& spec, const ir::Tensor* x,
                                               const ir::Tensor* scale) {
  if (!x) return InvalidArgument("input 0 (X) is missing");
  if (!scale) return InvalidArgument("input 1 (Scale) is missing");
  StatusOr<int64_t> axis_or = reduce::NormalizeAxis(spec.axis, x->rank());
  if (!axis_or.ok()) return axis_or.status().WithContext("attribute 'axis'");
  LayerNormShape shape;
  shape.axis = *axis_or;
  shape.rows = reduce::Product(x->dims(), 0, shape.axis);
  shape.cols = reduce::Product(x->dims(), shape.axis);
  return shape;
}

Status CheckNormalisedBroadcast(const ir::Tensor& t, const std::vector<int64_t>& x_dims, int64_t first,
                                std::string_view what) {
  const int64_t rank = static_cast<int64_t>(x_dims.size()) - first;
  const int64_t t_rank = t.rank();
  bool ok = t_rank <= static_cast<int64_t>(x_dims.size());
  for (int64_t k = 0; ok && k < t_rank; ++k) {
    const int64_t td = t.dims()[t_rank - 1 - k];
    const int64_t xd = x_dims[x_dims.size() - 1 - k];
    ok = td == 1 || (k < rank && td == xd);
  }
  if (!ok) {
    const std::vector<int64_t> dims(x_dims.begin() + first, x_dims.end());
    return InvalidArgument(what, ": shape ", reduce::DimsToString(t.dims()),
                           " does not broadcast to the normalised shape ", reduce::DimsToString(dims));
  }
  return Status::Ok();
}

std::vector<int64_t> NormalisedBroadcastStrides(const ir::Tensor& t, int64_t rank) {
  const int64_t t_rank = t.rank();
  std::vector<int64_t> stride(static_cast<size_t>(rank), 0);
  int64_t s = 1;
  for (int64_t k = 0; k < t_rank && k < rank; ++k) {
    const int64_t td = t.dims()[t_rank - 1 - k];
    stride[rank - 1 - k] = td == 1 ? 0 : s;
    s *= td;
  }
  return stride;
}

}  // namespace onnxamp::ops
