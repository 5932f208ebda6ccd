// The graph optimizer's blocked-layout pass (UseBlockedLayout, see graph_optimizer.h).
//
// Three steps over the graph in topological order. (1) Candidates: convolutions, MaxPool/AveragePool and
// GlobalAveragePool whose kernels have a blocked form for their (float32) operands. (2) Which inputs accept a
// blocked tensor, from the graph's end: a convolution's X and Z and a GlobalAveragePool's X always; a pooling's X
// when its own output can be blocked, i.e. every reader of that output accepts a blocked tensor. (3) From the
// start, which values are blocked: a convolution's output whose readers all accept one, and a pooling's output when
// its input is blocked. Then the nodes touching a blocked value become Blocked* ops and those values get their
// blocked types. Nothing is inserted: a BlockedConv reads and writes plain tensors beside blocked ones itself.
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/executor/graph_optimizer.h"

namespace onnxamp::exec {
namespace {

enum class Kind { kNone, kConv, kPool, kGlobalPool };

bool IsDefault(const ir::Node* n, const char* op) { return n->op_type() == op && ir::IsDefaultDomain(n->domain()); }

// A float32 tensor, or a value whose type the graph leaves out (the weights then say what it is).
bool MaybeFloat32(const ir::Value* v) {
  if (!v) return false;
  const ir::ValueType& t = v->type();
  return !t.defined() || (t.is_tensor() && (t.elem_type() == DType::kFloat32 || t.elem_type() == DType::kUndefined));
}

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

struct Candidate {
  Kind kind = Kind::kNone;
  int64_t spatial = 0;       // spatial dims
  int64_t out_channels = 0;  // convolution: M
};

Candidate Classify(const ir::Node* n) {
  Candidate c;
  if (n->outputs().empty() || !n->output(0) || !MaybeFloat32(n->output(0)) || n->inputs().empty() ||
      !MaybeFloat32(n->input(0))) {
    return c;
  }
  const bool conv = IsDefault(n, "Conv") || (n->op_type() == kFusedConvOp && n->domain() == kInternalDomain);
  if (conv) {
    if (n->outputs().size() != 1 || n->inputs().size() < 2 || n->inputs().size() > 4) return c;
    const ir::Value* w = n->input(1);
    if (!w || w->is_graph_input() || !w->initializer() || !w->initializer()->has_data()) return c;
    const ir::Tensor& wt = *w->initializer();
    const int64_t group = n->GetInt("group", 1);
    if (wt.dtype() != DType::kFloat32 || wt.rank() < 3 || wt.rank() > 5 || group < 1 || wt.dims()[0] % group != 0) {
      return c;
    }
    if (n->inputs().size() > 2 && n->input(2) && !MaybeFloat32(n->input(2))) return c;
    if (n->inputs().size() > 3 && n->input(3) &&
        !(MaybeFloat32(n->input(3)) && MaybeSameShape(n->input(3), n->output(0)))) {
      return c;
    }
    const std::string act = n->GetString("activation", "");
    if (act != "" && act != "Relu") return c;
    c.kind = Kind::kConv;
    c.spatial = wt.rank() - 2;
    c.out_channels = wt.dims()[0];
    return c;
  }
  if (IsDefault(n, "MaxPool") || IsDefault(n, "AveragePool")) {
    for (size_t i = 1; i < n->outputs().size(); ++i) {
      if (n->output(i)) return c;  // Indices
    }
    const size_t k = n->GetInts("kernel_shape").size();
    if (k < 1 || k > 3) return c;
    if (IsDefault(n, "AveragePool") && n->GetInt("ceil_mode", 0) == 1 && n->GetInt("count_include_pad", 0) == 1) {
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

}  // namespace

Status UseBlockedLayout(ir::Graph& graph, int64_t block, bool* changed) {
  *changed = false;
  if (block != 8 && block != 16) return InvalidArgument("channel block must be 8 or 16, got ", block);
  std::vector<ir::Node*> order;
  for (ir::Node* n : graph.nodes()) {
    for (const ir::Attribute& a : n->attributes()) {
      // A subgraph may read a value of this graph without being listed among its uses.
      if (a.type() == ir::AttrType::kGraph || a.type() == ir::AttrType::kGraphs) return Status::Ok();
    }
    order.push_back(n);
  }
  std::unordered_map<const ir::Node*, Candidate> cand;
  for (ir::Node* n : order) {
    Candidate c = Classify(n);
    if (c.kind != Kind::kNone) cand[n] = c;
  }
  auto kind_of = [&](const ir::Node* n) {
    auto it = cand.find(n);
    return it == cand.end() ? Kind::kNone : it->second.kind;
  };
  // (2) Poolings whose output may be blocked, from the end.
  std::unordered_map<const ir::Node*, bool> pool_accepts;
  auto readers_accept = [&](const ir::Value* v) {
    if (v->is_graph_output() || v->uses().empty()) return false;
    for (const ir::Use& u : v->uses()) {
      switch (kind_of(u.node)) {
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
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    if (kind_of(*it) == Kind::kPool) pool_accepts[*it] = readers_accept((*it)->output(0));
  }
  // (3) Blocked values and their channel counts, from the start.
  std::unordered_map<const ir::Value*, int64_t> channels;
  auto blocked = [&](const ir::Value* v) { return v && channels.count(v) > 0; };
  for (ir::Node* n : order) {
    const Kind k = kind_of(n);
    if (k == Kind::kConv && readers_accept(n->output(0))) channels[n->output(0)] = cand[n].out_channels;
    if (k == Kind::kPool && blocked(n->input(0)) && pool_accepts[n]) channels[n->output(0)] = channels[n->input(0)];
  }
  if (channels.empty()) return Status::Ok();
  // Rewrite the nodes, then the types.
  auto set_int = [](ir::Node* n, const char* name, int64_t v) { n->SetAttribute(ir::Attribute::Int(name, v)); };
  for (ir::Node* n : order) {
    const Kind k = kind_of(n);
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
      set_int(n, "channels", channels[n->input(0)]);
    }
  }
  for (ir::Node* n : order) {
    ir::Value* v = n->outputs().empty() ? nullptr : n->output(0);
    if (blocked(v)) v->set_type(BlockedType(v, channels[v], cand[n].spatial, block));
  }
  *changed = true;
  return Status::Ok();
}

}  // namespace onnxamp::exec
