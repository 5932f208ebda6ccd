// The inference optimizer's GEMM fusion (see graph_optimizer.h): MatMul / Gemm [* scale] [+ Add(bias)] [+ Relu |
// Gelu | the erf-GELU pattern] into one FusedMatMul node (runtime/ops/matmul/fused_matmul.h), whose kernels run the
// scale, the bias and the activation on the product before storing it: cuBLASLt's epilogue on CUDA, the GEMM's last
// pass over each output block on the CPU.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "runtime/executor/graph_match.h"
#include "runtime/executor/graph_optimizer.h"
#include "runtime/ops/matmul/fused_matmul.h"

namespace onnxamp::exec {
namespace {

// What one fusion replaces.
struct Match {
  ir::Node* product = nullptr;  // the MatMul or Gemm
  ir::Value* bias = nullptr;    // FusedMatMul's third input (a bias Add's operand, or Gemm's C)
  double scale = 1;             // a Mul or Div by a scalar right after the product, as a factor
  std::string activation;
  std::vector<ir::Node*> absorbed;    // nodes after the product, in graph order
  std::vector<ir::Value*> constants;  // constant operands of absorbed nodes (removed when nothing reads them)
  ir::Value* out = nullptr;           // the last absorbed node's output: the fused node's output
};

bool IsShapeRead(const ir::Node* n) { return IsSingleOutputOp(n, "Shape") && n->inputs().size() == 1; }

// The one node other than Shape nodes that reads `v` (through exactly one input), or null. Every value along the
// product -> scale -> bias -> activation chain has the fused output's shape, so Shape nodes reading it (a training
// graph's backward pass asks for the shapes its SumToShape reduces to) can read the fused output instead.
ir::Node* ChainConsumer(const ir::Value* v) {
  if (!v || v->is_graph_output()) return nullptr;
  ir::Node* consumer = nullptr;
  for (const ir::Use& u : v->uses()) {
    if (IsShapeRead(u.node)) continue;
    if (consumer) return nullptr;
    consumer = u.node;
  }
  return consumer;
}

// A bias or scale operand whose shape and type the graph fixes: a constant, a graph input (the session checks a
// bound tensor against the input's declared dims and type; a training graph's parameters are such inputs), or a Cast
// of one (mixed-precision training graphs cast their FP32 parameters).
bool IsFixedOperand(const ir::Value* v) {
  if (!v) return false;
  if (ConstantOf(v) || v->is_graph_input()) return true;
  const ir::Node* cast = CastProducer(v);
  return cast && IsFixedOperand(cast->input(0));
}

// Matches the fusion starting at `product`, or returns false.
bool MatchAt(ir::Node* product, Match* m) {
  const bool is_matmul = IsSingleOutputOp(product, "MatMul") && product->inputs().size() == 2;
  const bool is_gemm =
      IsSingleOutputOp(product, "Gemm") && product->inputs().size() >= 2 && product->inputs().size() <= 3;
  if (!is_matmul && !is_gemm) return false;
  ir::Value* a = product->input(0);
  ir::Value* b = product->input(1);
  if (!a || !b) return false;
  m->product = product;
  bool trans_b = false;
  if (is_gemm) {
    const int64_t ta = product->GetInt("transA", 0), tb = product->GetInt("transB", 0);
    if ((ta != 0 && ta != 1) || (tb != 0 && tb != 1)) return false;
    trans_b = tb == 1;
  }
  // N from B, and the element type from any input that tells it.
  const std::optional<std::vector<int64_t>> b_dims = StaticDims(b);
  std::optional<int64_t> n;
  if (b_dims && b_dims->size() >= 2) n = trans_b ? (*b_dims)[0] : b_dims->back();
  // A 1-D B drops N from the result: no bias then (a scale and an activation do not care).
  const bool b_rank2 = is_gemm || RankOf(b).value_or(0) >= 2;
  DType dtype = DType::kUndefined;
  for (const ir::Value* v : product->inputs()) {
    dtype = TypeOf(v);
    if (dtype != DType::kUndefined) break;
  }
  if (dtype != DType::kUndefined && !IsFloatType(dtype)) return false;
  // Where no input declares its type (intermediate values carry none until something infers them), a constant
  // operand of the scale or bias tells it: the ops take both operands of one type.
  auto same_type = [&](DType t) {
    if (dtype == DType::kUndefined && IsFloatType(t)) dtype = t;
    return t == dtype;
  };

  auto is_row_vector = [&](const ir::Value* v, bool allow_rank2) {
    if (!IsFixedOperand(v)) return false;
    // A Constant node's value tells its dims and type; other fixed operands declare them (through a Cast).
    const ir::Tensor* t = ConstantOf(v);
    const std::optional<std::vector<int64_t>> dims = t ? std::optional(t->dims()) : StaticDims(v);
    const DType type = t ? t->dtype() : TypeOf(v);
    if (!dims || !b_rank2 || !same_type(type) || !n || dims->empty() || dims->size() > 2 || dims->back() != *n) {
      return false;
    }
    if (dims->size() == 2 && ((*dims)[0] != 1 || !allow_rank2)) return false;
    return true;
  };
  // A [1, N] bias keeps the result's shape only when the product has rank >= 2, i.e. A does.
  const bool a_rank2 = is_gemm || RankOf(a).value_or(0) >= 2;
  ir::Value* x = product->output(0);
  const bool has_c = is_gemm && product->inputs().size() == 3 && product->input(2);
  // A scale: Mul by a scalar (either operand) or Div by one. After a Gemm with C it would scale C too.
  // A [1]-shaped scale would make the scalar product of two 1-D operands 1-D.
  const bool product_has_dims = is_gemm || RankOf(a).value_or(0) >= 2 || RankOf(b).value_or(0) >= 2;
  if (ir::Node* op = ChainConsumer(x); !has_c && (IsSingleOutputOp(op, "Mul") || IsSingleOutputOp(op, "Div"))) {
    ir::Value* s = OtherInput(op, x);
    const bool is_div = op->op_type() == "Div";
    DType s_type = DType::kUndefined;
    const std::optional<double> value = (is_div && op->input(1) != s) ? std::nullopt : ScalarOf(s, &s_type);
    if (value && same_type(s_type) && std::isfinite(*value) && *value != 0 &&
        (product_has_dims || ConstantOf(s)->rank() == 0)) {
      const double factor = is_div ? 1 / *value : *value;
      // FusedMatMul's alpha is a float: a double scale must be one.
      if (dtype != DType::kFloat64 || static_cast<double>(static_cast<float>(factor)) == factor) {
        m->scale = factor;
        m->absorbed.push_back(op);
        m->constants.push_back(s);
        x = op->output(0);
      }
    }
  }
  if (has_c) {
    if (product->GetFloat("beta", 1.0f) != 1.0f || !is_row_vector(product->input(2), true)) return false;
    m->bias = product->input(2);
  } else {
    ir::Node* add = ChainConsumer(x);
    ir::Value* bias = OtherInput(add, x);
    if (IsSingleOutputOp(add, "Add") && !BroadcastsFromAxis(add) && is_row_vector(bias, a_rank2)) {
      m->bias = bias;
      m->absorbed.push_back(add);
      x = add->output(0);
    }
  }
  ir::Node* next = ChainConsumer(x);
  if (IsSingleOutputOp(next, "Relu") && next->inputs().size() == 1) {
    m->activation = "Relu";
    m->absorbed.push_back(next);
    x = next->output(0);
  } else if (IsSingleOutputOp(next, "Gelu") && next->inputs().size() == 1) {
    const std::string approximate = next->GetString("approximate", "none");
    if (approximate == "none" || approximate == "tanh") {
      m->activation = approximate == "none" ? "Gelu" : "GeluTanh";
      m->absorbed.push_back(next);
      x = next->output(0);
    }
  } else if (std::optional<GeluPattern> gelu = MatchGelu(x)) {
    m->activation = gelu->tanh ? "GeluTanh" : "Gelu";
    m->absorbed.insert(m->absorbed.end(), gelu->nodes.begin(), gelu->nodes.end());
    m->constants.insert(m->constants.end(), gelu->constants.begin(), gelu->constants.end());
    x = gelu->out;
  }
  // Gemm's C is added by the Gemm kernel itself; fusing pays only with something absorbed.
  if (m->absorbed.empty() || !IsFloatType(dtype)) return false;
  m->out = x;
  return true;
}

void Rewrite(ir::Graph& g, const Match& m) {
  ir::Node* product = m.product;
  std::vector<ir::Value*> inputs = {product->input(0), product->input(1)};
  if (m.bias) inputs.push_back(m.bias);
  std::vector<ir::Attribute> attrs;
  float alpha = 1;
  if (product->op_type() == "Gemm") {
    alpha = product->GetFloat("alpha", 1.0f);
    for (const char* name : {"transA", "transB"}) {
      if (const ir::Attribute* a = product->FindAttribute(name)) attrs.push_back(*a);
    }
  }
  alpha = static_cast<float>(alpha * m.scale);
  if (alpha != 1.0f) attrs.push_back(ir::Attribute::Float("alpha", alpha));
  if (!m.activation.empty()) attrs.push_back(ir::Attribute::String("activation", m.activation));
  const std::string name = product->name();
  // Intermediate values: every output of the product and the absorbed nodes but the last.
  std::vector<ir::Value*> intermediates = {product->output(0)};
  for (ir::Node* n : m.absorbed) {
    if (n->output(0) != m.out) intermediates.push_back(n->output(0));
  }
  for (ir::Value* v : intermediates) {
    std::vector<ir::Node*> shape_reads;
    for (const ir::Use& u : v->uses()) {
      if (IsShapeRead(u.node)) shape_reads.push_back(u.node);
    }
    for (ir::Node* n : shape_reads) n->SetInput(0, m.out);
  }
  for (size_t i = m.absorbed.size(); i-- > 0;) g.RemoveNode(m.absorbed[i]);
  ir::Node* fused = g.InsertNode(product, ops::kFusedMatMulOp, inputs, {m.out}, name.empty() ? "" : name + "_fused",
                                 ops::kFusedMatMulDomain);
  for (ir::Attribute& a : attrs) fused->SetAttribute(std::move(a));
  g.RemoveNode(product);
  for (ir::Value* v : intermediates) g.RemoveValue(v);
  std::vector<ir::Value*> constants;
  for (ir::Value* v : m.constants) {
    if (std::find(constants.begin(), constants.end(), v) == constants.end()) constants.push_back(v);
  }
  for (ir::Value* v : constants) RemoveIfUnused(g, v);
  // An Add's bias that is also Gemm's C is still read by the fused node; nothing else to drop.
}

}  // namespace

Status FuseMatMulEpilogues(ir::Graph& graph, bool* changed) {
  *changed = false;
  std::vector<ir::Node*> products;
  for (ir::Node* n : graph.nodes()) {
    if (IsSingleOutputOp(n, "MatMul") || IsSingleOutputOp(n, "Gemm")) products.push_back(n);
  }
  for (ir::Node* p : products) {
    Match m;
    if (!MatchAt(p, &m)) continue;
    Rewrite(graph, m);
    *changed = true;
  }
  // A bias or constant made by a Constant node after the product must come first now.
  if (*changed) ONNXAMP_RETURN_IF_ERROR(graph.SortTopologically());
  return Status::Ok();
}

}  // namespace onnxamp::exec
