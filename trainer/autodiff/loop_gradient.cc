#include "trainer/autodiff/loop_gradient.h"

#include <memory>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "runtime/executor/graph_match.h"
#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ops/gradient_ops.h"
#include "trainer/autodiff/autodiff.h"
#include "trainer/autodiff/element_types.h"
#include "trainer/autodiff/shapes.h"

namespace onnxamp::trainer {
namespace {

void SetTypeIfUnknown(ir::Value* v, DType t) {
  if (t == DType::kUndefined) return;
  if (v->type().is_tensor() && v->type().elem_type() != DType::kUndefined) return;
  v->set_type(ir::ValueType::Tensor(t));
}

DType ElemType(const ir::Value* v) { return v && v->type().is_tensor() ? v->type().elem_type() : DType::kUndefined; }

// A loop body made a model of its own and differentiated: its formal inputs first, then the enclosing values it reads
// (promoted to inputs), then one input per seeded output holding that output's incoming gradient.
struct BodyVjp {
  ir::Model model;
  size_t formal = 0;
  std::vector<ir::Value*> incoming;     // per body output: the input holding its gradient, or null
  std::vector<ir::Value*> input_grads;  // per formal input: its gradient, or null (not wanted, or none)
  std::vector<ir::Value*> read_grads;   // per read: its gradient, or null
};

StatusOr<BodyVjp> DifferentiateBody(const ir::Model& model, const ir::Node& node, const ir::Graph& body,
                                    const std::vector<DType>& input_types, const std::vector<DType>& output_types,
                                    const std::vector<bool>& seeded, const std::vector<bool>& wanted,
                                    const std::vector<ir::Value*>& reads, const subgraph::TypeOf& type_of) {
  BodyVjp out;
  out.model.ir_version = model.ir_version;
  out.model.opset_imports = model.opset_imports;
  out.model.graph = body.Clone();
  GradientRequest request;
  std::vector<std::string> seeded_names, incoming_names(body.outputs().size());
  std::unordered_set<std::string> may_reach;
  {
    ir::Graph& g = *out.model.graph;
    out.formal = g.inputs().size();
    for (size_t i = 0; i < out.formal; ++i) SetTypeIfUnknown(g.inputs()[i], input_types[i]);
    subgraph::PromoteOuterReads(g, *node.graph(), type_of);
    for (size_t o = 0; o < g.outputs().size(); ++o) {
      if (!g.outputs()[o]->is_graph_input()) SetTypeIfUnknown(g.outputs()[o], output_types[o]);
    }
    for (size_t o = 0; o < g.outputs().size(); ++o) {
      if (!seeded[o]) continue;
      const std::string& name = g.outputs()[o]->name();
      ir::Value* in = g.CreateValue(g.UniqueName("grad_" + name));
      in->set_type(ir::ValueType::Tensor(output_types[o]));
      g.AddInput(in);
      incoming_names[o] = in->name();
      request.output_gradients.emplace_back(name, in->name());
      seeded_names.push_back(name);
    }
    may_reach = subgraph::MayReach(g, seeded_names);
    for (size_t i = 0; i < out.formal; ++i) {
      if (wanted[i]) request.wrt.push_back(g.inputs()[i]->name());
    }
    for (const ir::Value* r : reads) {
      const ir::Value* v = g.FindValue(r->name());
      if (v && v->is_graph_input()) request.wrt.push_back(r->name());
    }
  }
  std::vector<std::string> grads(request.wrt.size());
  if (!request.wrt.empty() && !request.output_gradients.empty()) {
    ONNXAMP_ASSIGN_OR_RETURN(GradientResult result, BuildGradients(out.model, request));
    grads = result.gradients;
  }
  // BuildGradients replaced the graph: find the values again by name.
  const ir::Graph& g = *out.model.graph;
  for (const std::string& name : incoming_names) out.incoming.push_back(name.empty() ? nullptr : g.FindValue(name));
  auto grad_of = [&](const std::string& name, const std::string& what) -> StatusOr<ir::Value*> {
    for (size_t k = 0; k < request.wrt.size(); ++k) {
      if (request.wrt[k] != name) continue;
      if (!grads[k].empty()) return g.FindValue(grads[k]);
      break;
    }
    if (may_reach.count(name)) {
      return InvalidArgument("the gradient of ", what, " '", name,
                             "' through the body cannot be traced: a value on its path has no known floating type");
    }
    return nullptr;
  };
  for (size_t i = 0; i < out.formal; ++i) {
    ir::Value* grad = nullptr;
    if (wanted[i]) {
      ONNXAMP_ASSIGN_OR_RETURN(grad, grad_of(g.inputs()[i]->name(), "body input"));
    }
    out.input_grads.push_back(grad);
  }
  for (const ir::Value* r : reads) {
    ONNXAMP_ASSIGN_OR_RETURN(ir::Value * grad, grad_of(r->name(), "enclosing value"));
    out.read_grads.push_back(grad);
  }
  return out;
}

// The element type of loop-carried state `i`: its initial value's, else what the body declares for its input or output,
// else the node's output's. Unknown: an error naming it (whether it carries a gradient cannot be decided).
StatusOr<DType> StateType(const ir::Node& node, size_t node_input, const ir::Value* body_input,
                          const ir::Value* body_output, size_t node_output, const subgraph::TypeOf& type_of) {
  DType t = type_of(node.input(node_input));
  if (t == DType::kUndefined) t = ElemType(body_input);
  if (t == DType::kUndefined) t = ElemType(body_output);
  if (t == DType::kUndefined && node.output(node_output)) t = type_of(node.output(node_output));
  if (t == DType::kUndefined) {
    return InvalidArgument("the element type of state '", node.input(node_input)->name(),
                           "' is unknown (neither the value, the body nor the node declares it): whether its gradient "
                           "goes through the loop cannot be decided");
  }
  return t;
}

// Types `v` as `t` with the shape `like` declares (a gradient has the shape of its value), where v declares none: the
// shape a loop's stacked output takes when no iteration ran.
void TypeLike(ir::Value* v, DType t, const ir::Value* like) {
  const bool has_shape = v->type().is_tensor() && v->type().shape();
  if (!has_shape && like && like->type().is_tensor() && like->type().shape() && t != DType::kUndefined) {
    v->set_type(ir::ValueType::Tensor(t, *like->type().shape()));
    return;
  }
  SetTypeIfUnknown(v, t);
}

// A fresh copy of `v` (an Identity), to be an output of `g` with a type of its own.
ir::Value* OwnOutput(ir::Graph& g, ir::Value* v, const std::string& base) {
  ir::Value* copy = g.CreateValue(g.UniqueName(base));
  g.AddNode("Identity", {v}, {copy}, copy->name());
  return copy;
}

// Makes `v` an output of `g`, through an Identity when it is an input or an output already (every output its own
// value), typed `t` with `like`'s declared shape.
void AddOwnOutput(ir::Graph& g, ir::Value* v, DType t, const std::string& base, const ir::Value* like = nullptr) {
  if (v->is_graph_output() || v->is_graph_input() || v->is_outer_scope()) v = OwnOutput(g, v, base);
  TypeLike(v, t, like);
  g.AddOutput(v);
}

ir::Value* AddInputTyped(ir::Graph& g, const std::string& base, DType t) {
  ir::Value* v = g.CreateValue(g.UniqueName(base));
  v->set_type(ir::ValueType::Tensor(t));
  g.AddInput(v);
  return v;
}

// Replaces the inputs of `g` by `order` (each an input of g, or a new value) followed by the inputs not in it.
void ReorderInputs(ir::Graph& g, const std::vector<ir::Value*>& order) {
  std::vector<ir::Value*> rest;
  std::unordered_set<const ir::Value*> listed(order.begin(), order.end());
  for (ir::Value* v : std::vector<ir::Value*>(g.inputs())) {
    if (!listed.count(v)) rest.push_back(v);
    g.RemoveInput(v);
  }
  for (ir::Value* v : order) g.AddInput(v);
  for (ir::Value* v : rest) g.AddInput(v);
}

void ClearOutputs(ir::Graph& g) {
  while (!g.outputs().empty()) g.RemoveOutput(g.outputs().size() - 1);
}

const ir::Graph* BodyOf(const ir::Node& node) {
  const ir::Attribute* a = node.FindAttribute("body");
  return a && a->type() == ir::AttrType::kGraph ? a->g.get() : nullptr;
}

std::vector<int64_t> Flipped(const std::vector<int64_t>& directions) {
  std::vector<int64_t> out;
  for (int64_t d : directions) out.push_back(d ? 0 : 1);
  return out;
}

// The trace loop's body: `body` returning its first `keep_outputs` outputs (the next states; a Loop's condition first)
// and then the inputs listed in `traced` as scan outputs, instead of its own scan outputs.
StatusOr<std::unique_ptr<ir::Graph>> TraceBody(const ir::Graph& body, size_t keep_outputs,
                                               const std::vector<size_t>& traced, const std::vector<DType>& input_types,
                                               const std::string& prefix) {
  std::unique_ptr<ir::Graph> t = body.Clone();
  while (t->outputs().size() > keep_outputs) t->RemoveOutput(t->outputs().size() - 1);
  for (size_t i : traced) {
    ir::Value* in = t->inputs()[i];
    SetTypeIfUnknown(in, input_types[i]);
    ir::Value* copy = t->CreateValue(t->UniqueName(in->name() + "_trace"));
    t->AddNode("Identity", {in}, {copy}, copy->name());
    TypeLike(copy, input_types[i], in);
    t->AddOutput(copy);
  }
  subgraph::RemoveDeadNodes(*t);
  ONNXAMP_RETURN_IF_ERROR(subgraph::FinishSubgraph(*t, t->inputs().size(), prefix));
  return t;
}

// The backward body's carried outputs: per floating state (formal input offset + i) its gradient, zeros where the body
// gives none; per accumulated read its accumulator plus this iteration's gradient.
void AddCarriedOutputs(ir::Graph& g, const BodyVjp& vjp, const std::vector<ir::Value*>& formal, size_t offset,
                       const std::vector<size_t>& states, const std::vector<DType>& input_types,
                       const std::vector<size_t>& grad_reads, const std::vector<ir::Value*>& acc,
                       const std::vector<ir::Value*>& reads, const subgraph::TypeOf& type_of) {
  for (size_t i : states) {
    ir::Value* in = formal[offset + i];
    const DType t = input_types[offset + i];
    ir::Value* d = vjp.input_grads[offset + i];
    if (!d) d = subgraph::ZerosLike(g, in, t, in->name() + "_grad");
    AddOwnOutput(g, d, t, in->name() + "_grad", in);
  }
  for (size_t a = 0; a < grad_reads.size(); ++a) {
    const size_t q = grad_reads[a];
    ir::Value* sum = g.CreateValue(g.UniqueName(reads[q]->name() + "_grad_sum"));
    g.AddNode("Add", {acc[a], vjp.read_grads[q]}, {sum}, sum->name());
    AddOwnOutput(g, sum, type_of(reads[q]), sum->name());
  }
}

// The backward loop's initial carried values, with their types: per floating state (node input offset + i) the
// gradient reaching its final value, zeros without one; per accumulated read zeros.
void AddCarriedInitialValues(const LoopEmitter& emitter, const ir::Node& node, size_t offset,
                             const std::vector<size_t>& states, const std::vector<ir::Value*>& dys,
                             const std::vector<DType>& input_types, const std::vector<size_t>& grad_reads,
                             const std::vector<ir::Value*>& reads, const subgraph::TypeOf& type_of,
                             std::vector<ir::Value*>* inputs, std::vector<DType>* types) {
  for (size_t i : states) {
    const DType t = input_types[offset + i];
    inputs->push_back(dys[i] ? dys[i] : emitter.zeros_like(node.input(offset + i), t));
    types->push_back(t);
  }
  for (size_t q : grad_reads) {
    inputs->push_back(emitter.zeros_like(reads[q], type_of(reads[q])));
    types->push_back(type_of(reads[q]));
  }
}

// The backward loop's carried outputs, from outs[*next] on: the gradients of the initial states that need one (node
// input offset + i) and of the accumulated reads.
void TakeCarriedGradients(const std::vector<ir::Value*>& outs, size_t* next, size_t offset,
                          const std::vector<size_t>& states, const std::vector<bool>& needs,
                          const std::vector<size_t>& grad_reads, LoopGradients* result) {
  for (size_t i : states) {
    ir::Value* d = outs[(*next)++];
    if (needs[offset + i]) result->inputs[offset + i] = d;
  }
  for (size_t q : grad_reads) result->reads[q] = outs[(*next)++];
}

// A one-output `op` node of the default domain whose first input is given.
bool IsUnaryOp(const ir::Node* n, const char* op) { return exec::IsSingleOutputOp(n, op) && n->input(0); }

// The gradient of an enclosing value that the body reads through one Gather only: GatherGrad(dY, indices,
// Shape(read)) (through an Identity). Or, where the body casts the value before gathering from it (an FP16/BF16 body
// reading an FP32 activation of the enclosing graph), Cast(GatherGrad(dY, indices, Shape(Cast(read)))): then
// `*cast_to` is the type the gradient is cast to (else kUndefined; also for a Cast to read's own type, whose gradient
// has no Cast). Null when it is anything else.
const ir::Node* SlicedGradient(const ir::Value* grad, const ir::Value* read, DType* cast_to) {
  *cast_to = DType::kUndefined;
  const ir::Node* p = grad ? grad->producer() : nullptr;
  if (IsUnaryOp(p, "Identity")) p = p->input(0)->producer();
  DType to = DType::kUndefined;
  if (IsUnaryOp(p, "Cast")) {
    to = static_cast<DType>(p->GetInt("to", 0));
    p = p->input(0)->producer();
  }
  if (!p || p->op_type() != ops::kGatherGradOp || p->domain() != exec::kInternalDomain) return nullptr;
  if (!p->input(0) || !p->input(1) || !p->input(2)) return nullptr;
  const ir::Node* shape = p->input(2)->producer();
  if (!IsUnaryOp(shape, "Shape") || shape->FindAttribute("start") || shape->FindAttribute("end")) return nullptr;
  const ir::Value* gathered = shape->input(0);
  // A Cast before the Gather: to another type (the gradient is cast back), or to read's own type (it is not).
  if (const ir::Node* c = gathered->producer(); gathered != read && IsUnaryOp(c, "Cast")) gathered = c->input(0);
  if (gathered != read || (to != DType::kUndefined && gathered == shape->input(0))) return nullptr;
  *cast_to = to;
  return p;
}

}  // namespace

StatusOr<LoopGradients> ScanGradient(const ir::Model& model, const ir::Node& node, const std::vector<bool>& needs,
                                     const std::vector<ir::Value*>& reads, const std::vector<ir::Value*>& dys,
                                     const subgraph::TypeOf& type_of, const std::string& prefix,
                                     const LoopEmitter& emitter) {
  if (model.OpsetVersion("") < 9) {
    return Unimplemented("Scan-8 (batched, opset 8) has no gradient; Scan from opset 9 has");
  }
  const ir::Graph* body = BodyOf(node);
  if (!body) return InvalidArgument("attribute 'body' (a graph) is missing");
  const int64_t m_attr = node.GetInt("num_scan_inputs", -1);
  if (m_attr < 1 || static_cast<size_t>(m_attr) > node.inputs().size()) {
    return InvalidArgument("attribute 'num_scan_inputs' (", m_attr, ") must be in [1, ", node.inputs().size(), "]");
  }
  const size_t m = static_cast<size_t>(m_attr), n = node.inputs().size() - m;
  if (body->inputs().size() != n + m || body->outputs().size() < n || node.outputs().size() != body->outputs().size()) {
    return InvalidArgument("'body' takes ", body->inputs().size(), " inputs and has ", body->outputs().size(),
                           " outputs for a node of ", node.inputs().size(), " inputs and ", node.outputs().size(),
                           " outputs");
  }
  const size_t k_out = body->outputs().size() - n;
  const std::vector<int64_t> in_axes = node.GetInts("scan_input_axes", std::vector<int64_t>(m, 0));
  const std::vector<int64_t> in_dirs = node.GetInts("scan_input_directions", std::vector<int64_t>(m, 0));
  const std::vector<int64_t> out_axes = node.GetInts("scan_output_axes", std::vector<int64_t>(k_out, 0));
  const std::vector<int64_t> out_dirs = node.GetInts("scan_output_directions", std::vector<int64_t>(k_out, 0));
  if (in_axes.size() != m || in_dirs.size() != m || out_axes.size() != k_out || out_dirs.size() != k_out) {
    return InvalidArgument("scan_input_axes and scan_input_directions have ", in_axes.size(), " and ", in_dirs.size(),
                           " entries for ", m, " scan inputs, scan_output_axes and scan_output_directions ",
                           out_axes.size(), " and ", out_dirs.size(), " for ", k_out, " scan outputs");
  }
  for (size_t i = 0; i < node.inputs().size(); ++i) {
    if (!node.input(i)) return InvalidArgument("input ", i, " is empty; every input of a Scan is required");
  }

  // Types: the node's inputs, else what the body declares.
  std::vector<DType> input_types(n + m), output_types(n + k_out);
  for (size_t i = 0; i < n + m; ++i) {
    if (i < n) {
      ONNXAMP_ASSIGN_OR_RETURN(input_types[i], StateType(node, i, body->inputs()[i], body->outputs()[i], i, type_of));
      continue;
    }
    input_types[i] = type_of(node.input(i));
    if (input_types[i] == DType::kUndefined) input_types[i] = ElemType(body->inputs()[i]);
  }
  for (size_t o = 0; o < n + k_out; ++o) {
    output_types[o] = o < n ? input_types[o] : ElemType(body->outputs()[o]);
    if (output_types[o] == DType::kUndefined && node.output(o)) output_types[o] = type_of(node.output(o));
  }
  // States carried backwards: the floating ones. Outputs seeded: those states, and the scan outputs with a gradient.
  std::vector<size_t> diff_states, active_outputs, needed_inputs;
  for (size_t i = 0; i < n; ++i) {
    if (IsDifferentiableType(input_types[i])) diff_states.push_back(i);
  }
  for (size_t k = 0; k < k_out; ++k) {
    if (dys[n + k] && IsDifferentiableType(output_types[n + k])) active_outputs.push_back(k);
  }
  for (size_t j = 0; j < m; ++j) {
    if (needs[n + j]) needed_inputs.push_back(j);
  }
  std::vector<bool> seeded(n + k_out, false), wanted(n + m, false);
  for (size_t i : diff_states) seeded[i] = wanted[i] = true;
  for (size_t k : active_outputs) seeded[n + k] = true;
  for (size_t j : needed_inputs) wanted[n + j] = true;

  ONNXAMP_ASSIGN_OR_RETURN(
      BodyVjp vjp, DifferentiateBody(model, node, *body, input_types, output_types, seeded, wanted, reads, type_of));
  ir::Graph& g = *vjp.model.graph;
  // The backward body: inputs (dstates, read accumulators, the iteration's states, its scan-input slices, its
  // scan-output gradients); outputs (the states' gradients, the accumulators, the scan-input gradients).
  std::vector<ir::Value*> order, acc;
  std::vector<size_t> grad_reads;
  for (size_t i : diff_states) order.push_back(vjp.incoming[i]);
  for (size_t q = 0; q < reads.size(); ++q) {
    if (!vjp.read_grads[q]) continue;
    grad_reads.push_back(q);
    acc.push_back(AddInputTyped(g, reads[q]->name() + "_grad_acc", type_of(reads[q])));
    order.push_back(acc.back());
  }
  const std::vector<ir::Value*> formal(g.inputs().begin(), g.inputs().begin() + static_cast<ptrdiff_t>(n + m));
  order.insert(order.end(), formal.begin(), formal.end());
  for (size_t k : active_outputs) order.push_back(vjp.incoming[n + k]);
  const size_t backward_formal = order.size();
  ReorderInputs(g, order);
  ClearOutputs(g);
  AddCarriedOutputs(g, vjp, formal, 0, diff_states, input_types, grad_reads, acc, reads, type_of);
  for (size_t j : needed_inputs) {
    ir::Value* d = vjp.input_grads[n + j];
    if (!d) d = subgraph::ZerosLike(g, formal[n + j], input_types[n + j], formal[n + j]->name() + "_grad");
    AddOwnOutput(g, d, input_types[n + j], formal[n + j]->name() + "_grad", formal[n + j]);
  }
  subgraph::RemoveDeadNodes(g);
  ONNXAMP_RETURN_IF_ERROR(subgraph::FinishSubgraph(g, backward_formal, prefix + "body/"));

  LoopGradients result;
  result.inputs.assign(node.inputs().size(), nullptr);
  result.reads.assign(reads.size(), nullptr);
  bool useful = !grad_reads.empty() || !needed_inputs.empty();
  for (size_t i : diff_states) useful = useful || needs[i];
  if (!useful) return result;
  result.uses_internal = vjp.model.OpsetVersion(exec::kInternalDomain) != 0;
  const std::string seed = exec::SeedName(node);

  // The trace: the forward Scan again, its body returning its state inputs as scan outputs instead of its own.
  std::vector<ir::Value*> traces;
  if (n > 0) {
    std::vector<size_t> traced(n);
    for (size_t i = 0; i < n; ++i) traced[i] = i;
    ONNXAMP_ASSIGN_OR_RETURN(std::unique_ptr<ir::Graph> t, TraceBody(*body, n, traced, input_types, prefix + "trace/"));
    std::vector<DType> types(input_types.begin(), input_types.begin() + static_cast<ptrdiff_t>(n));
    types.insert(types.end(), input_types.begin(), input_types.begin() + static_cast<ptrdiff_t>(n));
    std::vector<ir::Attribute> attrs;
    attrs.push_back(ir::Attribute::GraphValue("body", std::move(t)));
    attrs.push_back(ir::Attribute::Int("num_scan_inputs", static_cast<int64_t>(m)));
    attrs.push_back(ir::Attribute::Ints("scan_input_axes", in_axes));
    attrs.push_back(ir::Attribute::Ints("scan_input_directions", in_dirs));
    attrs.push_back(ir::Attribute::String("seed_from", seed));
    std::vector<ir::Value*> outs = emitter.emit("Scan", node.inputs(), types, std::move(attrs), "");
    traces.assign(outs.begin() + static_cast<ptrdiff_t>(n), outs.end());
  }

  // The backward Scan.
  std::vector<ir::Value*> inputs;
  std::vector<DType> types;
  AddCarriedInitialValues(emitter, node, 0, diff_states, dys, input_types, grad_reads, reads, type_of, &inputs, &types);
  std::vector<int64_t> axes(n, 0), dirs(n, 1);
  inputs.insert(inputs.end(), traces.begin(), traces.end());
  for (size_t j = 0; j < m; ++j) inputs.push_back(node.input(n + j));
  axes.insert(axes.end(), in_axes.begin(), in_axes.end());
  const std::vector<int64_t> in_flipped = Flipped(in_dirs), out_flipped = Flipped(out_dirs);
  dirs.insert(dirs.end(), in_flipped.begin(), in_flipped.end());
  for (size_t k : active_outputs) {
    inputs.push_back(dys[n + k]);
    axes.push_back(out_axes[k]);
    dirs.push_back(out_flipped[k]);
  }
  std::vector<int64_t> dx_axes, dx_dirs;
  for (size_t j : needed_inputs) {
    types.push_back(input_types[n + j]);
    dx_axes.push_back(in_axes[j]);
    dx_dirs.push_back(in_flipped[j]);
  }
  std::vector<ir::Attribute> attrs;
  attrs.push_back(ir::Attribute::GraphValue("body", std::move(vjp.model.graph)));
  attrs.push_back(ir::Attribute::Int("num_scan_inputs", static_cast<int64_t>(n + m + active_outputs.size())));
  attrs.push_back(ir::Attribute::Ints("scan_input_axes", axes));
  attrs.push_back(ir::Attribute::Ints("scan_input_directions", dirs));
  if (!needed_inputs.empty()) {
    attrs.push_back(ir::Attribute::Ints("scan_output_axes", dx_axes));
    attrs.push_back(ir::Attribute::Ints("scan_output_directions", dx_dirs));
  }
  attrs.push_back(ir::Attribute::String("seed_from", seed));
  attrs.push_back(ir::Attribute::Int("seed_reverse", 1));
  std::vector<ir::Value*> outs = emitter.emit("Scan", inputs, types, std::move(attrs), "");
  size_t next = 0;
  TakeCarriedGradients(outs, &next, 0, diff_states, needs, grad_reads, &result);
  for (size_t j : needed_inputs) result.inputs[n + j] = outs[next++];
  return result;
}

StatusOr<LoopGradients> LoopGradient(const ir::Model& model, const ir::Node& node, const std::vector<bool>& needs,
                                     const std::vector<ir::Value*>& reads, const std::vector<ir::Value*>& dys,
                                     const subgraph::TypeOf& type_of, const std::string& prefix,
                                     const LoopEmitter& emitter) {
  const ir::Graph* body = BodyOf(node);
  if (!body) return InvalidArgument("attribute 'body' (a graph) is missing");
  if (node.inputs().size() < 2) {
    return InvalidArgument("has ", node.inputs().size(), " inputs; a Loop takes M and cond (each may be empty) first");
  }
  const size_t n = node.inputs().size() - 2;
  if (body->inputs().size() != n + 2 || body->outputs().size() < n + 1 ||
      node.outputs().size() != body->outputs().size() - 1) {
    return InvalidArgument("'body' takes ", body->inputs().size(), " inputs and has ", body->outputs().size(),
                           " outputs for a node of ", node.inputs().size(), " inputs and ", node.outputs().size(),
                           " outputs");
  }
  const size_t k_out = body->outputs().size() - 1 - n;
  for (size_t i = 0; i < n; ++i) {
    if (!node.input(2 + i)) return InvalidArgument("loop-carried input ", i, " is empty");
  }
  // Body inputs (iteration_num, cond, the values), outputs (cond, the values, the scan outputs).
  std::vector<DType> input_types(n + 2), output_types(n + 1 + k_out);
  input_types[0] = DType::kInt64;
  input_types[1] = output_types[0] = DType::kBool;
  for (size_t i = 0; i < n; ++i) {
    ONNXAMP_ASSIGN_OR_RETURN(input_types[2 + i],
                             StateType(node, 2 + i, body->inputs()[2 + i], body->outputs()[1 + i], i, type_of));
    output_types[1 + i] = input_types[2 + i];
  }
  for (size_t k = 0; k < k_out; ++k) {
    DType t = ElemType(body->outputs()[1 + n + k]);
    if (t == DType::kUndefined && node.output(n + k)) t = type_of(node.output(n + k));
    output_types[1 + n + k] = t;
  }
  std::vector<size_t> diff_states, active_outputs;
  for (size_t i = 0; i < n; ++i) {
    if (IsDifferentiableType(input_types[2 + i])) diff_states.push_back(i);
  }
  for (size_t k = 0; k < k_out; ++k) {
    if (dys[n + k] && IsDifferentiableType(output_types[1 + n + k])) active_outputs.push_back(k);
  }
  std::vector<bool> seeded(n + 1 + k_out, false), wanted(n + 2, false);
  for (size_t i : diff_states) seeded[1 + i] = wanted[2 + i] = true;
  for (size_t k : active_outputs) seeded[1 + n + k] = true;
  ONNXAMP_ASSIGN_OR_RETURN(
      BodyVjp vjp, DifferentiateBody(model, node, *body, input_types, output_types, seeded, wanted, reads, type_of));
  LoopGradients result;
  result.inputs.assign(node.inputs().size(), nullptr);
  result.reads.assign(reads.size(), nullptr);
  std::vector<size_t> grad_reads;  // accumulated in the backward Loop
  // Gathered: slices and indices as scan outputs, summed by one GatherGrad along `axis` after the Loop (the stacked
  // slices' new axis 0 moved to `axis` first, by `perm`).
  struct Sliced {
    size_t read;
    const ir::Node* grad;
    int64_t axis;
    std::vector<int64_t> perm;
    DType cast_to;  // the slices are cast to this type in the body (kUndefined: they are not)
  };
  std::vector<Sliced> sliced;
  const ElementTypes body_types = InferElementTypes(*vjp.model.graph);
  const Shapes body_shapes = InferShapes(*vjp.model.graph);
  for (size_t q = 0; q < reads.size(); ++q) {
    if (!vjp.read_grads[q]) continue;
    DType cast_to = DType::kUndefined;
    const ir::Node* p = SlicedGradient(vjp.read_grads[q], vjp.model.graph->FindValue(reads[q]->name()), &cast_to);
    auto idx_type = p ? body_types.find(p->input(1)) : body_types.end();
    std::optional<Sliced> sl;
    if (p && idx_type != body_types.end() && (idx_type->second == DType::kInt64 || idx_type->second == DType::kInt32)) {
      const int64_t axis = p->GetInt("axis", 0);
      const int64_t rank = emitter.rank_of(reads[q]);
      // Stacked as a scan output, the indices must have one shape in every iteration: known dims only (Range(0, i),
      // Compress's NonZero positions keep the accumulator).
      auto idx_shape = body_shapes.find(p->input(1));
      bool fixed = idx_shape != body_shapes.end();
      if (fixed) {
        for (int64_t d : idx_shape->second) fixed = fixed && d >= 0;
      }
      // Otherwise the accumulator. The axis counts from the end only where the rank is known.
      const int64_t at = axis < 0 && rank > 0 ? axis + rank : axis;
      if (fixed && at == 0) {
        sl = Sliced{q, p, 0, {}, cast_to};
      } else if (fixed && rank > 0 && at > 0 && at < rank) {
        const int64_t idx_rank = static_cast<int64_t>(idx_shape->second.size());
        std::vector<int64_t> perm;
        for (int64_t j = 1; j <= at; ++j) perm.push_back(j);
        perm.push_back(0);
        for (int64_t j = at + 1; j < rank + idx_rank; ++j) perm.push_back(j);
        sl = Sliced{q, p, at, perm, cast_to};
      }
    }
    if (sl) {
      sliced.push_back(*sl);
    } else {
      grad_reads.push_back(q);
    }
  }
  bool useful = !grad_reads.empty() || !sliced.empty();
  for (size_t i : diff_states) useful = useful || needs[2 + i];
  if (!useful) return result;
  result.uses_internal = vjp.model.OpsetVersion(exec::kInternalDomain) != 0;
  const std::string seed = exec::SeedName(node);

  // The trace: the forward Loop again, its body returning the iteration number and its loop-carried inputs as scan
  // outputs instead of its own.
  std::vector<ir::Value*> traces;
  ir::Value* iterations = nullptr;
  {
    std::vector<size_t> traced = {0};  // the iteration number; not cond, true in every iteration that ran
    for (size_t i = 0; i < n; ++i) traced.push_back(2 + i);
    ONNXAMP_ASSIGN_OR_RETURN(std::unique_ptr<ir::Graph> t,
                             TraceBody(*body, n + 1, traced, input_types, prefix + "trace/"));
    std::vector<DType> types(input_types.begin() + 2, input_types.end());
    types.push_back(DType::kInt64);
    types.insert(types.end(), input_types.begin() + 2, input_types.end());
    std::vector<ir::Attribute> attrs;
    attrs.push_back(ir::Attribute::GraphValue("body", std::move(t)));
    attrs.push_back(ir::Attribute::String("seed_from", seed));
    std::vector<ir::Value*> outs = emitter.emit("Loop", node.inputs(), types, std::move(attrs), "");
    iterations = outs[n];
    traces.assign(outs.begin() + static_cast<ptrdiff_t>(n + 1), outs.end());
  }

  // The backward body: inputs (the iteration number u, cond, dvalues, read accumulators); it reads the traces and the
  // scan outputs' gradients at forward iteration L - 1 - u.
  ir::Graph& g = *vjp.model.graph;
  const std::vector<ir::Value*> formal(g.inputs().begin(), g.inputs().begin() + static_cast<ptrdiff_t>(n + 2));
  for (ir::Value* v : formal) g.RemoveInput(v);
  // An enclosing value the body reads (a trace, a scan output's gradient), once each (two scan outputs may get the
  // same gradient value). A body value of that name (the autodiff names gradients after nodes, whose names are not
  // scoped) is renamed: the enclosing one must be readable by its name.
  std::unordered_map<const ir::Value*, ir::Value*> read_from_outside;
  auto outer = [&](ir::Value* v, DType t) -> StatusOr<ir::Value*> {
    auto it = read_from_outside.find(v);
    if (it != read_from_outside.end()) return it->second;
    if (ir::Value* clash = g.FindValue(v->name())) {
      ONNXAMP_RETURN_IF_ERROR(g.RenameValue(clash, g.UniqueName(v->name() + "_body")));
    }
    ir::Value* in = g.CreateValue(v->name());
    in->set_type(ir::ValueType::Tensor(t));
    g.AddInput(in);
    read_from_outside.emplace(v, in);
    return in;
  };
  auto add = [&](const std::string& op, const std::vector<ir::Value*>& inputs, ir::Value* out = nullptr) {
    if (!out) out = g.CreateValue(g.UniqueName(op));
    g.AddNode(op, inputs, {out}, out->name());
    return out;
  };
  ir::Value* u = AddInputTyped(g, "iteration", DType::kInt64);
  ir::Value* cond = AddInputTyped(g, "cond", DType::kBool);
  ONNXAMP_ASSIGN_OR_RETURN(ir::Value * iter_trace, outer(iterations, DType::kInt64));
  ir::Value* count = add("Size", {iter_trace});
  ir::Value* one = g.CreateValue(g.UniqueName("one"));
  ir::Tensor one_t(DType::kInt64, {});
  one_t.mutable_values<int64_t>()[0] = 1;
  g.AddNode("Constant", {}, {one}, one->name())->SetAttribute(ir::Attribute::TensorValue("value", one_t));
  ir::Value* index = add("Sub", {add("Sub", {count, one}), u});
  add("Gather", {iter_trace, index}, formal[0]);
  ir::Value* yes = formal[1];
  ir::Tensor true_t(DType::kBool, {});
  true_t.mutable_values<uint8_t>()[0] = 1;
  g.AddNode("Constant", {}, {yes}, yes->name())->SetAttribute(ir::Attribute::TensorValue("value", true_t));
  for (size_t i = 0; i < n; ++i) {
    ONNXAMP_ASSIGN_OR_RETURN(ir::Value * trace, outer(traces[i], input_types[2 + i]));
    add("Gather", {trace, index}, formal[2 + i]);
  }
  for (size_t k : active_outputs) {
    ir::Value* slot = vjp.incoming[1 + n + k];
    g.RemoveInput(slot);
    ONNXAMP_ASSIGN_OR_RETURN(ir::Value * dy, outer(dys[n + k], output_types[1 + n + k]));
    add("Gather", {dy, index}, slot);
  }
  std::vector<ir::Value*> order = {u, cond}, acc;
  for (size_t i : diff_states) order.push_back(vjp.incoming[1 + i]);
  for (size_t q : grad_reads) {
    acc.push_back(AddInputTyped(g, reads[q]->name() + "_grad_acc", type_of(reads[q])));
    order.push_back(acc.back());
  }
  const size_t backward_formal = order.size();
  ReorderInputs(g, order);
  ClearOutputs(g);
  AddOwnOutput(g, cond, DType::kBool, "cond_out");
  AddCarriedOutputs(g, vjp, formal, 2, diff_states, input_types, grad_reads, acc, reads, type_of);
  std::vector<DType> index_types;
  for (const Sliced& sl : sliced) {
    const size_t q = sl.read;
    const ir::Node* p = sl.grad;
    index_types.push_back(body_types.at(p->input(1)));
    // Declared shapes, which a Loop that ran no iteration gives its empty stacks: the indices' (known) and the slices'
    // rank (dims unknown, 0 then; GatherGrad takes an empty dY when there are no indices).
    const PartialShape& idx_dims = body_shapes.at(p->input(1));
    ir::Shape idx_shape, slice_shape;
    for (int64_t d : idx_dims) idx_shape.push_back(ir::Dim::Value(d));
    const int64_t rank = emitter.rank_of(reads[q]);
    if (rank > 0) slice_shape.assign(static_cast<size_t>(rank - 1) + idx_dims.size(), ir::Dim::Unknown());
    // A cast read: each iteration's slice gradient is cast (the one GatherGrad after the loop then sums in the
    // read's type, as the accumulator did), instead of a cast of the whole scattered gradient per iteration.
    ir::Value* slice_grad = p->input(0);
    if (sl.cast_to != DType::kUndefined) {
      slice_grad = g.CreateValue(g.UniqueName(reads[q]->name() + "_grad_slice_cast"));
      g.AddNode("Cast", {p->input(0)}, {slice_grad}, slice_grad->name())
          ->SetAttribute(ir::Attribute::Int("to", static_cast<int64_t>(sl.cast_to)));
    }
    ir::Value* slice = OwnOutput(g, slice_grad, reads[q]->name() + "_grad_slice");
    ir::Value* index = OwnOutput(g, p->input(1), reads[q]->name() + "_grad_index");
    slice->set_type(rank > 0 ? ir::ValueType::Tensor(type_of(reads[q]), slice_shape)
                             : ir::ValueType::Tensor(type_of(reads[q])));
    index->set_type(ir::ValueType::Tensor(index_types.back(), idx_shape));
    g.AddOutput(slice);
    g.AddOutput(index);
  }
  subgraph::RemoveDeadNodes(g);
  ONNXAMP_RETURN_IF_ERROR(subgraph::FinishSubgraph(g, backward_formal, prefix + "body/"));

  // The backward Loop: as many iterations as the forward ran.
  std::vector<ir::Value*> inputs = {emitter.emit("Size", {iterations}, {DType::kInt64}, {}, "")[0], nullptr};
  std::vector<DType> types;
  AddCarriedInitialValues(emitter, node, 2, diff_states, dys, input_types, grad_reads, reads, type_of, &inputs, &types);
  for (size_t a = 0; a < sliced.size(); ++a) {
    types.push_back(type_of(reads[sliced[a].read]));
    types.push_back(index_types[a]);
  }
  std::vector<ir::Attribute> attrs;
  attrs.push_back(ir::Attribute::GraphValue("body", std::move(vjp.model.graph)));
  attrs.push_back(ir::Attribute::String("seed_from", seed));
  attrs.push_back(ir::Attribute::Int("seed_reverse", 1));
  std::vector<ir::Value*> outs = emitter.emit("Loop", inputs, types, std::move(attrs), "");
  size_t next = 0;
  TakeCarriedGradients(outs, &next, 2, diff_states, needs, grad_reads, &result);
  for (const Sliced& sl : sliced) {
    const size_t q = sl.read;
    ir::Value* slices = outs[next++];
    ir::Value* indices = outs[next++];
    if (!sl.perm.empty()) {
      slices = emitter.emit("Transpose", {slices}, {type_of(reads[q])}, {ir::Attribute::Ints("perm", sl.perm)}, "")[0];
    }
    ir::Value* shape = emitter.emit("Shape", {reads[q]}, {DType::kInt64}, {}, "")[0];
    result.reads[q] = emitter.emit(ops::kGatherGradOp, {slices, indices, shape}, {type_of(reads[q])},
                                   {ir::Attribute::Int("axis", sl.axis)}, exec::kInternalDomain)[0];
  }
  return result;
}

}  // namespace onnxamp::trainer
