// Attribute construction, deep copy (subgraphs included) and type names.
#include "runtime/ir/attribute.h"

#include "runtime/ir/graph.h"

namespace onnxamp::ir {

const char* AttrTypeName(AttrType t) {
  switch (t) {
    case AttrType::kUndefined:
      return "undefined";
    case AttrType::kFloat:
      return "float";
    case AttrType::kInt:
      return "int";
    case AttrType::kString:
      return "string";
    case AttrType::kTensor:
      return "tensor";
    case AttrType::kGraph:
      return "graph";
    case AttrType::kFloats:
      return "floats";
    case AttrType::kInts:
      return "ints";
    case AttrType::kStrings:
      return "strings";
    case AttrType::kTensors:
      return "tensors";
    case AttrType::kGraphs:
      return "graphs";
    case AttrType::kSparseTensor:
      return "sparse_tensor";
    case AttrType::kSparseTensors:
      return "sparse_tensors";
    case AttrType::kTypeProto:
      return "type_proto";
    case AttrType::kTypeProtos:
      return "type_protos";
  }
  return "invalid";
}

Attribute::~Attribute() = default;
Attribute::Attribute(Attribute&&) noexcept = default;
Attribute& Attribute::operator=(Attribute&&) noexcept = default;

Attribute::Attribute(const Attribute& other) { CopyFrom(other); }

Attribute& Attribute::operator=(const Attribute& other) {
  if (this != &other) CopyFrom(other);
  return *this;
}

void Attribute::CopyFrom(const Attribute& other) {
  name_ = other.name_;
  type_ = other.type_;
  doc_string_ = other.doc_string_;
  ref_attr_name_ = other.ref_attr_name_;
  f = other.f;
  i = other.i;
  s = other.s;
  t = other.t;
  g = other.g ? other.g->Clone() : nullptr;
  sparse_tensor = other.sparse_tensor;
  tp = other.tp;
  floats = other.floats;
  ints = other.ints;
  strings = other.strings;
  tensors = other.tensors;
  graphs.clear();
  for (const auto& sub : other.graphs) graphs.push_back(sub ? sub->Clone() : nullptr);
  sparse_tensors = other.sparse_tensors;
  type_protos = other.type_protos;
}

Attribute Attribute::Float(std::string name, float v) {
  Attribute a(std::move(name), AttrType::kFloat);
  a.f = v;
  return a;
}

Attribute Attribute::Int(std::string name, int64_t v) {
  Attribute a(std::move(name), AttrType::kInt);
  a.i = v;
  return a;
}

Attribute Attribute::String(std::string name, std::string v) {
  Attribute a(std::move(name), AttrType::kString);
  a.s = std::move(v);
  return a;
}

Attribute Attribute::TensorValue(std::string name, Tensor v) {
  Attribute a(std::move(name), AttrType::kTensor);
  a.t = std::move(v);
  return a;
}

Attribute Attribute::Floats(std::string name, std::vector<float> v) {
  Attribute a(std::move(name), AttrType::kFloats);
  a.floats = std::move(v);
  return a;
}

Attribute Attribute::Ints(std::string name, std::vector<int64_t> v) {
  Attribute a(std::move(name), AttrType::kInts);
  a.ints = std::move(v);
  return a;
}

Attribute Attribute::Strings(std::string name, std::vector<std::string> v) {
  Attribute a(std::move(name), AttrType::kStrings);
  a.strings = std::move(v);
  return a;
}

Attribute Attribute::GraphValue(std::string name, std::unique_ptr<Graph> g) {
  Attribute a(std::move(name), AttrType::kGraph);
  a.g = std::move(g);
  return a;
}

}  // namespace onnxamp::ir
