// Pad: attribute parsing, the pads and output dims of a run, the per-axis source maps, and the fill value of opsets
// 1-10 (see pad.h).
#include <algorithm>
#include <cstring>
#include <limits>

#include "runtime/ops/common/shape_util.h"
#include "runtime/ops/pad/pad.h"

namespace onnxamp::ops {
namespace {

// The padded size of one axis, after checking that the pads are possible (as 128-bit sums: pads are arbitrary).
StatusOr<int64_t> PaddedSize(int64_t dim, int64_t begin, int64_t end, PadMode mode, size_t axis) {
  const __int128 b = begin, e = end;
  const __int128 len = dim - std::max<__int128>(0, -b) - std::max<__int128>(0, -e);  // the cropped input
  const __int128 out = len + std::max<__int128>(0, b) + std::max<__int128>(0, e);
  if (len < 0) {
    return InvalidArgument("pads ", begin, " and ", end, " on axis ", axis, " of size ", dim,
                           " give a negative output size ",
                           static_cast<int64_t>(std::max<__int128>(dim + b + e, std::numeric_limits<int64_t>::min())));
  }
  if (out > std::numeric_limits<int64_t>::max()) {
    return OutOfRange("pads ", begin, " and ", end, " on axis ", axis, " make it too large");
  }
  if (len == 0 && out > 0 && mode != PadMode::kConstant) {
    const char* name = mode == PadMode::kEdge ? "edge" : mode == PadMode::kReflect ? "reflect" : "wrap";
    return InvalidArgument("cannot pad axis ", axis, " in ", name, " mode: it is empty after cropping (size ", dim,
                           ", pads ", begin, " and ", end, ")");
  }
  return static_cast<int64_t>(out);
}

}  // namespace

Status PadSpec::Parse(const ir::Node& node, int64_t opset) {
  opset_ = opset;
  const std::string mode = node.GetString("mode", "constant");
  if (mode == "constant") {
    mode_ = PadMode::kConstant;
  } else if (mode == "edge") {
    mode_ = PadMode::kEdge;
  } else if (mode == "reflect") {
    mode_ = PadMode::kReflect;
  } else if (mode == "wrap" && opset_ >= 19) {
    mode_ = PadMode::kWrap;
  } else {
    return InvalidArgument("attribute 'mode' is '", mode, "'; expected constant, edge, reflect",
                           opset_ >= 19 ? " or wrap" : " (wrap from opset 19)");
  }
  if (opset_ < 11) {
    const char* name = opset_ < 2 ? "paddings" : "pads";
    const ir::Attribute* a = node.FindAttribute(name);
    if (!a) return InvalidArgument("Pad-", opset_, " needs the ints attribute '", name, "'");
    pads_attr_ = a->ints;
    value_attr_ = node.GetFloat("value", 0.0f);
  }
  return Status::Ok();
}

StatusOr<PadShape> PadSpec::Resolve(const exec::KernelContext& ctx, const ir::Tensor& x) const {
  if (opset_ < 11) return ResolvePadShape(x.dims(), pads_attr_, nullptr, mode_);
  ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* p, RequireInput(ctx, 1, "pads"));
  ONNXAMP_ASSIGN_OR_RETURN(const std::vector<int64_t> pads, ReadInt64s(*p, InputLabel(ctx, 1, "pads")));
  const ir::Tensor* value = ctx.input(2);
  if (value && value->num_elements() == 0) value = nullptr;  // an empty constant_value means 0
  if (value && value->dtype() != x.dtype()) {
    return InvalidArgument(InputLabel(ctx, 2, "constant_value"), " has type ", DTypeName(value->dtype()),
                           ", expected the data's type ", DTypeName(x.dtype()));
  }
  if (value && value->num_elements() != 1) {
    return InvalidArgument(InputLabel(ctx, 2, "constant_value"), " must hold one value, got shape ",
                           ShapeToString(value->dims()));
  }
  std::vector<int64_t> axes;
  const ir::Tensor* a = opset_ >= 18 ? ctx.input(3) : nullptr;
  if (a) {
    ONNXAMP_ASSIGN_OR_RETURN(axes, ReadInt64s(*a, InputLabel(ctx, 3, "axes")));
  }
  ONNXAMP_ASSIGN_OR_RETURN(PadShape s, ResolvePadShape(x.dims(), pads, a ? &axes : nullptr, mode_));
  s.value = value;
  return s;
}

StatusOr<PadShape> ResolvePadShape(std::span<const int64_t> dims, const std::vector<int64_t>& pads,
                                   const std::vector<int64_t>* given_axes, PadMode mode) {
  const size_t rank = dims.size();
  PadShape s;
  std::vector<int64_t> axes;
  if (given_axes) {
    ONNXAMP_ASSIGN_OR_RETURN(axes, NormalizeAxes(*given_axes, static_cast<int64_t>(rank)));
  } else {
    for (size_t k = 0; k < rank; ++k) axes.push_back(static_cast<int64_t>(k));
  }
  if (pads.size() != 2 * axes.size()) {
    return InvalidArgument("pads ", ShapeToString(pads), " has ", pads.size(), " entries; expected ", 2 * axes.size(),
                           " (begin and end for each of ", axes.size(), " axes of input ", ShapeToString(dims), ")");
  }
  s.begin.assign(rank, 0);
  s.end.assign(rank, 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    s.begin[axes[i]] = pads[i];
    s.end[axes[i]] = pads[axes.size() + i];
  }
  s.out_dims.resize(rank);
  for (size_t k = 0; k < rank; ++k) {
    ONNXAMP_ASSIGN_OR_RETURN(s.out_dims[k], PaddedSize(dims[k], s.begin[k], s.end[k], mode, k));
  }
  return s;
}

std::vector<int64_t> PadAxisMap(int64_t dim, int64_t begin, int64_t end, PadMode mode) {
  const int64_t lo = std::max<int64_t>(0, -begin);
  const int64_t len = dim - lo - std::max<int64_t>(0, -end);  // the cropped input
  const int64_t pb = std::max<int64_t>(0, begin), pe = std::max<int64_t>(0, end);
  std::vector<int64_t> map(static_cast<size_t>(len + pb + pe));
  for (int64_t o = 0; o < static_cast<int64_t>(map.size()); ++o) {
    int64_t v = o - pb;
    if (v < 0 || v >= len) {
      switch (mode) {
        case PadMode::kConstant:
          map[o] = -1;
          continue;
        case PadMode::kEdge:
          v = std::clamp<int64_t>(v, 0, len - 1);
          break;
        case PadMode::kReflect:
          if (len == 1) {
            v = 0;
          } else {
            const int64_t period = 2 * (len - 1);
            v %= period;
            if (v < 0) v += period;
            if (v >= len) v = period - v;
          }
          break;
        case PadMode::kWrap:
          v %= len;
          if (v < 0) v += len;
          break;
      }
    }
    map[o] = lo + v;
  }
  return map;
}

Status StorePadValue(DType dtype, float value, void* dst) {
  return DispatchNumericOrBool(dtype, [&](auto vt) {
    using V = typename decltype(vt)::type;
    const V v = Store<V>(static_cast<ComputeType<V>>(value));
    std::memcpy(dst, &v, sizeof(V));
    return Status::Ok();
  });
}

}  // namespace onnxamp::ops
