// Small graphs for the graph-rewrite tests (matmul_fusion_test.cc, tests/cuda/backward_gemm_rewrite_test.cc): typed
// inputs (a negative dim is the symbolic "batch"), nodes by op type with attributes and domain, graph outputs; and what
// a rewritten graph holds.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "runtime/common/dtype.h"
#include "runtime/ir/model.h"

namespace onnxamp::testing {

class GraphBuilder {
 public:
  using Dims = std::vector<int64_t>;

  GraphBuilder(DType dtype, std::vector<ir::OpsetImport> opset_imports) : dtype_(dtype) {
    model_.opset_imports = std::move(opset_imports);
  }

  ir::Graph& g() { return *model_.graph; }
  ir::Model& model() { return model_; }
  DType dtype() const { return dtype_; }

  ir::Value* Input(const std::string& name, const Dims& dims, DType dtype = DType::kUndefined) {
    ir::Value* v = g().CreateValue(name);
    ir::Shape shape;
    for (int64_t d : dims) shape.push_back(d < 0 ? ir::Dim::Param("batch") : ir::Dim::Value(d));
    v->set_type(ir::ValueType::Tensor(dtype == DType::kUndefined ? dtype_ : dtype, shape));
    g().AddInput(v);
    return v;
  }
  ir::Value* Op(const std::string& op, std::vector<ir::Value*> inputs, const std::string& out,
                std::vector<ir::Attribute> attrs = {}, const std::string& domain = "") {
    ir::Value* v = g().CreateValue(out);
    ir::Node* n = g().AddNode(op, std::move(inputs), {v}, out, domain);
    for (ir::Attribute& a : attrs) n->SetAttribute(std::move(a));
    return v;
  }
  void Output(ir::Value* v) { g().AddOutput(v); }

 private:
  DType dtype_;
  ir::Model model_;
};

inline std::vector<std::string> OpTypes(const ir::Graph& g) {
  std::vector<std::string> ops;
  for (const ir::Node* n : g.nodes()) ops.push_back(n->op_type());
  return ops;
}

inline const ir::Node* FindOp(const ir::Graph& g, const std::string& op) {
  for (const ir::Node* n : g.nodes())
    if (n->op_type() == op) return n;
  return nullptr;
}

}  // namespace onnxamp::testing
