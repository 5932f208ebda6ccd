// InferRanks: declared ranks first, then per-op rules in topological order.
#include "trainer/autodiff/ranks.h"

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "runtime/executor/graph_match.h"

namespace onnxamp::trainer {
namespace {

std::optional<int64_t> Declared(const ir::Value* v) {
  if (v->initializer()) return static_cast<int64_t>(v->initializer()->rank());
  if (v->type().is_tensor() && v->type().shape()) return static_cast<int64_t>(v->type().shape()->size());
  return std::nullopt;
}

// Ops whose every output has the rank of their first input.
bool KeepsRank(const std::string& op) {
  static const std::set<std::string> ops = {
      "Abs", "Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "AveragePool", "BatchNormalization", "Cast",
      "CastLike", "Ceil", "Celu", "Clip", "Concat", "Conv", "ConvTranspose", "Cos", "Cosh", "CumSum", "DepthToSpace",
      "Dropout", "Elu", "Erf", "Exp", "Floor", "Gelu", "GroupNormalization", "HardSigmoid", "HardSwish", "Hardmax",
      "Identity", "InstanceNormalization", "IsInf", "IsNaN", "LayerNormalization", "LeakyRelu", "Log", "LogSoftmax",
      "LpNormalization", "LRN", "MaxPool", "MeanVarianceNormalization", "Mish", "Neg", "Not", "Pad", "Reciprocal",
      "Relu", "Resize", "ReverseSequence", "Round", "Selu", "Shrink", "Sigmoid", "Sign", "Sin", "Sinh", "Slice",
      "Softmax", "Softplus", "Softsign", "SpaceToDepth", "Split", "Sqrt", "Tan", "Tanh", "ThresholdedRelu", "Tile",
      "TopK", "Transpose", "Trilu", "Upsample", "GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool", "LpPool",
      "ScatterElements", "ScatterND", "Scatter", "CenterCropPad", "RoiAlign", "MaxRoiPool"};
  return ops.count(op) > 0;
}

// Ops broadcasting their inputs numpy-style: the largest input rank.
bool Broadcasts(const std::string& op) {
  static const std::set<std::string> ops = {"Add", "Sub", "Mul", "Div", "Pow", "Mod", "Where", "Max", "Min",
                                            "Sum", "Mean", "PRelu", "Equal", "Less", "Greater", "LessOrEqual",
                                            "GreaterOrEqual", "And", "Or", "Xor", "BitShift", "BitwiseAnd",
                                            "BitwiseOr", "BitwiseXor"};
  return ops.count(op) > 0;
}

bool IsReduction(const std::string& op) { return op.rfind("Reduce", 0) == 0; }

// The number of elements of a constant 1-D (or scalar) tensor input.
std::optional<int64_t> ConstantLength(const ir::Value* v) {
  const ir::Tensor* t = exec::ConstantOf(v);
  if (!t || t->rank() > 1) return std::nullopt;
  return t->num_elements();
}

std::optional<int64_t> Rule(const ir::Node& n, size_t out, const Ranks& ranks) {
  auto rank_of = [&](size_t k) -> std::optional<int64_t> {
    const ir::Value* v = k < n.inputs().size() ? n.input(k) : nullptr;
    if (!v) return std::nullopt;
    auto it = ranks.find(v);
    if (it == ranks.end()) return std::nullopt;
    return it->second;
  };
  const std::string& op = n.op_type();
  if (!ir::IsDefaultDomain(n.domain())) return std::nullopt;
  if (op == "Constant") {
    const ir::Attribute* a = n.FindAttribute("value");
    if (a && a->type() == ir::AttrType::kTensor) return static_cast<int64_t>(a->t.rank());
    if (n.FindAttribute("value_float") || n.FindAttribute("value_int") || n.FindAttribute("value_string")) return 0;
    if (n.FindAttribute("value_floats") || n.FindAttribute("value_ints") || n.FindAttribute("value_strings")) return 1;
    return std::nullopt;
  }
  if (op == "Shape") return 1;
  if (op == "Size") return 0;
  if (op == "Gemm" || op == "Flatten" || op == "NonZero") return 2;
  if (op == "Range") return 1;
  if (op == "BatchNormalization" && out > 0) return 1;  // training mode's running mean and variance
  if (op == "SoftmaxCrossEntropyLoss" || op == "NegativeLogLikelihoodLoss") {
    if (out > 0) return rank_of(0);  // log_prob
    return n.GetString("reduction", "mean") == "none" ? rank_of(1) : std::optional<int64_t>(0);
  }
  if (KeepsRank(op)) return rank_of(0);  // every output (LayerNormalization's Mean and InvStdDev keep unit dims)
  if (Broadcasts(op)) {
    int64_t r = 0;
    for (size_t k = 0; k < n.inputs().size(); ++k) {
      if (!n.input(k)) continue;
      const std::optional<int64_t> rk = rank_of(k);
      if (!rk) return std::nullopt;
      r = std::max(r, *rk);
    }
    return r;
  }
  if (op == "MatMul") {
    const std::optional<int64_t> ra = rank_of(0), rb = rank_of(1);
    if (!ra || !rb || *ra < 1 || *rb < 1) return std::nullopt;
    if (*ra == 1 && *rb == 1) return 0;
    if (*ra == 1) return *rb - 1;
    if (*rb == 1) return *ra - 1;
    return std::max(*ra, *rb);
  }
  if (op == "Reshape" || op == "ConstantOfShape") return ConstantLength(n.input(op == "Reshape" ? 1 : 0));
  if (op == "Expand") {
    const std::optional<int64_t> r = rank_of(0), len = ConstantLength(n.input(1));
    if (!r || !len) return std::nullopt;
    return std::max(*r, *len);
  }
  if (op == "Unsqueeze" || op == "Squeeze") {
    const std::optional<int64_t> r = rank_of(0);
    if (!r) return std::nullopt;
    std::optional<int64_t> count;
    if (const ir::Attribute* axes = n.FindAttribute("axes")) {
      count = static_cast<int64_t>(axes->ints.size());
    } else if (n.inputs().size() > 1 && n.input(1)) {
      count = ConstantLength(n.input(1));
    }
    if (!count) return std::nullopt;  // Squeeze without axes drops the unit dims, which only the shape tells
    return op == "Unsqueeze" ? *r + *count : *r - *count;
  }
  if (op == "Gather") {
    const std::optional<int64_t> r = rank_of(0), ri = rank_of(1);
    if (!r || !ri) return std::nullopt;
    return *r - 1 + *ri;
  }
  if (op == "ArgMax" || op == "ArgMin") {
    const std::optional<int64_t> r = rank_of(0);
    if (!r) return std::nullopt;
    return n.GetInt("keepdims", 1) != 0 ? *r : *r - 1;
  }
  if (IsReduction(op)) {
    const std::optional<int64_t> r = rank_of(0);
    if (!r) return std::nullopt;
    if (n.GetInt("keepdims", 1) != 0) return *r;
    std::optional<int64_t> count = 0;  // 0: no axes given, i.e. every axis (or none with noop_with_empty_axes)
    if (const ir::Attribute* axes = n.FindAttribute("axes")) {
      count = static_cast<int64_t>(axes->ints.size());
    } else if (n.inputs().size() > 1 && n.input(1)) {
      count = ConstantLength(n.input(1));
    }
    if (!count) return std::nullopt;
    if (*count == 0) return n.GetInt("noop_with_empty_axes", 0) != 0 ? *r : 0;
    return *r - *count;
  }
  return std::nullopt;
}

}  // namespace

Ranks InferRanks(const ir::Graph& graph) {
  Ranks ranks;
  for (const ir::Value* v : graph.values()) {
    if (std::optional<int64_t> r = Declared(v)) ranks[v] = *r;
  }
  StatusOr<std::vector<ir::Node*>> order = graph.TopologicalOrder();
  if (!order.ok()) return ranks;
  for (const ir::Node* n : *order) {
    for (size_t i = 0; i < n->outputs().size(); ++i) {
      const ir::Value* v = n->output(i);
      if (!v || ranks.count(v)) continue;
      if (std::optional<int64_t> r = Rule(*n, i, ranks); r && *r >= 0) ranks[v] = *r;
    }
  }
  return ranks;
}

}  // namespace onnxamp::trainer
