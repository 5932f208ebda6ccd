// Expand: the output shape and broadcast strides of a run (see expand.h).
#include "runtime/ops/common/broadcast.h"
#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/expand/expand.h"

namespace onnxamp::ops {

StatusOr<ExpandShape> ResolveExpand(const exec::KernelContext& ctx, const ir::Tensor& x) {
  ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* s, RequireInput(ctx, 1, "shape"));
  ONNXAMP_ASSIGN_OR_RETURN(std::vector<int64_t> shape, ReadInt64s(*s, InputLabel(ctx, 1, "shape")));
  for (int64_t d : shape) {
    if (d < 0) return InvalidArgument(InputLabel(ctx, 1, "shape"), " ", ShapeToString(shape), " has a negative dim");
  }
  StatusOr<std::vector<int64_t>> out = BroadcastShapes(x.dims(), shape);
  if (!out.ok()) {
    return InvalidArgument("cannot expand input ", ShapeToString(x.dims()), " to ", ShapeToString(shape), ": ",
                           out.status().message());
  }
  ExpandShape e;
  e.src_strides = BroadcastStrides(x.dims(), *out);
  e.out_dims = std::move(out).value();
  return e;
}

}  // namespace onnxamp::ops
