// MakeBatchDimSymbolic: which dim of each value is the batch, by a forward walk with one rule per op; declared shapes
// and Reshape constants rewritten from that.
#include "trainer/graph/batch_dim.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "converter/model_clone.h"
#include "runtime/executor/graph_match.h"
#include "runtime/executor/graph_optimizer.h"
#include "runtime/ops/gradient_ops.h"
#include "trainer/autodiff/shapes.h"

namespace onnxamp::trainer {
namespace {

using ir::Node;
using ir::Value;
using Ints = std::vector<int64_t>;

constexpr int kIndependent = -1;  // the value does not depend on the batch
constexpr int kTainted = -2;      // it depends on the batch, but no single dim of it is the batch

// How a value relates to the batch: `axis` >= 0 is the dim that is the batch (the other dims do not depend on it).
struct State {
  int axis = kIndependent;
  int rank = -1;  // -1: unknown
};

// An element of an integer vector computed from shapes (Shape, Gather, Concat...): the batch size itself, a constant,
// a value that depends on the batch (a product with it, ...), or one that does not.
struct Elem {
  enum Kind { kConst, kBatch, kDerived, kOther } kind = kOther;
  int64_t value = 0;
};

std::string IntsToString(const Ints& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

const ir::Tensor* ConstTensor(const Value* v) {
  if (!v) return nullptr;
  if (v->initializer()) return v->initializer();
  const Node* p = v->producer();
  if (p && p->op_type() == "Constant" && p->domain().empty()) {
    const ir::Attribute* a = p->FindAttribute("value");
    if (a && a->type() == ir::AttrType::kTensor) return &a->t;
  }
  return nullptr;
}

// An integer vector the graph computes from constants alone, and its rank.
struct FoldedInts {
  Ints values;
  int rank = 0;
};

// The values of a constant integer tensor (initializer or Constant node), or of the small expressions exporters
// write for shapes without folding them (torch.onnx.export with do_constant_folding=False: Concat of Unsqueezed
// Constants, through Identity, Cast and Squeeze), up to a few nodes deep.
std::optional<FoldedInts> FoldInts(const Value* v, int depth) {
  if (!v || depth > 6) return std::nullopt;
  const Node* p = v->producer();
  if (p && p->op_type() == "Constant" && p->domain().empty()) {
    if (const ir::Attribute* a = p->FindAttribute("value_ints")) return FoldedInts{a->ints, 1};
    if (const ir::Attribute* a = p->FindAttribute("value_int")) return FoldedInts{Ints{a->i}, 0};
  }
  if (const ir::Tensor* t = ConstTensor(v)) {
    if (!t->has_data()) return std::nullopt;
    const int rank = static_cast<int>(t->rank());
    if (t->dtype() == DType::kInt64)
      return FoldedInts{Ints(t->values<int64_t>().begin(), t->values<int64_t>().end()), rank};
    if (t->dtype() == DType::kInt32)
      return FoldedInts{Ints(t->values<int32_t>().begin(), t->values<int32_t>().end()), rank};
    return std::nullopt;
  }
  if (!p || !p->domain().empty() || p->outputs().size() != 1) return std::nullopt;
  const std::string& op = p->op_type();
  if (op == "Identity" || op == "Cast" || op == "Unsqueeze" || op == "Squeeze") {
    if (op == "Cast") {
      const int64_t to = p->GetInt("to", 0);
      if (to != static_cast<int64_t>(DType::kInt64) && to != static_cast<int64_t>(DType::kInt32)) return std::nullopt;
    }
    std::optional<FoldedInts> in = FoldInts(p->input(0), depth + 1);
    if (!in) return std::nullopt;
    if (op == "Unsqueeze" || op == "Squeeze") {
      std::optional<Ints> axes;
      if (const ir::Attribute* a = p->FindAttribute("axes")) {
        axes = a->ints;
      } else if (p->input(1)) {
        std::optional<FoldedInts> f = FoldInts(p->input(1), depth + 1);
        if (!f) return std::nullopt;
        axes = f->values;
      }
      if (op == "Unsqueeze") {
        if (!axes) return std::nullopt;
        in->rank += static_cast<int>(axes->size());
      } else if (axes) {
        in->rank -= static_cast<int>(axes->size());
      } else {
        in->rank = in->values.size() == 1 ? 0 : 1;  // every dim of size 1 goes
      }
      if (in->rank < 0) return std::nullopt;
    }
    return in;
  }
  if (op == "Concat") {
    FoldedInts out{{}, 1};
    for (const Value* x : p->inputs()) {
      std::optional<FoldedInts> part = FoldInts(x, depth + 1);
      if (!part || part->rank != 1) return std::nullopt;  // 1-D pieces: the flat values concatenate in order
      out.values.insert(out.values.end(), part->values.begin(), part->values.end());
    }
    return out;
  }
  return std::nullopt;
}

// The values of a constant integer tensor, any rank (FoldInts).
std::optional<Ints> ConstInts(const Value* v) {
  std::optional<FoldedInts> f = FoldInts(v, 0);
  if (!f) return std::nullopt;
  return std::move(f->values);
}

std::optional<double> ConstScalar(const Value* v) {
  const ir::Tensor* t = ConstTensor(v);
  if (!t || !t->has_data() || t->num_elements() != 1) return std::nullopt;
  switch (t->dtype()) {
    case DType::kInt64:
      return static_cast<double>(t->values<int64_t>()[0]);
    case DType::kInt32:
      return t->values<int32_t>()[0];
    case DType::kFloat32:
      return t->values<float>()[0];
    case DType::kFloat64:
      return t->values<double>()[0];
    default:
      return std::nullopt;
  }
}

const ir::Shape* DeclaredShape(const Value* v) {
  if (!v || !v->type().is_tensor() || !v->type().shape()) return nullptr;
  return &*v->type().shape();
}

class BatchPass {
 public:
  BatchPass(ir::Model& model, int64_t k, std::string symbol) : model_(model), g_(*model.graph), k_(k) {
    symbol_ = std::move(symbol);
  }

  void SetBatch(Value* v, int axis, int rank) { Set(v, axis, rank); }

  Status Run(BatchDimReport& report) {
    ONNXAMP_ASSIGN_OR_RETURN(std::vector<Node*> order, g_.TopologicalOrder());
    for (Node* n : order) ONNXAMP_RETURN_IF_ERROR(Visit(n));
    for (auto& [node, index, ints] : rewrites_) {
      ir::Tensor t(DType::kInt64, {static_cast<int64_t>(ints.size())});
      std::copy(ints.begin(), ints.end(), t.mutable_values<int64_t>().begin());
      Value* old = node->input(index);
      Value* c = g_.CreateValue(g_.UniqueName(old->name() + "_any_batch"));
      c->set_type(ir::ValueType::Tensor(DType::kInt64, ir::Shape{ir::Dim::Value(t.dims()[0])}));
      t.set_name(c->name());
      g_.SetInitializer(c, std::move(t));
      node->SetInput(index, c);
      exec::RemoveIfUnused(g_, old);
      ++report.constants;
    }
    for (Value* v : g_.values()) {
      auto it = states_.find(v);
      if (it == states_.end() || !v->type().is_tensor() || !v->type().shape()) continue;
      ir::Shape shape = *v->type().shape();
      bool changed = false;
      if (it->second.axis >= 0) {
        const size_t a = static_cast<size_t>(it->second.axis);
        if (a < shape.size() && !(shape[a].is_param() && shape[a].param == symbol_)) {
          shape[a] = ir::Dim::Param(symbol_);
          changed = true;
        }
      } else {
        for (ir::Dim& d : shape) {
          if (d.is_value()) {
            d = ir::Dim::Unknown();
            changed = true;
          }
        }
      }
      if (!changed) continue;
      ir::ValueType type = v->type();
      type.set_shape(std::move(shape));
      v->set_type(std::move(type));
      if (v->is_graph_input()) {
        ++report.inputs;
      } else {
        ++report.annotations;
      }
    }
    return Status::Ok();
  }

 private:
  State Get(const Value* v) const {
    if (!v) return {};
    auto it = states_.find(v);
    if (it != states_.end()) return it->second;
    return {kIndependent, RankOf(v)};
  }
  bool Depends(const Value* v) const { return v && states_.count(v) && states_.at(v).axis != kIndependent; }

  int RankOf(const Value* v) const {
    if (!v) return -1;
    if (auto it = states_.find(v); it != states_.end() && it->second.rank >= 0) return it->second.rank;
    if (const ir::Tensor* t = ConstTensor(v)) return static_cast<int>(t->rank());
    if (auto it = dims_.find(v); it != dims_.end()) return static_cast<int>(it->second.size());
    if (const ir::Shape* s = DeclaredShape(v)) return static_cast<int>(s->size());
    return -1;
  }

  // The dims of a value that does not depend on the batch, when known: constants, values made from constant shapes,
  // fully declared shapes.
  std::optional<Ints> StaticDims(const Value* v) const {
    if (!v || Depends(v)) return std::nullopt;
    if (const ir::Tensor* t = ConstTensor(v)) return t->dims();
    if (auto it = dims_.find(v); it != dims_.end()) return it->second;
    if (const ir::Shape* s = DeclaredShape(v)) {
      Ints d;
      for (const ir::Dim& x : *s) {
        if (!x.is_value()) return std::nullopt;
        d.push_back(x.value);
      }
      return d;
    }
    return std::nullopt;
  }

  void Set(Value* v, int axis, int rank) {
    if (!v) return;
    if (rank < 0) {
      if (const ir::Shape* s = DeclaredShape(v)) rank = static_cast<int>(s->size());
    }
    if (axis >= 0 && rank >= 0 && axis >= rank) axis = kTainted;
    if (axis == kIndependent) {
      states_.erase(v);
    } else {
      states_[v] = {axis, rank};
    }
  }
  void SetAll(Node* n, int axis, int rank) {
    for (Value* o : n->outputs()) Set(o, axis, rank);
  }
  void Taint(Node* n) { SetAll(n, kTainted, -1); }

  // The elements of an integer vector when they are known (constant, or computed from shapes).
  std::optional<std::vector<Elem>> ElemsOf(const Value* v) const {
    if (auto it = elems_.find(v); it != elems_.end()) return it->second;
    if (Depends(v)) return std::nullopt;
    if (std::optional<Ints> c = ConstInts(v)) {
      std::vector<Elem> e;
      for (int64_t x : *c) e.push_back({Elem::kConst, x});
      return e;
    }
    return std::nullopt;
  }
  void SetElems(Node* n, std::vector<Elem> e, int rank) {
    Set(n->output(0), kTainted, rank);
    bool any = false;
    for (const Elem& x : e) any |= x.kind == Elem::kBatch || x.kind == Elem::kDerived;
    if (!any) {
      Set(n->output(0), kIndependent, rank);
      return;
    }
    elems_[n->output(0)] = std::move(e);
  }

  Status Refuse(const Node* n, const std::string& why) const {
    return FailedPrecondition("node ", n->Describe(), ": ", why, " (", k_,
                              " at export); re-export with a dynamic batch axis");
  }

  // An operand that does not depend on the batch, broadcast against a value whose dim `out_axis` (of `out_rank`) is
  // the batch: its dim there must be 1 (or absent), not the export's batch size.
  Status CheckOperand(const Node* n, const Value* operand, int out_axis, int out_rank, int reserved_tail = 0) const {
    if (k_ == 1) return Status::Ok();
    std::optional<Ints> dims = StaticDims(operand);
    if (!dims) return Status::Ok();
    const int pos = out_axis - (out_rank - static_cast<int>(dims->size()));
    if (pos < 0 || pos >= static_cast<int>(dims->size()) - reserved_tail || (*dims)[pos] != k_) return Status::Ok();
    const Node* maker = operand->producer();
    if (maker && (maker->op_type() == "ConstantOfShape" || maker->op_type() == "Expand" || maker->op_type() == "Tile" ||
                  maker->op_type() == "Range")) {
      return Refuse(maker, StrCat("its constants make '", operand->name(), "' ", IntsToString(*dims), ", whose dim ",
                                  pos, " meets the batch dimension in node ", n->Describe(), " with the batch size"));
    }
    return Refuse(n, StrCat("its operand '", operand->name(), "' ", IntsToString(*dims), " has the batch size at dim ",
                            pos, ", where it meets the batch dimension"));
  }

  // Normalises a possibly negative axis; nullopt when the rank is unknown and the axis negative, or out of range.
  static std::optional<int> Axis(int64_t axis, int rank) {
    if (axis < 0) {
      if (rank < 0) return std::nullopt;
      axis += rank;
    }
    if (axis < 0 || (rank >= 0 && axis >= rank)) return std::nullopt;
    return static_cast<int>(axis);
  }

  // Axes from an attribute or (newer opsets) an input.
  std::optional<Ints> AxesOf(const Node* n, size_t input, bool* present) const {
    *present = false;
    if (const ir::Attribute* a = n->FindAttribute("axes")) {
      *present = true;
      return a->ints;
    }
    if (n->input(input)) {
      *present = true;
      return ConstInts(n->input(input));
    }
    return Ints{};
  }

  Status Visit(Node* n);
  Status VisitShapeVector(Node* n, bool* handled);
  Status VisitReshape(Node* n);
  Status VisitBroadcast(Node* n);
  Status VisitMatMul(Node* n, const State& a, const State& b);
  Status VisitGemm(Node* n);
  Status VisitRecurrent(Node* n, const State& x);
  Status VisitSlice(Node* n, const State& x);
  void VisitIndependent(Node* n);

  ir::Model& model_;
  ir::Graph& g_;
  int64_t k_;
  std::string symbol_;
  std::unordered_map<const Value*, State> states_;
  std::unordered_map<const Value*, Ints> dims_;                // independent values made from constant shapes
  std::unordered_map<const Value*, std::vector<Elem>> elems_;  // integer vectors computed from shapes
  struct Rewrite {
    Node* node;
    size_t index;
    Ints ints;
  };
  std::vector<Rewrite> rewrites_;
};

// Values that do not depend on the batch: remember the dims of those made from constant shapes, which may meet the
// batch later.
void BatchPass::VisitIndependent(Node* n) {
  const std::string& op = n->op_type();
  if (!n->domain().empty() || !n->output(0)) return;
  if (op == "ConstantOfShape") {
    if (std::optional<Ints> s = ConstInts(n->input(0))) dims_[n->output(0)] = *s;
  } else if (op == "Expand") {
    std::optional<Ints> x = StaticDims(n->input(0));
    std::optional<Ints> s = ConstInts(n->input(1));
    if (!x || !s) return;
    const size_t r = std::max(x->size(), s->size());
    Ints out(r, 1);
    for (size_t i = 0; i < r; ++i) {
      const int64_t a = i + x->size() >= r ? (*x)[i + x->size() - r] : 1;
      const int64_t b = i + s->size() >= r ? (*s)[i + s->size() - r] : 1;
      out[i] = a == 1 ? b : a;
    }
    dims_[n->output(0)] = out;
  } else if (op == "Tile") {
    std::optional<Ints> x = StaticDims(n->input(0));
    std::optional<Ints> rep = ConstInts(n->input(1));
    if (!x || !rep || x->size() != rep->size()) return;
    Ints out = *x;
    for (size_t i = 0; i < out.size(); ++i) out[i] *= (*rep)[i];
    dims_[n->output(0)] = out;
  } else if (op == "Transpose" || op == "Identity" || op == "Cast" || op == "Unsqueeze") {
    // Weights an unfolded export transposes or casts before a MatMul, positions unsqueezed before a Gather.
    std::optional<Ints> x = StaticDims(n->input(0));
    if (!x) return;
    Ints out = *x;
    if (op == "Transpose") {
      Ints perm = n->GetInts("perm");
      if (perm.empty()) {
        for (size_t i = x->size(); i-- > 0;) perm.push_back(static_cast<int64_t>(i));
      }
      if (perm.size() != x->size()) return;
      for (size_t i = 0; i < perm.size(); ++i) {
        if (perm[i] < 0 || perm[i] >= static_cast<int64_t>(x->size())) return;
        out[i] = (*x)[static_cast<size_t>(perm[i])];
      }
    } else if (op == "Unsqueeze") {
      std::optional<Ints> axes =
          n->FindAttribute("axes") ? std::optional<Ints>(n->GetInts("axes")) : ConstInts(n->input(1));
      if (!axes) return;
      const int64_t r = static_cast<int64_t>(x->size() + axes->size());
      Ints sorted;
      for (int64_t a : *axes) sorted.push_back(a < 0 ? a + r : a);
      std::sort(sorted.begin(), sorted.end());
      for (int64_t a : sorted) {
        if (a < 0 || a > static_cast<int64_t>(out.size())) return;
        out.insert(out.begin() + a, 1);
      }
    }
    dims_[n->output(0)] = out;
  } else if (op == "Gather") {
    std::optional<Ints> data = StaticDims(n->input(0)), idx = StaticDims(n->input(1));
    if (!data || !idx || data->empty()) return;
    int64_t axis = n->GetInt("axis", 0);
    if (axis < 0) axis += static_cast<int64_t>(data->size());
    if (axis < 0 || axis >= static_cast<int64_t>(data->size())) return;
    Ints out(data->begin(), data->begin() + axis);
    out.insert(out.end(), idx->begin(), idx->end());
    out.insert(out.end(), data->begin() + axis + 1, data->end());
    dims_[n->output(0)] = out;
  } else if (op == "Range") {
    std::optional<double> start = ConstScalar(n->input(0));
    std::optional<double> limit = ConstScalar(n->input(1));
    std::optional<double> delta = ConstScalar(n->input(2));
    if (!start || !limit || !delta || *delta == 0) return;
    const double count = std::ceil((*limit - *start) / *delta);
    dims_[n->output(0)] = {std::max<int64_t>(0, static_cast<int64_t>(count))};
  }
}

// Integer vectors computed from shapes (Shape, Size, Gather, Concat, Slice, Unsqueeze, Squeeze, Cast, arithmetic).
Status BatchPass::VisitShapeVector(Node* n, bool* handled) {
  *handled = false;
  const std::string& op = n->op_type();
  if (op == "Shape") {
    const State x = Get(n->input(0));
    if (x.axis < 0 || x.rank < 0) return Status::Ok();
    const ir::Shape* declared = DeclaredShape(n->input(0));
    std::vector<Elem> e;
    for (int i = 0; i < x.rank; ++i) {
      if (i == x.axis) {
        e.push_back({Elem::kBatch, 0});
      } else if (declared && static_cast<int>(declared->size()) == x.rank && (*declared)[i].is_value()) {
        e.push_back({Elem::kConst, (*declared)[i].value});
      } else {
        e.push_back({Elem::kOther, 0});
      }
    }
    const int r = x.rank;
    int64_t start = n->GetInt("start", 0), end = n->GetInt("end", r);
    if (start < 0) start += r;
    if (end < 0) end += r;
    start = std::clamp<int64_t>(start, 0, r);
    end = std::clamp<int64_t>(end, start, r);
    SetElems(n, std::vector<Elem>(e.begin() + start, e.begin() + end), 1);
    *handled = true;
    return Status::Ok();
  }
  if (op == "Size") {
    SetElems(n, {{Elem::kDerived, 0}}, 0);
    *handled = true;
    return Status::Ok();
  }
  // Only ops reading a vector already known to come from shapes; the others are data.
  bool from_shapes = false;
  for (const Value* v : n->inputs()) from_shapes |= v && elems_.count(v);
  if (!from_shapes) return Status::Ok();
  std::optional<std::vector<Elem>> in = ElemsOf(n->input(0));
  if (op == "Cast" || op == "Identity" || op == "Unsqueeze" || op == "Squeeze") {
    if (!in) return Status::Ok();
    SetElems(n, *in, op == "Squeeze" ? 0 : 1);
  } else if (op == "Gather" && in) {
    std::optional<Ints> idx = ConstInts(n->input(1));
    if (!idx) return Status::Ok();
    std::vector<Elem> e;
    for (int64_t i : *idx) {
      if (i < 0) i += static_cast<int64_t>(in->size());
      if (i < 0 || i >= static_cast<int64_t>(in->size())) return Status::Ok();
      e.push_back((*in)[i]);
    }
    SetElems(n, e, RankOf(n->input(1)));
  } else if (op == "Concat") {
    std::vector<Elem> e;
    for (const Value* v : n->inputs()) {
      std::optional<std::vector<Elem>> part = ElemsOf(v);
      if (!part) return Status::Ok();
      e.insert(e.end(), part->begin(), part->end());
    }
    SetElems(n, e, 1);
  } else if (op == "Slice" && in) {
    std::optional<Ints> starts = ConstInts(n->input(1)), ends = ConstInts(n->input(2));
    if (!starts || !ends || starts->size() != 1 || ends->size() != 1) return Status::Ok();
    std::optional<Ints> steps = n->input(4) ? ConstInts(n->input(4)) : Ints{1};
    if (!steps || steps->size() != 1 || (*steps)[0] != 1) return Status::Ok();
    const int64_t size = static_cast<int64_t>(in->size());
    int64_t s = (*starts)[0], t = (*ends)[0];
    if (s < 0) s += size;
    if (t < 0) t += size;
    s = std::clamp<int64_t>(s, 0, size);
    t = std::clamp<int64_t>(t, s, size);
    SetElems(n, std::vector<Elem>(in->begin() + s, in->begin() + t), 1);
  } else if (op == "Mul" || op == "Div" || op == "Add" || op == "Sub" || op == "Max" || op == "Min") {
    std::optional<std::vector<Elem>> a = ElemsOf(n->input(0)), b = ElemsOf(n->input(1));
    if (!a || !b) return Status::Ok();
    if (a->size() != b->size() && a->size() != 1 && b->size() != 1) return Status::Ok();
    const size_t len = std::max(a->size(), b->size());
    std::vector<Elem> e(len);
    for (size_t i = 0; i < len; ++i) {
      const Elem& x = (*a)[a->size() == 1 ? 0 : i];
      const Elem& y = (*b)[b->size() == 1 ? 0 : i];
      const bool batch =
          x.kind == Elem::kBatch || x.kind == Elem::kDerived || y.kind == Elem::kBatch || y.kind == Elem::kDerived;
      // x * 1, x / 1, x + 0, x - 0 keep the batch size itself.
      const bool identity = (op == "Mul" || op == "Div")
                                ? (y.kind == Elem::kConst && y.value == 1)
                                : (op == "Add" || op == "Sub") && y.kind == Elem::kConst && y.value == 0;
      if (x.kind == Elem::kBatch && identity) {
        e[i] = x;
      } else {
        e[i] = {batch ? Elem::kDerived : Elem::kOther, 0};
      }
    }
    SetElems(n, e, std::max(RankOf(n->input(0)), RankOf(n->input(1))));
  } else {
    return Status::Ok();
  }
  *handled = true;
  return Status::Ok();
}

Status BatchPass::VisitReshape(Node* n) {
  const State x = Get(n->input(0));
  Value* shape_in = n->input(1);
  const bool allowzero = n->GetInt("allowzero", 0) != 0;
  if (!shape_in) return Taint(n), Status::Ok();
  if (Depends(shape_in)) {
    // A shape computed at run time: the output's batch dim is where the batch size itself lands.
    std::optional<std::vector<Elem>> e = ElemsOf(shape_in);
    if (!e) return Taint(n), Status::Ok();
    int at = -1, batches = 0;
    bool derived = false;
    for (size_t i = 0; i < e->size(); ++i) {
      if ((*e)[i].kind == Elem::kBatch) at = static_cast<int>(i), ++batches;
      if ((*e)[i].kind == Elem::kDerived) derived = true;
      // A 0 copies the input's dim there.
      if (!allowzero && (*e)[i].kind == Elem::kConst && (*e)[i].value == 0 && x.axis == static_cast<int>(i)) {
        at = static_cast<int>(i), ++batches;
      }
    }
    Set(n->output(0), batches == 1 && !derived ? at : kTainted, static_cast<int>(e->size()));
    return Status::Ok();
  }
  std::optional<Ints> s = ConstInts(shape_in);
  if (!s) {
    Set(n->output(0), x.axis == kIndependent ? kIndependent : kTainted, -1);
    return Status::Ok();
  }
  const int out_rank = static_cast<int>(s->size());
  if (x.axis == kIndependent) return Status::Ok();
  const std::string shown = IntsToString(*s);
  if (x.axis == kTainted) {
    for (int64_t d : *s) {
      if (d == k_ && k_ != 1) {
        return Refuse(n, StrCat("its input depends on the batch in a way this pass does not follow, and its shape "
                                "constant ",
                                shown, " holds the batch size"));
      }
    }
    Set(n->output(0), kTainted, out_rank);
    return Status::Ok();
  }
  const int a = x.axis;
  if (!allowzero && a < out_rank && (*s)[a] == 0) {
    Set(n->output(0), a, out_rank);  // the batch dim is copied
    return Status::Ok();
  }
  if (a == 0 && out_rank > 0 && (*s)[0] == k_) {
    Ints fixed = *s;
    if (!allowzero) {
      fixed[0] = 0;
    } else if (std::count(s->begin() + 1, s->end(), -1) == 0) {
      fixed[0] = -1;
    } else {
      return Refuse(n, StrCat("its shape constant ", shown,
                              " starts with the batch size, and with allowzero=1 and another -1 it cannot be made "
                              "to copy dim 0"));
    }
    rewrites_.push_back({n, 1, fixed});
    Set(n->output(0), 0, out_rank);
    return Status::Ok();
  }
  if (a == 0 && out_rank > 0 && (*s)[0] == -1) {
    // -1 is the batch when the other dims hold exactly the input's non-batch dims.
    std::optional<Ints> in_dims;
    if (const ir::Shape* d = DeclaredShape(n->input(0))) {
      Ints v;
      for (size_t i = 1; i < d->size(); ++i) {
        if (!(*d)[i].is_value()) break;
        v.push_back((*d)[i].value);
      }
      if (v.size() + 1 == d->size()) in_dims = v;
    }
    if (in_dims) {
      int64_t p = 1, r = 1;
      for (int64_t d : *in_dims) p *= d;
      for (int i = 1; i < out_rank; ++i) {
        int64_t d = (*s)[i];
        if (d == 0 && !allowzero) d = i <= static_cast<int>(in_dims->size()) ? (*in_dims)[i - 1] : -2;
        r *= d;
      }
      if (p == r) {
        Set(n->output(0), 0, out_rank);
        return Status::Ok();
      }
    }
    Set(n->output(0), kTainted, out_rank);
    return Status::Ok();
  }
  if (a == 0) {
    if (std::count(s->begin(), s->end(), -1) == 0 && std::count(s->begin(), s->end(), 0) == 0) {
      int64_t prefix = 1;
      for (int64_t d : *s) {
        prefix *= d;
        if (prefix == k_) {
          return Refuse(n, StrCat("its shape constant ", shown, " splits the batch dimension"));
        }
        if (prefix > k_) break;
      }
      return Refuse(n, StrCat("its shape constant ", shown, " merges the batch dimension with other dims"));
    }
    return Refuse(n, StrCat("its shape constant ", shown, " does not keep the batch dimension as dim 0"));
  }
  return Refuse(n, StrCat("its input's batch dimension is dim ", a, ", and its shape constant ", shown,
                          " does not copy it (0 at that position)"));
}

// Elementwise ops with numpy broadcasting.
Status BatchPass::VisitBroadcast(Node* n) {
  int axis = kIndependent, out_rank = 0;
  bool tainted = false;
  for (const Value* v : n->inputs()) {
    if (!v) continue;
    const State s = Get(v);
    if (s.axis == kTainted || (s.axis >= 0 && s.rank < 0)) tainted = true;
    out_rank = std::max(out_rank, s.rank < 0 ? 0 : s.rank);
  }
  if (tainted) return Taint(n), Status::Ok();
  for (const Value* v : n->inputs()) {
    const State s = Get(v);
    if (s.axis < 0) continue;
    const int aligned = s.axis + (out_rank - s.rank);
    if (axis == kIndependent) {
      axis = aligned;
    } else if (axis != aligned) {
      return Taint(n), Status::Ok();
    }
  }
  for (const Value* v : n->inputs()) {
    if (v && !Depends(v)) {
      if (RankOf(v) < 0) continue;  // an operand of unknown rank: cannot be aligned, assumed not to broadcast
      ONNXAMP_RETURN_IF_ERROR(CheckOperand(n, v, axis, out_rank));
    }
  }
  SetAll(n, axis, out_rank);
  return Status::Ok();
}

// RNN, GRU, LSTM: X's batch dim is 1 (layout 0) or 0 (layout 1); so is that of initial_h and initial_c, and
// sequence_lens is per batch row. Y has the batch at dim 2 (layout 0) or 0, Y_h and Y_c where the initial states have
// it. The weights must not depend on the batch.
Status BatchPass::VisitRecurrent(Node* n, const State& x) {
  const bool batch_major = n->GetInt("layout", 0) != 0;
  const int state_axis = batch_major ? 0 : 1;
  for (size_t k : {1, 2, 3, 7}) {
    if (k < n->inputs().size() && Depends(n->input(k))) return Taint(n), Status::Ok();
  }
  if (x.axis != state_axis) return Taint(n), Status::Ok();
  for (size_t k : {4, 5, 6}) {
    const Value* v = k < n->inputs().size() ? n->input(k) : nullptr;
    if (!v) continue;
    const int axis = k == 4 ? 0 : state_axis, rank = k == 4 ? 1 : 3;
    if (Depends(v)) {
      if (Get(v).axis != axis) return Taint(n), Status::Ok();
    } else {
      ONNXAMP_RETURN_IF_ERROR(CheckOperand(n, v, axis, rank));
    }
  }
  for (size_t i = 0; i < n->outputs().size(); ++i)
    Set(n->output(i), i == 0 ? (batch_major ? 0 : 2) : state_axis, i == 0 ? 4 : 3);
  return Status::Ok();
}

Status BatchPass::VisitGemm(Node* n) {
  const State a = Get(n->input(0)), b = Get(n->input(1));
  const bool ta = n->GetInt("transA", 0) != 0, tb = n->GetInt("transB", 0) != 0;
  int out = kTainted;
  if (a.axis >= 0 && b.axis == kIndependent) {
    out = a.axis == (ta ? 1 : 0) ? 0 : kTainted;
  } else if (a.axis == kIndependent && b.axis >= 0) {
    out = b.axis == (tb ? 0 : 1) ? 1 : kTainted;
  }
  if (out >= 0 && n->input(2) && !Depends(n->input(2))) ONNXAMP_RETURN_IF_ERROR(CheckOperand(n, n->input(2), out, 2));
  if (Depends(n->input(2)) && Get(n->input(2)).axis != out) out = kTainted;
  SetAll(n, out, 2);
  return Status::Ok();
}

Status BatchPass::VisitMatMul(Node* n, const State& a, const State& b) {
  const int ra = RankOf(n->input(0)), rb = RankOf(n->input(1));
  if (ra < 1 || rb < 1) return Taint(n), Status::Ok();
  int out_rank;
  if (ra == 1 && rb == 1) {
    out_rank = 0;
  } else if (ra == 1) {
    out_rank = rb - 1;
  } else if (rb == 1) {
    out_rank = ra - 1;
  } else {
    out_rank = std::max(ra, rb);
  }
  int out = kTainted;
  if (a.axis >= 0 && b.axis == kIndependent) {
    if (ra >= 2 && a.axis == ra - 2) {
      out = rb == 1 ? out_rank - 1 : out_rank - 2;
    } else if (ra >= 3 && a.axis < ra - 2) {
      out = a.axis + out_rank - ra;
      if (rb > 2) ONNXAMP_RETURN_IF_ERROR(CheckOperand(n, n->input(1), out, out_rank, 2));
    }
  } else if (a.axis == kIndependent && b.axis >= 0) {
    if (rb >= 2 && b.axis == rb - 1) {
      out = out_rank - 1;
    } else if (rb >= 3 && b.axis < rb - 2) {
      out = b.axis + out_rank - rb;
      if (ra > 2) ONNXAMP_RETURN_IF_ERROR(CheckOperand(n, n->input(0), out, out_rank, 2));
    }
  } else if (a.axis >= 0 && b.axis >= 0 && ra == rb && a.axis == b.axis && a.axis < ra - 2) {
    out = a.axis;
  }
  SetAll(n, out, out_rank);
  return Status::Ok();
}

Status BatchPass::VisitSlice(Node* n, const State& x) {
  Ints starts, ends, axes, steps;
  bool constant = true;
  if (model_.OpsetVersion("") < 10) {
    starts = n->GetInts("starts");
    ends = n->GetInts("ends");
    axes = n->GetInts("axes");
  } else {
    auto read = [&](size_t i, Ints& out) {
      if (!n->input(i)) return;
      std::optional<Ints> v = ConstInts(n->input(i));
      if (!v) {
        constant = false;
        return;
      }
      out = *v;
    };
    read(1, starts);
    read(2, ends);
    read(3, axes);
    read(4, steps);
  }
  if (!constant) return Taint(n), Status::Ok();
  if (axes.empty()) {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  for (size_t i = 0; i < axes.size() && i < starts.size() && i < ends.size(); ++i) {
    std::optional<int> ax = Axis(axes[i], x.rank);
    if (!ax) return Taint(n), Status::Ok();
    if (*ax != x.axis) continue;
    const int64_t step = i < steps.size() ? steps[i] : 1;
    if (step == 1 && (starts[i] == 0 || starts[i] <= -k_) && ends[i] >= k_) continue;  // the whole batch
    return Refuse(n, StrCat("it slices the batch dimension (starts ", starts[i], ", ends ", ends[i], ", step ", step,
                            "), constants that depend on the batch size"));
  }
  SetAll(n, x.axis, x.rank);
  return Status::Ok();
}

Status BatchPass::Visit(Node* n) {
  bool depends = false;
  for (const Value* v : n->inputs()) depends |= Depends(v);
  for (const Value* v : g_.ImplicitInputs(n)) depends |= Depends(v);
  if (!depends) {
    VisitIndependent(n);
    return Status::Ok();
  }
  if (!n->subgraphs().empty()) {
    return Refuse(n, "its subgraphs read values that depend on the batch, and this pass does not look into subgraphs");
  }
  // BatchNormTraining, the trainer's training-mode BatchNormalization (turned on before this pass when the model holds
  // Gradient nodes): batch-first like BatchNormalization.
  const bool bn_training = n->domain() == exec::kInternalDomain && n->op_type() == ops::kBatchNormTrainingOp;
  if (!n->domain().empty() && !bn_training) return Taint(n), Status::Ok();
  bool handled = false;
  ONNXAMP_RETURN_IF_ERROR(VisitShapeVector(n, &handled));
  if (handled) return Status::Ok();

  const std::string& op = n->op_type();
  const State x = Get(n->input(0));
  static const std::unordered_set<std::string> kUnary = {
      "Relu", "LeakyRelu", "Sigmoid", "Tanh",     "Erf",      "Exp",     "Log",         "Sqrt",      "Reciprocal",
      "Neg",  "Abs",       "Cast",    "CastLike", "Identity", "Dropout", "Softplus",    "Softsign",  "Elu",
      "Selu", "Celu",      "Gelu",    "Mish",     "Floor",    "Ceil",    "Round",       "Sign",      "Sin",
      "Cos",  "Not",       "IsNaN",   "IsInf",    "Clip",     "Shrink",  "HardSigmoid", "HardSwish", "ThresholdedRelu"};
  // Ops whose dim 0 is N (the batch) and whose other operands are per-channel.
  static const std::unordered_set<std::string> kBatchFirst = {"Conv",
                                                              "ConvTranspose",
                                                              "MaxPool",
                                                              "AveragePool",
                                                              "GlobalAveragePool",
                                                              "GlobalMaxPool",
                                                              "LpPool",
                                                              "InstanceNormalization",
                                                              "LRN",
                                                              "GroupNormalization",
                                                              "DepthToSpace",
                                                              "SpaceToDepth",
                                                              "BatchNormalization"};

  if (kUnary.count(op)) {
    bool others = false;
    for (size_t i = 1; i < n->inputs().size(); ++i) others |= Depends(n->input(i));
    if (others) return Taint(n), Status::Ok();
    SetAll(n, x.axis, x.rank);
    return Status::Ok();
  }
  if (IsNumpyBroadcastOp(op)) return VisitBroadcast(n);
  if (kBatchFirst.count(op) || bn_training) {
    bool others = false;
    for (size_t i = 1; i < n->inputs().size(); ++i) others |= Depends(n->input(i));
    if (x.axis != 0 || others) return Taint(n), Status::Ok();
    Set(n->output(0), 0, x.rank);
    for (size_t i = 1; i < n->outputs().size(); ++i) Set(n->output(i), op == "MaxPool" ? 0 : kTainted, -1);
    return Status::Ok();
  }
  if (op == "Reshape") return VisitReshape(n);
  if (op == "Gemm") return VisitGemm(n);
  if (op == "RNN" || op == "GRU" || op == "LSTM") return VisitRecurrent(n, x);
  if (op == "MatMul") return VisitMatMul(n, x, Get(n->input(1)));
  if (op == "Transpose") {
    Ints perm = n->GetInts("perm");
    if (perm.empty() && x.rank >= 0) {
      for (int i = x.rank - 1; i >= 0; --i) perm.push_back(i);
    }
    if (x.axis < 0 || perm.empty()) return Taint(n), Status::Ok();
    const auto it = std::find(perm.begin(), perm.end(), x.axis);
    SetAll(n, it == perm.end() ? kTainted : static_cast<int>(it - perm.begin()), static_cast<int>(perm.size()));
    return Status::Ok();
  }
  if (op == "Flatten") {
    int64_t f = n->GetInt("axis", 1);
    if (f < 0) f = x.rank < 0 ? -1 : f + x.rank;
    SetAll(n, x.axis == 0 && f == 1 ? 0 : kTainted, 2);
    return Status::Ok();
  }
  if (op == "Softmax" || op == "LogSoftmax" || op == "Hardmax") {
    const bool v13 = model_.OpsetVersion("") >= 13;
    std::optional<int> ax = Axis(n->GetInt("axis", v13 ? -1 : 1), x.rank);
    if (x.axis < 0 || !ax) return Taint(n), Status::Ok();
    SetAll(n, (v13 ? *ax != x.axis : x.axis < *ax) ? x.axis : kTainted, x.rank);
    return Status::Ok();
  }
  if (op == "LayerNormalization") {
    std::optional<int> ax = Axis(n->GetInt("axis", -1), x.rank);
    bool others = false;
    for (size_t i = 1; i < n->inputs().size(); ++i) others |= Depends(n->input(i));
    if (x.axis < 0 || !ax || others || x.axis >= *ax) return Taint(n), Status::Ok();
    SetAll(n, x.axis, x.rank);
    return Status::Ok();
  }
  if (op.rfind("Reduce", 0) == 0 || op == "ArgMax" || op == "ArgMin") {
    if (x.axis < 0 || x.rank < 0) return Taint(n), Status::Ok();
    bool present = false;
    std::optional<Ints> axes;
    if (op == "ArgMax" || op == "ArgMin") {
      axes = Ints{n->GetInt("axis", 0)};
      present = true;
    } else {
      axes = AxesOf(n, 1, &present);
    }
    if (!axes) return Taint(n), Status::Ok();
    if (axes->empty()) {
      if (n->GetInt("noop_with_empty_axes", 0) != 0) return SetAll(n, x.axis, x.rank), Status::Ok();
      return Taint(n), Status::Ok();  // over everything, the batch included
    }
    const bool keep = n->GetInt("keepdims", 1) != 0;
    int before = 0;
    for (int64_t a : *axes) {
      std::optional<int> ax = Axis(a, x.rank);
      if (!ax || *ax == x.axis) return Taint(n), Status::Ok();
      before += *ax < x.axis;
    }
    SetAll(n, keep ? x.axis : x.axis - before, keep ? x.rank : x.rank - static_cast<int>(axes->size()));
    return Status::Ok();
  }
  if (op == "Gather") {
    const State idx = Get(n->input(1));
    if (x.axis >= 0 && idx.axis == kIndependent) {
      std::optional<int> ax = Axis(n->GetInt("axis", 0), x.rank);
      const int q = RankOf(n->input(1));
      if (!ax || q < 0 || *ax == x.axis) return Taint(n), Status::Ok();
      SetAll(n, x.axis < *ax ? x.axis : x.axis + q - 1, x.rank < 0 ? -1 : x.rank + q - 1);
      return Status::Ok();
    }
    if (x.axis == kIndependent && idx.axis >= 0) {
      const int rd = RankOf(n->input(0));
      std::optional<int> ax = Axis(n->GetInt("axis", 0), rd);
      if (!ax) return Taint(n), Status::Ok();
      SetAll(n, *ax + idx.axis, rd < 0 || idx.rank < 0 ? -1 : rd + idx.rank - 1);
      return Status::Ok();
    }
    return Taint(n), Status::Ok();
  }
  if (op == "Concat") {
    int axis = kIndependent, rank = -1;
    for (const Value* v : n->inputs()) {
      const State s = Get(v);
      if (s.axis == kTainted) return Taint(n), Status::Ok();
      if (s.axis >= 0) {
        if (axis != kIndependent && (axis != s.axis || rank != s.rank)) return Taint(n), Status::Ok();
        axis = s.axis;
        rank = s.rank;
      }
    }
    std::optional<int> cat = Axis(n->GetInt("axis", 0), rank);
    if (!cat || *cat == axis) return Taint(n), Status::Ok();
    for (const Value* v : n->inputs()) {
      if (v && !Depends(v)) ONNXAMP_RETURN_IF_ERROR(CheckOperand(n, v, axis, rank));
    }
    SetAll(n, axis, rank);
    return Status::Ok();
  }
  if (op == "Split") {
    std::optional<int> ax = Axis(n->GetInt("axis", 0), x.rank);
    SetAll(n, x.axis >= 0 && ax && *ax != x.axis ? x.axis : kTainted, x.rank);
    return Status::Ok();
  }
  if (op == "Slice") {
    if (x.axis < 0) return Taint(n), Status::Ok();
    return VisitSlice(n, x);
  }
  if (op == "Unsqueeze" || op == "Squeeze") {
    if (x.axis < 0 || Depends(n->input(1))) return Taint(n), Status::Ok();
    bool present = false;
    std::optional<Ints> axes = AxesOf(n, 1, &present);
    if (!axes) return Taint(n), Status::Ok();
    if (op == "Squeeze") {
      if (!present) {
        if (k_ == 1) return Refuse(n, "it squeezes every dim of size 1, the batch dimension included");
        SetAll(n, x.axis == 0 ? 0 : kTainted, -1);
        return Status::Ok();
      }
      int before = 0;
      for (int64_t a : *axes) {
        std::optional<int> ax = Axis(a, x.rank);
        if (!ax) return Taint(n), Status::Ok();
        if (*ax == x.axis) return Refuse(n, "it squeezes the batch dimension (of size 1)");
        before += *ax < x.axis;
      }
      SetAll(n, x.axis - before, x.rank < 0 ? -1 : x.rank - static_cast<int>(axes->size()));
      return Status::Ok();
    }
    if (x.rank < 0) return Taint(n), Status::Ok();
    const int out_rank = x.rank + static_cast<int>(axes->size());
    std::set<int> inserted;
    for (int64_t a : *axes) {
      std::optional<int> ax = Axis(a, out_rank);
      if (!ax) return Taint(n), Status::Ok();
      inserted.insert(*ax);
    }
    int seen = -1;
    for (int i = 0; i < out_rank; ++i) {
      if (inserted.count(i)) continue;
      if (++seen == x.axis) {
        SetAll(n, i, out_rank);
        return Status::Ok();
      }
    }
    return Taint(n), Status::Ok();
  }
  if (op == "Expand") {
    if (x.axis < 0 || x.rank < 0) return Taint(n), Status::Ok();
    std::optional<std::vector<Elem>> e = ElemsOf(n->input(1));
    if (!e) return Taint(n), Status::Ok();
    const int out_rank = std::max(x.rank, static_cast<int>(e->size()));
    const int out = x.axis + out_rank - x.rank;
    const int pos = out - (out_rank - static_cast<int>(e->size()));
    if (pos >= 0) {
      const Elem& at = (*e)[pos];
      if (at.kind == Elem::kConst && at.value != 1) {
        Ints shown;
        for (const Elem& v : *e) shown.push_back(v.value);
        return Refuse(n, StrCat("its shape constant ", IntsToString(shown), " sets the batch dimension to ", at.value,
                                ", a constant that depends on the batch size"));
      }
      if (at.kind == Elem::kDerived || at.kind == Elem::kOther) return Taint(n), Status::Ok();
    }
    SetAll(n, out, out_rank);
    return Status::Ok();
  }
  if (op == "Tile") {
    std::optional<Ints> rep = ConstInts(n->input(1));
    if (x.axis < 0 || !rep || x.axis >= static_cast<int>(rep->size())) return Taint(n), Status::Ok();
    if ((*rep)[x.axis] != 1) {
      return Refuse(n, StrCat("its repeats ", IntsToString(*rep), " tile the batch dimension ", (*rep)[x.axis],
                              " times, a constant that depends on the batch size"));
    }
    SetAll(n, x.axis, x.rank);
    return Status::Ok();
  }
  if (op == "ConstantOfShape") {
    std::optional<std::vector<Elem>> e = ElemsOf(n->input(0));
    int at = -1, batches = 0;
    bool derived = false;
    for (size_t i = 0; e && i < e->size(); ++i) {
      if ((*e)[i].kind == Elem::kBatch) at = static_cast<int>(i), ++batches;
      derived |= (*e)[i].kind == Elem::kDerived;
    }
    SetAll(n, e && batches == 1 && !derived ? at : kTainted, e ? static_cast<int>(e->size()) : -1);
    return Status::Ok();
  }
  if (op == "Pad") {
    if (x.axis < 0 || x.rank < 0 || n->input(3)) return Taint(n), Status::Ok();
    std::optional<Ints> pads =
        model_.OpsetVersion("") < 11 ? std::optional<Ints>(n->GetInts("pads")) : ConstInts(n->input(1));
    if (!pads || static_cast<int>(pads->size()) != 2 * x.rank) return Taint(n), Status::Ok();
    if ((*pads)[x.axis] != 0 || (*pads)[x.axis + x.rank] != 0) {
      return Refuse(n, StrCat("its pads ", IntsToString(*pads), " pad the batch dimension"));
    }
    SetAll(n, x.axis, x.rank);
    return Status::Ok();
  }
  if (op == "Resize" || op == "Upsample") {
    if (x.axis != 0) return Taint(n), Status::Ok();
    const Value* sizes = op == "Resize" ? n->input(3) : nullptr;
    if (sizes) {
      std::optional<Ints> s = ConstInts(sizes);
      if (s && !s->empty() && n->GetInts("axes").empty()) {
        return Refuse(n, StrCat("its sizes ", IntsToString(*s), " fix the batch dimension to ", (*s)[0]));
      }
      return Taint(n), Status::Ok();
    }
    const ir::Tensor* scales = ConstTensor(n->input(op == "Resize" ? 2 : 1));
    if (scales && scales->dtype() == DType::kFloat32 && scales->num_elements() > 0 && n->GetInts("axes").empty() &&
        scales->values<float>()[0] != 1.0f) {
      return Refuse(n, "its scales resize the batch dimension");
    }
    SetAll(n, 0, x.rank);
    return Status::Ok();
  }
  if (op == "TopK") {
    std::optional<int> ax = Axis(n->GetInt("axis", -1), x.rank);
    SetAll(n, x.axis >= 0 && ax && *ax != x.axis && !Depends(n->input(1)) ? x.axis : kTainted, x.rank);
    return Status::Ok();
  }
  if (op == "CumSum") {
    std::optional<Ints> ax = ConstInts(n->input(1));
    std::optional<int> a = ax && ax->size() == 1 ? Axis((*ax)[0], x.rank) : std::nullopt;
    SetAll(n, x.axis >= 0 && a && *a != x.axis ? x.axis : kTainted, x.rank);
    return Status::Ok();
  }
  return Taint(n), Status::Ok();
}

}  // namespace

std::vector<std::string> GraphDataInputs(const ir::Graph& graph) {
  std::vector<std::string> names;
  for (const Value* v : graph.inputs()) {
    if (!v->initializer()) names.push_back(v->name());
  }
  return names;
}

Status MakeBatchDimSymbolic(ir::Model& model, const std::vector<std::string>& data_inputs, BatchDimReport* report) {
  BatchDimReport local;
  BatchDimReport& out = report ? *report : local;
  out = {};
  if (!model.graph) return InvalidArgument("the model has no graph");
  const ir::Graph& g = *model.graph;
  int64_t k = 0;
  std::string fixed_by, symbol;
  for (const std::string& name : data_inputs) {
    const Value* v = g.FindValue(name);
    if (!v || !v->is_graph_input()) return NotFound("data input '", name, "' is not a graph input");
    const ir::Shape* s = DeclaredShape(v);
    if (!s || s->empty()) continue;
    const ir::Dim& d = (*s)[0];
    if (d.is_param() && symbol.empty()) symbol = d.param;
    if (!d.is_value()) continue;
    if (k != 0 && d.value != k) {
      return InvalidArgument("data inputs '", fixed_by, "' and '", name, "' fix different batch sizes (", k, " and ",
                             d.value, " in dim 0)");
    }
    k = d.value;
    fixed_by = name;
  }
  if (k == 0) return Status::Ok();
  if (k < 0) return InvalidArgument("data input '", fixed_by, "' has dim 0 = ", k);
  if (symbol.empty()) {
    // "batch", unless the model already names another dim so.
    std::set<std::string> params;
    for (const Value* v : g.values()) {
      if (const ir::Shape* s = DeclaredShape(v)) {
        for (const ir::Dim& d : *s) {
          if (d.is_param()) params.insert(d.param);
        }
      }
    }
    symbol = "batch";
    for (int i = 1; params.count(symbol); ++i) symbol = StrCat("batch_", i);
  }

  ir::Model work = converter::CloneModel(model);
  BatchPass pass(work, k, symbol);
  for (const std::string& name : data_inputs) {
    Value* v = work.graph->FindValue(name);
    const ir::Shape* s = DeclaredShape(v);
    if (s && s->empty()) continue;  // a scalar input is not batched
    pass.SetBatch(v, 0, s ? static_cast<int>(s->size()) : -1);
  }
  BatchDimReport r;
  ONNXAMP_RETURN_IF_ERROR(pass.Run(r));
  r.exported = k;
  r.symbol = symbol;
  model = std::move(work);
  out = r;
  return Status::Ok();
}

}  // namespace onnxamp::trainer
