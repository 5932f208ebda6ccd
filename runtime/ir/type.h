// Value types of the IR: tensors with (symbolic) shapes, and ONNX's sequence, map, optional and sparse types.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/common/dtype.h"

namespace onnxamp::ir {

// One dimension of a shape: a known size, a named symbol ("batch"), or unknown.
struct Dim {
  enum class Kind { kUnknown, kValue, kParam };
  Kind kind = Kind::kUnknown;
  int64_t value = 0;       // when kind == kValue
  std::string param;       // when kind == kParam
  std::string denotation;  // ONNX dimension denotation, often empty

  static Dim Value(int64_t v) { return Dim{Kind::kValue, v, {}, {}}; }
  static Dim Param(std::string p) { return Dim{Kind::kParam, 0, std::move(p), {}}; }
  static Dim Unknown() { return Dim{}; }

  bool is_value() const { return kind == Kind::kValue; }
  bool is_param() const { return kind == Kind::kParam; }
  bool operator==(const Dim& o) const = default;
};

// A shape is a list of dims; a shape that is not known at all (not even its rank) is std::nullopt.
using Shape = std::vector<Dim>;

// "[batch,3,224,?]".
std::string ShapeToString(const Shape& shape);
std::string ShapeToString(const std::optional<Shape>& shape);

// The type of a graph value. Tensors are by far the common case; sequences, maps and optionals nest.
class ValueType {
 public:
  enum class Kind { kUndefined, kTensor, kSparseTensor, kSequence, kMap, kOptional };

  ValueType() = default;
  static ValueType Tensor(DType elem, std::optional<Shape> shape = std::nullopt);
  static ValueType SparseTensor(DType elem, std::optional<Shape> shape = std::nullopt);
  static ValueType Sequence(ValueType elem);
  static ValueType Optional(ValueType elem);
  static ValueType Map(DType key, ValueType value);

  Kind kind() const { return kind_; }
  bool is_tensor() const { return kind_ == Kind::kTensor; }
  bool defined() const { return kind_ != Kind::kUndefined; }

  // Tensor and sparse tensor: element type (kUndefined when the file leaves it out) and shape.
  DType elem_type() const { return elem_type_; }
  void set_elem_type(DType t) { elem_type_ = t; }
  const std::optional<Shape>& shape() const { return shape_; }
  void set_shape(std::optional<Shape> s) { shape_ = std::move(s); }

  // Sequence and optional: the element type. Map: the value type.
  const ValueType* inner() const { return inner_.get(); }
  // Map: the key type.
  DType map_key_type() const { return elem_type_; }

  const std::string& denotation() const { return denotation_; }
  void set_denotation(std::string d) { denotation_ = std::move(d); }

  // "tensor(float16)[batch,128]", "seq(tensor(float))", "map(int64,tensor(float))".
  std::string ToString() const;

  bool operator==(const ValueType& o) const;

 private:
  Kind kind_ = Kind::kUndefined;
  DType elem_type_ = DType::kUndefined;
  std::optional<Shape> shape_;
  std::shared_ptr<const ValueType> inner_;  // immutable once built, so sharing is safe
  std::string denotation_;
};

}  // namespace onnxamp::ir
