// Helpers for writing reference models with the IR API: deterministic weights and a small graph builder.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/ir/model.h"
#include "runtime/ir/tensor.h"

namespace onnxamp::gen {

// splitmix64: a tiny generator whose output is fully specified, so weights are the same on every machine and
// standard library (std::*_distribution are not).
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next();
  // Uniform in [lo, hi), computed in double from 53 random bits and rounded once to float.
  float Uniform(double lo, double hi);

 private:
  uint64_t state_;
};

// A seed derived from a tensor's name (FNV-1a), so each tensor's values do not depend on which others exist.
uint64_t SeedFromName(std::string_view name);

// A float32 tensor named `name` with values uniform in [lo, hi), seeded by the name.
ir::Tensor UniformTensor(const std::string& name, std::vector<int64_t> dims, double lo, double hi);

// PyTorch's default init bound for Linear/Conv weights and biases: kaiming_uniform_(a=sqrt(5)) gives
// 1/sqrt(fan_in), and the bias bound is 1/sqrt(fan_in) as well.
double KaimingBound(int64_t fan_in);

// Builds one graph: inputs, initializers, nodes with named outputs, outputs. Names are unique by construction
// (ONNXAMP_CHECK otherwise: a generator bug, not user input).
class GraphBuilder {
 public:
  explicit GraphBuilder(ir::Graph& graph) : graph_(graph) {}

  ir::Value* Input(const std::string& name, DType dtype, ir::Shape shape);
  // Makes `v` a graph output, renamed to `name`, with the given type.
  void Output(ir::Value* v, const std::string& name, DType dtype, ir::Shape shape);

  // An initializer holding `t` (named `name`).
  ir::Value* Initializer(const std::string& name, ir::Tensor t);
  // A trainable float initializer uniform in [-bound, bound).
  ir::Value* Param(const std::string& name, std::vector<int64_t> dims, double bound);
  ir::Value* ParamRange(const std::string& name, std::vector<int64_t> dims, double lo, double hi);

  // A Constant node (for values that are not parameters: shapes, scalars, masks). Output named `name`.
  ir::Value* Constant(const std::string& name, ir::Tensor t);
  ir::Value* ConstantInts(const std::string& name, std::vector<int64_t> values);  // 1-D int64
  ir::Value* ConstantScalar(const std::string& name, float value);                // 0-D float

  // A node named `name` with one output named `name` (or `name` + "_<i>" for several outputs).
  ir::Value* Op(const std::string& op_type, const std::string& name, std::vector<ir::Value*> inputs,
                std::vector<ir::Attribute> attributes = {});
  std::vector<ir::Value*> OpN(const std::string& op_type, const std::string& name, std::vector<ir::Value*> inputs,
                              size_t num_outputs, std::vector<ir::Attribute> attributes = {});

  ir::Graph& graph() { return graph_; }

 private:
  ir::Graph& graph_;
};

// A model with the settings every reference model shares: IR 8, default-domain opset 17, producer "onnxamp".
ir::Model NewModel(const std::string& graph_name, const std::string& doc);

// Shorthands for shapes: Dims("batch", 256) -> [batch, 256].
inline ir::Dim D(int64_t v) { return ir::Dim::Value(v); }
inline ir::Dim D(const char* p) { return ir::Dim::Param(p); }
template <typename... T>
ir::Shape Dims(T... dims) {
  return ir::Shape{D(dims)...};
}

}  // namespace onnxamp::gen
