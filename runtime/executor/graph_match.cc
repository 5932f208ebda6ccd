// Pattern-matching queries the graph rewrites share (see graph_match.h).
#include "runtime/executor/graph_match.h"

#include <cmath>

#include "runtime/executor/kernel.h"
#include "runtime/ops/common/dtype_dispatch.h"

namespace onnxamp::exec {

bool IsSingleOutputOp(const ir::Node* n, const char* op) {
  return n && n->op_type() == op && ir::IsDefaultDomain(n->domain()) && n->outputs().size() == 1 && n->output(0);
}

bool BroadcastsFromAxis(const ir::Node* n) {
  const ir::Attribute* broadcast = n ? n->FindAttribute("broadcast") : nullptr;
  return broadcast && broadcast->i != 0 && n->FindAttribute("axis");
}

bool IsFloatType(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16 || t == DType::kFloat64;
}

const ir::Value* DefiningValue(const ir::Value* v) {
  while (v && v->is_outer_scope()) {
    const ir::Graph* parent = v->graph()->parent();
    if (!parent) return v;
    const ir::Value* outer = parent->ResolveValue(v->name());
    if (!outer) return v;
    v = outer;
  }
  return v;
}

const ir::Tensor* ConstantOf(const ir::Value* v) {
  if (!v || v->is_graph_input()) return nullptr;
  if (v->initializer()) return v->initializer()->has_data() ? v->initializer() : nullptr;
  const ir::Node* p = v->producer();
  if (!IsSingleOutputOp(p, "Constant")) return nullptr;
  const ir::Attribute* a = p->FindAttribute("value");
  return a && a->type() == ir::AttrType::kTensor && a->t.has_data() ? &a->t : nullptr;
}

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

bool IsConstantNear(const ir::Value* v, double want) {
  DType dtype = DType::kUndefined;
  const std::optional<double> got = ScalarOf(v, &dtype);
  if (!got) return false;
  const double eps = dtype == DType::kFloat16    ? std::ldexp(1.0, -10)
                     : dtype == DType::kBFloat16 ? std::ldexp(1.0, -7)
                                                 : std::ldexp(1.0, -23);
  return std::abs(*got - want) <= std::abs(want) * eps;
}

ir::Node* SoleConsumer(const ir::Value* v) {
  if (!v || v->is_graph_output() || v->uses().size() != 1) return nullptr;
  return v->uses()[0].node;
}

ir::Value* OtherInput(const ir::Node* n, const ir::Value* v) {
  if (!n || n->inputs().size() != 2) return nullptr;
  if (n->input(0) == v && n->input(1) != v) return n->input(1);
  if (n->input(1) == v && n->input(0) != v) return n->input(0);
  return nullptr;
}

ir::Node* CastProducer(const ir::Value* v) {
  ir::Node* p = v ? v->producer() : nullptr;
  return IsSingleOutputOp(p, "Cast") && p->inputs().size() == 1 && p->input(0) ? p : nullptr;
}

DType TypeOf(const ir::Value* v) {
  if (!v) return DType::kUndefined;
  if (v->initializer()) return v->initializer()->dtype();
  if (v->type().is_tensor() && v->type().elem_type() != DType::kUndefined) return v->type().elem_type();
  if (const ir::Node* cast = CastProducer(v)) {
    const ir::Attribute* to = cast->FindAttribute("to");
    if (to && to->type() == ir::AttrType::kInt) return static_cast<DType>(to->i);
  }
  // Ops that move elements without changing their type (the autodiff's Flatten of a gradient declares no type).
  const ir::Node* p = v->producer();
  for (const char* op : {"Flatten", "Reshape", "Transpose", "Identity", "Squeeze", "Unsqueeze"}) {
    if (IsSingleOutputOp(p, op) && !p->inputs().empty() && p->input(0)) return TypeOf(p->input(0));
  }
  return DType::kUndefined;
}

std::optional<std::vector<int64_t>> StaticDims(const ir::Value* v) {
  if (!v) return std::nullopt;
  if (v->initializer()) return v->initializer()->dims();
  const auto& shape = v->type().shape();
  if (v->type().is_tensor() && shape) {
    std::vector<int64_t> dims;
    bool known = true;
    for (const ir::Dim& d : *shape) {
      known = known && d.is_value();
      dims.push_back(d.value);
    }
    if (known) return dims;
  }
  if (const ir::Node* cast = CastProducer(v)) return StaticDims(cast->input(0));
  return std::nullopt;
}

std::optional<size_t> RankOf(const ir::Value* v) {
  if (!v) return std::nullopt;
  if (v->initializer()) return v->initializer()->dims().size();
  const auto& shape = v->type().shape();
  if (v->type().is_tensor() && shape) return shape->size();
  if (const ir::Node* cast = CastProducer(v)) return RankOf(cast->input(0));
  return std::nullopt;
}

void RemoveIfUnused(ir::Graph& g, ir::Value* v) {
  if (!v || !v->uses().empty() || v->is_graph_input() || v->is_graph_output()) return;
  for (const ir::Node* n : g.nodes()) {  // a subgraph may read it by name
    for (const ir::Value* read : SubgraphReads(*n)) {
      if (read == v) return;
    }
  }
  if (ir::Node* p = v->producer()) {
    if (!IsSingleOutputOp(p, "Constant")) return;
    g.RemoveNode(p);
    g.RemoveValue(v);
    return;
  }
  if (v->initializer()) g.RemoveInitializer(v);
  if (!v->sparse_initializer()) g.RemoveValue(v);
}

std::optional<ErfGelu> MatchErfGelu(ir::Value* x) {
  if (!x || x->is_graph_output() || x->uses().size() != 2) return std::nullopt;
  ir::Node* div = nullptr;
  ir::Node* other = nullptr;
  for (const ir::Use& u : x->uses()) {
    ir::Node* n = u.node;
    const bool scaled = (IsSingleOutputOp(n, "Div") && n->inputs().size() == 2 && n->input(0) == x &&
                         IsConstantNear(n->input(1), std::sqrt(2.0))) ||
                        (IsSingleOutputOp(n, "Mul") && IsConstantNear(OtherInput(n, x), std::sqrt(0.5)));
    if (scaled && !div) {
      div = n;
    } else {
      other = n;
    }
  }
  if (!div || !other || other == div) return std::nullopt;
  ir::Node* erf = SoleConsumer(div->output(0));
  if (!IsSingleOutputOp(erf, "Erf") || erf->inputs().size() != 1) return std::nullopt;
  ir::Node* add = SoleConsumer(erf->output(0));
  ir::Value* one = OtherInput(add, erf->output(0));
  if (!IsSingleOutputOp(add, "Add") || !IsConstantNear(one, 1.0)) return std::nullopt;
  ir::Value* a1 = add->output(0);
  std::vector<ir::Node*> muls;
  ir::Value* half = nullptr;
  ir::Node* after_add = SoleConsumer(a1);
  if (!IsSingleOutputOp(after_add, "Mul")) return std::nullopt;
  if (after_add == other) {
    // (x * (1 + erf)) * 0.5
    ir::Node* last = SoleConsumer(other->output(0));
    half = OtherInput(last, other->output(0));
    if (OtherInput(other, x) != a1 || !IsSingleOutputOp(last, "Mul") || !IsConstantNear(half, 0.5)) return std::nullopt;
    muls = {other, last};
  } else if (IsSingleOutputOp(other, "Mul") && IsConstantNear(OtherInput(other, x), 0.5)) {
    // (x * 0.5) * (1 + erf)
    half = OtherInput(other, x);
    if (OtherInput(after_add, a1) != other->output(0) || SoleConsumer(other->output(0)) != after_add)
      return std::nullopt;
    muls = {other, after_add};
  } else {
    // x * ((1 + erf) * 0.5)
    half = OtherInput(after_add, a1);
    if (!IsConstantNear(half, 0.5) || SoleConsumer(after_add->output(0)) != other || !IsSingleOutputOp(other, "Mul") ||
        OtherInput(other, x) != after_add->output(0)) {
      return std::nullopt;
    }
    muls = {after_add, other};
  }
  for (ir::Node* n : muls) {
    if (n->inputs().size() != 2) return std::nullopt;
  }
  ErfGelu gelu;
  gelu.in = x;
  gelu.nodes = {div, erf, add, muls[0], muls[1]};
  gelu.constants = {OtherInput(div, x), one, half};
  gelu.out = muls.back()->output(0);
  return gelu;
}

}  // namespace onnxamp::exec
