// Gather and GatherElements: checks of a run's data and indices and the output shape (see gather.h).
#include <algorithm>

#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/gather/gather.h"

namespace onnxamp::ops {

StatusOr<bool> IndicesAreInt64(const exec::KernelContext& ctx, const ir::Tensor& indices) {
  if (indices.dtype() == DType::kInt64) return true;
  if (indices.dtype() == DType::kInt32) return false;
  return InvalidArgument(InputLabel(ctx, 1, "indices"), " must be int32 or int64, got ", DTypeName(indices.dtype()));
}

Status CheckGatherGradDy(const exec::KernelContext& ctx, const ir::Tensor& dy, const ir::Tensor& indices,
                         const GatherShape& shape, const std::vector<int64_t>& data_dims) {
  const bool empty = indices.num_elements() == 0 && dy.num_elements() == 0;
  if (dy.dims() != shape.out_dims && !empty) {
    return InvalidArgument(InputLabel(ctx, 0, "dY"), " has shape ", ShapeToString(dy.dims()), "; expected ",
                           ShapeToString(shape.out_dims), " (Gather's output for data ", ShapeToString(data_dims),
                           " and indices ", ShapeToString(indices.dims()), ")");
  }
  return Status::Ok();
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

Status AddRunsAt(const ir::Tensor& dy, const std::vector<int64_t>& offsets, int64_t run, ir::Tensor* dx) {
  return DispatchFloat(dy.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    using A = ComputeType<T>;
    const T* g = dy.values<T>().data();
    std::vector<A> acc(static_cast<size_t>(dx->num_elements()), A(0));
    for (size_t i = 0; i < offsets.size(); ++i) {
      const T* from = g + static_cast<int64_t>(i) * run;
      A* to = acc.data() + offsets[i];
      for (int64_t k = 0; k < run; ++k) to[k] += Load<T>(from[k]);
    }
    T* out = dx->mutable_values<T>().data();
    for (size_t k = 0; k < acc.size(); ++k) out[k] = Store<T>(acc[k]);
    return Status::Ok();
  });
}

std::vector<int64_t> ElementOffsets(const std::vector<int64_t>& index_dims, const std::vector<int64_t>& data_strides,
                                    int64_t axis, const std::vector<int64_t>& idx) {
  std::vector<int64_t> out(idx.size());
  // Odometer over the indices' shape; `base` is the data offset of the position without the axis term.
  const size_t rank = index_dims.size();
  std::vector<int64_t> pos(rank, 0);
  int64_t base = 0;
  for (size_t e = 0; e < idx.size(); ++e) {
    out[e] = base + idx[e] * data_strides[static_cast<size_t>(axis)];
    for (size_t k = rank; k-- > 0;) {
      if (++pos[k] < index_dims[k]) {
        if (static_cast<int64_t>(k) != axis) base += data_strides[k];
        break;
      }
      if (static_cast<int64_t>(k) != axis) base -= (index_dims[k] - 1) * data_strides[k];
      pos[k] = 0;
    }
  }
  return out;
}

StatusOr<NdShape> ResolveNdShape(const exec::KernelContext& ctx, const std::vector<int64_t>& data_dims,
                                 const ir::Tensor& indices, int64_t batch_dims) {
  ONNXAMP_RETURN_IF_ERROR(IndicesAreInt64(ctx, indices).status());
  const std::vector<int64_t>& id = indices.dims();
  const int64_t r = static_cast<int64_t>(data_dims.size()), q = static_cast<int64_t>(id.size());
  const std::string label = InputLabel(ctx, 1, "indices");
  if (q < 1) return InvalidArgument(label, " must have rank >= 1, got a scalar");
  if (batch_dims < 0 || batch_dims >= std::min(r, q)) {
    return InvalidArgument("attribute 'batch_dims' ", batch_dims, " must be in [0, ", std::min(r, q), ") for data ",
                           ShapeToString(data_dims), " and indices ", ShapeToString(id));
  }
  const int64_t m = id.back();
  if (m < 1 || m > r - batch_dims) {
    return InvalidArgument("the last dim of ", label, " ", ShapeToString(id), " must be in [1, ", r - batch_dims,
                           "] for data ", ShapeToString(data_dims), " and batch_dims ", batch_dims);
  }
  for (int64_t k = 0; k < batch_dims; ++k) {
    if (id[static_cast<size_t>(k)] != data_dims[static_cast<size_t>(k)]) {
      return InvalidArgument(label, " ", ShapeToString(id), " and data ", ShapeToString(data_dims),
                             " differ in batch dim ", k);
    }
  }
  NdShape s;
  s.batch_dims = batch_dims;
  s.m = m;
  s.batch = DimProduct(data_dims, 0, static_cast<size_t>(batch_dims));
  s.tuples = DimProduct(id, static_cast<size_t>(batch_dims), id.size() - 1);
  s.slice = DimProduct(data_dims, static_cast<size_t>(batch_dims + m), data_dims.size());
  s.out_dims.assign(id.begin(), id.end() - 1);
  s.out_dims.insert(s.out_dims.end(), data_dims.begin() + batch_dims + m, data_dims.end());
  return s;
}

StatusOr<NdShape> ResolveNd(const exec::KernelContext& ctx, const std::vector<int64_t>& data_dims,
                            const ir::Tensor& indices, int64_t batch_dims) {
  ONNXAMP_ASSIGN_OR_RETURN(NdShape s, ResolveNdShape(ctx, data_dims, indices, batch_dims));
  const bool idx64 = indices.dtype() == DType::kInt64;
  const std::vector<int64_t>& id = indices.dims();
  const int64_t m = s.m;
  const std::string label = InputLabel(ctx, 1, "indices");
  const std::vector<int64_t> strides = ContiguousStrides(data_dims);
  const int64_t batch_stride = batch_dims == 0 ? 0 : strides[static_cast<size_t>(batch_dims - 1)];
  s.offsets.resize(static_cast<size_t>(s.batch * s.tuples));
  for (int64_t t = 0; t < s.batch * s.tuples; ++t) {
    int64_t offset = (t / std::max<int64_t>(s.tuples, 1)) * batch_stride;
    for (int64_t j = 0; j < m; ++j) {
      const size_t e = static_cast<size_t>(t * m + j);
      int64_t v = idx64 ? indices.values<int64_t>()[e] : indices.values<int32_t>()[e];
      const int64_t dim = data_dims[static_cast<size_t>(batch_dims + j)];
      if (v < -dim || v >= dim) {
        return OutOfRange("index ", v, " (element ", e, " of ", label, " ", ShapeToString(id),
                          ") is out of range for dim ", batch_dims + j, " of size ", dim, " (data ",
                          ShapeToString(data_dims), ")");
      }
      if (v < 0) v += dim;
      offset += v * strides[static_cast<size_t>(batch_dims + j)];
    }
    s.offsets[static_cast<size_t>(t)] = offset;
  }
  return s;
}

StatusOr<NdGradShape> ResolveGatherNDGrad(const exec::KernelContext& ctx, int64_t batch_dims, bool read_indices) {
  ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* dy, RequireInput(ctx, 0, "dY"));
  ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* indices, RequireInput(ctx, 1, "indices"));
  ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* shape_t, RequireInput(ctx, 2, "data_shape"));
  const std::string shape_label = InputLabel(ctx, 2, "data_shape");
  NdGradShape g;
  ONNXAMP_ASSIGN_OR_RETURN(g.data_dims, ReadInt64s(*shape_t, shape_label));
  for (int64_t d : g.data_dims) {
    if (d < 0) return InvalidArgument(shape_label, " has a negative dim: ", ShapeToString(g.data_dims));
  }
  ONNXAMP_RETURN_IF_ERROR(CheckFitsInMemory(dy->dtype(), g.data_dims, shape_label));
  if (read_indices) {
    ONNXAMP_ASSIGN_OR_RETURN(g.nd, ResolveNd(ctx, g.data_dims, *indices, batch_dims));
  } else {
    ONNXAMP_ASSIGN_OR_RETURN(g.nd, ResolveNdShape(ctx, g.data_dims, *indices, batch_dims));
  }
  if (dy->dims() != g.nd.out_dims) {
    return InvalidArgument(InputLabel(ctx, 0, "dY"), " has shape ", ShapeToString(dy->dims()), "; expected ",
                           ShapeToString(g.nd.out_dims), " (GatherND's output)");
  }
  return g;
}

}  // namespace onnxamp::ops
