// LayerNormalization: attribute parsing and the view of X shared by every backend (see layer_norm.h).
#include "runtime/ops/common/reduce.h"
#include "runtime/ops/common/reduce_norm.h"
#include "runtime/ops/common/shape_util.h"
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

StatusOr<LayerNormGradInputs> ResolveLayerNormGradInputs(const exec::KernelContext& ctx, const LayerNormSpec& spec) {
  LayerNormGradInputs in;
  ONNXAMP_ASSIGN_OR_RETURN(in.dy, RequireInput(ctx, 0, "dY"));
  ONNXAMP_ASSIGN_OR_RETURN(in.x, RequireInput(ctx, 1, "X"));
  ONNXAMP_ASSIGN_OR_RETURN(in.scale, RequireInput(ctx, 2, "Scale"));
  ONNXAMP_ASSIGN_OR_RETURN(in.mean, RequireInput(ctx, 3, "Mean"));
  ONNXAMP_ASSIGN_OR_RETURN(in.inv_std, RequireInput(ctx, 4, "InvStdDev"));
  const ir::Tensor* dy = in.dy;
  const ir::Tensor* x = in.x;
  const ir::Tensor* scale = in.scale;
  if (dy->dtype() != x->dtype() || dy->dims() != x->dims()) {
    return InvalidArgument(InputLabel(ctx, 0, "dY"), " is ", DTypeName(dy->dtype()), " ", ShapeToString(dy->dims()),
                           "; expected X's type and shape, ", DTypeName(x->dtype()), " ", ShapeToString(x->dims()));
  }
  if (scale->dtype() != x->dtype()) {
    return InvalidArgument(InputLabel(ctx, 2, "Scale"), " is ", DTypeName(scale->dtype()), "; expected X's type, ",
                           DTypeName(x->dtype()));
  }
  ONNXAMP_ASSIGN_OR_RETURN(in.shape, ResolveLayerNormShape(spec, x, scale));
  ONNXAMP_RETURN_IF_ERROR(CheckNormalisedBroadcast(*scale, x->dims(), in.shape.axis, InputLabel(ctx, 2, "Scale")));
  return in;
}

}  // namespace onnxamp::ops
