// RecomputeSegments: the boundaries chosen from estimated value sizes, then each segment's stashed values copied into
// the backward pass just before their first reader there.
#include "trainer/graph/recompute.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "runtime/common/dtype.h"
#include "runtime/executor/graph_optimizer.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/op_info.h"
#include "runtime/ops/rnn/rnn.h"
#include "trainer/autodiff/element_types.h"
#include "trainer/autodiff/shapes.h"

namespace onnxamp::trainer {
namespace {

using InputDims = std::unordered_map<std::string, std::vector<int64_t>>;

// Nodes a copy could not reproduce: random draws other than Dropout's (whose copy shares the original's seed through
// `seed_from`), subgraphs.
bool Recomputable(const ir::Node& n) {
  if (!n.subgraphs().empty()) return false;
  if (ir::IsDefaultDomain(n.domain()) && n.op_type() == "Dropout") return true;
  const ops::OpInfo* info = ops::OpInfoRegistry::Global().Find(n.domain(), n.op_type());
  return !info || info->deterministic;
}

// The forward pass as the planner sees it: node i's outputs, which of them the backward pass reads, their sizes,
// and when the forward pass reads each for the last time.
struct Forward {
  std::vector<ir::Node*> nodes;
  std::unordered_map<const ir::Node*, size_t> position;
  std::unordered_map<const ir::Value*, uint64_t> bytes;  // estimated bytes of each value a forward node writes
  std::unordered_set<const ir::Value*> stashed;          // read by the backward pass, not graph outputs
  std::unordered_set<const ir::Value*> pinned;           // kept whatever the plan: outputs of nodes not recomputable,
                                                         // and values of no size (shapes)
  std::vector<uint64_t> stash_bytes;                     // per node: its stashed outputs' bytes
  // crossing[i]: values written at or before node i and read by a forward node after it (not graph outputs, which
  // are kept anyway): what a boundary after node i keeps.
  std::vector<std::vector<const ir::Value*>> crossing;
  // Names of the graph's nodes, so that each copy gets a name of its own (profiles list nodes by name); grows with
  // the copies.
  mutable std::unordered_set<std::string> node_names;
};

// com.onnxamp RNNTraining's traces (output 3, [directions, seq x batch x hidden x (gates + states)]) from X's
// estimate (seq x batch x input) and its last dim: stash_recurrent_traces makes the node after the caller's sizes were
// taken, and the shape rules know no such op. nullopt for any other value.
std::optional<uint64_t> RecurrentTraceElements(const ir::Value* v, const Shapes& shapes,
                                               const std::unordered_map<const ir::Value*, uint64_t>& known) {
  const ir::Node* n = v->producer();
  if (!n || n->domain() != exec::kInternalDomain || n->op_type() != ops::kRnnTrainingOp ||
      n->output(ops::rnn::kTraceOutput) != v) {
    return std::nullopt;
  }
  const StatusOr<ops::rnn::Spec> parsed = ops::rnn::ParseSpec(*n, n->GetString("forward_op", ""));
  if (!parsed.ok()) return std::nullopt;
  const ops::rnn::Spec& spec = *parsed;
  const ir::Value* x = n->input(0);
  const ir::Value* r = n->input(2);
  auto x_elements = x ? known.find(x) : known.end();
  auto x_shape = x ? shapes.find(x) : shapes.end();
  auto r_shape = r ? shapes.find(r) : shapes.end();
  if (x_elements == known.end() || x_shape == shapes.end() || x_shape->second.size() != 3) return std::nullopt;
  const int64_t input = x_shape->second[2];
  int64_t hidden = spec.hidden;
  if (hidden <= 0 && r_shape != shapes.end() && r_shape->second.size() == 3) hidden = r_shape->second[2];
  if (input <= 0 || hidden <= 0) return std::nullopt;
  ops::rnn::InputDims dims;
  dims.seq = 1;  // seq x batch rows in all
  dims.batch = static_cast<int64_t>(x_elements->second / static_cast<uint64_t>(input));
  dims.hidden = hidden;
  return static_cast<uint64_t>(spec.directions * ops::rnn::TraceElements(spec, dims));
}

// Estimated elements of each value: its partial shape's product with the symbolic dim 0 as `batch`; where a later dim
// is unknown (or the rank), the largest estimate among the producer's inputs (most ops keep their input's scale).
// Shapes, sizes and the parameters' low-precision copies count as nothing.
uint64_t EstimateElements(const ir::Value* v, const Shapes& shapes, int64_t batch,
                          const std::unordered_map<const ir::Value*, uint64_t>& known) {
  if (std::optional<uint64_t> trace = RecurrentTraceElements(v, shapes, known)) return *trace;
  const ir::Node* producer = v->producer();
  if (producer && ir::IsDefaultDomain(producer->domain()) &&
      (producer->op_type() == "Shape" || producer->op_type() == "Size")) {
    return 0;  // a rank's worth of dims: nothing next to an activation
  }
  // A parameter's low-precision copy (a Cast of a graph input of static shape): the trainers read it as an input of
  // its own (ExternalizeWeightCasts), not an activation.
  if (producer && ir::IsDefaultDomain(producer->domain()) && producer->op_type() == "Cast" && producer->input(0) &&
      producer->input(0)->is_graph_input()) {
    const std::optional<ir::Shape>& shape = producer->input(0)->type().shape();
    bool fixed = shape.has_value();
    for (size_t d = 0; fixed && d < shape->size(); ++d) fixed = (*shape)[d].is_value();
    if (fixed) return 0;
  }
  auto it = shapes.find(v);
  if (it != shapes.end()) {
    const PartialShape& s = it->second;
    double e = 1;
    bool ok = true;
    for (size_t d = 0; d < s.size() && ok; ++d) {
      if (s[d] >= 0) {
        e *= static_cast<double>(s[d]);
      } else if (d == 0) {
        e *= static_cast<double>(batch);
      } else {
        ok = false;
      }
    }
    if (ok) return static_cast<uint64_t>(std::min(e, 1e18));
  }
  uint64_t e = 1;
  if (const ir::Node* p = v->producer()) {
    for (const ir::Value* in : p->inputs()) {
      auto k = in ? known.find(in) : known.end();
      if (k != known.end()) e = std::max(e, k->second);
    }
  }
  return e;
}

// Estimated bytes of every value of `g` (EstimateElements times the element type's size).
std::unordered_map<const ir::Value*, uint64_t> EstimateBytes(const ir::Graph& g, int64_t batch,
                                                             const InputDims& input_dims) {
  const Shapes shapes = InferShapes(g, /*spatial_dims=*/true, &input_dims);
  const ElementTypes types = InferElementTypes(g);
  std::unordered_map<const ir::Value*, uint64_t> elements, bytes;
  auto add = [&](const ir::Value* v) {
    elements[v] = EstimateElements(v, shapes, batch, elements);
    auto t = types.find(v);
    const std::optional<uint64_t> size =
        PackedByteSize(t != types.end() && t->second != DType::kUndefined ? t->second : DType::kFloat32, elements[v]);
    bytes[v] = size ? *size : elements[v] * 4;
  };
  for (const ir::Value* v : g.inputs()) add(v);
  for (const ir::Value* v : g.initializers()) add(v);
  StatusOr<std::vector<ir::Node*>> order = g.TopologicalOrder();
  if (order.ok()) {
    for (const ir::Node* n : *order) {
      for (const ir::Value* v : n->outputs()) {
        if (v) add(v);
      }
    }
  }
  return bytes;
}

// The number of nodes before the first one that depends on `seed` (the loss scale every backward node descends
// from): the forward pass.
StatusOr<size_t> ForwardNodes(const ir::Graph& g, const std::string& seed) {
  const ir::Value* s = g.FindValue(seed);
  if (!s || !s->is_graph_input()) return Internal("recompute: '", seed, "' is not an input of the training graph");
  size_t i = 0;
  for (const ir::Node* n : g.nodes()) {
    for (const ir::Value* in : g.ImplicitInputs(n)) {
      if (in == s) return i;
    }
    ++i;
  }
  return Internal("recompute: no node reads '", seed, "'");
}

StatusOr<Forward> Analyse(ir::Graph& g, const std::string& seed, int64_t batch, const InputDims& input_dims,
                          const ValueSizes* sizes) {
  Forward f;
  std::vector<ir::Node*> all;
  for (ir::Node* n : g.nodes()) {
    all.push_back(n);
    f.node_names.insert(n->name());
  }
  ONNXAMP_ASSIGN_OR_RETURN(const size_t forward_nodes, ForwardNodes(g, seed));
  f.nodes.assign(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(forward_nodes));
  for (size_t i = 0; i < f.nodes.size(); ++i) f.position[f.nodes[i]] = i;
  std::unordered_set<const ir::Node*> backward(all.begin() + static_cast<std::ptrdiff_t>(forward_nodes), all.end());
  // Sizes: the caller's by value name (the graph before the session's fusions, whose shape rules know more ops),
  // else estimated here (only when some value needs it: the hook's sizes name every value but a few).
  std::optional<std::unordered_map<const ir::Value*, uint64_t>> estimated;
  auto size_of = [&](const ir::Value* v) -> uint64_t {
    if (sizes) {
      auto it = sizes->find(v->name());
      if (it != sizes->end()) return it->second;
    }
    if (!estimated) estimated = EstimateBytes(g, batch, input_dims);
    auto it = estimated->find(v);
    return it == estimated->end() ? 0 : it->second;
  };

  std::unordered_map<const ir::Value*, size_t> last_read;
  f.stash_bytes.assign(f.nodes.size(), 0);
  for (size_t i = 0; i < f.nodes.size(); ++i) {
    ir::Node* n = f.nodes[i];
    for (const ir::Value* in : g.ImplicitInputs(n)) {
      if (in->producer() && backward.count(in->producer())) {
        return Internal("recompute: forward node ", n->Describe(), " reads '", in->name(),
                        "', which the backward pass writes");
      }
      if (in->producer() && f.position.count(in->producer())) last_read[in] = i;
    }
    const bool recomputable = Recomputable(*n);
    for (const ir::Value* v : n->outputs()) {
      if (!v) continue;
      f.bytes[v] = size_of(v);
      // Outputs of a node no copy may reproduce are kept (a copy reads them as they are); so are values of no size
      // (shapes), which then cost no planning either.
      if (!recomputable || f.bytes[v] == 0) {
        if (!v->is_graph_output()) f.pinned.insert(v);
        continue;
      }
      bool read_backward = false;
      for (const ir::Use& u : v->uses()) read_backward = read_backward || backward.count(u.node) > 0;
      if (!read_backward || v->is_graph_output()) continue;
      f.stashed.insert(v);
      f.stash_bytes[i] += f.bytes[v];
    }
  }
  f.crossing.assign(f.nodes.size(), {});
  for (const auto& [v, last] : last_read) {
    if (v->is_graph_output() || f.pinned.count(v)) continue;
    for (size_t i = f.position.at(v->producer()); i < last; ++i) f.crossing[i].push_back(v);
  }
  // A deterministic order (the map's is not): by position of the producer, then output index.
  for (std::vector<const ir::Value*>& c : f.crossing) {
    std::sort(c.begin(), c.end(), [&](const ir::Value* a, const ir::Value* b) {
      const size_t pa = f.position.at(a->producer()), pb = f.position.at(b->producer());
      if (pa != pb) return pa < pb;
      return a->name() < b->name();
    });
  }
  return f;
}

struct Plan {
  std::vector<size_t> boundaries;  // a boundary after each of these nodes
  std::unordered_set<const ir::Value*> kept;
  uint64_t peak = 0;  // estimated bytes held at once: kept values + the largest segment's stash
};

uint64_t KeptBytes(const Forward& f, const std::unordered_set<const ir::Value*>& kept) {
  uint64_t total = 0;
  for (const ir::Value* v : kept) total += f.bytes.at(v);
  return total;
}

// The estimated peak of `boundaries`: every kept value (boundaries and pinned) plus the largest segment's stashed
// values that are not kept.
uint64_t Peak(const Forward& f, const std::vector<size_t>& boundaries,
              const std::unordered_set<const ir::Value*>& kept) {
  uint64_t worst = 0, segment = 0;
  size_t b = 0;
  for (size_t i = 0; i < f.nodes.size(); ++i) {
    for (const ir::Value* v : f.nodes[i]->outputs()) {
      if (v && f.stashed.count(v) && !kept.count(v)) segment += f.bytes.at(v);
    }
    if (b < boundaries.size() && boundaries[b] == i) {
      worst = std::max(worst, segment);
      segment = 0;
      ++b;
    }
  }
  worst = std::max(worst, segment);
  return KeptBytes(f, kept) + worst;
}

// Greedy cut for a segment budget: walking forward, when a segment's stash passes `budget`, a boundary goes where
// the values it adds to those kept weigh least (the latest such place among equals).
Plan Cut(const Forward& f, uint64_t budget) {
  Plan plan;
  plan.kept = f.pinned;
  auto added = [&](size_t b) {
    uint64_t total = 0;
    for (const ir::Value* v : f.crossing[b]) {
      if (!plan.kept.count(v)) total += f.bytes.at(v);
    }
    return total;
  };
  size_t start = 0;
  uint64_t segment = 0;
  for (size_t i = 0; i < f.nodes.size(); ++i) {
    segment += f.stash_bytes[i];
    while (segment > budget && i > start) {
      size_t best = start;
      uint64_t best_cost = std::numeric_limits<uint64_t>::max();
      for (size_t b = start; b < i; ++b) {
        const uint64_t c = added(b);
        if (c <= best_cost) {
          best_cost = c;
          best = b;
        }
      }
      plan.boundaries.push_back(best);
      for (const ir::Value* v : f.crossing[best]) plan.kept.insert(v);
      start = best + 1;
      segment = 0;
      for (size_t j = start; j <= i; ++j) segment += f.stash_bytes[j];
    }
  }
  plan.peak = Peak(f, plan.boundaries, plan.kept);
  return plan;
}

// Copies `nodes` (forward nodes, in forward order, each reading graph inputs, kept values or outputs of the nodes
// before it) just before the first backward node that reads a value of `rewire` (outputs of `nodes`), and makes every
// backward reader of those values read the copies. Returns how many nodes it added.
StatusOr<int> CopyBefore(ir::Graph& g, const Forward& f, const std::vector<const ir::Node*>& nodes,
                         const std::vector<const ir::Value*>& rewire) {
  std::unordered_set<const ir::Value*> replaced(rewire.begin(), rewire.end());
  ir::Node* before = nullptr;
  for (ir::Node* n : g.nodes()) {
    if (f.position.count(n)) continue;
    bool reads = false;
    for (const ir::Value* in : n->inputs()) reads = reads || (in && replaced.count(in));
    if (reads) {
      before = n;
      break;
    }
  }
  if (!before) return Internal("recompute: no backward node reads '", rewire.front()->name(), "'");

  std::unordered_map<const ir::Value*, ir::Value*> copy_of;
  for (const ir::Node* n : nodes) {
    std::vector<ir::Value*> inputs;
    for (ir::Value* in : n->inputs()) {
      auto c = in ? copy_of.find(in) : copy_of.end();
      inputs.push_back(c != copy_of.end() ? c->second : in);
    }
    std::vector<ir::Value*> outputs;
    for (const ir::Value* out : n->outputs()) {
      if (!out) {
        outputs.push_back(nullptr);
        continue;
      }
      ir::Value* c = g.CreateValue(g.UniqueName(out->name() + "_recomputed"));
      c->set_type(out->type());
      copy_of[out] = c;
      outputs.push_back(c);
    }
    std::string name;
    if (!n->name().empty()) {
      name = n->name() + "_recompute";
      for (int k = 1; f.node_names.count(name); ++k) name = StrCat(n->name(), "_recompute_", k);
      f.node_names.insert(name);
    }
    ir::Node* copy = g.InsertNode(before, n->op_type(), inputs, outputs, name, n->domain());
    copy->set_doc_string(n->doc_string());
    for (const ir::Attribute& a : n->attributes()) copy->SetAttribute(a);
    // The copy draws the original's random numbers (Dropout's mask), as DropoutGrad does.
    if (n->op_type() == "Dropout" && !n->FindAttribute("seed_from")) {
      for (const ir::Value* out : n->outputs()) {
        if (out) {
          copy->SetAttribute(ir::Attribute::String("seed_from", out->name()));
          break;
        }
      }
    }
  }
  // Backward readers of the replaced values read the copies.
  for (const ir::Value* v : rewire) {
    ir::Value* c = copy_of.at(v);
    std::vector<ir::Use> uses = v->uses();
    for (const ir::Use& u : uses) {
      if (!f.position.count(u.node)) u.node->SetInput(static_cast<size_t>(u.index), c);
    }
  }
  return static_cast<int>(nodes.size());
}

// Copies segment [lo, hi]'s stashed values (not kept) and what they need from the segment into the backward pass,
// before the first backward node reading one of them; returns the nodes added.
StatusOr<int> RecomputeSegment(ir::Graph& g, const Forward& f, size_t lo, size_t hi,
                               const std::unordered_set<const ir::Value*>& kept) {
  std::vector<bool> needed(hi - lo + 1, false);
  std::vector<const ir::Value*> pending;
  for (size_t i = lo; i <= hi; ++i) {
    for (const ir::Value* v : f.nodes[i]->outputs()) {
      if (v && f.stashed.count(v) && !kept.count(v)) pending.push_back(v);
    }
  }
  if (pending.empty()) return 0;
  std::vector<const ir::Value*> rewire = pending;
  while (!pending.empty()) {
    const ir::Value* v = pending.back();
    pending.pop_back();
    const size_t p = f.position.at(v->producer());
    if (p < lo || p > hi) {
      return Internal("recompute: '", v->name(), "' is read in the segment of nodes ", lo, "-", hi,
                      " but neither written there nor kept");
    }
    if (needed[p - lo]) continue;
    needed[p - lo] = true;
    for (const ir::Value* in : g.ImplicitInputs(f.nodes[p])) {
      // Graph outputs live to the end of the run: the copies read them as they are.
      if (in->producer() && f.position.count(in->producer()) && !kept.count(in) && !in->is_graph_output()) {
        pending.push_back(in);
      }
    }
  }
  std::vector<const ir::Node*> nodes;
  for (size_t i = lo; i <= hi; ++i) {
    if (needed[i - lo]) nodes.push_back(f.nodes[i]);
  }
  return CopyBefore(g, f, nodes, rewire);
}

// Ops whose recomputation costs about a pass over their values (elementwise, normalisations, movement), unlike the
// products and convolutions whose outputs feed them.
bool Cheap(const ir::Node& n) {
  if (n.domain() == exec::kInternalDomain) {
    return n.op_type() == ops::kGeluOp || n.op_type() == ops::kBatchNormTrainingOp;
  }
  if (!ir::IsDefaultDomain(n.domain())) return false;
  static const std::set<std::string> ops = {"Abs",
                                            "Add",
                                            "BatchNormalization",
                                            "Cast",
                                            "Celu",
                                            "Clip",
                                            "Div",
                                            "Dropout",
                                            "Elu",
                                            "Erf",
                                            "Flatten",
                                            "Gelu",
                                            "HardSigmoid",
                                            "HardSwish",
                                            "Identity",
                                            "LayerNormalization",
                                            "LeakyRelu",
                                            "LogSoftmax",
                                            "Mish",
                                            "Mul",
                                            "Neg",
                                            "PRelu",
                                            "Relu",
                                            "Reshape",
                                            "Selu",
                                            "Sigmoid",
                                            "Softmax",
                                            "Softplus",
                                            "Sqrt",
                                            "Squeeze",
                                            "Sub",
                                            "Tanh",
                                            "Transpose",
                                            "Unsqueeze",
                                            "Where"};
  return ops.count(n.op_type()) > 0;
}

// Ops whose output shares its input's memory on the CPU (reshapes): recomputing one from a kept input saves nothing.
bool IsView(const ir::Node& n) {
  static const std::set<std::string> ops = {"Flatten", "Identity", "Reshape", "Squeeze", "Unsqueeze"};
  return ir::IsDefaultDomain(n.domain()) && ops.count(n.op_type()) > 0;
}

// --recompute cheap: each stashed value that cheap ops make from values the backward pass keeps anyway (a Relu after
// a BatchNormalization after a Conv whose output BatchNormalization's gradient reads; a GELU or LayerNormalization
// output from its input) is computed again from those values just before its first backward reader, instead of kept
// from the forward pass. A value whose cheap ops would reach past kCheapCopies nodes, a value not kept, a value an
// earlier group recomputed, or a value kept anyway whose last backward reader comes before that point, keeps it as it
// is. Returns the nodes added; `*values` and `*saved` count the values recomputed and their estimated bytes.
constexpr size_t kCheapCopies = 8;

StatusOr<int> RecomputeCheap(ir::Graph& g, const Forward& f, int* values, uint64_t* saved) {
  std::unordered_map<const ir::Node*, size_t> at;  // every node's position before any copy
  for (ir::Node* n : g.nodes()) at.emplace(n, at.size());
  // The last (or first) original backward reader of v; nullopt when none.
  auto backward_read = [&](const ir::Value* v, bool last) -> std::optional<size_t> {
    std::optional<size_t> r;
    for (const ir::Use& u : v->uses()) {
      if (f.position.count(u.node)) continue;
      auto it = at.find(u.node);
      if (it == at.end()) continue;  // a copy made here
      if (!r || (last ? it->second > *r : it->second < *r)) r = it->second;
    }
    return r;
  };
  std::unordered_set<const ir::Value*> recomputed;
  int added = 0;
  for (const ir::Node* p : f.nodes) {
    if (!Cheap(*p) || !Recomputable(*p) || IsView(*p)) continue;
    // Worth it: outputs of at least an eighth of the largest input's size (not a normalisation's statistics: the
    // backward pass keeps reading the originals, and a copy's are left unread), floating (integer results could be
    // placed apart from their originals by the host-side shape pass).
    uint64_t largest_input = 0;
    for (const ir::Value* in : p->inputs()) {
      auto b = in ? f.bytes.find(in) : f.bytes.end();
      if (b != f.bytes.end()) largest_input = std::max(largest_input, b->second);
    }
    std::vector<const ir::Value*> outs;
    for (const ir::Value* v : p->outputs()) {
      if (v && f.stashed.count(v) && 8 * f.bytes.at(v) >= largest_input &&
          (v->type().elem_type() == DType::kUndefined || IsFloatingPoint(v->type().elem_type()))) {
        outs.push_back(v);
      }
    }
    if (outs.empty()) continue;
    size_t first = SIZE_MAX;
    for (const ir::Value* v : outs) first = std::min(first, backward_read(v, false).value_or(SIZE_MAX));
    std::unordered_set<const ir::Node*> closure = {p};
    std::vector<const ir::Node*> stack = {p};
    bool ok = true;
    while (ok && !stack.empty()) {
      const ir::Node* n = stack.back();
      stack.pop_back();
      for (const ir::Value* in : g.ImplicitInputs(n)) {
        const ir::Node* q = in->producer();
        if (!q || !f.position.count(q) || in->is_graph_output()) continue;  // there to the end of the run
        // A value an earlier group recomputed is gone from the forward pass: copying its nodes again would repeat
        // their work. Its readers keep theirs.
        if (recomputed.count(in)) {
          ok = false;
          break;
        }
        if (f.stashed.count(in) || f.pinned.count(in)) {
          // Kept for the backward pass anyway: usable while a backward node reads it at or after the copy (a shape
          // may live longer).
          ok = f.bytes.at(in) == 0 || backward_read(in, true).value_or(0) >= first;
          if (!ok) break;
          continue;
        }
        if (closure.count(q)) continue;
        if (!Cheap(*q) || !Recomputable(*q) || closure.size() >= kCheapCopies) {
          ok = false;
          break;
        }
        closure.insert(q);
        stack.push_back(q);
      }
    }
    if (!ok) continue;
    std::vector<const ir::Node*> nodes(closure.begin(), closure.end());
    std::sort(nodes.begin(), nodes.end(),
              [&](const ir::Node* a, const ir::Node* b) { return f.position.at(a) < f.position.at(b); });
    ONNXAMP_ASSIGN_OR_RETURN(int n, CopyBefore(g, f, nodes, outs));
    added += n;
    for (const ir::Value* v : outs) {
      recomputed.insert(v);
      *saved += f.bytes.at(v);
      ++*values;
    }
  }
  return added;
}

}  // namespace

Status RecomputeSegments(ir::Model& model, const std::string& seed, const RecomputeOptions& options,
                         RecomputeReport* report, const ValueSizes* sizes) {
  *report = RecomputeReport();
  if (options.segments == 0) return Status::Ok();
  if (!model.graph) return InvalidArgument("the model has no graph");
  if (options.segments != kRecomputeAuto && options.segments != kRecomputeCheap && options.segments < 2) {
    return InvalidArgument("recompute: segments must be 'auto', 'cheap' or at least 2, got ", options.segments);
  }
  ir::Graph& g = *model.graph;
  ONNXAMP_RETURN_IF_ERROR(g.SortTopologically());
  ONNXAMP_ASSIGN_OR_RETURN(Forward f, Analyse(g, seed, std::max<int64_t>(options.batch, 1), options.input_dims, sizes));
  uint64_t total = 0, largest = 0;
  for (uint64_t b : f.stash_bytes) {
    total += b;
    largest = std::max(largest, b);
  }
  report->bytes_before = total + KeptBytes(f, f.pinned);
  report->bytes_after = report->bytes_before;
  if (total == 0) {
    report->why_not = "the backward pass reads no activation that could be recomputed";
    return Status::Ok();
  }
  if (options.segments == kRecomputeCheap) {
    uint64_t saved = 0;
    ONNXAMP_ASSIGN_OR_RETURN(report->nodes, RecomputeCheap(g, f, &report->values, &saved));
    report->bytes_after = report->bytes_before - saved;
    if (report->nodes == 0) {
      report->why_not = "no activation the backward pass reads is made by cheap ops from values it keeps anyway";
    }
    return Status::Ok();
  }

  // Budgets from the largest single node's stash up to the whole, geometrically; each gives a plan.
  std::vector<Plan> plans;
  const int kBudgets = 48;
  for (int k = 0; k <= kBudgets; ++k) {
    const double budget =
        static_cast<double>(std::max<uint64_t>(largest, 1)) *
        std::pow(static_cast<double>(total) / std::max<uint64_t>(largest, 1), static_cast<double>(k) / kBudgets);
    Plan p = Cut(f, static_cast<uint64_t>(budget));
    if (p.boundaries.empty()) continue;
    bool seen = false;
    for (const Plan& q : plans) seen = seen || q.boundaries == p.boundaries;
    if (!seen) plans.push_back(std::move(p));
  }
  const Plan* chosen = nullptr;
  for (const Plan& p : plans) {
    if (p.peak >= report->bytes_before) continue;  // no saving
    if (!chosen) {
      chosen = &p;
      continue;
    }
    if (options.segments == kRecomputeAuto) {
      if (p.peak < chosen->peak || (p.peak == chosen->peak && p.boundaries.size() < chosen->boundaries.size())) {
        chosen = &p;
      }
    } else {
      auto distance = [&](const Plan& q) {
        return std::abs(static_cast<long>(q.boundaries.size()) + 1 - options.segments);
      };
      if (distance(p) < distance(*chosen) || (distance(p) == distance(*chosen) && p.peak < chosen->peak)) {
        chosen = &p;
      }
    }
  }
  if (!chosen) {
    report->why_not = "no cut of the forward pass holds fewer activations than keeping them all";
    return Status::Ok();
  }
  // auto asks for a saving worth a forward pass of compute: a quarter of the activations at least.
  if (options.segments == kRecomputeAuto && chosen->peak > report->bytes_before - report->bytes_before / 4) {
    report->why_not =
        StrCat("the best cut of the forward pass would hold ", chosen->peak, " of ", report->bytes_before,
               " bytes of activations (estimated at batch ", options.batch, "): less than a quarter saved");
    return Status::Ok();
  }

  int added = 0;
  size_t lo = 0;
  for (size_t b : chosen->boundaries) {
    ONNXAMP_ASSIGN_OR_RETURN(int n, RecomputeSegment(g, f, lo, b, chosen->kept));
    added += n;
    lo = b + 1;
  }
  report->segments = static_cast<int>(chosen->boundaries.size()) + 1;
  report->nodes = added;
  report->bytes_after = chosen->peak;
  std::set<std::pair<size_t, std::string>> order;
  for (size_t b : chosen->boundaries) {
    for (const ir::Value* v : f.crossing[b]) order.insert({f.position.at(v->producer()), v->name()});
  }
  for (const auto& [pos, name] : order) report->checkpoints.push_back(name);
  return Status::Ok();
}

ValueSizes EstimateValueSizes(const ir::Model& model, int64_t batch, const InputDims& input_dims) {
  ValueSizes out;
  if (!model.graph) return out;
  for (const auto& [v, bytes] : EstimateBytes(*model.graph, std::max<int64_t>(batch, 1), input_dims)) {
    out[v->name()] = bytes;
  }
  return out;
}

std::function<Status(ir::Model&)> RecomputeHook(const ir::Model& train, const std::string& seed,
                                                const RecomputeOptions& options, RecomputeReport* report) {
  if (options.segments == 0) return {};
  auto sizes = std::make_shared<const ValueSizes>(EstimateValueSizes(train, options.batch, options.input_dims));
  return [seed, options, report, sizes](ir::Model& model) {
    Status st = RecomputeSegments(model, seed, options, report, sizes.get());
    return st.ok() ? st : st.WithContext("--recompute");
  };
}

StatusOr<int> ParseRecompute(const std::string& text) {
  if (text == "off") return 0;
  if (text == "auto") return kRecomputeAuto;
  if (text == "cheap") return kRecomputeCheap;
  int n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size() || n < 2) {
    return InvalidArgument("--recompute must be 'off', 'auto', 'cheap' or a number of segments >= 2, got '", text, "'");
  }
  return n;
}

std::string RecomputeName(int segments) {
  if (segments == 0) return "off";
  if (segments == kRecomputeAuto) return "auto";
  if (segments == kRecomputeCheap) return "cheap";
  return std::to_string(segments);
}

}  // namespace onnxamp::trainer
