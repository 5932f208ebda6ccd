// The graph optimizer's layout passes (UseBlockedLayout and UseChannelsLastLayout, see graph_optimizer.h).
//
// Both share one analysis over the graph in topological order. (1) Candidates: convolutions, MaxPool/AveragePool
// and GlobalAveragePool whose kernels have a form for the layout and whose operands have an element type the
// layout takes. (2) Which inputs accept a laid-out tensor, from the graph's end: a convolution's X and Z and a
// GlobalAveragePool's X always; a pooling's X when its own output can be laid out, i.e. every reader of that output
// accepts one. (3) From the start, which values are laid out: a convolution's output whose readers all accept one,
// and a pooling's output when its input is laid out. Then the nodes touching a laid-out value become the layout's
// ops and those values get their new types. The blocked ops read and write plain tensors beside blocked ones
// themselves, so that pass inserts nothing; the channels-last ops take channels-last tensors only, so that pass
// inserts a Transpose where a chain starts or a convolution's output leaves it.
#include <algorithm>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/executor/graph_optimizer.h"
#include "runtime/ops/common/elementwise_half.h"
#include "runtime/ops/layout/channels_last.h"
#include "runtime/ops/transpose/transpose.h"

namespace onnxamp::exec {
namespace {

enum class Kind { kNone, kConv, kPool, kGlobalPool };

bool IsDefault(const ir::Node* n, const char* op) { return n->op_type() == op && ir::IsDefaultDomain(n->domain()); }

// The element types a layout takes (the convolution weights' type decides; other operands must not contradict it).
struct Types {
  std::vector<DType> dtypes;
  bool Has(DType t) const { return std::find(dtypes.begin(), dtypes.end(), t) != dtypes.end(); }
  // A tensor of one of the types, or a value whose type the graph leaves out (the weights then say what it is).
  bool Maybe(const ir::Value* v) const {
    if (!v) return false;
    const ir::ValueType& t = v->type();
    return !t.defined() || (t.is_tensor() && (Has(t.elem_type()) || t.elem_type() == DType::kUndefined));
  }
};

// False when both shapes are known well enough to differ (Z would broadcast); a shape the graph leaves open is
// checked by the kernel, which broadcasts when it must.
bool MaybeSameShape(const ir::Value* a, const ir::Value* b) {
  const auto& sa = a->type().shape();
  const auto& sb = b->type().shape();
  if (!sa || !sb) return true;
  if (sa->size() != sb->size()) return false;
  for (size_t i = 0; i < sa->size(); ++i) {
    const ir::Dim &da = (*sa)[i], &db = (*sb)[i];
    if (da.is_value() && db.is_value() && da.value != db.value) return false;
  }
  return true;
}

// The rank of a value's type, or -1 when the graph leaves it open.
int64_t KnownRank(const ir::Value* v) {
  const auto& shape = v->type().shape();
  return v->type().is_tensor() && shape ? static_cast<int64_t>(shape->size()) : -1;
}

// The rank of a value that a convolution (from its constant weights) or a pooling (from kernel_shape) makes, else -1.
int64_t ProducedRank(const ir::Value* v) {
  const ir::Node* p = v->producer();
  if (!p) return -1;
  if (IsDefault(p, "Conv") || (p->op_type() == kFusedConvOp && p->domain() == kInternalDomain)) {
    const ir::Value* w = p->input(1);
    return w && !w->is_graph_input() && w->initializer() ? static_cast<int64_t>(w->initializer()->rank()) : -1;
  }
  if (IsDefault(p, "MaxPool") || IsDefault(p, "AveragePool")) {
    const size_t k = p->GetInts("kernel_shape").size();
    return k > 0 ? static_cast<int64_t>(k) + 2 : -1;
  }
  return -1;
}

struct Candidate {
  Kind kind = Kind::kNone;
  int64_t spatial = 0;              // spatial dims
  int64_t out_channels = 0;         // convolution: M
  DType dtype = DType::kUndefined;  // convolution: the weights' element type
};

Candidate Classify(const ir::Node* n, const Types& types, bool blocked) {
  Candidate c;
  if (n->outputs().empty() || !n->output(0) || !types.Maybe(n->output(0)) || n->inputs().empty() ||
      !types.Maybe(n->input(0))) {
    return c;
  }
  const bool conv = IsDefault(n, "Conv") || (n->op_type() == kFusedConvOp && n->domain() == kInternalDomain);
  if (conv) {
    if (n->outputs().size() != 1 || n->inputs().size() < 2 || n->inputs().size() > 4) return c;
    const ir::Value* w = n->input(1);
    if (!w || w->is_graph_input() || !w->initializer() || !w->initializer()->has_data()) return c;
    const ir::Tensor& wt = *w->initializer();
    const int64_t group = n->GetInt("group", 1);
    if (!types.Has(wt.dtype()) || wt.rank() < 3 || wt.rank() > 5 || group < 1 || wt.dims()[0] % group != 0) {
      return c;
    }
    const int64_t x_rank = KnownRank(n->input(0));
    if (x_rank != -1 && x_rank != wt.rank()) return c;
    if (n->inputs().size() > 2 && n->input(2) && !types.Maybe(n->input(2))) return c;
    if (n->inputs().size() > 3 && n->input(3)) {
      const ir::Value* z = n->input(3);
      if (!types.Maybe(z) || !MaybeSameShape(z, n->output(0))) return c;
      // A channels-last Z is permuted like Y, which needs its rank: known from its type, or Z comes from a
      // convolution or pooling (whose output has Y's rank when it is laid out at all).
      if (!blocked && KnownRank(z) != wt.rank() && !(KnownRank(z) == -1 && ProducedRank(z) == wt.rank())) return c;
    }
    const std::string act = n->GetString("activation", "");
    if (act != "" && act != "Relu") return c;
    c.kind = Kind::kConv;
    c.spatial = wt.rank() - 2;
    c.out_channels = wt.dims()[0];
    c.dtype = wt.dtype();
    return c;
  }
  if (IsDefault(n, "MaxPool") || IsDefault(n, "AveragePool")) {
    for (size_t i = 1; i < n->outputs().size(); ++i) {
      if (n->output(i)) return c;  // Indices
    }
    const size_t k = n->GetInts("kernel_shape").size();
    if (k < 1 || k > 3) return c;
    if (blocked && IsDefault(n, "AveragePool") && n->GetInt("ceil_mode", 0) == 1 &&
        n->GetInt("count_include_pad", 0) == 1) {
      return c;  // oneDNN's divisor differs where a ceil-mode window passes the padding
    }
    c.kind = Kind::kPool;
    c.spatial = static_cast<int64_t>(k);
    return c;
  }
  if (IsDefault(n, "GlobalAveragePool") && n->outputs().size() == 1) c.kind = Kind::kGlobalPool;
  return c;
}

// The blocked type of a float32 value with `channels` channels and `spatial` spatial dims.
ir::ValueType BlockedType(const ir::Value* v, int64_t channels, int64_t spatial, int64_t block) {
  ir::Shape shape;
  const auto& old = v->type().shape();
  if (old && static_cast<int64_t>(old->size()) == spatial + 2) {
    shape = *old;
  } else {
    shape.assign(static_cast<size_t>(spatial + 2), ir::Dim::Unknown());
  }
  shape[1] = ir::Dim::Value((channels + block - 1) / block);
  shape.push_back(ir::Dim::Value(block));
  return ir::ValueType::Tensor(DType::kFloat32, shape);
}

// The analysis both passes share: candidates and which values are laid out (with their channel counts).
struct LayoutPlan {
  std::vector<ir::Node*> order;
  std::unordered_map<const ir::Node*, Candidate> cand;
  std::unordered_map<const ir::Value*, int64_t> channels;  // laid-out values -> C

  Kind kind_of(const ir::Node* n) const {
    auto it = cand.find(n);
    return it == cand.end() ? Kind::kNone : it->second.kind;
  }
  bool laid_out(const ir::Value* v) const { return v && channels.count(v) > 0; }
};

// Fills `plan`; false when the graph has subgraphs (which may read a value of this graph without being listed
// among its uses) and nothing may change.
bool Analyze(ir::Graph& graph, const Types& types, bool blocked, LayoutPlan* plan) {
  for (ir::Node* n : graph.nodes()) {
    for (const ir::Attribute& a : n->attributes()) {
      if (a.type() == ir::AttrType::kGraph || a.type() == ir::AttrType::kGraphs) return false;
    }
    plan->order.push_back(n);
  }
  for (ir::Node* n : plan->order) {
    Candidate c = Classify(n, types, blocked);
    if (c.kind != Kind::kNone) plan->cand[n] = c;
  }
  // (2) Poolings whose output may be laid out, from the end.
  std::unordered_map<const ir::Node*, bool> pool_accepts;
  auto readers_accept = [&](const ir::Value* v) {
    if (v->is_graph_output() || v->uses().empty()) return false;
    for (const ir::Use& u : v->uses()) {
      switch (plan->kind_of(u.node)) {
        case Kind::kConv:
          if (u.index != 0 && u.index != 3) return false;
          break;
        case Kind::kPool:
          if (u.index != 0 || !pool_accepts[u.node]) return false;
          break;
        case Kind::kGlobalPool:
          if (u.index != 0) return false;
          break;
        case Kind::kNone:
          return false;
      }
    }
    return true;
  };
  for (auto it = plan->order.rbegin(); it != plan->order.rend(); ++it) {
    if (plan->kind_of(*it) == Kind::kPool) pool_accepts[*it] = readers_accept((*it)->output(0));
  }
  // (3) Laid-out values and their channel counts, from the start.
  for (ir::Node* n : plan->order) {
    const Kind k = plan->kind_of(n);
    if (k == Kind::kConv && readers_accept(n->output(0))) plan->channels[n->output(0)] = plan->cand[n].out_channels;
    if (k == Kind::kPool && plan->laid_out(n->input(0)) && pool_accepts[n]) {
      plan->channels[n->output(0)] = plan->channels[n->input(0)];
    }
  }
  return true;
}

// ---- channels-last --------------------------------------------------------------------------------------------

// The shape `shape` (of rank `rank`, or unknown dims when absent or of another rank) permuted to or from
// channels-last.
ir::Shape PermuteShape(const std::optional<ir::Shape>& shape, int64_t rank, bool to_last) {
  ir::Shape in = shape && static_cast<int64_t>(shape->size()) == rank
                     ? *shape
                     : ir::Shape(static_cast<size_t>(rank), ir::Dim::Unknown());
  ir::Shape out;
  for (int64_t d : ops::ChannelsPerm(rank, to_last)) out.push_back(in[static_cast<size_t>(d)]);
  return out;
}

// Rewrites the graph for the channels-last plan (see UseChannelsLastLayout).
class ChannelsLastRewriter {
 public:
  ChannelsLastRewriter(ir::Graph& graph, const LayoutPlan& plan) : graph_(graph), plan_(plan) {}

  void Run() {
    for (ir::Node* n : plan_.order) {
      auto it = plan_.cand.find(n);
      if (it == plan_.cand.end()) continue;
      const Candidate& c = it->second;
      const int64_t rank = c.spatial + 2;
      if (c.kind == Kind::kConv) {
        const bool z = n->inputs().size() > 3 && n->input(3) != nullptr;
        if (!plan_.laid_out(n->input(0)) && !(z && plan_.laid_out(n->input(3))) && !plan_.laid_out(n->output(0))) {
          continue;
        }
        RewriteConv(n, c, z);
      } else if (plan_.laid_out(n->input(0))) {
        const bool max = n->op_type() == "MaxPool";
        n->set_op_type(c.kind == Kind::kGlobalPool ? kChannelsLastGlobalAveragePoolOp
                       : max                       ? kChannelsLastMaxPoolOp
                                                   : kChannelsLastAveragePoolOp);
        n->set_domain(kInternalDomain);
        n->RemoveAttribute("storage_order");
        if (c.kind == Kind::kPool) SetLaidOutType(n->output(0), rank);
      }
    }
    // Convolution weights that no node reads any more.
    for (auto& [old_w, new_w] : weights_) {
      if (old_w->uses().empty() && !old_w->is_graph_output() && !old_w->is_graph_input()) {
        graph_.RemoveInitializer(old_w);
        graph_.RemoveValue(old_w);
      }
    }
  }

 private:
  void RewriteConv(ir::Node* n, const Candidate& c, bool z) {
    const int64_t rank = c.spatial + 2;
    n->set_op_type(kChannelsLastConvOp);
    n->set_domain(kInternalDomain);
    if (!plan_.laid_out(n->input(0))) n->SetInput(0, EnterValue(n, n->input(0), rank, c.dtype));
    n->SetInput(1, ChannelsLastWeights(n->input(1)));
    if (z && !plan_.laid_out(n->input(3))) n->SetInput(3, EnterValue(n, n->input(3), rank, c.dtype));
    ir::Value* y = n->output(0);
    if (plan_.laid_out(y)) {
      SetLaidOutType(y, rank);
      return;
    }
    // Y leaves the chain: the node writes a channels-last value and a Transpose makes Y from it for the readers
    // outside.
    ir::Value* y_last = graph_.CreateValue(graph_.UniqueName(y->name() + "_channels_last"));
    y_last->set_type(ir::ValueType::Tensor(c.dtype, PermuteShape(y->type().shape(), rank, true)));
    n->SetOutput(0, y_last);
    ir::Node* t = graph_.InsertNode(n, "Transpose", {y_last}, {y}, graph_.UniqueName(y->name() + "_to_plain"));
    t->SetAttribute(ir::Attribute::Ints("perm", ops::ChannelsPerm(rank, false)));
    entered_[y] = y_last;  // channels-last readers of Y read the convolution's output itself
  }

  // The channels-last copy of plain value `v` that `reader` reads (one Transpose per value, before its first
  // reader in the graph's order).
  ir::Value* EnterValue(ir::Node* reader, ir::Value* v, int64_t rank, DType dtype) {
    auto it = entered_.find(v);
    if (it != entered_.end()) return it->second;
    ir::Value* last = graph_.CreateValue(graph_.UniqueName(v->name() + "_channels_last"));
    const DType t = v->type().is_tensor() && v->type().elem_type() != DType::kUndefined ? v->type().elem_type() : dtype;
    last->set_type(ir::ValueType::Tensor(t, PermuteShape(v->type().shape(), rank, true)));
    ir::Node* tr =
        graph_.InsertNode(reader, "Transpose", {v}, {last}, graph_.UniqueName(v->name() + "_to_channels_last"));
    tr->SetAttribute(ir::Attribute::Ints("perm", ops::ChannelsPerm(rank, true)));
    entered_[v] = last;
    return last;
  }

  // A new initializer holding weights `w` ([M, C / group, kernel...]) as [M, kernel..., C / group].
  ir::Value* ChannelsLastWeights(ir::Value* w) {
    auto it = weights_.find(w);
    if (it != weights_.end()) return it->second;
    const ir::Tensor& src = *w->initializer();
    const int64_t rank = static_cast<int64_t>(src.rank());
    // [M, C/g, k...] -> [M, k..., C/g]: the channels-last permutation of a rank-`rank` tensor.
    const std::vector<int64_t> perm = ops::ChannelsPerm(rank, true);
    std::vector<int64_t> dims;
    for (int64_t d : perm) dims.push_back(src.dims()[static_cast<size_t>(d)]);
    ir::Tensor dst = ir::Tensor::Uninitialized(src.dtype(), dims);
    ops::TransposeReference(src.data(), dst.mutable_data(), src.dims(), perm,
                            static_cast<size_t>(DTypeBits(src.dtype()) / 8));
    ir::Value* v = graph_.CreateValue(graph_.UniqueName(w->name() + "_channels_last"));
    v->set_type(ir::ValueType::Tensor(src.dtype(), ShapeOf(dims)));
    dst.set_name(v->name());
    graph_.SetInitializer(v, std::move(dst));
    weights_[w] = v;
    return v;
  }

  static ir::Shape ShapeOf(const std::vector<int64_t>& dims) {
    ir::Shape s;
    for (int64_t d : dims) s.push_back(ir::Dim::Value(d));
    return s;
  }

  void SetLaidOutType(ir::Value* v, int64_t rank) {
    const DType t = v->type().is_tensor() ? v->type().elem_type() : DType::kUndefined;
    v->set_type(ir::ValueType::Tensor(t, PermuteShape(v->type().shape(), rank, true)));
  }

  ir::Graph& graph_;
  const LayoutPlan& plan_;
  std::unordered_map<const ir::Value*, ir::Value*> entered_;
  std::unordered_map<ir::Value*, ir::Value*> weights_;
};

}  // namespace

Status ComputeHalfConvsInFloat(ir::Graph& graph, bool* changed) {
  *changed = false;
  LayoutPlan plan;
  if (!Analyze(graph, Types{{DType::kFloat16}}, /*blocked=*/true, &plan) || plan.channels.empty()) {
    return Status::Ok();
  }
  auto blocked = [&](const ir::Value* v) { return plan.laid_out(v); };
  std::vector<ir::Node*> convert;
  for (ir::Node* n : plan.order) {
    const Kind k = plan.kind_of(n);
    const bool take = (k == Kind::kConv && (blocked(n->input(0)) || (n->inputs().size() > 3 && blocked(n->input(3))) ||
                                            blocked(n->output(0)))) ||
                      (k == Kind::kPool && IsDefault(n, "MaxPool") && blocked(n->input(0))) ||
                      (k == Kind::kGlobalPool && blocked(n->input(0)));
    if (take) convert.push_back(n);
  }
  if (convert.empty()) return Status::Ok();
  auto float_type = [](const ir::Value* v) {
    return ir::ValueType::Tensor(DType::kFloat32, v->type().is_tensor() ? v->type().shape() : std::nullopt);
  };
  // Outputs: each converted node writes a float value, and a Cast gives the float16 value its other readers read.
  // Within the chain a convolution's (rounded) and a MaxPool's float outputs are read as they are.
  std::unordered_map<const ir::Value*, ir::Value*> as_float;
  std::vector<ir::Node*> exits;
  for (ir::Node* n : convert) {
    ir::Value* v = n->output(0);
    ir::Value* vf = graph.CreateValue(graph.UniqueName(v->name() + "_float"));
    vf->set_type(float_type(v));
    n->SetOutput(0, vf);
    ir::Node* cast = graph.InsertNode(nullptr, "Cast", {vf}, {v}, graph.UniqueName(v->name() + "_to_float16"));
    cast->SetAttribute(ir::Attribute::Int("to", static_cast<int64_t>(DType::kFloat16)));
    exits.push_back(cast);
    if (plan.kind_of(n) != Kind::kGlobalPool) as_float[v] = vf;
  }
  // Inputs: X and Z from the chain in float, others through one Cast to float each; W and B widened.
  std::unordered_map<const ir::Value*, ir::Value*> entered, widened;
  auto enter = [&](ir::Node* reader, ir::Value* v) -> ir::Value* {
    if (auto it = as_float.find(v); it != as_float.end()) return it->second;
    if (auto it = entered.find(v); it != entered.end()) return it->second;
    ir::Value* vf = graph.CreateValue(graph.UniqueName(v->name() + "_float"));
    vf->set_type(float_type(v));
    ir::Node* cast = graph.InsertNode(reader, "Cast", {v}, {vf}, graph.UniqueName(v->name() + "_to_float"));
    cast->SetAttribute(ir::Attribute::Int("to", static_cast<int64_t>(DType::kFloat32)));
    entered[v] = vf;
    return vf;
  };
  auto widen = [&](ir::Value* w) -> ir::Value* {
    if (auto it = widened.find(w); it != widened.end()) return it->second;
    const ir::Tensor& src = *w->initializer();
    ir::Tensor dst = ir::Tensor::Uninitialized(DType::kFloat32, src.dims());
    ops::HalfToFloat(src.values<Float16>().data(), dst.mutable_values<float>().data(), src.num_elements());
    ir::Value* v = graph.CreateValue(graph.UniqueName(w->name() + "_float"));
    v->set_type(ir::ValueType::Tensor(DType::kFloat32, w->type().is_tensor() ? w->type().shape() : std::nullopt));
    dst.set_name(v->name());
    graph.SetInitializer(v, std::move(dst));
    widened[w] = v;
    return v;
  };
  for (ir::Node* n : convert) {
    if (n->input(0)) n->SetInput(0, enter(n, n->input(0)));
    if (plan.kind_of(n) != Kind::kConv) continue;
    n->SetInput(1, widen(n->input(1)));
    ir::Value* b = n->inputs().size() > 2 ? n->input(2) : nullptr;
    if (b && b->initializer() && !b->is_graph_input() && b->initializer()->dtype() == DType::kFloat16) {
      n->SetInput(2, widen(b));
    } else if (b) {
      n->SetInput(2, enter(n, b));
    }
    if (n->inputs().size() > 3 && n->input(3)) n->SetInput(3, enter(n, n->input(3)));
    if (IsDefault(n, "Conv")) {
      n->set_op_type(kFusedConvOp);
      n->set_domain(kInternalDomain);
    }
    n->SetAttribute(ir::Attribute::Int("round_to", static_cast<int64_t>(DType::kFloat16)));
  }
  // Readers within the chain now read the float values; a Cast that nothing else reads goes.
  for (ir::Node* cast : exits) {
    ir::Value* v = cast->output(0);
    if (v->uses().empty() && !v->is_graph_output()) {
      graph.RemoveNode(cast);
      graph.RemoveValue(v);
    }
  }
  ONNXAMP_RETURN_IF_ERROR(graph.SortTopologically());
  *changed = true;
  return Status::Ok();
}

Status UseBlockedLayout(ir::Graph& graph, int64_t block, bool* changed) {
  *changed = false;
  if (block != 8 && block != 16) return InvalidArgument("channel block must be 8 or 16, got ", block);
  LayoutPlan plan;
  if (!Analyze(graph, Types{{DType::kFloat32}}, /*blocked=*/true, &plan) || plan.channels.empty()) {
    return Status::Ok();
  }
  auto blocked = [&](const ir::Value* v) { return plan.laid_out(v); };
  // Rewrite the nodes, then the types.
  auto set_int = [](ir::Node* n, const char* name, int64_t v) { n->SetAttribute(ir::Attribute::Int(name, v)); };
  for (ir::Node* n : plan.order) {
    const Kind k = plan.kind_of(n);
    if (k == Kind::kConv) {
      const bool z = n->inputs().size() > 3 && blocked(n->input(3));
      if (!blocked(n->input(0)) && !z && !blocked(n->output(0))) continue;
      n->set_op_type(kBlockedConvOp);
      n->set_domain(kInternalDomain);
      set_int(n, "x_block", blocked(n->input(0)) ? block : 0);
      set_int(n, "z_block", z ? block : 0);
      set_int(n, "y_block", blocked(n->output(0)) ? block : 0);
    } else if (k == Kind::kPool && blocked(n->input(0))) {
      n->set_op_type(n->op_type() == "MaxPool" ? kBlockedMaxPoolOp : kBlockedAveragePoolOp);
      n->set_domain(kInternalDomain);
      n->RemoveAttribute("storage_order");
      set_int(n, "block", block);
    } else if (k == Kind::kGlobalPool && blocked(n->input(0))) {
      n->set_op_type(kBlockedGlobalAveragePoolOp);
      n->set_domain(kInternalDomain);
      set_int(n, "block", block);
      set_int(n, "channels", plan.channels[n->input(0)]);
    }
  }
  for (ir::Node* n : plan.order) {
    ir::Value* v = n->outputs().empty() ? nullptr : n->output(0);
    if (blocked(v)) v->set_type(BlockedType(v, plan.channels[v], plan.cand[n].spatial, block));
  }
  *changed = true;
  return Status::Ok();
}

Status UseChannelsLastLayout(ir::Graph& graph, const std::vector<DType>& dtypes, bool* changed) {
  *changed = false;
  LayoutPlan plan;
  if (!Analyze(graph, Types{dtypes}, /*blocked=*/false, &plan) || plan.channels.empty()) return Status::Ok();
  ChannelsLastRewriter(graph, plan).Run();
  ONNXAMP_RETURN_IF_ERROR(graph.SortTopologically());
  *changed = true;
  return Status::Ok();
}

}  // namespace onnxamp::exec
