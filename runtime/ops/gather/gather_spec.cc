// Gather and GatherElements: checks of a run's data and indices and the output shape (see gather.h).
#include <algorithm>

#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/gather/gather.h"

namespace onnxamp::ops {

StatusOr<bool> IndicesAreInt64(const exec::KernelContext& ctx, const ir::Tensor& indices) {
  if (indices.dtype() == DType::kInt64) return true;
  if (indices.dtype() == DType::kInt32) return false;
  return InvalidArgument(InputLabel(ctx, 1, "indices"), " must be int32 or int64, got ", DTypeName(indices.dtype()));
}

StatusOr<GatherShape> ResolveGather(const ir::Tensor& data, const ir::Tensor& indices, int64_t axis_attr) {
  GatherShape s;
  ONNXAMP_ASSIGN_OR_RETURN(s.axis, NormalizeAxis(axis_attr, data.rank()));
  const std::vector<int64_t>& dd = data.dims();
  s.out_dims.assign(dd.begin(), dd.begin() + s.axis);
  s.out_dims.insert(s.out_dims.end(), indices.dims().begin(), indices.dims().end());
  s.out_dims.insert(s.out_dims.end(), dd.begin() + s.axis + 1, dd.end());
  s.outer = DimProduct(dd, 0, s.axis);
  s.inner = DimProduct(dd, s.axis + 1, dd.size());
  return s;
}

StatusOr<int64_t> ResolveGatherElements(const exec::KernelContext& ctx, const ir::Tensor& data,
                                        const ir::Tensor& indices, int64_t axis_attr) {
  ONNXAMP_ASSIGN_OR_RETURN(const int64_t axis, NormalizeAxis(axis_attr, data.rank()));
  const std::vector<int64_t>& dd = data.dims();
  const std::vector<int64_t>& id = indices.dims();
  bool ok = id.size() == dd.size();
  for (size_t k = 0; ok && k < dd.size(); ++k) ok = static_cast<int64_t>(k) == axis || id[k] <= dd[k];
  if (!ok) {
    return InvalidArgument(InputLabel(ctx, 1, "indices"), " has shape ", ShapeToString(id),
                           "; expected the rank of data ", ShapeToString(dd), " and dims no larger off axis ", axis);
  }
  return axis;
}

StatusOr<std::vector<int64_t>> ReadGatherIndices(const exec::KernelContext& ctx, const ir::Tensor& indices, int64_t dim,
                                                 int64_t axis, const std::vector<int64_t>& data_dims,
                                                 std::string_view label) {
  ONNXAMP_ASSIGN_OR_RETURN(const bool idx64, IndicesAreInt64(ctx, indices));
  std::vector<int64_t> out(static_cast<size_t>(indices.num_elements()));
  if (idx64) {
    const auto v = indices.values<int64_t>();
    std::copy(v.begin(), v.end(), out.begin());
  } else {
    const auto v = indices.values<int32_t>();
    std::copy(v.begin(), v.end(), out.begin());
  }
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t v = out[i];
    if (v < -dim || v >= dim) {
      return OutOfRange("index ", v, " (element ", i, " of ", label, " ", ShapeToString(indices.dims()),
                        ") is out of range for axis ", axis, " of size ", dim, " (data ", ShapeToString(data_dims),
                        ")");
    }
    if (v < 0) out[i] = v + dim;
  }
  return out;
}

}  // namespace onnxamp::ops
