// CUDA graph rewrites (see graph_rewrite.h): MatMul / Gemm [+ Add(bias)] [+ Relu | Gelu | the erf-GELU pattern]
// into one FusedMatMul node whose kernel runs the bias and the activation in cuBLASLt's epilogue.
#include "runtime/cuda/graph_rewrite.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/ir/verify.h"
#include "runtime/ops/common/dtype_dispatch.h"
#include "runtime/ops/gradient_ops.h"

namespace onnxamp::cuda {
namespace {

bool IsDefaultOp(const ir::Node* n, const char* op) {
  return n && n->op_type() == op && ir::IsDefaultDomain(n->domain()) && n->outputs().size() == 1 && n->output(0);
}

bool IsFloatType(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16 || t == DType::kFloat64;
}

// The data of a value the model fixes: an initializer that no graph input overrides, or a Constant node's `value`.
const ir::Tensor* ConstantOf(const ir::Value* v) {
  if (!v || v->is_graph_input()) return nullptr;
  if (v->initializer()) return v->initializer()->has_data() ? v->initializer() : nullptr;
  const ir::Node* p = v->producer();
  if (!IsDefaultOp(p, "Constant")) return nullptr;
  const ir::Attribute* a = p->FindAttribute("value");
  return a && a->type() == ir::AttrType::kTensor && a->t.has_data() ? &a->t : nullptr;
}

// The one value of a float constant of rank 0 or 1 (so that it broadcasts without changing any shape).
std::optional<double> ScalarOf(const ir::Value* v, DType* dtype) {
  const ir::Tensor* t = ConstantOf(v);
  if (!t || !IsFloatType(t->dtype()) || t->rank() > 1 || t->num_elements() != 1) return std::nullopt;
  double out = 0;
  const Status st = ops::DispatchFloat(t->dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    out = static_cast<double>(ops::Load<T>(t->values<T>()[0]));
    return Status::Ok();
  });
  if (!st.ok()) return std::nullopt;
  *dtype = t->dtype();
  return out;
}

// Whether constant `v` is `want` up to the rounding of its element type (one unit in the last place; double
// constants may carry float precision).
bool IsConstantNear(const ir::Value* v, double want) {
  DType dtype = DType::kUndefined;
  const std::optional<double> got = ScalarOf(v, &dtype);
  if (!got) return false;
  const double eps = dtype == DType::kFloat16    ? std::ldexp(1.0, -10)
                     : dtype == DType::kBFloat16 ? std::ldexp(1.0, -7)
                                                 : std::ldexp(1.0, -23);
  return std::abs(*got - want) <= std::abs(want) * eps;
}

// The only node reading `v` (through exactly one input), or null when v is read by several or none, or is a graph
// output.
ir::Node* SoleConsumer(const ir::Value* v) {
  if (!v || v->is_graph_output() || v->uses().size() != 1) return nullptr;
  return v->uses()[0].node;
}

// For a two-input node reading `v`: its other input (null when it does not read v exactly once).
ir::Value* OtherInput(const ir::Node* n, const ir::Value* v) {
  if (!n || n->inputs().size() != 2) return nullptr;
  if (n->input(0) == v && n->input(1) != v) return n->input(1);
  if (n->input(1) == v && n->input(0) != v) return n->input(0);
  return nullptr;
}

// Static dims of a value: its initializer's, else its type's when every dim is known.
std::optional<std::vector<int64_t>> StaticDims(const ir::Value* v) {
  if (!v) return std::nullopt;
  if (v->initializer()) return v->initializer()->dims();
  const auto& shape = v->type().shape();
  if (!v->type().is_tensor() || !shape) return std::nullopt;
  std::vector<int64_t> dims;
  for (const ir::Dim& d : *shape) {
    if (!d.is_value()) return std::nullopt;
    dims.push_back(d.value);
  }
  return dims;
}

// The rank of a value when known.
std::optional<size_t> RankOf(const ir::Value* v) {
  if (!v) return std::nullopt;
  if (v->initializer()) return v->initializer()->dims().size();
  const auto& shape = v->type().shape();
  if (!v->type().is_tensor() || !shape) return std::nullopt;
  return shape->size();
}

// What one fusion replaces.
struct Match {
  ir::Node* product = nullptr;  // the MatMul or Gemm
  ir::Value* bias = nullptr;    // FusedMatMul's third input (a bias Add's operand, or Gemm's C)
  std::string activation;
  std::vector<ir::Node*> absorbed;    // nodes after the product, in graph order
  std::vector<ir::Value*> constants;  // constant operands of absorbed nodes (removed when nothing reads them)
  ir::Value* out = nullptr;           // the last absorbed node's output: the fused node's output
};

// The erf pattern 0.5 * x * (1 + erf(x / sqrt 2)) reading x, in the three ways its products associate. Appends its
// nodes to m and returns the value it computes, or null.
ir::Value* MatchErfGelu(ir::Value* x, Match* m) {
  if (!x || x->is_graph_output() || x->uses().size() != 2) return nullptr;
  ir::Node* div = nullptr;
  ir::Node* other = nullptr;
  for (const ir::Use& u : x->uses()) {
    ir::Node* n = u.node;
    const bool scaled = (IsDefaultOp(n, "Div") && n->inputs().size() == 2 && n->input(0) == x &&
                         IsConstantNear(n->input(1), std::sqrt(2.0))) ||
                        (IsDefaultOp(n, "Mul") && IsConstantNear(OtherInput(n, x), std::sqrt(0.5)));
    if (scaled && !div) {
      div = n;
    } else {
      other = n;
    }
  }
  if (!div || !other || other == div) return nullptr;
  ir::Node* erf = SoleConsumer(div->output(0));
  if (!IsDefaultOp(erf, "Erf") || erf->inputs().size() != 1) return nullptr;
  ir::Node* add = SoleConsumer(erf->output(0));
  ir::Value* one = OtherInput(add, erf->output(0));
  if (!IsDefaultOp(add, "Add") || !IsConstantNear(one, 1.0)) return nullptr;
  ir::Value* a1 = add->output(0);
  std::vector<ir::Node*> muls;
  ir::Value* half = nullptr;
  ir::Node* after_add = SoleConsumer(a1);
  if (!IsDefaultOp(after_add, "Mul")) return nullptr;
  if (after_add == other) {
    // (x * (1 + erf)) * 0.5
    ir::Node* last = SoleConsumer(other->output(0));
    half = OtherInput(last, other->output(0));
    if (OtherInput(other, x) != a1 || !IsDefaultOp(last, "Mul") || !IsConstantNear(half, 0.5)) return nullptr;
    muls = {other, last};
  } else if (IsDefaultOp(other, "Mul") && IsConstantNear(OtherInput(other, x), 0.5)) {
    // (x * 0.5) * (1 + erf)
    half = OtherInput(other, x);
    if (OtherInput(after_add, a1) != other->output(0) || SoleConsumer(other->output(0)) != after_add) return nullptr;
    muls = {other, after_add};
  } else {
    // x * ((1 + erf) * 0.5)
    half = OtherInput(after_add, a1);
    if (!IsConstantNear(half, 0.5) || SoleConsumer(after_add->output(0)) != other || !IsDefaultOp(other, "Mul") ||
        OtherInput(other, x) != after_add->output(0)) {
      return nullptr;
    }
    muls = {after_add, other};
  }
  for (ir::Node* n : muls) {
    if (n->inputs().size() != 2) return nullptr;
  }
  m->absorbed.insert(m->absorbed.end(), {div, erf, add});
  m->absorbed.insert(m->absorbed.end(), muls.begin(), muls.end());
  m->constants.insert(m->constants.end(), {div->input(1) == x ? div->input(0) : div->input(1), one, half});
  return muls.back()->output(0);
}

// Matches the fusion starting at `product`, or returns false.
bool MatchAt(ir::Node* product, Match* m) {
  const bool is_matmul = IsDefaultOp(product, "MatMul") && product->inputs().size() == 2;
  const bool is_gemm = IsDefaultOp(product, "Gemm") && product->inputs().size() >= 2 && product->inputs().size() <= 3;
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
  if (is_matmul && !(RankOf(b).value_or(0) >= 2)) return false;  // a 1-D B drops N from the result
  DType dtype = DType::kUndefined;
  for (const ir::Value* v : product->inputs()) {
    if (!v) continue;
    if (v->initializer())
      dtype = v->initializer()->dtype();
    else if (v->type().is_tensor() && v->type().elem_type() != DType::kUndefined)
      dtype = v->type().elem_type();
    if (dtype != DType::kUndefined) break;
  }
  if (!IsFloatType(dtype)) return false;

  auto is_row_vector = [&](const ir::Value* v, bool allow_rank2) {
    const ir::Tensor* t = ConstantOf(v);
    if (!t || t->dtype() != dtype || !n || t->rank() < 1 || t->rank() > 2 || t->dims().back() != *n) return false;
    if (t->rank() == 2 && (t->dims()[0] != 1 || !allow_rank2)) return false;
    return true;
  };
  // A [1, N] bias keeps the result's shape only when the product has rank >= 2, i.e. A does.
  const bool a_rank2 = is_gemm || RankOf(a).value_or(0) >= 2;
  ir::Value* x = product->output(0);
  if (is_gemm && product->inputs().size() == 3 && product->input(2)) {
    if (product->GetFloat("beta", 1.0f) != 1.0f || !is_row_vector(product->input(2), true)) return false;
    m->bias = product->input(2);
  } else {
    ir::Node* add = SoleConsumer(x);
    ir::Value* bias = OtherInput(add, x);
    if (IsDefaultOp(add, "Add") && is_row_vector(bias, a_rank2)) {
      m->bias = bias;
      m->absorbed.push_back(add);
      x = add->output(0);
    }
  }
  ir::Node* next = SoleConsumer(x);
  if (IsDefaultOp(next, "Relu") && next->inputs().size() == 1) {
    m->activation = "Relu";
    m->absorbed.push_back(next);
    x = next->output(0);
  } else if (IsDefaultOp(next, "Gelu") && next->inputs().size() == 1) {
    const std::string approximate = next->GetString("approximate", "none");
    if (approximate == "none" || approximate == "tanh") {
      m->activation = approximate == "none" ? "Gelu" : "GeluTanh";
      m->absorbed.push_back(next);
      x = next->output(0);
    }
  } else if (ir::Value* gelu = MatchErfGelu(x, m)) {
    m->activation = "Gelu";
    x = gelu;
  }
  // Gemm's C is added by the Gemm kernel itself; fusing pays only with something absorbed.
  if (m->absorbed.empty()) return false;
  m->out = x;
  return true;
}

// Removes a value nothing reads any more: a Constant node's output (and the node) or an initializer.
void RemoveIfUnused(ir::Graph& g, ir::Value* v) {
  if (!v || !v->uses().empty() || v->is_graph_input() || v->is_graph_output()) return;
  if (ir::Node* p = v->producer()) {
    if (!IsDefaultOp(p, "Constant")) return;
    g.RemoveNode(p);
    g.RemoveValue(v);
    return;
  }
  if (v->initializer()) g.RemoveInitializer(v);
  if (!v->sparse_initializer()) g.RemoveValue(v);
}

void Rewrite(ir::Graph& g, const Match& m) {
  ir::Node* product = m.product;
  std::vector<ir::Value*> inputs = {product->input(0), product->input(1)};
  if (m.bias) inputs.push_back(m.bias);
  std::vector<ir::Attribute> attrs;
  if (product->op_type() == "Gemm") {
    for (const char* name : {"alpha", "transA", "transB"}) {
      if (const ir::Attribute* a = product->FindAttribute(name)) attrs.push_back(*a);
    }
  }
  if (!m.activation.empty()) attrs.push_back(ir::Attribute::String("activation", m.activation));
  const std::string name = product->name();
  // Intermediate values: every output of the product and the absorbed nodes but the last.
  std::vector<ir::Value*> intermediates = {product->output(0)};
  for (ir::Node* n : m.absorbed) {
    if (n->output(0) != m.out) intermediates.push_back(n->output(0));
  }
  for (size_t i = m.absorbed.size(); i-- > 0;) g.RemoveNode(m.absorbed[i]);
  ir::Node* fused =
      g.InsertNode(product, kFusedMatMulOp, inputs, {m.out}, name.empty() ? "" : name + "_fused", kFusedMatMulDomain);
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

// ---- Backward GEMMs (FuseBackwardGemms) --------------------------------------------------------------------------

// The element type a value declares, or of its initializer.
DType TypeOf(const ir::Value* v) {
  if (!v) return DType::kUndefined;
  if (v->initializer()) return v->initializer()->dtype();
  return v->type().is_tensor() ? v->type().elem_type() : DType::kUndefined;
}

bool IsHalfType(DType t) { return t == DType::kFloat16 || t == DType::kBFloat16; }

// The only node reading `v`, when it is a Cast to float (and v not a graph output).
ir::Node* SoleCastToFloat(const ir::Value* v) {
  ir::Node* cast = SoleConsumer(v);
  if (!IsDefaultOp(cast, "Cast") || cast->inputs().size() != 1) return nullptr;
  return cast->GetInt("to", 0) == static_cast<int64_t>(DType::kFloat32) ? cast : nullptr;
}

// The values of a shape a SumToShape reduces to, when the graph fixes them: an int64 constant, or Shape (whole, no
// start/end) of a value whose dims are all known.
std::optional<std::vector<int64_t>> StaticShapeInput(const ir::Value* shape) {
  if (const ir::Tensor* t = ConstantOf(shape)) {
    if (t->dtype() != DType::kInt64 || t->rank() != 1) return std::nullopt;
    const auto vals = t->values<int64_t>();
    return std::vector<int64_t>(vals.begin(), vals.end());
  }
  const ir::Node* p = shape ? shape->producer() : nullptr;
  if (!IsDefaultOp(p, "Shape") || p->inputs().size() != 1 || p->FindAttribute("start") || p->FindAttribute("end")) {
    return std::nullopt;
  }
  return StaticDims(p->input(0));
}

// What one backward-GEMM fusion replaces.
struct BackwardMatch {
  ir::Node* product = nullptr;   // the MatMul or Gemm
  ir::Node* cast = nullptr;      // the Cast to float of its result, or null
  ir::Value* out = nullptr;      // the fused node's output
  std::string bias_grad;         // "", "A" or "B"
  ir::Node* sum = nullptr;       // the SumToShape
  ir::Node* sum_cast = nullptr;  // its Cast to float, or null
  ir::Value* grad = nullptr;     // the fused node's second output
};

// A SumToShape that sums `operand` (2-D [rows, cols], rows the product's K) over its rows to [cols] in `out_type`:
// on success fills m's bias-gradient fields. The target must be a fixed 1-D shape [N]; the operand's cols, where the
// graph does not declare them, are N whenever the original graph runs (SumToShape fails unless they are N or the
// target 1, so N = 1 needs declared cols of 1).
bool MatchBiasGrad(ir::Value* operand, const char* which, DType in_type, DType out_type, BackwardMatch* m) {
  std::optional<int64_t> cols;
  if (const auto& shape = operand->type().shape();
      operand->type().is_tensor() && shape && shape->size() == 2 && (*shape)[1].is_value()) {
    cols = (*shape)[1].value;
  } else if (operand->initializer() && operand->initializer()->rank() == 2) {
    cols = operand->initializer()->dims()[1];
  }
  for (const ir::Use& u : operand->uses()) {
    ir::Node* s = u.node;
    if (!s || s->op_type() != ops::kSumToShapeOp || s->domain() != exec::kInternalDomain || u.index != 0 ||
        s->inputs().size() != 2 || s->outputs().size() != 1 || !s->output(0)) {
      continue;
    }
    const std::optional<std::vector<int64_t>> target = StaticShapeInput(s->input(1));
    if (!target || target->size() != 1) continue;
    const int64_t n = (*target)[0];
    if (cols ? *cols != n : n <= 1) continue;
    const DType sum_type = TypeOf(s->output(0));
    if (sum_type != in_type && sum_type != DType::kUndefined) continue;
    ir::Node* cast = nullptr;
    if (out_type != in_type) {
      cast = SoleCastToFloat(s->output(0));
      if (!cast) continue;
    }
    m->bias_grad = which;
    m->sum = s;
    m->sum_cast = cast;
    m->grad = cast ? cast->output(0) : s->output(0);
    return true;
  }
  return false;
}

bool MatchBackwardAt(ir::Node* product, BackwardMatch* m) {
  const bool is_matmul = IsDefaultOp(product, "MatMul") && product->inputs().size() == 2;
  const bool is_gemm = IsDefaultOp(product, "Gemm") && product->inputs().size() == 2;
  if (!is_matmul && !is_gemm) return false;
  ir::Value* a = product->input(0);
  ir::Value* b = product->input(1);
  if (!a || !b) return false;
  const DType t = TypeOf(a) != DType::kUndefined ? TypeOf(a) : TypeOf(b);
  if (!IsFloatType(t) || (TypeOf(b) != DType::kUndefined && TypeOf(b) != t)) return false;
  bool ta = false, tb = false;
  if (is_gemm) {
    const int64_t ia = product->GetInt("transA", 0), ib = product->GetInt("transB", 0);
    if ((ia != 0 && ia != 1) || (ib != 0 && ib != 1)) return false;
    ta = ia == 1;
    tb = ib == 1;
  }
  m->product = product;
  m->out = product->output(0);
  DType out_type = t;
  if (IsHalfType(t)) {
    if (ir::Node* cast = SoleCastToFloat(product->output(0))) {
      m->cast = cast;
      m->out = cast->output(0);
      out_type = DType::kFloat32;
    }
  }
  // The bias gradient: 2-D operands (Gemm's always are), alpha 1.
  const bool two_d = is_gemm || (RankOf(a) == size_t{2} && RankOf(b) == size_t{2});
  if (two_d && (!is_gemm || product->GetFloat("alpha", 1.0f) == 1.0f)) {
    if (!(ta && MatchBiasGrad(a, "A", t, out_type, m)) && !tb) MatchBiasGrad(b, "B", t, out_type, m);
  }
  return m->cast || m->sum;
}

void RewriteBackward(ir::Graph& g, const BackwardMatch& m) {
  ir::Node* product = m.product;
  const std::vector<ir::Value*> inputs = {product->input(0), product->input(1)};
  std::vector<ir::Attribute> attrs;
  if (product->op_type() == "Gemm") {
    for (const char* name : {"alpha", "transA", "transB"}) {
      if (const ir::Attribute* a = product->FindAttribute(name)) attrs.push_back(*a);
    }
  }
  if (m.cast) attrs.push_back(ir::Attribute::Int("output_type", static_cast<int64_t>(DType::kFloat32)));
  if (m.sum) attrs.push_back(ir::Attribute::String("bias_grad", m.bias_grad));
  const std::string name = product->name();
  ir::Value* product_out = product->output(0);
  // The absorbed nodes go first, so that their outputs can become the fused node's.
  ir::Value* shape = m.sum ? m.sum->input(1) : nullptr;
  ir::Value* sum_out = m.sum ? m.sum->output(0) : nullptr;
  if (m.sum_cast) g.RemoveNode(m.sum_cast);
  if (m.sum) g.RemoveNode(m.sum);
  if (m.cast) g.RemoveNode(m.cast);
  std::vector<ir::Value*> outputs = {m.out};
  if (m.sum) outputs.push_back(m.grad);
  // The fused node takes the product's place (and, without a Cast, its output): the product goes first.
  ir::Node* next = nullptr;
  bool found = false;
  for (ir::Node* n : g.nodes()) {
    if (found) {
      next = n;
      break;
    }
    found = n == product;
  }
  g.RemoveNode(product);
  ir::Node* fused =
      g.InsertNode(next, kFusedMatMulOp, inputs, outputs, name.empty() ? "" : name + "_fused", kFusedMatMulDomain);
  for (ir::Attribute& a : attrs) fused->SetAttribute(std::move(a));
  if (m.cast) g.RemoveValue(product_out);
  if (m.sum_cast) g.RemoveValue(sum_out);
  // The SumToShape's shape: a Shape node (or constant) nothing else reads.
  if (shape && shape->uses().empty() && !shape->is_graph_output() && !shape->is_graph_input()) {
    if (ir::Node* p = shape->producer(); IsDefaultOp(p, "Shape")) {
      g.RemoveNode(p);
      g.RemoveValue(shape);
    } else {
      RemoveIfUnused(g, shape);
    }
  }
}

}  // namespace

Status FuseBackwardGemms(ir::Graph& graph, bool* changed) {
  *changed = false;
  std::vector<ir::Node*> products;
  for (ir::Node* n : graph.nodes()) {
    if (IsDefaultOp(n, "MatMul") || IsDefaultOp(n, "Gemm")) products.push_back(n);
  }
  for (ir::Node* p : products) {
    BackwardMatch m;
    if (!MatchBackwardAt(p, &m)) continue;
    RewriteBackward(graph, m);
    *changed = true;
  }
  // A bias gradient the fused node now writes may be read by nodes placed before the GEMM.
  if (*changed) ONNXAMP_RETURN_IF_ERROR(graph.SortTopologically());
  return Status::Ok();
}

Status FuseMatMulEpilogues(ir::Graph& graph, bool* changed) {
  *changed = false;
  std::vector<ir::Node*> products;
  for (ir::Node* n : graph.nodes()) {
    if (IsDefaultOp(n, "MatMul") || IsDefaultOp(n, "Gemm")) products.push_back(n);
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

passes::PassPipeline CudaPasses(const exec::SessionOptions& options) {
  passes::PassPipeline pipeline;
  if (options.graph_optimization == exec::GraphOptimization::kNone) return pipeline;
  const bool training = options.mode == exec::SessionMode::kTraining;
  // A training graph's backward nodes read the products and activations separately, and its parameters are bound
  // on every run: no forward epilogue fusion and no layout change there, but the backward GEMMs write FP32 weight
  // gradients and bias gradients themselves.
  if (training) {
    pipeline.Add("fuse_backward_gemms", [](ir::Model& m, const passes::PassContext&, bool* changed) {
      ONNXAMP_RETURN_IF_ERROR(FuseBackwardGemms(*m.graph, changed));
      if (*changed && m.OpsetVersion(kFusedMatMulDomain) == 0) m.SetOpsetVersion(kFusedMatMulDomain, 1);
      return Status::Ok();
    });
    return pipeline;
  }
  pipeline.Add("fuse_matmul_epilogues", [](ir::Model& m, const passes::PassContext&, bool* changed) {
    ONNXAMP_RETURN_IF_ERROR(FuseMatMulEpilogues(*m.graph, changed));
    if (*changed && m.OpsetVersion(kFusedMatMulDomain) == 0) m.SetOpsetVersion(kFusedMatMulDomain, 1);
    return Status::Ok();
  });
  // fp16/bf16 convolutions run on tensor cores, which want channels-last activations: chains of them switch layout
  // once at each end. fp32 convolutions (FMA unless TF32 is allowed) keep the plain layout.
  if (options.graph_optimization == exec::GraphOptimization::kAll && options.channels_last) {
    pipeline.Add("use_channels_last_layout", [](ir::Model& m, const passes::PassContext&, bool* changed) {
      ONNXAMP_RETURN_IF_ERROR(exec::UseChannelsLastLayout(*m.graph, {DType::kFloat16, DType::kBFloat16}, changed));
      if (*changed && m.OpsetVersion(exec::kInternalDomain) == 0) m.SetOpsetVersion(exec::kInternalDomain, 1);
      return Status::Ok();
    });
  }
  return pipeline;
}

Status OptimizeGraphForCuda(ir::Model& model, const exec::SessionOptions& options) {
  if (options.graph_optimization == exec::GraphOptimization::kNone || !model.graph) return Status::Ok();
  if (!ir::Verify(model).ok()) return Status::Ok();  // Session::Create reports the problem
  // Before opset 7, Gemm broadcasts C only with its `broadcast` attribute; such models are left as they are.
  if (model.OpsetVersion("") < 7) return Status::Ok();
  passes::PassContext ctx;
  ctx.device = exec::Device::kCuda;
  ctx.training = options.mode == exec::SessionMode::kTraining;
  return CudaPasses(options).Run(model, ctx);
}

}  // namespace onnxamp::cuda
