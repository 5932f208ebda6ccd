// Tile: repeat counts, output dims and copy plan of a run (see tile.h).
#include <limits>

#include "runtime/ops/tile/tile.h"

namespace onnxamp::ops {
namespace {

// A scalar (or one-element) int tensor's value.
StatusOr<int64_t> ReadScalar(const exec::KernelContext& ctx, size_t i, std::string_view role) {
  ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* t, RequireInput(ctx, i, role));
  ONNXAMP_ASSIGN_OR_RETURN(std::vector<int64_t> v, ReadInt64s(*t, InputLabel(ctx, i, role), /*allow_scalar=*/true));
  if (v.size() != 1) return InvalidArgument(InputLabel(ctx, i, role), " must hold one value, got ", v.size());
  return v[0];
}

}  // namespace

StatusOr<TileShape> ResolveTile(const exec::KernelContext& ctx, const ir::Tensor& x, int64_t opset) {
  const size_t rank = x.dims().size();
  TileShape s;
  std::vector<int64_t>& repeats = s.repeats;
  if (opset < 6) {
    ONNXAMP_ASSIGN_OR_RETURN(const int64_t tiles, ReadScalar(ctx, 1, "tiles"));
    ONNXAMP_ASSIGN_OR_RETURN(const int64_t axis_in, ReadScalar(ctx, 2, "axis"));
    ONNXAMP_ASSIGN_OR_RETURN(const int64_t axis, NormalizeAxis(axis_in, x.rank()));
    repeats.assign(rank, 1);
    repeats[axis] = tiles;
  } else {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* r, RequireInput(ctx, 1, "repeats"));
    ONNXAMP_ASSIGN_OR_RETURN(repeats, ReadInt64s(*r, InputLabel(ctx, 1, "repeats")));
  }
  if (repeats.size() != rank) {
    return InvalidArgument("repeats ", ShapeToString(repeats), " has ", repeats.size(), " entries but the input ",
                           ShapeToString(x.dims()), " has rank ", rank);
  }
  s.out_dims.resize(rank);
  for (size_t k = 0; k < rank; ++k) {
    if (repeats[k] < 0) return InvalidArgument("repeats ", ShapeToString(repeats), " has a negative count");
    if (repeats[k] != 0 && x.dims()[k] > std::numeric_limits<int64_t>::max() / repeats[k]) {
      return OutOfRange("tiling ", ShapeToString(x.dims()), " by ", ShapeToString(repeats),
                        " overflows the size of dim ", k);
    }
    s.out_dims[k] = x.dims()[k] * repeats[k];
  }
  return s;
}

CopyPlan TileCopyPlan(const std::vector<int64_t>& in_dims, const TileShape& shape) {
  const std::vector<int64_t> in_strides = ContiguousStrides(in_dims);
  const std::vector<int64_t> out_strides = ContiguousStrides(shape.out_dims);
  std::vector<int64_t> dims, dst_strides, src_strides;
  for (size_t k = 0; k < in_dims.size(); ++k) {
    dims.insert(dims.end(), {shape.repeats[k], in_dims[k]});
    dst_strides.insert(dst_strides.end(), {in_dims[k] * out_strides[k], out_strides[k]});
    src_strides.insert(src_strides.end(), {0, in_strides[k]});
  }
  return MakeCopyPlan(dims, dst_strides, src_strides);
}

}  // namespace onnxamp::ops
