// Pattern-matching queries the graph rewrites share (see graph_match.h).
#include "runtime/executor/graph_match.h"

#include <algorithm>
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

std::optional<GeluPattern> MatchErfGelu(ir::Value* x) {
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
  GeluPattern gelu;
  gelu.in = x;
  gelu.nodes = {div, erf, add, muls[0], muls[1]};
  gelu.constants = {OtherInput(div, x), one, half};
  gelu.out = muls.back()->output(0);
  return gelu;
}

namespace {

// A binary node of op type `op` with one output.
bool IsBinary(const ir::Node* n, const char* op) { return IsSingleOutputOp(n, op) && n->inputs().size() == 2; }

// The exponent 3 of x^3: a float constant near 3 or an integer constant 3.
bool IsThree(const ir::Value* v) {
  if (IsConstantNear(v, 3.0)) return true;
  const ir::Tensor* t = ConstantOf(v);
  if (!t || t->rank() > 1 || t->num_elements() != 1) return false;
  if (t->dtype() == DType::kInt64) return t->values<int64_t>()[0] == 3;
  if (t->dtype() == DType::kInt32) return t->values<int32_t>()[0] == 3;
  return false;
}

}  // namespace

std::optional<GeluPattern> MatchTanhGelu(ir::Value* x) {
  if (!x || x->is_graph_output() || x->uses().empty()) return std::nullopt;
  GeluPattern gelu;
  gelu.in = x;
  gelu.tanh = true;
  // x as the pattern's nodes read it: itself, a Cast of it to float, or (x being such a Cast) the value cast: a
  // fp16/bf16 graph whose converter kept the pattern from its Pow on in FP32 computes 0.5 x in fp16/bf16 and the rest
  // from x's Cast to float.
  const int64_t to_float = static_cast<int64_t>(DType::kFloat32);
  auto is_widening = [&](const ir::Node* n) {
    return IsSingleOutputOp(n, "Cast") && n->inputs().size() == 1 && n->input(0) && n->GetInt("to", 0) == to_float;
  };
  std::vector<ir::Value*> xs = {x};
  std::vector<ir::Node*> casts;
  for (const ir::Use& u : x->uses()) {
    if (is_widening(u.node) && std::find(casts.begin(), casts.end(), u.node) == casts.end()) {
      casts.push_back(u.node);
      xs.push_back(u.node->output(0));
    }
  }
  const bool from_float = is_widening(x->producer());  // x is the float Cast of a fp16/bf16 value
  if (from_float) xs.push_back(x->producer()->input(0));
  auto is_x = [&](const ir::Value* v) { return v && std::find(xs.begin(), xs.end(), v) != xs.end(); };
  std::vector<ir::Node*> nodes = casts;
  // x^3: Pow(x, 3), (x * x) * x or x * (x * x).
  ir::Node* cube = nullptr;
  for (ir::Value* xv : xs) {
    for (const ir::Use& u : xv->uses()) {
      ir::Node* n = u.node;
      if (IsBinary(n, "Pow") && n->input(0) == xv && IsThree(n->input(1))) {
        cube = n;
        nodes.push_back(n);
        gelu.constants.push_back(n->input(1));
      } else if (IsBinary(n, "Mul") && n->input(0) == xv && n->input(1) == xv) {
        ir::Node* next = SoleConsumer(n->output(0));
        if (IsBinary(next, "Mul") && is_x(OtherInput(next, n->output(0)))) {
          cube = next;
          nodes.insert(nodes.end(), {n, next});
        }
      }
      if (cube) break;
    }
    if (cube) break;
  }
  if (!cube) return std::nullopt;
  // 0.044715 * x^3, x + that, sqrt(2 / pi) * that, tanh, 1 + tanh.
  ir::Node* cubic = SoleConsumer(cube->output(0));
  ir::Value* c = OtherInput(cubic, cube->output(0));
  if (!IsBinary(cubic, "Mul") || !IsConstantNear(c, 0.044715)) return std::nullopt;
  ir::Node* inner = SoleConsumer(cubic->output(0));
  if (!IsBinary(inner, "Add") || !is_x(OtherInput(inner, cubic->output(0)))) return std::nullopt;
  ir::Node* scale = SoleConsumer(inner->output(0));
  ir::Value* k = OtherInput(scale, inner->output(0));
  if (!IsBinary(scale, "Mul") || !IsConstantNear(k, std::sqrt(2.0 / 3.14159265358979323846))) return std::nullopt;
  ir::Node* tanh = SoleConsumer(scale->output(0));
  if (!IsSingleOutputOp(tanh, "Tanh") || tanh->inputs().size() != 1) return std::nullopt;
  ir::Node* add = SoleConsumer(tanh->output(0));
  ir::Value* one = OtherInput(add, tanh->output(0));
  if (!IsBinary(add, "Add") || !IsConstantNear(one, 1.0)) return std::nullopt;
  nodes.insert(nodes.end(), {cubic, inner, scale, tanh, add});
  // 0.5 * x * (1 + tanh): (x * s) * 0.5, x * (s * 0.5), or (x * 0.5) * s (0.5 * x perhaps computed before the Cast to
  // float).
  ir::Value* s = add->output(0);
  ir::Node* after = SoleConsumer(s);
  if (!IsBinary(after, "Mul")) return std::nullopt;
  ir::Value* partner = OtherInput(after, s);
  ir::Value* half = nullptr;
  if (is_x(partner) || IsConstantNear(partner, 0.5)) {
    ir::Node* last = SoleConsumer(after->output(0));
    ir::Value* rest = OtherInput(last, after->output(0));
    if (!IsBinary(last, "Mul") || !(is_x(partner) ? IsConstantNear(rest, 0.5) : is_x(rest))) return std::nullopt;
    half = is_x(partner) ? rest : partner;
    nodes.insert(nodes.end(), {after, last});
  } else {
    ir::Node* widen = partner ? partner->producer() : nullptr;
    ir::Value* hx = partner;
    if (is_widening(widen) && SoleConsumer(partner) == after) {
      hx = widen->input(0);
      nodes.push_back(widen);
      casts.push_back(widen);
    }
    ir::Node* h = hx ? hx->producer() : nullptr;
    if (IsBinary(h, "Mul")) half = is_x(h->input(0)) ? h->input(1) : is_x(h->input(1)) ? h->input(0) : nullptr;
    if (!half || !IsConstantNear(half, 0.5) || SoleConsumer(hx) != (hx == partner ? after : widen)) return std::nullopt;
    nodes.insert(nodes.end(), {h, after});
  }
  gelu.constants.insert(gelu.constants.end(), {c, k, one, half});
  ir::Value* out = nodes.back()->output(0);
  // A pattern that widens x (a Cast of x, or of 0.5 x, in it) and then rounds its result back to x's type with one
  // Cast is x's GELU in x's type; one whose result stays float is the GELU of x's float Cast (found from there).
  bool widened = false;
  for (const ir::Node* n : casts) widened |= std::find(nodes.begin(), nodes.end(), n) != nodes.end();
  ir::Node* back = SoleConsumer(out);
  const bool rounds_back = IsSingleOutputOp(back, "Cast") && back->inputs().size() == 1 &&
                           (back->GetInt("to", 0) == static_cast<int64_t>(DType::kFloat16) ||
                            back->GetInt("to", 0) == static_cast<int64_t>(DType::kBFloat16));
  if (from_float && rounds_back) return std::nullopt;  // x's GELU in fp16/bf16: found from x's input
  if (!from_float && widened) {
    if (!rounds_back) return std::nullopt;  // a float result: found from x's Cast
    const DType to = static_cast<DType>(back->GetInt("to", 0));
    if (TypeOf(x) != DType::kUndefined && TypeOf(x) != to) return std::nullopt;
    nodes.push_back(back);
    out = back->output(0);
  }
  // x and every intermediate value read by the pattern alone, the Casts of x included.
  auto inside = [&](const ir::Node* n) { return std::find(nodes.begin(), nodes.end(), n) != nodes.end(); };
  for (const ir::Use& u : x->uses()) {
    if (!inside(u.node)) return std::nullopt;
  }
  for (const ir::Node* n : nodes) {
    if (n->output(0) == out) continue;
    if (!inside(n) || n->output(0)->is_graph_output()) return std::nullopt;
    for (const ir::Use& u : n->output(0)->uses()) {
      if (!inside(u.node)) return std::nullopt;
    }
  }
  gelu.nodes = std::move(nodes);
  gelu.out = out;
  return gelu;
}

std::optional<GeluPattern> MatchGelu(ir::Value* x) {
  if (std::optional<GeluPattern> erf = MatchErfGelu(x)) return erf;
  return MatchTanhGelu(x);
}

}  // namespace onnxamp::exec
