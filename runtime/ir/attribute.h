// Node attributes: every ONNX attribute kind, with subgraphs owned as nested ir::Graph objects.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/ir/tensor.h"
#include "runtime/ir/type.h"

namespace onnxamp::ir {

class Graph;

// Numbered as ONNX's AttributeProto.AttributeType.
enum class AttrType : int32_t {
  kUndefined = 0,
  kFloat = 1,
  kInt = 2,
  kString = 3,
  kTensor = 4,
  kGraph = 5,
  kFloats = 6,
  kInts = 7,
  kStrings = 8,
  kTensors = 9,
  kGraphs = 10,
  kSparseTensor = 11,
  kSparseTensors = 12,
  kTypeProto = 13,
  kTypeProtos = 14,
};

const char* AttrTypeName(AttrType t);

// One attribute. Copying deep-copies any subgraphs (the copies have no parent until a node adopts them).
class Attribute {
 public:
  Attribute() = default;
  Attribute(std::string name, AttrType type) : name_(std::move(name)), type_(type) {}
  ~Attribute();
  Attribute(const Attribute& other);
  Attribute& operator=(const Attribute& other);
  Attribute(Attribute&&) noexcept;
  Attribute& operator=(Attribute&&) noexcept;

  static Attribute Float(std::string name, float v);
  static Attribute Int(std::string name, int64_t v);
  static Attribute String(std::string name, std::string v);
  static Attribute TensorValue(std::string name, Tensor v);
  static Attribute Floats(std::string name, std::vector<float> v);
  static Attribute Ints(std::string name, std::vector<int64_t> v);
  static Attribute Strings(std::string name, std::vector<std::string> v);
  static Attribute GraphValue(std::string name, std::unique_ptr<Graph> g);

  const std::string& name() const { return name_; }
  void set_name(std::string n) { name_ = std::move(n); }
  AttrType type() const { return type_; }
  void set_type(AttrType t) { type_ = t; }
  const std::string& doc_string() const { return doc_string_; }
  void set_doc_string(std::string d) { doc_string_ = std::move(d); }
  // Inside a function body: the attribute takes the value of the calling node's attribute of this name.
  const std::string& ref_attr_name() const { return ref_attr_name_; }
  void set_ref_attr_name(std::string r) { ref_attr_name_ = std::move(r); }

  // Payloads. Only the one matching type() is meaningful; the others stay empty.
  float f = 0.0f;
  int64_t i = 0;
  std::string s;  // bytes, not necessarily UTF-8
  Tensor t;
  std::unique_ptr<Graph> g;
  SparseTensor sparse_tensor;
  ValueType tp;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  std::vector<Tensor> tensors;
  std::vector<std::unique_ptr<Graph>> graphs;
  std::vector<SparseTensor> sparse_tensors;
  std::vector<ValueType> type_protos;

 private:
  void CopyFrom(const Attribute& other);

  std::string name_;
  AttrType type_ = AttrType::kUndefined;
  std::string doc_string_;
  std::string ref_attr_name_;
};

}  // namespace onnxamp::ir
