// InferElementTypes: declared types first, then per-op rules in topological order.
#include "trainer/autodiff/element_types.h"

#include <set>
#include <string>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/ops/gradient_ops.h"

namespace onnxamp::trainer {
namespace {

DType Declared(const ir::Value* v) {
  if (v->type().is_tensor() && v->type().elem_type() != DType::kUndefined) return v->type().elem_type();
  if (v->initializer()) return v->initializer()->dtype();
  return DType::kUndefined;
}

bool IsBoolResult(const std::string& op) {
  static const std::set<std::string> ops = {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And",
                                            "Or",    "Xor",  "Not",     "IsNaN",       "IsInf"};
  return ops.count(op) > 0;
}

bool IsInt64Result(const std::string& op) {
  static const std::set<std::string> ops = {"Shape", "Size", "ArgMax", "ArgMin", "NonZero", "NonMaxSuppression"};
  return ops.count(op) > 0;
}

// The output type of output `i` of node `n` from its inputs' types, or kUndefined.
DType Rule(const ir::Node& n, size_t i, const ElementTypes& types) {
  auto type_of = [&](size_t k) {
    const ir::Value* v = n.input(k);
    if (!v) return DType::kUndefined;
    auto it = types.find(v);
    return it == types.end() ? DType::kUndefined : it->second;
  };
  const std::string& op = n.op_type();
  // The runtime's own ops take their type from input 0, except ResizeGrad, whose input 0 is X's shape (dY is input 4).
  if (n.domain() == exec::kInternalDomain && op == ops::kResizeGradOp) return type_of(4);
  if (!n.domain().empty() && n.domain() != "ai.onnx") return type_of(0);
  if (op == "Cast") {
    const ir::Attribute* to = n.FindAttribute("to");
    if (to && to->type() == ir::AttrType::kInt) return static_cast<DType>(to->i);
    return DType::kUndefined;
  }
  if (op == "CastLike") return type_of(1);
  if (op == "If" || op == "Loop" || op == "Scan") {
    // The type the subgraph declares for the output (a Loop body's outputs start with its condition); else a Loop's
    // or Scan's initial value of a loop-carried output.
    const size_t offset = op == "Loop" ? 1 : 0;
    for (const char* name : {op == "If" ? "then_branch" : "body", op == "If" ? "else_branch" : "body"}) {
      const ir::Attribute* a = n.FindAttribute(name);
      if (a && a->type() == ir::AttrType::kGraph && a->g && i + offset < a->g->outputs().size()) {
        if (DType t = Declared(a->g->outputs()[i + offset]); t != DType::kUndefined) return t;
      }
    }
    if (op == "Loop" && i + 2 < n.inputs().size()) return type_of(i + 2);
    if (op == "Scan" &&
        static_cast<int64_t>(i) < static_cast<int64_t>(n.inputs().size()) - n.GetInt("num_scan_inputs", 0)) {
      return type_of(i);
    }
    return DType::kUndefined;
  }
  if (IsBoolResult(op)) return DType::kBool;
  if (IsInt64Result(op)) return DType::kInt64;
  if ((op == "TopK" || op == "MaxPool" || op == "Unique") && i > 0) return DType::kInt64;
  if (op == "Dropout" && i == 1) return DType::kBool;  // (the data type before opset 10; never differentiable)
  if (op == "Where") return type_of(1);
  if (op == "Constant") {
    if (const ir::Attribute* a = n.FindAttribute("value"); a && a->type() == ir::AttrType::kTensor) {
      return a->t.dtype();
    }
    if (n.FindAttribute("value_float") || n.FindAttribute("value_floats")) return DType::kFloat32;
    if (n.FindAttribute("value_int") || n.FindAttribute("value_ints")) return DType::kInt64;
    return DType::kUndefined;
  }
  if (op == "ConstantOfShape") {
    if (const ir::Attribute* a = n.FindAttribute("value"); a && a->type() == ir::AttrType::kTensor) {
      return a->t.dtype();
    }
    return DType::kFloat32;
  }
  if (op == "EyeLike" || op == "RandomNormalLike" || op == "RandomUniformLike" || op == "Bernoulli") {
    if (const ir::Attribute* d = n.FindAttribute("dtype"); d && d->type() == ir::AttrType::kInt) {
      return static_cast<DType>(d->i);
    }
    return type_of(0);
  }
  if (op == "RandomNormal" || op == "RandomUniform") {
    const ir::Attribute* d = n.FindAttribute("dtype");
    return d && d->type() == ir::AttrType::kInt ? static_cast<DType>(d->i) : DType::kFloat32;
  }
  if (op == "Range") return type_of(0);
  if (op == "QuantizeLinear") {
    if (n.input(2)) return type_of(2);
    const int64_t t = n.GetInt("output_dtype", 0);
    return t != 0 ? static_cast<DType>(t) : DType::kUint8;
  }
  if (op == "DequantizeLinear") {
    const int64_t t = n.GetInt("output_dtype", 0);
    return t != 0 ? static_cast<DType>(t) : type_of(1);
  }
  if (op == "DynamicQuantizeLinear") return i == 1 ? DType::kFloat32 : DType::kUint8;
  if (op == "Multinomial") return n.GetInt("dtype", 6) == 7 ? DType::kInt64 : DType::kInt32;
  for (size_t k = 0; k < n.inputs().size(); ++k) {
    if (DType t = type_of(k); t != DType::kUndefined) return t;
  }
  return DType::kUndefined;
}

}  // namespace

bool IsDifferentiableType(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16 || t == DType::kFloat64;
}

ElementTypes InferElementTypes(const ir::Graph& graph) {
  ElementTypes types;
  for (const ir::Value* v : graph.values()) {
    if (DType t = Declared(v); t != DType::kUndefined) types[v] = t;
  }
  StatusOr<std::vector<ir::Node*>> order = graph.TopologicalOrder();
  if (!order.ok()) return types;
  for (const ir::Node* n : *order) {
    for (size_t i = 0; i < n->outputs().size(); ++i) {
      const ir::Value* v = n->output(i);
      if (!v || types.count(v)) continue;
      if (DType t = Rule(*n, i, types); t != DType::kUndefined) types[v] = t;
    }
  }
  return types;
}

}  // namespace onnxamp::trainer
