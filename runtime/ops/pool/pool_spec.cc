// Pooling attributes and input checks (see pool.h).
#include "runtime/ops/common/broadcast.h"
#include "runtime/ops/pool/pool.h"

namespace onnxamp::ops {

Status ParsePoolAttrs(const ir::Node& node, bool max, PoolAttrs* out) {
  out->max = max;
  WindowAttrSpec wspec;
  wspec.kernel_shape_required = true;
  ONNXAMP_RETURN_IF_ERROR(ParseWindowAttrs(node, wspec, &out->window));
  int64_t ceil_mode = 0, count_include_pad = 0;
  ONNXAMP_RETURN_IF_ERROR(GetIntAttr(node, "ceil_mode", 0, &ceil_mode));
  if (max) {
    ONNXAMP_RETURN_IF_ERROR(GetIntAttr(node, "storage_order", 0, &out->storage_order));
    if (out->storage_order != 0 && out->storage_order != 1) {
      return InvalidArgument("attribute 'storage_order' must be 0 or 1, got ", out->storage_order);
    }
  } else {
    ONNXAMP_RETURN_IF_ERROR(GetIntAttr(node, "count_include_pad", 0, &count_include_pad));
  }
  if ((ceil_mode != 0 && ceil_mode != 1) || (count_include_pad != 0 && count_include_pad != 1)) {
    return InvalidArgument("attributes 'ceil_mode' and 'count_include_pad' must be 0 or 1");
  }
  out->ceil_mode = ceil_mode == 1;
  out->count_include_pad = count_include_pad == 1;
  return Status::Ok();
}

Status ResolvePool(const PoolAttrs& attrs, const ir::Tensor* x, WindowGeometry* g, std::vector<int64_t>* out_dims) {
  if (!x) return InvalidArgument("input X is required");
  if (x->rank() < 3) {
    return InvalidArgument("input X must have rank >= 3 ([N, C, spatial...]), got ", ShapeToString(x->dims()));
  }
  const std::vector<int64_t> in(x->dims().begin() + 2, x->dims().end());
  const std::vector<int64_t>& kernel = attrs.window.kernel_shape;
  if (kernel.size() != in.size()) {
    return InvalidArgument("attribute 'kernel_shape' ", ShapeToString(kernel), " has ", kernel.size(),
                           " dims but input X ", ShapeToString(x->dims()), " has ", in.size(), " spatial dims");
  }
  ONNXAMP_ASSIGN_OR_RETURN(*g, ForwardGeometry(attrs.window, in, kernel, attrs.ceil_mode));
  *out_dims = {x->dims()[0], x->dims()[1]};
  out_dims->insert(out_dims->end(), g->out.begin(), g->out.end());
  return Status::Ok();
}

Status ResolveGlobalPool(const ir::Tensor* x, std::vector<int64_t>* out_dims, int64_t* planes, int64_t* size) {
  if (!x) return InvalidArgument("input X is required");
  if (x->rank() < 2)
    return InvalidArgument("input X must have rank >= 2 ([N, C, ...]), got ", ShapeToString(x->dims()));
  *out_dims = x->dims();
  for (size_t d = 2; d < out_dims->size(); ++d) (*out_dims)[d] = 1;
  *planes = x->dims()[0] * x->dims()[1];
  *size = *planes == 0 ? 0 : x->num_elements() / *planes;
  if (*size == 0 && *planes > 0) {
    return InvalidArgument("input X ", ShapeToString(x->dims()), " has no spatial elements to pool");
  }
  return Status::Ok();
}

StatusOr<std::vector<int64_t>> ReadPoolShapeInput(const ir::Tensor* t, int index, const char* what) {
  if (!t) return InvalidArgument("input ", index, " (", what, ") is required");
  if (t->dtype() != DType::kInt64 || t->rank() != 1) {
    return InvalidArgument("input ", index, " (", what, ") must be a 1-D int64 tensor, got ", DTypeName(t->dtype()),
                           " ", ShapeToString(t->dims()));
  }
  std::vector<int64_t> dims(t->values<int64_t>().begin(), t->values<int64_t>().end());
  for (int64_t d : dims) {
    if (d < 0) return InvalidArgument("input ", index, " (", what, ") holds a negative dim: ", ShapeToString(dims));
  }
  return dims;
}

Status CheckPoolGradInput(const ir::Tensor* dy) {
  if (!dy) return InvalidArgument("input 0 (dY) is required");
  if (!IsFloatingPoint(dy->dtype())) {
    return InvalidArgument("input 0 (dY) has element type ", DTypeName(dy->dtype()), ", expected a float type");
  }
  return Status::Ok();
}

Status CheckMaxPoolGradIndices(const ir::Tensor* dy, const ir::Tensor* indices) {
  if (!indices || indices->dtype() != DType::kInt64 || indices->dims() != dy->dims()) {
    return InvalidArgument("input 1 (Indices) must be an int64 tensor of dY's shape ", ShapeToString(dy->dims()),
                           ", got ", indices ? DTypeName(indices->dtype()) : "none", " ",
                           indices ? ShapeToString(indices->dims()) : "");
  }
  return Status::Ok();
}

Status ResolveAveragePoolGrad(const PoolAttrs& attrs, const ir::Tensor* dy, const std::vector<int64_t>& x_dims,
                              WindowGeometry* g) {
  const std::vector<int64_t>& kernel = attrs.window.kernel_shape;
  if (x_dims.size() < 3 || x_dims.size() - 2 != kernel.size()) {
    return InvalidArgument("input 1 (X_shape) ", ShapeToString(x_dims), " must be [N, C] and ", kernel.size(),
                           " spatial dims (attribute 'kernel_shape' ", ShapeToString(kernel), ")");
  }
  const std::vector<int64_t> in(x_dims.begin() + 2, x_dims.end());
  ONNXAMP_ASSIGN_OR_RETURN(*g, ForwardGeometry(attrs.window, in, kernel, attrs.ceil_mode));
  std::vector<int64_t> out_dims = {x_dims[0], x_dims[1]};
  out_dims.insert(out_dims.end(), g->out.begin(), g->out.end());
  if (dy->dims() != out_dims) {
    return InvalidArgument("input 0 (dY) has shape ", ShapeToString(dy->dims()), ", expected ", ShapeToString(out_dims),
                           " (AveragePool's output for X ", ShapeToString(x_dims), ")");
  }
  return Status::Ok();
}

}  // namespace onnxamp::ops
