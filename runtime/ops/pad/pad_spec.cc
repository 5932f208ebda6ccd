// Pad: attribute parsing, the pads and output dims of a run, and the fill value of opsets 1-10 (see pad.h).
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
  const size_t rank = x.dims().size();
  PadShape s;
  std::vector<int64_t> pads = pads_attr_;
  std::vector<int64_t> axes;
  if (opset_ >= 11) {
    ONNXAMP_ASSIGN_OR_RETURN(const ir::Tensor* p, RequireInput(ctx, 1, "pads"));
    ONNXAMP_ASSIGN_OR_RETURN(pads, ReadInt64s(*p, InputLabel(ctx, 1, "pads")));
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
    s.value = value;
    if (const ir::Tensor* a = opset_ >= 18 ? ctx.input(3) : nullptr) {
      ONNXAMP_ASSIGN_OR_RETURN(std::vector<int64_t> raw, ReadInt64s(*a, InputLabel(ctx, 3, "axes")));
      ONNXAMP_ASSIGN_OR_RETURN(axes, NormalizeAxes(raw, x.rank()));
    }
  }
  if (axes.empty() && !(opset_ >= 18 && ctx.input(3))) {
    for (size_t k = 0; k < rank; ++k) axes.push_back(static_cast<int64_t>(k));
  }
  if (pads.size() != 2 * axes.size()) {
    return InvalidArgument("pads ", ShapeToString(pads), " has ", pads.size(), " entries; expected ", 2 * axes.size(),
                           " (begin and end for each of ", axes.size(), " axes of input ", ShapeToString(x.dims()),
                           ")");
  }
  s.begin.assign(rank, 0);
  s.end.assign(rank, 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    s.begin[axes[i]] = pads[i];
    s.end[axes[i]] = pads[axes.size() + i];
  }
  s.out_dims.resize(rank);
  for (size_t k = 0; k < rank; ++k) {
    ONNXAMP_ASSIGN_OR_RETURN(s.out_dims[k], PaddedSize(x.dims()[k], s.begin[k], s.end[k], mode_, k));
  }
  return s;
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
