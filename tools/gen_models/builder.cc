// Deterministic weights and the graph builder used by the reference-model generator.
#include "tools/gen_models/builder.h"

#include <cmath>
#include <utility>

#include "runtime/common/status.h"

namespace onnxamp::gen {

uint64_t SplitMix64::Next() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

float SplitMix64::Uniform(double lo, double hi) {
  // 53 random bits give x in [-1, 1) exactly. std::fma rounds once on every platform, whether or not the
  // compiler would have contracted a multiply-add, so the result does not depend on compiler flags.
  const double x = static_cast<double>(Next() >> 11) * 0x1.0p-52 - 1.0;
  const double v = std::fma((hi - lo) / 2.0, x, (hi + lo) / 2.0);
  return static_cast<float>(v);
}

uint64_t SeedFromName(std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (char c : name) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ULL;
  }
  return h;
}

ir::Tensor UniformTensor(const std::string& name, std::vector<int64_t> dims, double lo, double hi) {
  ir::Tensor t(DType::kFloat32, std::move(dims));
  SplitMix64 rng(SeedFromName(name));
  for (float& x : t.mutable_values<float>()) x = rng.Uniform(lo, hi);
  t.set_name(name);
  return t;
}

double KaimingBound(int64_t fan_in) { return 1.0 / std::sqrt(static_cast<double>(fan_in)); }

ir::Value* GraphBuilder::Input(const std::string& name, DType dtype, ir::Shape shape) {
  ir::Value* v = graph_.CreateValue(name);
  v->set_type(ir::ValueType::Tensor(dtype, std::move(shape)));
  graph_.AddInput(v);
  return v;
}

void GraphBuilder::Output(ir::Value* v, const std::string& name, DType dtype, ir::Shape shape) {
  if (v->name() != name) {
    Status s = graph_.RenameValue(v, name);
    ONNXAMP_CHECK(s.ok(), s.message());
  }
  v->set_type(ir::ValueType::Tensor(dtype, std::move(shape)));
  graph_.AddOutput(v);
}

ir::Value* GraphBuilder::Initializer(const std::string& name, ir::Tensor t) {
  ir::Value* v = graph_.CreateValue(name);
  graph_.SetInitializer(v, std::move(t));
  return v;
}

ir::Value* GraphBuilder::Param(const std::string& name, std::vector<int64_t> dims, double bound) {
  return ParamRange(name, std::move(dims), -bound, bound);
}

ir::Value* GraphBuilder::ParamRange(const std::string& name, std::vector<int64_t> dims, double lo, double hi) {
  return Initializer(name, UniformTensor(name, std::move(dims), lo, hi));
}

ir::Value* GraphBuilder::Constant(const std::string& name, ir::Tensor t) {
  return Op("Constant", name, {}, {ir::Attribute::TensorValue("value", std::move(t))});
}

ir::Value* GraphBuilder::ConstantInts(const std::string& name, std::vector<int64_t> values) {
  ir::Tensor t(DType::kInt64, {static_cast<int64_t>(values.size())});
  auto out = t.mutable_values<int64_t>();
  for (size_t i = 0; i < values.size(); ++i) out[i] = values[i];
  return Constant(name, std::move(t));
}

ir::Value* GraphBuilder::ConstantScalar(const std::string& name, float value) {
  ir::Tensor t(DType::kFloat32, {});
  t.mutable_values<float>()[0] = value;
  return Constant(name, std::move(t));
}

ir::Value* GraphBuilder::Op(const std::string& op_type, const std::string& name, std::vector<ir::Value*> inputs,
                            std::vector<ir::Attribute> attributes) {
  return OpN(op_type, name, std::move(inputs), 1, std::move(attributes))[0];
}

std::vector<ir::Value*> GraphBuilder::OpN(const std::string& op_type, const std::string& name,
                                          std::vector<ir::Value*> inputs, size_t num_outputs,
                                          std::vector<ir::Attribute> attributes) {
  std::vector<ir::Value*> outputs;
  for (size_t i = 0; i < num_outputs; ++i) {
    outputs.push_back(graph_.CreateValue(num_outputs == 1 ? name : StrCat(name, "_", i)));
  }
  ir::Node* node = graph_.AddNode(op_type, std::move(inputs), outputs, name);
  for (ir::Attribute& a : attributes) node->SetAttribute(std::move(a));
  return outputs;
}

ir::Model NewModel(const std::string& graph_name, const std::string& doc) {
  ir::Model model;
  model.ir_version = 8;
  model.opset_imports = {{"", 17}};
  model.producer_name = "onnxamp";
  model.graph = std::make_unique<ir::Graph>(graph_name);
  model.graph->set_doc_string(doc);
  return model;
}

}  // namespace onnxamp::gen
