// ValueType construction and printing.
#include "runtime/ir/type.h"

#include "runtime/common/status.h"

namespace onnxamp::ir {

std::string ShapeToString(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ",";
    const Dim& d = shape[i];
    if (d.is_value()) {
      s += std::to_string(d.value);
    } else if (d.is_param()) {
      s += d.param;
    } else {
      s += "?";
    }
  }
  return s + "]";
}

std::string ShapeToString(const std::optional<Shape>& shape) { return shape ? ShapeToString(*shape) : "[*]"; }

ValueType ValueType::Tensor(DType elem, std::optional<Shape> shape) {
  ValueType t;
  t.kind_ = Kind::kTensor;
  t.elem_type_ = elem;
  t.shape_ = std::move(shape);
  return t;
}

ValueType ValueType::SparseTensor(DType elem, std::optional<Shape> shape) {
  ValueType t = Tensor(elem, std::move(shape));
  t.kind_ = Kind::kSparseTensor;
  return t;
}

ValueType ValueType::Sequence(ValueType elem) {
  ValueType t;
  t.kind_ = Kind::kSequence;
  t.inner_ = std::make_shared<const ValueType>(std::move(elem));
  return t;
}

ValueType ValueType::Optional(ValueType elem) {
  ValueType t;
  t.kind_ = Kind::kOptional;
  t.inner_ = std::make_shared<const ValueType>(std::move(elem));
  return t;
}

ValueType ValueType::Map(DType key, ValueType value) {
  ValueType t;
  t.kind_ = Kind::kMap;
  t.elem_type_ = key;
  t.inner_ = std::make_shared<const ValueType>(std::move(value));
  return t;
}

std::string ValueType::ToString() const {
  auto inner = [&] { return inner_ ? inner_->ToString() : std::string("?"); };
  switch (kind_) {
    case Kind::kUndefined:
      return "undefined";
    case Kind::kTensor:
      return StrCat("tensor(", DTypeName(elem_type_), ")", ShapeToString(shape_));
    case Kind::kSparseTensor:
      return StrCat("sparse_tensor(", DTypeName(elem_type_), ")", ShapeToString(shape_));
    case Kind::kSequence:
      return StrCat("seq(", inner(), ")");
    case Kind::kOptional:
      return StrCat("optional(", inner(), ")");
    case Kind::kMap:
      return StrCat("map(", DTypeName(elem_type_), ",", inner(), ")");
  }
  return "invalid";
}

bool ValueType::operator==(const ValueType& o) const {
  if (kind_ != o.kind_ || elem_type_ != o.elem_type_ || shape_ != o.shape_ || denotation_ != o.denotation_) {
    return false;
  }
  if (!inner_ || !o.inner_) return !inner_ && !o.inner_;
  return *inner_ == *o.inner_;
}

}  // namespace onnxamp::ir
