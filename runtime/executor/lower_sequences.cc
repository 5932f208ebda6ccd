// LowerSequences: sequence ops whose elements the graph fixes, replaced by tensor ops (lower_sequences.h).
#include "runtime/executor/lower_sequences.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "runtime/executor/graph_match.h"
#include "runtime/ir/attribute.h"
#include "runtime/ir/graph.h"
#include "runtime/ops/decompose.h"
#include "runtime/ops/shape_rules.h"

namespace onnxamp::exec {
namespace {

bool IsOnnxOp(const ir::Node* n, std::string_view op) {
  return n && n->op_type() == op && ir::IsDefaultDomain(n->domain());
}

// The ops that make a sequence from tensors or from another sequence (Identity aside).
bool MakesSequence(const ir::Node* n) {
  static const std::unordered_set<std::string> ops = {"SequenceEmpty", "SequenceConstruct", "SequenceInsert",
                                                      "SequenceErase", "SplitToSequence"};
  return ir::IsDefaultDomain(n->domain()) && ops.count(n->op_type()) > 0;
}

ir::Value* Resolve(ir::Value* v) { return DefiningValue(v); }

// A constant integer scalar (or one-element tensor): an initializer no input overrides, or a Constant node's value.
std::optional<int64_t> ConstInt(ir::Value* v) {
  const ir::Tensor* t = ConstantOf(Resolve(v));
  if (!t || t->num_elements() != 1 || t->rank() > 1) return std::nullopt;
  if (t->dtype() == DType::kInt64) return t->values<int64_t>()[0];
  if (t->dtype() == DType::kInt32) return t->values<int32_t>()[0];
  return std::nullopt;
}

std::optional<std::vector<int64_t>> ConstInts(ir::Value* v) {
  const ir::Tensor* t = ConstantOf(Resolve(v));
  if (!t || t->rank() != 1) return std::nullopt;
  std::vector<int64_t> out;
  if (t->dtype() == DType::kInt64) {
    for (int64_t x : t->values<int64_t>()) out.push_back(x);
  } else if (t->dtype() == DType::kInt32) {
    for (int32_t x : t->values<int32_t>()) out.push_back(x);
  } else {
    return std::nullopt;
  }
  return out;
}

int64_t DeclaredRank(const ir::Value* v) {
  const std::optional<size_t> r = RankOf(v);
  return r ? static_cast<int64_t>(*r) : -1;
}

// The element rank a sequence's declared type gives (-1 when it gives none).
int64_t DeclaredElementRank(const ir::Value* seq) {
  if (!seq || seq->type().kind() != ir::ValueType::Kind::kSequence || !seq->type().inner()) return -1;
  const ir::ValueType& inner = *seq->type().inner();
  return inner.is_tensor() && inner.shape() ? static_cast<int64_t>(inner.shape()->size()) : -1;
}

// The elements' rank for ConcatFromSequence `n`: `rank` when known, else from its output's declared rank.
int64_t ConcatElementRank(const ir::Node& n, int64_t rank) {
  if (rank >= 0) return rank;
  const int64_t out = DeclaredRank(n.output(0));
  return out < 0 ? -1 : out - (n.GetInt("new_axis", 0) != 0 ? 1 : 0);
}

// `v` through an identity Transpose of `rank` dims: the same tensor, or a run-time error when its rank differs.
ir::Value* RankChecked(ops::DecomposeContext& ctx, ir::Value* v, int64_t rank) {
  std::vector<int64_t> perm(static_cast<size_t>(rank));
  for (int64_t i = 0; i < rank; ++i) perm[static_cast<size_t>(i)] = i;
  return ctx.Emit1("Transpose", {v}, {ir::Attribute::Ints("perm", perm)});
}

// The nodes appended to `g` since it had `count` nodes (emitters append at the end), last first.
std::vector<ir::Node*> NodesAddedSince(const ir::Graph& g, size_t count) {
  std::vector<ir::Node*> all;
  for (ir::Node* n : g.nodes()) all.push_back(n);
  return {all.rbegin(), all.rbegin() + static_cast<std::ptrdiff_t>(all.size() - count)};
}

bool IsSequenceType(const ir::Value* v) { return v && v->type().kind() == ir::ValueType::Kind::kSequence; }

// The rank of a tensor value: from a few rules over its producers (the ops a recurrent cell's output comes from), else
// declared. The rules come first because exporters declare wrong ranks inside loop bodies: torch.onnx declares the
// elements of an unbind (SplitToSequence, keepdims 0) with the split axis kept. -1 when unknown. A wrong rank mostly
// fails in the Transpose it makes; a declared rank too low that makes a negative axis 0 gives wrong shapes (known).
// Each value is visited once (a memo of the ranks found within the depth limit), so that broadcasting ops sharing
// inputs do not make the walk exponential.
class ElementRanks {
 public:
  int64_t Of(ir::Value* v, int depth = 0) {
    v = Resolve(v);
    if (!v || depth > 32) {
      truncated_ = true;
      return -1;
    }
    if (auto it = memo_.find(v); it != memo_.end()) return it->second;
    const bool outer_truncated = truncated_;
    truncated_ = false;
    int64_t r = -1;
    if (const ir::Tensor* c = ConstantOf(v)) {
      r = c->rank();
    } else if (const ir::Node* p = v->producer(); p && ir::IsDefaultDomain(p->domain())) {
      r = ByRule(p, v, depth);
    }
    if (r < 0) r = DeclaredRank(v);
    if (!truncated_) memo_[v] = r;
    truncated_ = truncated_ || outer_truncated;
    return r;
  }

 private:
  int64_t ByRule(const ir::Node* p, ir::Value* v, int depth);

  std::unordered_map<const ir::Value*, int64_t> memo_;  // ranks found without reaching the depth limit
  bool truncated_ = false;
};

int64_t ElementRank(ir::Value* v) { return ElementRanks().Of(v); }

// The rules for `v`, output of `p`.
int64_t ElementRanks::ByRule(const ir::Node* p, ir::Value* v, int depth) {
  const std::string& op = p->op_type();
  if (ops::KeepsRank(op)) return p->outputs()[0] == v ? Of(p->input(0), depth + 1) : -1;
  if (ops::IsNumpyBroadcastOp(op)) {
    int64_t r = 0;
    for (ir::Value* in : p->inputs()) {
      if (!in) continue;
      const int64_t ri = Of(in, depth + 1);
      if (ri < 0) return -1;
      r = std::max(r, ri);
    }
    return r;
  }
  if (op == "Gemm") return 2;
  if (op == "MatMul") {
    const int64_t a = Of(p->input(0), depth + 1), b = Of(p->input(1), depth + 1);
    if (a < 0 || b < 0) return -1;
    if (a == 1 && b == 1) return 0;
    if (a == 1) return b - 1;
    if (b == 1) return a - 1;
    return std::max(a, b);
  }
  if (op == "Gather") {
    const int64_t a = Of(p->input(0), depth + 1), i = Of(p->input(1), depth + 1);
    return a < 0 || i < 0 ? -1 : a - 1 + i;
  }
  return -1;
}

// What a sequence value holds, in terms of tensor values (of the graph that defines the sequence, or enclosing ones).
struct Seq {
  enum class Kind { kList, kStacked, kSplit };
  Kind kind = Kind::kList;
  std::vector<ir::Value*> elems;    // kList
  ir::Value* tensor = nullptr;      // kStacked: S [n, element dims...]; kSplit: the tensor split
  int64_t rank = -1;                // kStacked: the elements' rank; kSplit: the split tensor's; -1 unknown
  int64_t axis = 0;                 // kSplit
  int64_t chunk = 1;                // kSplit: chunk length along the axis (the last chunk may be shorter)
  ir::Value* sizes = nullptr;       // kSplit: a 1-D tensor of chunk lengths known at run time only (instead of chunk)
  bool keepdims = true;             // kSplit: whether a chunk keeps the axis
  DType dtype = DType::kUndefined;  // kList from SequenceEmpty: the element type it declares
};

class Lowering {
 public:
  explicit Lowering(int64_t opset) : opset_(opset) {}

  Status LowerGraph(ir::Graph& g);
  bool changed() const { return changed_; }

 private:
  const Seq* Find(ir::Value* v) const {
    auto it = seqs_.find(Resolve(v));
    return it == seqs_.end() ? nullptr : &it->second;
  }
  // `v` as graph `g` reads it: `v` itself, or an outer-scope reference of `g` to it. Null when a value of `g` or of a
  // graph between them has the same name (the reference would read that one).
  ir::Value* InGraph(ir::Graph& g, ir::Value* v);
  std::optional<std::vector<ir::Value*>> InGraph(ir::Graph& g, const std::vector<ir::Value*>& vs);

  // The sequence output of a node that makes one; false when it is not understood. Nodes it adds (a Split, the
  // stacking of a list) are removed again when nothing reads them.
  bool Define(ir::Graph& g, ir::Node* n);
  bool DefineSplit(ir::Graph& g, ir::Node* n, ops::DecomposeContext& ctx);
  // A list as a stacked tensor, made in `g` (null when the elements' dims are not all known and equal, also to
  // `extra`'s when given, or when `g` cannot read an element).
  ir::Value* Stack(ir::Graph& g, ops::DecomposeContext& ctx, const std::vector<ir::Value*>& elems, ir::Value* extra,
                   int64_t* rank);
  // Position `pos` (int32/int64 scalar) as an int64 in [0, n] for n = length, counting from the back when negative;
  // n when out of range.
  static ir::Value* Normalized(ops::DecomposeContext& ctx, ir::Value* pos, ir::Value* length);
  // Replaces a node that reads a known sequence and writes a tensor; false when it cannot.
  StatusOr<bool> Replace(ir::Graph& g, ir::Node* n);
  StatusOr<bool> ReplaceWith(ir::Graph& g, ir::Node* n);
  // The append-in-a-loop pattern: each such state of the Loop becomes a scan output.
  StatusOr<ir::Node*> LowerLoopAppends(ir::Graph& g, ir::Node* loop);
  // Whether every use of a stacked sequence `seq` (rank `rank`) is one Replace handles.
  bool StackedUsesLowerable(const ir::Graph& g, const ir::Value* seq, int64_t rank) const;
  void RemoveDead(ir::Graph& g);

  ops::DecomposeContext Context(ir::Graph& g, ir::Node* n) {
    return ops::DecomposeContext(g, *n, opset_, [](const ir::Value*) { return DType::kUndefined; });
  }

  const int64_t opset_;
  std::unordered_map<const ir::Value*, Seq> seqs_;
  std::unordered_set<const ir::Node*> created_;  // nodes Define added (removed again when left unread)
  std::unordered_set<const ir::Value*> created_constants_;
  std::unordered_set<const ir::Value*> created_refs_;  // outer-scope references InGraph made
  bool changed_ = false;
};

ir::Value* Lowering::InGraph(ir::Graph& g, ir::Value* v) {
  if (!v || v->graph() == &g) return v;
  ir::Graph* h = &g;
  for (; h && h != v->graph(); h = h->parent()) {
    ir::Value* own = h->FindValue(v->name());
    if (own && !own->is_outer_scope()) return nullptr;
  }
  if (!h) return nullptr;  // not a value of an enclosing graph
  if (ir::Value* ref = g.FindValue(v->name())) return ref;
  ir::Value* ref = g.CreateOuterScopeValue(v->name());
  created_refs_.insert(ref);
  return ref;
}

std::optional<std::vector<ir::Value*>> Lowering::InGraph(ir::Graph& g, const std::vector<ir::Value*>& vs) {
  std::vector<ir::Value*> out;
  for (ir::Value* v : vs) {
    ir::Value* in = InGraph(g, v);
    if (!in) return std::nullopt;
    out.push_back(in);
  }
  return out;
}

ir::Value* Lowering::Normalized(ops::DecomposeContext& ctx, ir::Value* pos, ir::Value* length) {
  ir::Value* p = ctx.CastTo(pos, DType::kInt64);
  ir::Value* zero = ctx.Scalar(DType::kInt64, 0);
  p = ctx.Emit1("Where", {ctx.Emit1("Less", {p, zero}), ctx.Emit1("Add", {p, length}), p});
  // Out of range (below -n, or past n): n, so that a Slice reads nothing there instead of wrapping around.
  ir::Value* out_of_range = ctx.Emit1("Or", {ctx.Emit1("Less", {p, zero}), ctx.Emit1("Greater", {p, length})});
  return ctx.Emit1("Where", {out_of_range, length, p});
}

ir::Value* Lowering::Stack(ir::Graph& g, ops::DecomposeContext& ctx, const std::vector<ir::Value*>& elems,
                           ir::Value* extra, int64_t* rank) {
  std::vector<ir::Value*> all = elems;
  if (extra) all.push_back(extra);
  if (all.empty()) return nullptr;
  std::optional<std::vector<int64_t>> dims;
  DType type = DType::kUndefined;
  for (ir::Value* v : all) {
    const ir::Value* r = Resolve(v);
    std::optional<std::vector<int64_t>> d = StaticDims(r);
    const DType t = r->initializer() ? r->initializer()->dtype()
                                     : (r->type().is_tensor() ? r->type().elem_type() : DType::kUndefined);
    if (!d || t == DType::kUndefined || (dims && (*d != *dims || t != type))) return nullptr;
    dims = d;
    type = t;
  }
  std::optional<std::vector<ir::Value*>> here = InGraph(g, elems);
  if (!here) return nullptr;
  if (here->empty()) return nullptr;
  std::vector<ir::Value*> parts;
  for (ir::Value* v : *here) parts.push_back(ctx.EmitUnsqueeze(v, {0}));
  *rank = static_cast<int64_t>(dims->size());
  return ctx.Emit1("Concat", parts, {ir::Attribute::Int("axis", 0)}, "", type);
}

bool Lowering::Define(ir::Graph& g, ir::Node* n) {
  ir::Value* out = n->output(0);
  if (!out) return false;
  // What the context adds is found again as the graph's last nodes and initializers.
  const size_t nodes_before = g.num_nodes(), constants_before = g.initializers().size();
  ops::DecomposeContext ctx = Context(g, n);
  bool ok = false;
  if (IsOnnxOp(n, "SequenceEmpty")) {
    Seq s;
    s.dtype = static_cast<DType>(n->GetInt("dtype", static_cast<int64_t>(DType::kFloat32)));
    seqs_[out] = std::move(s);
    ok = true;
  } else if (IsOnnxOp(n, "SequenceConstruct")) {
    Seq s;
    ok = true;
    for (ir::Value* v : n->inputs()) {
      ok = ok && v;
      if (v) s.elems.push_back(Resolve(v));
    }
    if (ok) seqs_[out] = std::move(s);
  } else if (IsOnnxOp(n, "SplitToSequence")) {
    ok = DefineSplit(g, n, ctx);
  } else if (IsOnnxOp(n, "Identity") || IsOnnxOp(n, "SequenceInsert") || IsOnnxOp(n, "SequenceErase")) {
    const Seq* found = Find(n->input(0));
    const bool insert = IsOnnxOp(n, "SequenceInsert"), erase = IsOnnxOp(n, "SequenceErase");
    ir::Value* x = insert ? n->input(1) : nullptr;
    ir::Value* pos_value = insert ? n->input(2) : (erase ? n->input(1) : nullptr);
    const std::optional<int64_t> pos = pos_value ? ConstInt(pos_value) : std::nullopt;
    if (found && (!insert || x)) {
      Seq s = *found;
      if (!insert && !erase) {
        ok = true;
      } else if (s.kind == Seq::Kind::kList && (!pos_value || pos)) {
        // Constant positions on a list: the list changes, no node is needed.
        const int64_t size = static_cast<int64_t>(s.elems.size());
        int64_t p = pos ? *pos : (insert ? size : size - 1);
        if (p < 0) p += size;
        if (insert && p >= 0 && p <= size) {
          s.elems.insert(s.elems.begin() + p, Resolve(x));
          ok = true;
        } else if (erase && p >= 0 && p < size) {
          s.elems.erase(s.elems.begin() + p);
          ok = true;
        }  // else out of range: the op's own error, at run time
      } else {
        // A position known at run time: on a stacked tensor (a list whose elements all have one static shape is
        // stacked first), the slices before and after it.
        ir::Value* stacked = nullptr;
        int64_t rank = s.rank;
        if (s.kind == Seq::Kind::kList) {
          stacked = Stack(g, ctx, s.elems, x, &rank);
        } else if (s.kind == Seq::Kind::kStacked) {
          stacked = InGraph(g, s.tensor);
        }
        ir::Value* x_here = x ? InGraph(g, x) : nullptr;
        if (stacked && (!insert || x_here)) {
          ir::Value* shape = ctx.Emit1("Shape", {stacked});
          ir::Value* length =
              ctx.Emit1("Gather", {shape, ctx.Scalar(DType::kInt64, 0)}, {ir::Attribute::Int("axis", 0)});
          ir::Value* p = nullptr;  // [1]
          if (pos_value) {
            if (ir::Value* pos_here = InGraph(g, pos_value)) {
              p = ctx.EmitUnsqueeze(Normalized(ctx, pos_here, length), {0});
            }
          } else {
            ir::Value* n1 = ctx.Emit1("Slice", {shape, ctx.Ints({0}), ctx.Ints({1}), ctx.Ints({0})});
            p = insert ? n1 : ctx.Emit1("Sub", {n1, ctx.Ints({1})});
          }
          if (p) {
            ir::Value* axes = ctx.Ints({0});
            ir::Value* before = ctx.Emit1("Slice", {stacked, ctx.Ints({0}), p, axes});
            ir::Value* after_start = insert ? p : ctx.Emit1("Add", {p, ctx.Ints({1})});
            ir::Value* after =
                ctx.Emit1("Slice", {stacked, after_start, ctx.Ints({std::numeric_limits<int64_t>::max()}), axes});
            std::vector<ir::Value*> parts = {before};
            if (insert) parts.push_back(ctx.EmitUnsqueeze(x_here, {0}));
            parts.push_back(after);
            Seq st;
            st.kind = Seq::Kind::kStacked;
            st.tensor = ctx.Emit1("Concat", parts, {ir::Attribute::Int("axis", 0)});
            st.rank = rank;
            seqs_[out] = std::move(st);
            ok = true;
          }
        }
      }
      if (ok && !seqs_.count(out)) seqs_[out] = std::move(s);
    }
  }
  // Remember what the context added, to remove it again should no reader of the sequence be lowered.
  for (ir::Node* added : NodesAddedSince(g, nodes_before)) created_.insert(added);
  for (size_t i = constants_before; i < g.initializers().size(); ++i) created_constants_.insert(g.initializers()[i]);
  return ok;
}

bool Lowering::DefineSplit(ir::Graph& g, ir::Node* n, ops::DecomposeContext& ctx) {
  ir::Value* out = n->output(0);
  ir::Value* x = Resolve(n->input(0));
  if (!x) return false;
  const int64_t axis = n->GetInt("axis", 0);
  const bool keepdims = n->GetInt("keepdims", 1) != 0;
  ir::Value* split = n->input(1);
  Seq s;
  s.kind = Seq::Kind::kSplit;
  s.tensor = x;
  s.rank = ElementRank(x);
  s.axis = axis;  // as given: Gather, Slice and Shape's Gather take negative axes, so no rank is trusted for it
  s.keepdims = keepdims;
  if (!split) {
    seqs_[out] = std::move(s);
    return true;
  }
  const int64_t split_rank = ElementRank(split);
  if (split_rank == 0) {
    std::optional<int64_t> k = ConstInt(split);
    if (!k || *k <= 0) return false;
    s.chunk = *k;
    // keepdims applies to the scalar 1 as well, as ONNX Runtime reads it; a longer chunk keeps its axis.
    s.keepdims = *k == 1 ? keepdims : true;
    seqs_[out] = std::move(s);
    return true;
  }
  if (split_rank != 1) return false;
  s.keepdims = true;
  // Constant lengths: one Split node, its outputs the list. Lengths known at run time only are read then (chunk p
  // starts at the sum of the lengths before it), which also serves positions known at run time only.
  std::optional<std::vector<int64_t>> sizes = ConstInts(split);
  if (!sizes) {
    s.sizes = Resolve(split);
    seqs_[out] = std::move(s);
    return true;
  }
  const int64_t count = static_cast<int64_t>(sizes->size());
  ir::Value* x_here = InGraph(g, x);
  if (count == 0 || !x_here) return false;
  std::vector<ir::Value*> parts;
  if (opset_ >= 13) {
    parts =
        ctx.Emit("Split", {x_here, ctx.Ints(*sizes)}, static_cast<size_t>(count), {ir::Attribute::Int("axis", axis)});
  } else {
    parts = ctx.Emit("Split", {x_here}, static_cast<size_t>(count),
                     {ir::Attribute::Int("axis", axis), ir::Attribute::Ints("split", *sizes)});
  }
  Seq list;
  list.elems = parts;
  seqs_[out] = std::move(list);
  return true;
}

bool Lowering::StackedUsesLowerable(const ir::Graph& g, const ir::Value* seq, int64_t rank) const {
  if (seq->is_graph_output()) return false;
  for (const ir::Node* n : g.nodes()) {
    for (const ir::Value* v : g.SubgraphReads(n)) {
      if (v == seq) return false;  // read inside a subgraph: not followed here
    }
  }
  for (const ir::Use& u : seq->uses()) {
    const ir::Node* n = u.node;
    if (u.index != 0) return false;
    if (IsOnnxOp(n, "SequenceAt") || IsOnnxOp(n, "SequenceLength")) continue;
    if (!IsOnnxOp(n, "ConcatFromSequence")) return false;
    const int64_t axis = n->GetInt("axis", 0);
    if (ConcatElementRank(*n, rank) < 0 && axis != 0) return false;
  }
  return true;
}

StatusOr<ir::Node*> Lowering::LowerLoopAppends(ir::Graph& g, ir::Node* loop) {
  const ir::Attribute* body_attr = loop->FindAttribute("body");
  if (!body_attr || loop->subgraphs().size() != 1) return loop;
  ir::Graph* body = loop->subgraphs()[0];
  const size_t num_states = loop->inputs().size() >= 2 ? loop->inputs().size() - 2 : 0;
  if (body->inputs().size() != num_states + 2 || body->outputs().size() < num_states + 1 ||
      loop->outputs().size() < num_states) {
    return loop;  // malformed: the kernel reports it
  }
  std::vector<size_t> lowered;  // state indices
  std::vector<ir::Value*> appended;
  std::vector<int64_t> ranks;
  std::vector<DType> types;
  for (size_t j = 0; j < num_states; ++j) {
    const Seq* init = Find(loop->input(2 + j));
    if (!init || init->kind != Seq::Kind::kList || !init->elems.empty()) continue;
    ir::Value* in = body->inputs()[2 + j];
    ir::Value* out = body->outputs()[1 + j];
    ir::Value* final_seq = loop->output(j);
    if (!final_seq || in->uses().size() != 1 || in->is_graph_output()) continue;
    ir::Node* insert = in->uses()[0].node;
    if (!IsOnnxOp(insert, "SequenceInsert") || in->uses()[0].index != 0 || insert->inputs().size() > 2 ||
        !insert->input(1) || insert->output(0) != out || !out->uses().empty() ||
        std::count(body->outputs().begin(), body->outputs().end(), out) != 1) {
      continue;
    }
    bool read_below = false;
    for (const ir::Node* n : body->nodes()) {
      for (const ir::Value* v : body->SubgraphReads(n)) read_below |= v == in || v == out;
    }
    if (read_below) continue;
    ir::Value* x = insert->input(1);
    int64_t rank = ElementRank(x);
    if (rank < 0) rank = DeclaredElementRank(out);
    if (rank < 0) rank = DeclaredElementRank(final_seq);
    if (rank < 0) rank = DeclaredElementRank(in);
    if (!StackedUsesLowerable(g, final_seq, rank)) continue;
    lowered.push_back(j);
    appended.push_back(x);
    ranks.push_back(rank);
    types.push_back(init->dtype);
  }
  if (lowered.empty()) return loop;

  // The body: each appended tensor becomes a scan output (after the existing ones), its state goes.
  for (size_t k = lowered.size(); k-- > 0;) {
    const size_t j = lowered[k];
    ir::Value* in = body->inputs()[2 + j];
    ir::Value* out = body->outputs()[1 + j];
    body->RemoveNode(in->uses()[0].node);
    body->RemoveOutput(1 + j);
    body->RemoveInput(in);
    body->RemoveValue(in);
    body->RemoveValue(out);
  }
  for (ir::Value* x : appended) body->AddOutput(x);

  // The node, made again with those inputs and outputs changed (a node's outputs cannot be removed in place).
  std::vector<ir::Value*> inputs = loop->inputs(), outputs = loop->outputs();
  std::vector<ir::Value*> finals;
  for (size_t k = lowered.size(); k-- > 0;) {
    const size_t j = lowered[k];
    finals.insert(finals.begin(), outputs[j]);
    inputs.erase(inputs.begin() + static_cast<std::ptrdiff_t>(2 + j));
    outputs.erase(outputs.begin() + static_cast<std::ptrdiff_t>(j));
  }
  std::vector<ir::Attribute> attrs;
  std::vector<std::string> attr_names;
  for (const ir::Attribute& a : loop->attributes()) attr_names.push_back(a.name());
  for (const std::string& a : attr_names) attrs.push_back(std::move(*loop->FindAttribute(a)));
  const std::string name = loop->name(), domain = loop->domain(), doc = loop->doc_string();
  // The appended values' types, read while the body still has its parent node (removed next).
  for (size_t k = 0; k < finals.size(); ++k) {
    const ir::Value* x = Resolve(appended[k]);
    if (x && x->type().is_tensor() && x->type().elem_type() != DType::kUndefined) types[k] = x->type().elem_type();
  }
  g.RemoveNode(loop);
  for (size_t k = 0; k < finals.size(); ++k) {
    ir::Value* stacked = g.CreateValue(g.UniqueName(finals[k]->name() + "/stacked"));
    // Typed, so that a loop that runs no iteration still gives an (empty) tensor: the appended value's declared type,
    // else the one SequenceEmpty declares.
    const DType t = types[k];
    // With the rank when known, so that it is [0, ?...] then, which the ops after it take.
    std::optional<ir::Shape> shape;
    if (ranks[k] >= 0) shape = ir::Shape(static_cast<size_t>(ranks[k] + 1), ir::Dim::Unknown());
    if (t != DType::kUndefined) stacked->set_type(ir::ValueType::Tensor(t, shape));
    outputs.push_back(stacked);
    Seq s;
    s.kind = Seq::Kind::kStacked;
    s.tensor = stacked;
    s.rank = ranks[k];
    seqs_[finals[k]] = std::move(s);
  }
  ir::Node* rebuilt = g.AddNode("Loop", inputs, outputs, name, domain);
  rebuilt->set_doc_string(doc);
  for (ir::Attribute& a : attrs) rebuilt->SetAttribute(std::move(a));
  changed_ = true;
  return rebuilt;
}

StatusOr<bool> Lowering::Replace(ir::Graph& g, ir::Node* n) {
  // What ReplaceWith adds before it finds that it cannot replace the node is found again as the graph's last nodes and
  // initializers, and removed.
  const size_t nodes_before = g.num_nodes(), constants_before = g.initializers().size();
  StatusOr<bool> replaced = ReplaceWith(g, n);
  if (!replaced.ok() || *replaced) return replaced;
  for (ir::Node* added : NodesAddedSince(g, nodes_before)) {
    std::vector<ir::Value*> outs = added->outputs();
    g.RemoveNode(added);
    for (ir::Value* v : outs) {
      if (v && v->uses().empty() && !v->is_graph_output()) g.RemoveValue(v);
    }
  }
  std::vector<ir::Value*> constants(g.initializers().begin() + static_cast<std::ptrdiff_t>(constants_before),
                                    g.initializers().end());
  for (ir::Value* v : constants) {
    if (!v->uses().empty()) continue;
    g.RemoveInitializer(v);
    g.RemoveValue(v);
  }
  return false;
}

StatusOr<bool> Lowering::ReplaceWith(ir::Graph& g, ir::Node* n) {
  const bool at = IsOnnxOp(n, "SequenceAt"), length = IsOnnxOp(n, "SequenceLength"),
             concat = IsOnnxOp(n, "ConcatFromSequence");
  if (!at && !length && !concat) return false;
  const Seq* found = Find(n->input(0));
  if (!found || !n->output(0)) return false;
  const Seq s = *found;
  ops::DecomposeContext ctx = Context(g, n);
  auto gather_scalar = [&](ir::Value* shape, int64_t i) {
    return ctx.Emit1("Gather", {shape, ctx.Scalar(DType::kInt64, static_cast<double>(i))},
                     {ir::Attribute::Int("axis", 0)});
  };
  auto slice1 = [&](ir::Value* v, int64_t start, int64_t end) {
    return ctx.Emit1("Slice", {v, ctx.Ints({start}), ctx.Ints({end}), ctx.Ints({0})});
  };
  ir::Value* result = nullptr;

  if (s.kind == Seq::Kind::kList) {
    std::optional<std::vector<ir::Value*>> elems = InGraph(g, s.elems);
    if (!elems) return false;
    const int64_t size = static_cast<int64_t>(elems->size());
    if (length) {
      result = ctx.Scalar(DType::kInt64, static_cast<double>(size));
    } else if (at) {
      if (!n->input(1)) return false;
      if (std::optional<int64_t> pos = ConstInt(n->input(1))) {
        const int64_t p = *pos < 0 ? *pos + size : *pos;
        if (p < 0 || p >= size) return false;
        result = (*elems)[p];
      } else {
        // A position known at run time: the elements stacked (when they have one static shape), then gathered.
        int64_t rank = -1;
        ir::Value* stacked = Stack(g, ctx, s.elems, nullptr, &rank);
        if (!stacked) return false;
        result = ctx.Emit1("Gather", {stacked, n->input(1)}, {ir::Attribute::Int("axis", 0)});
      }
    } else {
      if (size == 0) return false;
      const int64_t axis = n->GetInt("axis", 0);
      std::vector<ir::Value*> parts = *elems;
      if (n->GetInt("new_axis", 0) != 0) {
        for (ir::Value*& v : parts) v = ctx.EmitUnsqueeze(v, {axis});
      }
      result = ctx.Emit1("Concat", parts, {ir::Attribute::Int("axis", axis)});
    }
  } else if (s.kind == Seq::Kind::kStacked) {
    ir::Value* stacked = InGraph(g, s.tensor);
    if (!stacked) return false;
    if (length) {
      result = gather_scalar(ctx.Emit1("Shape", {stacked}), 0);
    } else if (at) {
      if (!n->input(1)) return false;
      result = ctx.Emit1("Gather", {stacked, n->input(1)}, {ir::Attribute::Int("axis", 0)});
    } else {
      const bool new_axis = n->GetInt("new_axis", 0) != 0;
      const int64_t r = ConcatElementRank(*n, s.rank);
      int64_t axis = n->GetInt("axis", 0);
      const bool from_back = axis < 0;
      if (from_back) {
        if (r < 0) return false;
        axis += r + (new_axis ? 1 : 0);
      }
      if (axis < 0 || (r >= 0 && axis > r - (new_axis ? 0 : 1))) {
        return InvalidArgument(n->Describe(), ": axis ", n->GetInt("axis", 0), " is out of range for elements of rank ",
                               r, new_axis ? " with new_axis" : "");
      }
      // The elements' dims [e_0 .. e_{r-1}], S [n, e...]: move n to position `axis`; without new_axis, merge it with
      // the dim after it (element 0's rows along the axis first, then element 1's, ...).
      ir::Value* moved = stacked;
      if (axis > 0) {
        if (r < 0) return false;
        std::vector<int64_t> perm;
        for (int64_t i = 1; i <= axis; ++i) perm.push_back(i);
        perm.push_back(0);
        for (int64_t i = axis + 1; i <= r; ++i) perm.push_back(i);
        moved = ctx.Emit1("Transpose", {stacked}, {ir::Attribute::Ints("perm", perm)});
      } else if (from_back) {
        // The axis counted from the back became 0 through a rank that may only be declared (exporters declare wrong
        // ones): an identity Transpose fails at run time unless S has rank r + 1, where a wrong rank would otherwise
        // stack or merge along the wrong axis without an error.
        moved = RankChecked(ctx, stacked, r + 1);
      }
      if (new_axis) {
        result = moved;
      } else {
        ir::Value* shape = ctx.Emit1("Shape", {moved});
        ir::Value* merged = ctx.Emit1("Mul", {slice1(shape, axis, axis + 1), slice1(shape, axis + 1, axis + 2)});
        ir::Value* dims = ctx.Emit1(
            "Concat", {slice1(shape, 0, axis), merged, slice1(shape, axis + 2, std::numeric_limits<int64_t>::max())},
            {ir::Attribute::Int("axis", 0)});
        // allowzero (opset 14+): a 0 in the dims is an empty element's dim, not "copy the input's".
        std::vector<ir::Attribute> reshape_attrs;
        if (opset_ >= 14) reshape_attrs.push_back(ir::Attribute::Int("allowzero", 1));
        result = ctx.Emit1("Reshape", {moved, dims}, std::move(reshape_attrs));
      }
    }
  } else {  // kSplit
    ir::Value* x = InGraph(g, s.tensor);
    if (!x) return false;
    ir::Value* dim = nullptr;
    auto axis_dim = [&]() {
      if (!dim) dim = gather_scalar(ctx.Emit1("Shape", {x}), s.axis);
      return dim;
    };
    ir::Value* sizes = nullptr;
    if (s.sizes) {
      sizes = InGraph(g, s.sizes);
      if (!sizes) return false;
      sizes = ctx.CastTo(sizes, DType::kInt64);
    }
    auto count = [&]() -> ir::Value* {
      if (sizes) return gather_scalar(ctx.Emit1("Shape", {sizes}), 0);
      if (s.chunk == 1) return axis_dim();
      ir::Value* up = ctx.Emit1("Add", {axis_dim(), ctx.Scalar(DType::kInt64, static_cast<double>(s.chunk - 1))});
      return ctx.Emit1("Div", {up, ctx.Scalar(DType::kInt64, static_cast<double>(s.chunk))});
    };
    if (length) {
      result = count();
    } else if (at) {
      ir::Value* pos = n->input(1);
      if (!pos) return false;
      if (sizes) {
        // Chunk p starts at the sum of the lengths before it.
        ir::Value* p = Normalized(ctx, pos, count());
        ir::Value* offsets =
            ctx.Emit1("CumSum", {sizes, ctx.Scalar(DType::kInt64, 0)}, {ir::Attribute::Int("exclusive", 1)});
        ir::Value* start = ctx.Emit1("Gather", {offsets, p}, {ir::Attribute::Int("axis", 0)});
        ir::Value* end = ctx.Emit1("Add", {start, ctx.Emit1("Gather", {sizes, p}, {ir::Attribute::Int("axis", 0)})});
        result =
            ctx.Emit1("Slice", {x, ctx.EmitUnsqueeze(start, {0}), ctx.EmitUnsqueeze(end, {0}), ctx.Ints({s.axis})});
      } else if (s.chunk == 1) {
        ir::Value* index = s.keepdims ? ctx.EmitUnsqueeze(pos, {0}) : pos;
        result = ctx.Emit1("Gather", {x, index}, {ir::Attribute::Int("axis", s.axis)});
      } else {
        ir::Value* p = Normalized(ctx, pos, count());
        ir::Value* start = ctx.Emit1("Mul", {p, ctx.Scalar(DType::kInt64, static_cast<double>(s.chunk))});
        ir::Value* end = ctx.Emit1("Add", {start, ctx.Scalar(DType::kInt64, static_cast<double>(s.chunk))});
        result =
            ctx.Emit1("Slice", {x, ctx.EmitUnsqueeze(start, {0}), ctx.EmitUnsqueeze(end, {0}), ctx.Ints({s.axis})});
      }
    } else {
      // Concatenating the chunks again along their own axis gives X back: with new_axis when each chunk lost the
      // axis, without it when each kept it.
      const bool new_axis = n->GetInt("new_axis", 0) != 0;
      int64_t axis = n->GetInt("axis", 0);
      const int64_t out_rank = s.rank < 0 ? -1 : (s.keepdims ? s.rank : s.rank - 1) + (new_axis ? 1 : 0);
      if (axis < 0 && out_rank >= 0) axis += out_rank;
      const int64_t split_axis = s.axis < 0 && s.rank >= 0 ? s.axis + s.rank : s.axis;
      const bool same_axis = axis == split_axis && (axis >= 0 || s.rank < 0);
      if (!same_axis || new_axis == s.keepdims) return false;
      // Axes of different signs were compared through X's rank, which may only be declared: checked at run time.
      const bool through_rank = (n->GetInt("axis", 0) < 0) != (s.axis < 0);
      result = through_rank ? RankChecked(ctx, x, s.rank) : x;
    }
  }
  if (!result) return false;
  ctx.SetY(0, result);
  ONNXAMP_RETURN_IF_ERROR(ctx.Finish());
  changed_ = true;
  return true;
}

void Lowering::RemoveDead(ir::Graph& g) {
  // Outer-scope references that nothing reads any more (made by a replacement given up, or to a sequence whose readers
  // were all replaced), first: they count as reads of the enclosing graph's values.
  for (ir::Value* v : g.values()) {
    // Also the references to a sequence whose readers were all replaced.
    if ((created_refs_.count(v) || (v->is_outer_scope() && Find(v))) && v->uses().empty() && !v->is_graph_output()) {
      changed_ = changed_ || !created_refs_.count(v);
      created_refs_.erase(v);
      g.RemoveValue(v);
    }
  }
  // Sequence ops, and the nodes Define added, whose outputs nothing reads any more, last first.
  std::unordered_set<std::string> read_below;
  for (ir::Node* n : g.nodes()) {
    for (ir::Value* v : g.SubgraphReads(n)) read_below.insert(v->name());
  }
  bool removed = true;
  while (removed) {
    removed = false;
    std::vector<ir::Node*> nodes;
    for (ir::Node* n : g.nodes()) nodes.push_back(n);
    for (size_t i = nodes.size(); i-- > 0;) {
      ir::Node* n = nodes[i];
      const bool created = created_.count(n) > 0;
      const bool seq_identity = IsOnnxOp(n, "Identity") && (IsSequenceType(n->output(0)) || seqs_.count(n->output(0)));
      const bool seq_op = MakesSequence(n);
      if (!created && !seq_identity && !seq_op) continue;
      bool dead = true;
      for (ir::Value* v : n->outputs()) {
        dead = dead && (!v || (v->uses().empty() && !v->is_graph_output() && !read_below.count(v->name())));
      }
      if (!dead) continue;
      std::vector<ir::Value*> outs = n->outputs();
      std::vector<ir::Value*> ins = n->inputs();
      std::sort(ins.begin(), ins.end());
      ins.erase(std::unique(ins.begin(), ins.end()), ins.end());  // a value read twice is removed once
      changed_ = changed_ || !created;                            // removing a sequence op of the model changes it
      created_.erase(n);
      g.RemoveNode(n);
      for (ir::Value* v : outs) {
        if (!v) continue;
        seqs_.erase(v);
        g.RemoveValue(v);
      }
      for (ir::Value* v : ins) {
        if (!v || !v->uses().empty() || v->is_graph_output()) continue;
        if (created_constants_.count(v)) {
          created_constants_.erase(v);
          g.RemoveInitializer(v);
          g.RemoveValue(v);
        } else if (v->is_outer_scope()) {
          created_refs_.erase(v);
          g.RemoveValue(v);
        }
      }
      removed = true;
    }
  }
  // Values the Loop rewrite left without a producer.
  for (ir::Value* v : g.values()) {
    if (v->uses().empty() && !v->producer() && !v->is_graph_input() && !v->is_graph_output() && !v->initializer() &&
        !v->sparse_initializer() && seqs_.count(v)) {
      seqs_.erase(v);
      g.RemoveValue(v);
    }
  }
}

Status Lowering::LowerGraph(ir::Graph& g) {
  ONNXAMP_ASSIGN_OR_RETURN(std::vector<ir::Node*> order, g.TopologicalOrder());
  for (ir::Node* n : order) {
    // The body first: the ranks of what a loop appends come from its (then lowered) ops.
    for (ir::Graph* sub : n->subgraphs()) ONNXAMP_RETURN_IF_ERROR(LowerGraph(*sub));
    if (IsOnnxOp(n, "Loop")) {
      ONNXAMP_ASSIGN_OR_RETURN(n, LowerLoopAppends(g, n));
    }
    if (!n->output(0) || n->outputs().size() != 1) continue;
    if (IsSequenceType(n->output(0)) || MakesSequence(n) || (IsOnnxOp(n, "Identity") && Find(n->input(0)))) {
      Define(g, n);
      continue;
    }
    ONNXAMP_ASSIGN_OR_RETURN(bool replaced, Replace(g, n));
    (void)replaced;
  }
  RemoveDead(g);
  return g.SortTopologically();
}

}  // namespace

bool HasSequenceOps(const ir::Graph& graph) {
  for (const ir::Node* n : graph.nodes()) {
    const std::string& op = n->op_type();
    if (ir::IsDefaultDomain(n->domain()) &&
        (op.starts_with("Sequence") || op == "SplitToSequence" || op == "ConcatFromSequence")) {
      return true;
    }
    for (const ir::Graph* sub : n->subgraphs()) {
      if (HasSequenceOps(*sub)) return true;
    }
  }
  return false;
}

Status LowerSequences(ir::Model& model, bool* changed) {
  if (changed) *changed = false;
  if (!model.graph || !HasSequenceOps(*model.graph)) return Status::Ok();
  const int64_t opset = model.OpsetVersion("");
  if (opset < 11) return Status::Ok();  // sequence ops start at opset 11
  Lowering lowering(opset);
  ONNXAMP_RETURN_IF_ERROR(lowering.LowerGraph(*model.graph));
  if (changed) *changed = lowering.changed();
  return Status::Ok();
}

}  // namespace onnxamp::exec
