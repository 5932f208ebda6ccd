// Cast and CastLike: element types and attribute parsing shared by every backend (see cast.h).
#include <utility>

#include "runtime/ops/cast/cast.h"
#include "runtime/ops/common/elementwise.h"

namespace onnxamp::ops {

bool IsCastable(DType t) {
  switch (t) {
    case DType::kFloat32:
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kFloat64:
    case DType::kInt8:
    case DType::kInt16:
    case DType::kInt32:
    case DType::kInt64:
    case DType::kUint8:
    case DType::kUint16:
    case DType::kUint32:
    case DType::kUint64:
    case DType::kBool:
    case DType::kString:
      return true;
    default:
      return false;
  }
}

std::optional<DType> DTypeFromProtoName(std::string_view s) {
  static constexpr std::pair<std::string_view, DType> kNames[] = {
      {"FLOAT", DType::kFloat32},   {"UINT8", DType::kUint8},       {"INT8", DType::kInt8},
      {"UINT16", DType::kUint16},   {"INT16", DType::kInt16},       {"INT32", DType::kInt32},
      {"INT64", DType::kInt64},     {"STRING", DType::kString},     {"BOOL", DType::kBool},
      {"FLOAT16", DType::kFloat16}, {"DOUBLE", DType::kFloat64},    {"UINT32", DType::kUint32},
      {"UINT64", DType::kUint64},   {"BFLOAT16", DType::kBFloat16},
  };
  for (const auto& [name, t] : kNames) {
    if (s == name) return t;
  }
  return std::nullopt;
}

StatusOr<DType> ParseCastTo(const exec::KernelInfo& info) {
  const ir::Attribute* to = info.node.FindAttribute("to");
  if (!to) return InvalidArgument("attribute 'to' is required");
  DType result = DType::kUndefined;
  if (to->type() == ir::AttrType::kString) {  // Cast-1
    auto t = DTypeFromProtoName(to->s);
    if (!t) return InvalidArgument("attribute 'to' names no element type: \"", to->s, "\"");
    result = *t;
  } else if (to->type() == ir::AttrType::kInt) {
    auto t = DTypeFromCode(to->i);
    if (!t) return InvalidArgument("attribute 'to' is ", to->i, ", which is no ONNX element type");
    result = *t;
  } else {
    return InvalidArgument("attribute 'to' must be an int, got ", ir::AttrTypeName(to->type()));
  }
  if (!IsCastable(result)) {
    return Unimplemented("attribute 'to' is ", DTypeName(result),
                         ", which Cast does not support (numeric types, bool and string)");
  }
  return result;
}

Status CheckCastSaturate(const exec::KernelInfo& info) {
  ONNXAMP_ASSIGN_OR_RETURN(std::optional<int64_t> sat, OptionalIntAttribute(info.node, "saturate"));
  if (sat && info.opset < 19) return InvalidArgument("attribute 'saturate' exists from opset 19, this is ", info.opset);
  if (sat && *sat != 0 && *sat != 1) return InvalidArgument("attribute 'saturate' must be 0 or 1, got ", *sat);
  return Status::Ok();
}

}  // namespace onnxamp::ops
