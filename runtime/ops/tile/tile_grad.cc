// Gradient builder of Tile (opsets 6+, the `repeats` form): the sum of dY over the tiles. Tile's output is the input
// viewed as [r0, d0, r1, d1, ...] (see tile.h), so dX = ReduceSum(Reshape(dY, [r0, d0, r1, d1, ...]), axes 0, 2, ...,
// keepdims 0). The interleaved shape is made at run time from `repeats` and Shape(input); the reduced axes need the
// rank, known from the declared shapes, or computed at run time from opset 13 (ReduceSum's axes an input). Opsets
// before 6 (tiles and axis inputs) are refused.
#include <cstdint>
#include <optional>
#include <vector>

#include "runtime/ops/op_info.h"

namespace onnxamp::ops {
namespace {

// The input's rank when the model says it: X's declared shape, or the length of `repeats`.
std::optional<int64_t> KnownRank(const ir::Value* x, const ir::Value* repeats) {
  if (x->type().is_tensor() && x->type().shape()) return static_cast<int64_t>(x->type().shape()->size());
  if (const ir::Tensor* t = repeats->initializer(); t && t->rank() == 1) return t->dims()[0];
  const auto& shape = repeats->type().shape();
  if (repeats->type().is_tensor() && shape && shape->size() == 1 && (*shape)[0].is_value()) return (*shape)[0].value;
  return std::nullopt;
}

Status TileGradient(GradContext& ctx) {
  if (!ctx.NeedsDX(0) || !ctx.dY(0)) return Status::Ok();
  ir::Value* x = ctx.X(0);
  ir::Value* repeats = ctx.X(1);
  const DType type = ctx.TypeOf(x);
  const std::optional<int64_t> rank = KnownRank(x, repeats);
  if (!rank && ctx.onnx_opset() < 13) {
    return Unimplemented("the input's rank is unknown (declare the shape of the input or of 'repeats')");
  }
  if (rank == 0) return ctx.SetDX(0, ctx.Emit("Identity", {ctx.dY(0)}, 1, {}, "", type)[0]);
  // [r0, .., r_{k-1}, d0, .., d_{k-1}] -> [2, k] -> [k, 2] -> [r0, d0, r1, d1, ...].
  ir::Value* both = ctx.Emit1("Concat", {repeats, ctx.ShapeOf(x)}, {ir::Attribute::Int("axis", 0)});
  ir::Value* pairs = ctx.Emit1("Reshape", {both, ctx.Ints({2, -1})});
  ir::Value* interleaved =
      ctx.Emit1("Reshape", {ctx.Emit1("Transpose", {pairs}, {ir::Attribute::Ints("perm", {1, 0})}), ctx.Ints({-1})});
  ir::Value* tiles = ctx.Emit1("Reshape", {ctx.dY(0), interleaved});
  ir::Value* dx = nullptr;
  if (rank) {
    std::vector<int64_t> axes;
    for (int64_t k = 0; k < *rank; ++k) axes.push_back(2 * k);
    dx = ctx.EmitReduceSum(tiles, axes, /*keepdims=*/false);
  } else {
    // Axes 0, 2, .., 2 (rank - 1) at run time: Range(0, 2 * Size(Shape(x)), 2); ReduceSum takes them as an input.
    ir::Value* limit = ctx.Emit1("Mul", {ctx.Emit1("Size", {ctx.ShapeOf(x)}), ctx.Scalar(DType::kInt64, 2)});
    ir::Value* axes = ctx.Emit1("Range", {ctx.Scalar(DType::kInt64, 0), limit, ctx.Scalar(DType::kInt64, 2)});
    dx = ctx.Emit("ReduceSum", {tiles, axes}, 1, {ir::Attribute::Int("keepdims", 0)}, "", type)[0];
  }
  return ctx.SetDX(0, dx);
}

}  // namespace

void RegisterTileOpInfos(OpInfoRegistry& r) {
  // Opset 13 only added bfloat16.
  r.Add("Tile").Gradient(6, INT64_MAX, &TileGradient);
}

}  // namespace onnxamp::ops
