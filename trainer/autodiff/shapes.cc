// InferShapes: declared shapes first, then per-op rules in topological order.
#include "trainer/autodiff/shapes.h"

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "runtime/executor/graph_match.h"
#include "runtime/executor/graph_optimizer.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/shape_rules.h"

namespace onnxamp::trainer {

using ops::KeepsRank;
using ops::KeepsShape;
namespace {

std::optional<PartialShape> Declared(const ir::Value* v) {
  if (v->initializer()) return v->initializer()->dims();
  if (!v->type().is_tensor() || !v->type().shape()) return std::nullopt;
  PartialShape dims;
  for (const ir::Dim& d : *v->type().shape()) dims.push_back(d.is_value() ? d.value : -1);
  return dims;
}

PartialShape Unknown(int64_t rank) { return PartialShape(static_cast<size_t>(std::max<int64_t>(rank, 0)), -1); }

// numpy broadcasting of partial shapes: a dim is known where some input has a known dim other than 1 (the others
// must then be 1 or equal), or where every input's dim is known (all 1).
PartialShape Broadcast(const std::vector<const PartialShape*>& in) {
  size_t rank = 0;
  for (const PartialShape* s : in) rank = std::max(rank, s->size());
  PartialShape out(rank, -1);
  for (size_t k = 0; k < rank; ++k) {  // k from the right
    bool all_known = true;
    int64_t big = -1;
    for (const PartialShape* s : in) {
      if (k >= s->size()) continue;
      const int64_t d = (*s)[s->size() - 1 - k];
      if (d < 0) {
        all_known = false;
      } else if (d != 1) {
        big = d;
      }
    }
    out[rank - 1 - k] = big >= 0 ? big : (all_known ? 1 : -1);
  }
  return out;
}

bool IsReduction(const std::string& op) { return op.rfind("Reduce", 0) == 0; }

// The number of elements of a constant 1-D (or scalar) tensor input.
std::optional<int64_t> ConstantLength(const ir::Value* v) {
  const ir::Tensor* t = exec::ConstantOf(v);
  if (!t || t->rank() > 1) return std::nullopt;
  return t->num_elements();
}

// The output's rank only (dims unknown).
std::optional<int64_t> RankRule(const ir::Node& n, size_t out, const Shapes& shapes);

// The partial shape of input k of `n`, null when it has none or none is known.
const PartialShape* InputShape(const ir::Node& n, size_t k, const Shapes& shapes) {
  const ir::Value* v = k < n.inputs().size() ? n.input(k) : nullptr;
  if (!v) return nullptr;
  auto it = shapes.find(v);
  return it == shapes.end() ? nullptr : &it->second;
}

// One spatial output dim of a convolution or pooling window: input `in`, kernel `k` (dilated), `pads` the sum of both
// ends. -1 where something is unknown.
int64_t WindowDim(int64_t in, int64_t k, int64_t stride, int64_t dilation, int64_t pads, const std::string& auto_pad,
                  bool ceil_mode) {
  if (in < 0 || k < 1 || stride < 1 || dilation < 1) return -1;
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") return (in + stride - 1) / stride;
  const int64_t span = dilation * (k - 1) + 1;
  const int64_t room = in + (auto_pad == "VALID" ? 0 : pads) - span;
  if (room < 0) return -1;
  return (ceil_mode ? (room + stride - 1) / stride : room / stride) + 1;
}

// Conv, MaxPool and AveragePool output dims from X's and the window's (spatial_dims only).
std::optional<PartialShape> WindowRule(const ir::Node& n, const PartialShape& x, const PartialShape* w) {
  if (x.size() < 3) return std::nullopt;
  const size_t spatial = x.size() - 2;
  const bool conv = n.op_type() == "Conv";
  std::vector<int64_t> kernel = n.GetInts("kernel_shape");
  if (kernel.empty() && conv && w && w->size() == x.size()) kernel.assign(w->begin() + 2, w->end());
  if (kernel.size() != spatial) return std::nullopt;
  const std::vector<int64_t> strides = n.GetInts("strides", std::vector<int64_t>(spatial, 1));
  const std::vector<int64_t> dilations = n.GetInts("dilations", std::vector<int64_t>(spatial, 1));
  const std::vector<int64_t> pads = n.GetInts("pads", std::vector<int64_t>(2 * spatial, 0));
  if (strides.size() != spatial || dilations.size() != spatial || pads.size() != 2 * spatial) return std::nullopt;
  const std::string auto_pad = n.GetString("auto_pad", "NOTSET");
  const bool ceil_mode = !conv && n.GetInt("ceil_mode", 0) != 0;
  PartialShape y = {x[0], conv ? (w && !w->empty() ? (*w)[0] : -1) : x[1]};
  for (size_t d = 0; d < spatial; ++d) {
    y.push_back(
        WindowDim(x[2 + d], kernel[d], strides[d], dilations[d], pads[d] + pads[spatial + d], auto_pad, ceil_mode));
  }
  return y;
}

// The spatial_dims rules; nullopt where they do not apply.
std::optional<PartialShape> SpatialRule(const ir::Node& n, size_t out, const Shapes& shapes) {
  auto shape_of = [&](size_t k) { return InputShape(n, k, shapes); };
  const std::string& op = n.op_type();
  const PartialShape* x = shape_of(0);
  if (!x) return std::nullopt;
  if (n.domain() == exec::kInternalDomain && op == ops::kBatchNormTrainingOp) {
    if (out == 0) return *x;
    if (x->size() >= 2) return PartialShape{(*x)[1]};
    return std::nullopt;
  }
  if (!ir::IsDefaultDomain(n.domain())) return std::nullopt;
  if (op == "Conv" || ((op == "MaxPool" || op == "AveragePool") && out <= 1)) {
    return WindowRule(n, *x, op == "Conv" ? shape_of(1) : nullptr);
  }
  if ((op == "GlobalAveragePool" || op == "GlobalMaxPool") && x->size() >= 3) {
    PartialShape y = {(*x)[0], (*x)[1]};
    y.resize(x->size(), 1);
    return y;
  }
  return std::nullopt;
}

// The output's partial shape where a rule knows dims, else its rank from RankRule.
std::optional<PartialShape> Rule(const ir::Node& n, size_t out, const Shapes& shapes, bool spatial_dims) {
  auto shape_of = [&](size_t k) { return InputShape(n, k, shapes); };
  const std::string& op = n.op_type();
  if (spatial_dims) {
    if (std::optional<PartialShape> s = SpatialRule(n, out, shapes)) return s;
  }
  if (n.domain() == exec::kInternalDomain && op == ops::kGeluOp) {
    if (const PartialShape* s = shape_of(0)) return *s;
  }
  if (!ir::IsDefaultDomain(n.domain())) return std::nullopt;
  if (op == "Constant") {
    if (const ir::Tensor* t = exec::ConstantOf(n.output(0))) return t->dims();
  } else if ((KeepsShape(op) && !(op == "BatchNormalization" && out > 0)) || (op == "LayerNormalization" && out == 0)) {
    if (const PartialShape* s = shape_of(0)) return *s;
  } else if (IsNumpyBroadcastOp(op)) {
    std::vector<const PartialShape*> in;
    for (size_t k = 0; k < n.inputs().size(); ++k) {
      if (!n.input(k)) continue;
      const PartialShape* s = shape_of(k);
      if (!s) return std::nullopt;
      in.push_back(s);
    }
    return Broadcast(in);
  } else if (op == "MatMul") {
    const PartialShape* a = shape_of(0);
    const PartialShape* b = shape_of(1);
    if (a && b && a->size() >= 2 && b->size() >= 2) {
      const PartialShape batch_a(a->begin(), a->end() - 2), batch_b(b->begin(), b->end() - 2);
      PartialShape y = Broadcast({&batch_a, &batch_b});
      y.push_back((*a)[a->size() - 2]);
      y.push_back(b->back());
      return y;
    }
  } else if (op == "Shape") {
    // The length of a shape (from opset 15 the [start, end) part of it): what a Reshape target made by Concat reads.
    if (const PartialShape* x = shape_of(0)) {
      const auto rank = static_cast<int64_t>(x->size());
      auto clamp = [&](int64_t v) { return std::clamp(v < 0 ? v + rank : v, int64_t{0}, rank); };
      const int64_t start = clamp(n.GetInt("start", 0)), end = clamp(n.GetInt("end", rank));
      return PartialShape{std::max<int64_t>(end - start, 0)};
    }
  } else if (op == "Gather") {
    // data's dims with the one at `axis` replaced by the indices' dims (an embedding lookup: [N, T, width]).
    const PartialShape* data = shape_of(0);
    const PartialShape* indices = shape_of(1);
    if (data && indices) {
      const auto rank = static_cast<int64_t>(data->size());
      int64_t axis = n.GetInt("axis", 0);
      if (axis < 0) axis += rank;
      if (axis >= 0 && axis < rank) {
        PartialShape y(data->begin(), data->begin() + axis);
        y.insert(y.end(), indices->begin(), indices->end());
        y.insert(y.end(), data->begin() + axis + 1, data->end());
        return y;
      }
    }
  } else if (op == "Unsqueeze") {
    // Unit dims at the axes (an attribute before opset 13, a constant input from 13).
    const PartialShape* x = shape_of(0);
    std::optional<std::vector<int64_t>> axes;
    if (n.FindAttribute("axes")) {
      axes = n.GetInts("axes");
    } else if (const ir::Tensor* t = n.inputs().size() > 1 ? exec::ConstantOf(n.input(1)) : nullptr;
               t && t->dtype() == DType::kInt64 && t->rank() <= 1) {
      axes.emplace(t->values<int64_t>().begin(), t->values<int64_t>().end());
    }
    if (x && axes) {
      const auto rank = static_cast<int64_t>(x->size() + axes->size());
      PartialShape y(static_cast<size_t>(rank), -2);  // -2: not placed yet
      for (int64_t a : *axes) {
        if (a < 0) a += rank;
        if (a < 0 || a >= rank || y[static_cast<size_t>(a)] != -2) return std::nullopt;
        y[static_cast<size_t>(a)] = 1;
      }
      size_t next = 0;
      for (int64_t& d : y) {
        if (d == -2) d = (*x)[next++];
      }
      return y;
    }
  } else if (op == "Concat") {
    // Dims summed along the axis (the length of a shape built from pieces), the others from any input.
    std::vector<const PartialShape*> in;
    bool known = true;
    for (size_t k = 0; k < n.inputs().size(); ++k) {
      const PartialShape* p = shape_of(k);
      known = known && p && (in.empty() || p->size() == in[0]->size());
      if (known) in.push_back(p);
    }
    if (known && !in.empty() && !in[0]->empty()) {
      const auto rank = static_cast<int64_t>(in[0]->size());
      int64_t axis = n.GetInt("axis", 0);
      if (axis < 0) axis += rank;
      if (axis >= 0 && axis < rank) {
        PartialShape y(in[0]->size(), -1);
        int64_t sum = 0;
        for (const PartialShape* p : in) {
          const int64_t d = (*p)[static_cast<size_t>(axis)];
          sum = (sum < 0 || d < 0) ? -1 : sum + d;
          for (size_t j = 0; j < y.size(); ++j) {
            if (static_cast<int64_t>(j) != axis && y[j] < 0) y[j] = (*p)[j];
          }
        }
        y[static_cast<size_t>(axis)] = sum;
        return y;
      }
    }
  } else if (op == "Gemm") {
    const PartialShape* a = shape_of(0);
    const PartialShape* b = shape_of(1);
    PartialShape y = {-1, -1};
    if (a && a->size() == 2) y[0] = (*a)[n.GetInt("transA", 0) != 0 ? 1 : 0];
    if (b && b->size() == 2) y[1] = (*b)[n.GetInt("transB", 0) != 0 ? 0 : 1];
    return y;
  } else if (op == "Transpose") {
    if (const PartialShape* s = shape_of(0)) {
      const ir::Attribute* perm = n.FindAttribute("perm");
      PartialShape y(s->size(), -1);
      for (size_t d = 0; d < s->size(); ++d) {
        const int64_t from =
            perm ? (d < perm->ints.size() ? perm->ints[d] : -1) : static_cast<int64_t>(s->size() - 1 - d);
        if (from >= 0 && from < static_cast<int64_t>(s->size())) y[d] = (*s)[static_cast<size_t>(from)];
      }
      return y;
    }
  } else if (op == "Reshape") {
    const ir::Tensor* t = exec::ConstantOf(n.input(1));
    if (t && t->dtype() == DType::kInt64 && t->rank() == 1) {
      const PartialShape* s = shape_of(0);
      const bool allow_zero = n.GetInt("allowzero", 0) != 0;
      PartialShape y;
      for (size_t d = 0; d < static_cast<size_t>(t->num_elements()); ++d) {
        const int64_t v = t->values<int64_t>()[d];
        if (v > 0 || (v == 0 && allow_zero)) {
          y.push_back(v);
        } else if (v == 0 && s && d < s->size()) {
          y.push_back((*s)[d]);
        } else {
          y.push_back(-1);
        }
      }
      return y;
    }
  } else if (op == "RNN" || op == "GRU" || op == "LSTM") {
    // Y [seq, dirs, batch, hidden] and Y_h, Y_c [dirs, batch, hidden]; batch first for layout 1.
    const PartialShape* x = shape_of(0);
    const bool batch_major = n.GetInt("layout", 0) != 0;
    const int64_t dirs = n.GetString("direction", "forward") == "bidirectional" ? 2 : 1;
    const int64_t hidden = n.GetInt("hidden_size", 0) > 0 ? n.GetInt("hidden_size", 0) : -1;
    int64_t seq = -1, batch = -1;
    if (x && x->size() == 3) {
      seq = (*x)[batch_major ? 1 : 0];
      batch = (*x)[batch_major ? 0 : 1];
    }
    if (out == 0) return batch_major ? PartialShape{batch, seq, dirs, hidden} : PartialShape{seq, dirs, batch, hidden};
    return batch_major ? PartialShape{batch, dirs, hidden} : PartialShape{dirs, batch, hidden};
  } else if (op == "Flatten") {
    if (const PartialShape* s = shape_of(0)) {
      int64_t axis = n.GetInt("axis", 1);
      if (axis < 0) axis += static_cast<int64_t>(s->size());
      if (axis >= 0 && axis <= static_cast<int64_t>(s->size())) {
        PartialShape y = {1, 1};
        for (size_t d = 0; d < s->size(); ++d) {
          int64_t& p = y[static_cast<int64_t>(d) < axis ? 0 : 1];
          p = (p < 0 || (*s)[d] < 0) ? -1 : p * (*s)[d];
        }
        return y;
      }
    }
  }
  const std::optional<int64_t> r = RankRule(n, out, shapes);
  if (!r || *r < 0) return std::nullopt;
  return Unknown(*r);
}

std::optional<int64_t> RankRule(const ir::Node& n, size_t out, const Shapes& shapes) {
  auto rank_of = [&](size_t k) -> std::optional<int64_t> {
    const ir::Value* v = k < n.inputs().size() ? n.input(k) : nullptr;
    if (!v) return std::nullopt;
    auto it = shapes.find(v);
    if (it == shapes.end()) return std::nullopt;
    return static_cast<int64_t>(it->second.size());
  };
  const std::string& op = n.op_type();
  if (op == "Constant") {
    if (n.FindAttribute("value_float") || n.FindAttribute("value_int") || n.FindAttribute("value_string")) return 0;
    if (n.FindAttribute("value_floats") || n.FindAttribute("value_ints") || n.FindAttribute("value_strings")) return 1;
    return std::nullopt;
  }
  if (op == "Shape") return 1;
  if (op == "Size") return 0;
  if (op == "RNN" || op == "GRU" || op == "LSTM") return out == 0 ? 4 : 3;
  if (op == "Gemm" || op == "Flatten" || op == "NonZero") return 2;
  if (op == "Range") return 1;
  if (op == "BatchNormalization" && out > 0) return 1;  // training mode's running mean and variance
  if (op == "SoftmaxCrossEntropyLoss" || op == "NegativeLogLikelihoodLoss") {
    if (out > 0) return rank_of(0);  // log_prob
    return n.GetString("reduction", "mean") == "none" ? rank_of(1) : std::optional<int64_t>(0);
  }
  if (KeepsRank(op)) return rank_of(0);  // every output (LayerNormalization's Mean and InvStdDev keep unit dims)
  if (IsNumpyBroadcastOp(op)) {
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
  // The length of a 1-D shape input: a constant's, or the inferred one (a Concat of Shape pieces).
  auto length_of = [&](size_t k) -> std::optional<int64_t> {
    if (std::optional<int64_t> len = ConstantLength(k < n.inputs().size() ? n.input(k) : nullptr)) return len;
    const PartialShape* s = InputShape(n, k, shapes);
    if (s && s->size() == 1 && (*s)[0] >= 0) return (*s)[0];
    return std::nullopt;
  };
  if (op == "Reshape" || op == "ConstantOfShape") return length_of(op == "Reshape" ? 1 : 0);
  if (op == "Expand") {
    const std::optional<int64_t> r = rank_of(0), len = length_of(1);
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

Shapes InferShapes(const ir::Graph& graph, bool spatial_dims,
                   const std::unordered_map<std::string, PartialShape>* input_dims) {
  Shapes shapes;
  for (const ir::Value* v : graph.values()) {
    if (input_dims && v->is_graph_input()) {
      if (auto it = input_dims->find(v->name()); it != input_dims->end()) {
        shapes[v] = it->second;
        continue;
      }
    }
    if (std::optional<PartialShape> s = Declared(v)) shapes[v] = std::move(*s);
  }
  StatusOr<std::vector<ir::Node*>> order = graph.TopologicalOrder();
  if (!order.ok()) return shapes;
  for (const ir::Node* n : *order) {
    for (size_t i = 0; i < n->outputs().size(); ++i) {
      const ir::Value* v = n->output(i);
      if (!v || shapes.count(v)) continue;
      if (std::optional<PartialShape> s = Rule(*n, i, shapes, spatial_dims)) shapes[v] = std::move(*s);
    }
  }
  return shapes;
}

bool BroadcastKeepsShape(const ir::Node& n, const ir::Value* x, const Shapes& shapes) {
  if (!ir::IsDefaultDomain(n.domain()) || !IsNumpyBroadcastOp(n.op_type()) || !x) return false;
  auto it = shapes.find(x);
  if (it == shapes.end()) return false;
  const PartialShape& xs = it->second;
  bool found = false;
  for (const ir::Value* o : n.inputs()) {
    if (!o) continue;
    if (o == x && !found) {
      found = true;
      continue;
    }
    auto jt = shapes.find(o);
    if (jt == shapes.end()) return false;
    const PartialShape& os = jt->second;
    if (os.size() > xs.size()) return false;
    for (size_t k = 0; k < os.size(); ++k) {
      const int64_t od = os[os.size() - 1 - k], xd = xs[xs.size() - 1 - k];
      if (od == 1 || (xd >= 0 && xd == od)) continue;
      return false;
    }
  }
  return found;
}

}  // namespace onnxamp::trainer
