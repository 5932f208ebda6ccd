// Attribute reading and binary-op broadcasting rules shared by the elementwise kernels.
#include "runtime/ops/common/elementwise.h"

namespace onnxamp::ops {
namespace {

Status WrongType(const ir::Attribute& a, const char* want) {
  return InvalidArgument("attribute '", a.name(), "' must be ", want, ", got ", ir::AttrTypeName(a.type()));
}

}  // namespace

StatusOr<std::optional<float>> OptionalFloatAttribute(const ir::Node& node, std::string_view name) {
  const ir::Attribute* a = node.FindAttribute(name);
  if (!a) return std::optional<float>();
  if (a->type() != ir::AttrType::kFloat) return WrongType(*a, "a float");
  return std::optional<float>(a->f);
}

StatusOr<std::optional<int64_t>> OptionalIntAttribute(const ir::Node& node, std::string_view name) {
  const ir::Attribute* a = node.FindAttribute(name);
  if (!a) return std::optional<int64_t>();
  if (a->type() != ir::AttrType::kInt) return WrongType(*a, "an int");
  return std::optional<int64_t>(a->i);
}

StatusOr<float> FloatAttribute(const ir::Node& node, std::string_view name, float default_value) {
  ONNXAMP_ASSIGN_OR_RETURN(std::optional<float> v, OptionalFloatAttribute(node, name));
  return v.value_or(default_value);
}

StatusOr<int64_t> IntAttribute(const ir::Node& node, std::string_view name, int64_t default_value) {
  ONNXAMP_ASSIGN_OR_RETURN(std::optional<int64_t> v, OptionalIntAttribute(node, name));
  return v.value_or(default_value);
}

StatusOr<std::string> StringAttribute(const ir::Node& node, std::string_view name, std::string default_value) {
  const ir::Attribute* a = node.FindAttribute(name);
  if (!a) return default_value;
  if (a->type() != ir::AttrType::kString) return WrongType(*a, "a string");
  return a->s;
}

Status ReadLegacyBroadcast(const ir::Node& node, int64_t opset, LegacyBroadcast* out) {
  *out = LegacyBroadcast();
  if (opset >= 7) return Status::Ok();
  LegacyBroadcast lb;
  lb.enabled = true;
  ONNXAMP_ASSIGN_OR_RETURN(int64_t broadcast, IntAttribute(node, "broadcast", 0));
  if (broadcast != 0 && broadcast != 1) {
    return InvalidArgument("attribute 'broadcast' must be 0 or 1, got ", broadcast);
  }
  lb.broadcast = broadcast == 1;
  ONNXAMP_ASSIGN_OR_RETURN(lb.axis, OptionalIntAttribute(node, "axis"));
  *out = lb;
  return Status::Ok();
}

StatusOr<BroadcastPlan> MakeBinaryPlan(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                                       const LegacyBroadcast& legacy) {
  if (!legacy.enabled) {
    const std::span<const int64_t> shapes[] = {a, b};
    return BroadcastPlan::Make(shapes);
  }
  ONNXAMP_ASSIGN_OR_RETURN(std::vector<int64_t> b_shape, LegacyBroadcastShape(a, b, legacy.broadcast, legacy.axis));
  return BroadcastPlan::MakeTo(a, {a, b_shape});
}

StatusOr<BroadcastPlan> PlanBinaryInputs(const ir::Tensor* a, const ir::Tensor* b, bool same_type,
                                         const LegacyBroadcast& legacy) {
  if (!a || !b) return InvalidArgument("input ", a ? 1 : 0, " is missing");
  if (same_type && a->dtype() != b->dtype()) {
    return InvalidArgument("input 1 (B) has element type ", DTypeName(b->dtype()), ", expected ", DTypeName(a->dtype()),
                           " like input 0 (A)");
  }
  return MakeBinaryPlan(a->dims(), b->dims(), legacy);
}

}  // namespace onnxamp::ops
