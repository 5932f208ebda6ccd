// FuseBackwardGemms and FuseActivationGradients (graph_optimizer.h): the GEMMs of a training graph's backward pass
// into FusedMatMul nodes with an FP32 output and a bias gradient, or with the gradient of the activation that follows
// them applied (the forward layer's ReLU mask, the tanh GELU's derivative).
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "runtime/executor/graph_match.h"
#include "runtime/executor/graph_optimizer.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/matmul/fused_matmul.h"

namespace onnxamp::exec {
namespace {

using ops::kFusedMatMulDomain;
using ops::kFusedMatMulOp;

bool IsHalfType(DType t) { return t == DType::kFloat16 || t == DType::kBFloat16; }

// The only node reading `v`, when it is a Cast to float (and v not a graph output).
ir::Node* SoleCastToFloat(const ir::Value* v) {
  ir::Node* cast = SoleConsumer(v);
  if (!IsSingleOutputOp(cast, "Cast") || cast->inputs().size() != 1) return nullptr;
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
  if (!IsSingleOutputOp(p, "Shape") || p->inputs().size() != 1 || p->FindAttribute("start") ||
      p->FindAttribute("end")) {
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

// The input of a Flatten over all but the last dim (axis -1) that makes `v`, or null: summing that input to its last
// dim ([N]) sums the Flatten's [rows, N] over its rows.
ir::Value* FlattenedFrom(const ir::Value* v) {
  const ir::Node* p = v->producer();
  if (!IsSingleOutputOp(p, "Flatten") || p->inputs().size() != 1 || !p->input(0)) return nullptr;
  return p->GetInt("axis", 1) == -1 ? p->input(0) : nullptr;
}

// A SumToShape that sums `operand` (2-D [rows, cols], rows the product's K) over its rows to [cols] in `out_type`,
// or sums the batched value that a Flatten(axis -1) made `operand` of (a Linear layer on [batch, seq, features], whose
// weight gradient is one GEMM over the flattened rows) to its last dim: on success fills m's bias-gradient fields.
// The target must be a fixed 1-D shape [N]; the operand's cols, where the graph does not declare them, are N
// whenever the original graph runs (SumToShape fails unless they are N or the target 1, so N = 1 needs declared cols
// of 1; through a Flatten, whose cols are the summed value's last dim, always).
bool MatchBiasGrad(ir::Value* operand, const char* which, DType in_type, DType out_type, BackwardMatch* m) {
  std::optional<int64_t> cols;
  if (const auto& shape = operand->type().shape();
      operand->type().is_tensor() && shape && shape->size() == 2 && (*shape)[1].is_value()) {
    cols = (*shape)[1].value;
  } else if (operand->initializer() && operand->initializer()->rank() == 2) {
    cols = operand->initializer()->dims()[1];
  }
  std::vector<ir::Use> uses = operand->uses();
  if (ir::Value* batched = FlattenedFrom(operand)) {
    uses.insert(uses.end(), batched->uses().begin(), batched->uses().end());
  }
  for (const ir::Use& u : uses) {
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

bool MatchBackwardAt(ir::Node* product, const BackwardGemmFusion& what, BackwardMatch* m) {
  const bool is_matmul = IsSingleOutputOp(product, "MatMul") && product->inputs().size() == 2;
  const bool is_gemm = IsSingleOutputOp(product, "Gemm") && product->inputs().size() == 2;
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
  const bool to_float =
      std::find(what.float_output_for.begin(), what.float_output_for.end(), t) != what.float_output_for.end();
  if (IsHalfType(t) && to_float) {
    if (ir::Node* cast = SoleCastToFloat(product->output(0))) {
      m->cast = cast;
      m->out = cast->output(0);
      out_type = DType::kFloat32;
    }
  }
  // The bias gradient: 2-D operands (Gemm's always are), alpha 1.
  const bool two_d = is_gemm || (RankOf(a) == size_t{2} && RankOf(b) == size_t{2});
  if (what.bias_grad && two_d && (!is_gemm || product->GetFloat("alpha", 1.0f) == 1.0f)) {
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
    if (ir::Node* p = shape->producer(); IsSingleOutputOp(p, "Shape")) {
      g.RemoveNode(p);
      g.RemoveValue(shape);
    } else {
      RemoveIfUnused(g, shape);
    }
  }
}

// The product a ReluGrad's gradient input comes from, when it can take the mask: a MatMul, a Gemm without C and
// transA, or a FusedMatMul with only A and B and no attributes but alpha and transB; B 2-D, of type t, read by the
// ReluGrad alone.
bool MaskableProduct(const ir::Node* p, DType t) {
  if (!p || p->outputs().size() != 1 || p->inputs().size() != 2 || !p->input(0) || !p->input(1)) return false;
  if (p->op_type() == "Gemm" && p->domain().empty()) {
    if (p->GetInt("transA", 0) != 0) return false;
    const int64_t tb = p->GetInt("transB", 0);
    if (tb != 0 && tb != 1) return false;
  } else if (p->op_type() == kFusedMatMulOp && p->domain() == kFusedMatMulDomain) {
    for (const ir::Attribute& a : p->attributes()) {
      if (a.name() != "alpha" && a.name() != "transB" && !(a.name() == "transA" && p->GetInt("transA", 0) == 0)) {
        return false;
      }
    }
  } else if (!(p->op_type() == "MatMul" && p->domain().empty())) {
    return false;
  }
  const DType ta = TypeOf(p->input(0)), tb = TypeOf(p->input(1));
  return (ta == t || ta == DType::kUndefined) && (tb == t || tb == DType::kUndefined) &&
         RankOf(p->input(1)) == size_t{2};
}

}  // namespace

namespace {

// The ReLU mask of Y when Y is the output of a forward FusedMatMul with activation Relu and a 2-D B: that node's
// output 1, which it is made to write on first use. Null otherwise.
ir::Value* ForwardReluMask(ir::Graph& graph, ir::Value* y) {
  ir::Node* forward = y->producer();
  if (!forward || forward->op_type() != kFusedMatMulOp || forward->domain() != kFusedMatMulDomain ||
      forward->GetString("activation", "") != "Relu" || y->producer_index() != 0 ||
      forward->FindAttribute("bias_grad") || forward->FindAttribute("output_type") || !forward->input(1) ||
      RankOf(forward->input(1)) != size_t{2}) {
    return nullptr;
  }
  if (ir::Value* mask = forward->output(1)) return mask;
  if (forward->outputs().size() > 1) return nullptr;  // an output 1 that was omitted: leave it
  ir::Value* mask = graph.CreateValue(graph.UniqueName(y->name() + "_relu_mask"));
  if (const auto& shape = y->type().shape(); y->type().is_tensor() && shape && !shape->empty()) {
    ir::Dim rows = ir::Dim::Value(1);
    for (size_t d = 0; d + 1 < shape->size(); ++d) {
      rows = rows.is_value() && (*shape)[d].is_value() ? ir::Dim::Value(rows.value * (*shape)[d].value) : ir::Dim();
    }
    const ir::Dim& n = shape->back();
    mask->set_type(ir::ValueType::Tensor(
        DType::kUint8, ir::Shape{rows, n.is_value() ? ir::Dim::Value(ops::ReluMaskRowBytes(n.value)) : ir::Dim()}));
  } else {
    mask->set_type(ir::ValueType::Tensor(DType::kUint8));
  }
  forward->SetOutput(1, mask);
  forward->SetAttribute(ir::Attribute::Int("relu_mask", 1));
  return mask;
}

// `product` (read by `grad` alone) and `grad` become one FusedMatMul of the product's operands with activation_grad
// `kind` reading `aux` as input 3, writing the gradient node's output.
void FuseIntoProduct(ir::Graph& graph, ir::Node* product, ir::Node* grad, const char* kind, ir::Value* aux) {
  std::vector<ir::Attribute> attrs;
  for (const char* name : {"alpha", "transB"}) {
    if (const ir::Attribute* a = product->FindAttribute(name)) attrs.push_back(*a);
  }
  attrs.push_back(ir::Attribute::String("activation_grad", kind));
  const std::vector<ir::Value*> inputs = {product->input(0), product->input(1), nullptr, aux};
  ir::Value* out = grad->output(0);
  ir::Value* unmasked = product->output(0);
  const std::string name = product->name();
  graph.RemoveNode(product);
  ir::Node* fused = graph.InsertNode(grad, kFusedMatMulOp, inputs, {}, name.empty() ? "" : name + "_activation_grad",
                                     kFusedMatMulDomain);
  graph.RemoveNode(grad);
  fused->SetOutput(0, out);
  for (ir::Attribute& a : attrs) fused->SetAttribute(std::move(a));
  graph.RemoveValue(unmasked);
}

}  // namespace

Status FuseActivationGradients(ir::Graph& graph, bool* changed) {
  *changed = false;
  std::vector<ir::Node*> grads;
  for (ir::Node* n : graph.nodes()) {
    const bool relu = n->op_type() == ops::kReluGradOp;
    const bool gelu = n->op_type() == ops::kGeluGradOp && n->GetString("approximate", "none") == "tanh";
    if ((relu || gelu) && n->domain() == kInternalDomain && n->inputs().size() == 2 && n->outputs().size() == 1 &&
        n->input(0) && n->input(1) && n->output(0)) {
      grads.push_back(n);
    }
  }
  for (ir::Node* grad : grads) {
    ir::Node* product = grad->input(0)->producer();
    if (SoleConsumer(grad->input(0)) != grad) continue;
    if (grad->op_type() == ops::kReluGradOp) {
      // ReluGrad(G, Y): the mask of Y's forward node. Y's type: declared, or the forward's operands'. The product is
      // checked first, so that no forward node gets a mask that nothing reads.
      ir::Value* y = grad->input(1);
      const ir::Node* forward = y->producer();
      DType t = TypeOf(y);
      for (size_t i = 0; i < 2 && t == DType::kUndefined && forward; ++i) t = TypeOf(forward->input(i));
      if (!IsFloatType(t) || !MaskableProduct(product, t)) continue;
      ir::Value* mask = ForwardReluMask(graph, y);
      if (!mask) continue;
      FuseIntoProduct(graph, product, grad, "Relu", mask);
    } else {
      // GeluGrad(G, X, tanh): X itself, of G's type.
      ir::Value* x = grad->input(1);
      DType t = TypeOf(x);
      for (size_t i = 0; i < 2 && t == DType::kUndefined && product; ++i) t = TypeOf(product->input(i));
      if (!IsFloatType(t) || !MaskableProduct(product, t)) continue;
      FuseIntoProduct(graph, product, grad, "GeluTanh", x);
    }
    *changed = true;
  }
  return Status::Ok();
}

Status FuseBackwardGemms(ir::Graph& graph, bool* changed, const BackwardGemmFusion& what) {
  *changed = false;
  std::vector<ir::Node*> products;
  for (ir::Node* n : graph.nodes()) {
    if (IsSingleOutputOp(n, "MatMul") || IsSingleOutputOp(n, "Gemm")) products.push_back(n);
  }
  for (ir::Node* p : products) {
    BackwardMatch m;
    if (!MatchBackwardAt(p, what, &m)) continue;
    RewriteBackward(graph, m);
    *changed = true;
  }
  // A bias gradient the fused node now writes may be read by nodes placed before the GEMM.
  if (*changed) ONNXAMP_RETURN_IF_ERROR(graph.SortTopologically());
  return Status::Ok();
}

}  // namespace onnxamp::exec
