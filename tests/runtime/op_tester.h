// OpTester: runs one node through a real Session on the CPU and returns its outputs, for kernel tests.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/session.h"
#include "runtime/ir/model.h"
#include "runtime/ops/common/dtype_dispatch.h"

namespace onnxamp::testing {

// CPU session options with `threads` threads and session seed `seed`.
inline exec::SessionOptions CpuSessionOptions(int threads, uint64_t seed = 0) {
  exec::SessionOptions o;
  o.num_threads = threads;
  o.seed = seed;
  return o;
}

// A tensor of storage type T from values given in T's compute type (float for fp16/bf16).
template <typename T>
ir::Tensor MakeTensor(std::vector<int64_t> dims, const std::vector<ops::ComputeType<T>>& values) {
  ir::Tensor t(ops::DTypeOf<T>(), std::move(dims));
  auto out = t.mutable_values<T>();
  for (size_t i = 0; i < values.size() && i < out.size(); ++i) out[i] = ops::Store<T>(values[i]);
  return t;
}

// The values of a tensor of storage type T in its compute type.
template <typename T>
std::vector<ops::ComputeType<T>> Values(const ir::Tensor& t) {
  std::vector<ops::ComputeType<T>> out;
  for (T v : t.values<T>()) out.push_back(ops::Load<T>(v));
  return out;
}

struct OpTester {
  std::string op_type;
  int64_t opset = 17;
  std::string domain;
  std::vector<ir::Attribute> attributes;
  std::vector<std::optional<ir::Tensor>> inputs;  // nullopt: an omitted optional input
  int num_outputs = 1;
  std::vector<bool> omit_outputs;  // per output: true leaves it unrequested
  exec::SessionOptions options = CpuSessionOptions(1);

  OpTester& Attr(ir::Attribute a) {
    attributes.push_back(std::move(a));
    return *this;
  }
  OpTester& Input(ir::Tensor t) {
    inputs.emplace_back(std::move(t));
    return *this;
  }
  OpTester& OmittedInput() {
    inputs.emplace_back(std::nullopt);
    return *this;
  }

  // Builds the one-node model (inputs "in0".., outputs "out0"..) without running it.
  ir::Model BuildModel() const {
    ir::Model m;
    m.opset_imports = {{domain, opset}};
    ir::Graph& g = *m.graph;
    std::vector<ir::Value*> ins, outs;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!inputs[i]) {
        ins.push_back(nullptr);
        continue;
      }
      ir::Value* v = g.CreateValue("in" + std::to_string(i));
      ir::Shape shape;
      for (int64_t d : inputs[i]->dims()) shape.push_back(ir::Dim::Value(d));
      v->set_type(ir::ValueType::Tensor(inputs[i]->dtype(), shape));
      g.AddInput(v);
      ins.push_back(v);
    }
    for (int i = 0; i < num_outputs; ++i) {
      const bool omit = static_cast<size_t>(i) < omit_outputs.size() && omit_outputs[i];
      if (omit) {
        outs.push_back(nullptr);
        continue;
      }
      outs.push_back(g.CreateValue("out" + std::to_string(i)));
    }
    ir::Node* n = g.AddNode(op_type, ins, outs, "node", domain);
    for (const ir::Attribute& a : attributes) n->SetAttribute(a);
    for (ir::Value* v : outs)
      if (v) g.AddOutput(v);
    return m;
  }

  // The inputs as a session of BuildModel()'s model takes them (named "in0".., omitted ones left out).
  std::vector<ir::Tensor> Feeds() const {
    std::vector<ir::Tensor> feeds;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!inputs[i]) continue;
      ir::Tensor t = *inputs[i];
      t.set_name("in" + std::to_string(i));
      feeds.push_back(std::move(t));
    }
    return feeds;
  }

  // Runs the node; returns the requested outputs in order.
  StatusOr<std::vector<ir::Tensor>> Run() const {
    ONNXAMP_ASSIGN_OR_RETURN(auto session, exec::Session::Create(BuildModel(), options));
    return session->Run(Feeds());
  }
};

// A one-node tester of an op of the runtime's internal domain (com.onnxamp, version 1).
inline OpTester InternalOp(std::string op) {
  OpTester t;
  t.op_type = std::move(op);
  t.domain = exec::kInternalDomain;
  t.opset = 1;
  return t;
}

}  // namespace onnxamp::testing
