// Classify pass: a precision per node from the policy, checked against the ONNX schema, and the type plan that
// the later passes carry out (which type each value gets, which type each node input must have).
#include <onnx/defs/schema.h>

#include <algorithm>
#include <climits>
#include <set>
#include <string>
#include <unordered_map>

#include "converter/passes/passes.h"

namespace onnxamp::converter {

namespace {

const onnx::OpSchema* FindSchema(const ir::Node& node, int64_t opset) {
  const std::string domain = ir::IsDefaultDomain(node.domain()) ? std::string() : node.domain();
  if (opset <= 0) return nullptr;
  return onnx::OpSchemaRegistry::Schema(node.op_type(), static_cast<int>(opset), domain);
}

// The formal parameter input/output `i` binds to (the last one repeats when variadic); null when none.
const onnx::OpSchema::FormalParameter* Formal(const std::vector<onnx::OpSchema::FormalParameter>& formals, size_t i) {
  if (formals.empty()) return nullptr;
  if (i < formals.size()) return &formals[i];
  if (formals.back().GetOption() == onnx::OpSchema::Variadic) return &formals.back();
  return nullptr;
}

const onnx::OpSchema::TypeConstraintParam* Constraint(const onnx::OpSchema& schema, const std::string& param) {
  for (const auto& c : schema.typeConstraintParams()) {
    if (c.type_param_str == param) return &c;
  }
  return nullptr;
}

bool ConstraintAllows(const onnx::OpSchema::TypeConstraintParam& c, DType t) {
  const std::string want = "tensor(" + std::string(DTypeName(t)) + ")";
  return std::find(c.allowed_type_strs.begin(), c.allowed_type_strs.end(), want) != c.allowed_type_strs.end();
}

bool ConstraintHasFloat(const onnx::OpSchema::TypeConstraintParam& c) {
  for (const auto& s : c.allowed_type_strs) {
    if (s == "tensor(float)" || s == "tensor(float16)" || s == "tensor(bfloat16)" || s.rfind("seq(", 0) == 0 ||
        s.rfind("optional(", 0) == 0) {
      return true;
    }
  }
  return false;
}

// "tensor(int64)" -> kInt64; kUndefined for type parameters and non-tensor types.
DType FixedType(const std::string& type_str) {
  if (type_str.rfind("tensor(", 0) != 0 || type_str.back() != ')') return DType::kUndefined;
  return DTypeFromName(type_str.substr(7, type_str.size() - 8)).value_or(DType::kUndefined);
}

DType DeclaredType(const ir::Value* v) {
  return v && v->type().is_tensor() ? v->type().elem_type() : DType::kUndefined;
}

// Ops that create a floating value from attributes or from a non-float input, with the attribute naming it.
bool IsDtypeSource(const std::string& op) {
  return op == "RandomNormal" || op == "RandomUniform" || op == "RandomNormalLike" || op == "RandomUniformLike" ||
         op == "EyeLike" || op == "Bernoulli";
}

DType ConstantValueType(const ir::Node& n) {
  if (const ir::Attribute* a = n.FindAttribute("value"); a && a->type() == ir::AttrType::kTensor) return a->t.dtype();
  if (n.FindAttribute("value_float") || n.FindAttribute("value_floats")) return DType::kFloat32;
  if (n.FindAttribute("value_int") || n.FindAttribute("value_ints")) return DType::kInt64;
  if (n.FindAttribute("value_string") || n.FindAttribute("value_strings")) return DType::kString;
  return DType::kUndefined;
}

}  // namespace

namespace {

int64_t BFloat16Since(const ir::Node& node) {
  // ONNX 1.17's opset 22 added bfloat16 to these ops wherever they took float16, ONNX 1.15's opset 20 to
  // ConstantOfShape (the ops ONNX 1.12 knows, since the others have no schema here and are boundaries; found by
  // comparing every op's type constraints at opsets 17 and 18-23 in ONNX 1.23's schemas).
  static const std::unordered_map<std::string, int64_t> kSince = [] {
    std::unordered_map<std::string, int64_t> m = {{"ConstantOfShape", 20}};
    for (const char* op : {"Acos",
                           "Acosh",
                           "Asin",
                           "Asinh",
                           "Atan",
                           "Atanh",
                           "AveragePool",
                           "Bernoulli",
                           "Conv",
                           "ConvTranspose",
                           "Cos",
                           "Cosh",
                           "Det",
                           "Dropout",
                           "Elu",
                           "EyeLike",
                           "GRU",
                           "GlobalAveragePool",
                           "GlobalLpPool",
                           "GlobalMaxPool",
                           "GridSample",
                           "HardSigmoid",
                           "HardSwish",
                           "InstanceNormalization",
                           "LSTM",
                           "LpNormalization",
                           "LpPool",
                           "MaxPool",
                           "MaxRoiPool",
                           "MaxUnpool",
                           "Multinomial",
                           "NegativeLogLikelihoodLoss",
                           "RNN",
                           "RandomNormal",
                           "RandomNormalLike",
                           "RandomUniform",
                           "RandomUniformLike",
                           "RoiAlign",
                           "Round",
                           "Selu",
                           "Sin",
                           "Sinh",
                           "Softplus",
                           "Softsign",
                           "Tan",
                           "ThresholdedRelu"}) {
      m.emplace(op, 22);
    }
    return m;
  }();
  if (!ir::IsDefaultDomain(node.domain())) return INT64_MAX;
  const auto it = kSince.find(node.op_type());
  return it == kSince.end() ? INT64_MAX : it->second;
}

}  // namespace

bool SchemaAllows(const ir::Node& node, int64_t opset, const std::string& type_param, DType t, int64_t types_opset) {
  const onnx::OpSchema* schema = FindSchema(node, opset);
  if (!schema) return true;
  const auto* c = Constraint(*schema, type_param);
  if (c == nullptr || ConstraintAllows(*c, t)) return true;
  // The linked schemas stop at opset 17; bfloat16 came later to parameters that took float16.
  return t == DType::kBFloat16 && ConstraintAllows(*c, DType::kFloat16) &&
         BFloat16Since(node) <= std::max(opset, types_opset);
}

DType ClassifyPass::Orig(const ir::Value* v) {
  if (!v) return DType::kUndefined;
  if (const ValuePlan* p = state_.FindValue(v)) return p->orig;
  return DeclaredType(ConversionState::Resolve(v));
}

void ClassifyPass::SetOutput(ir::Value* v, DType inferred_orig, DType actual, bool weak) {
  if (!v) return;
  ValuePlan p;
  // Sequences, maps and optionals are never converted; only untyped values take the inferred type.
  p.orig = v->type().defined() ? DeclaredType(v) : inferred_orig;
  p.actual = actual == DType::kUndefined ? p.orig : actual;
  p.prop = p.actual;
  p.weak = weak && IsConvertible(p.actual);
  state_.values[v] = p;
}

Status ClassifyPass::Run(ir::Graph& graph, bool* changed) {
  if (changed) *changed = false;
  return PlanGraph(graph);
}

Status ClassifyPass::PlanGraph(ir::Graph& graph) {
  const bool top = graph.parent_node() == nullptr;
  const DType target = state_.options.target;
  for (ir::Node* n : graph.nodes()) {
    if (n->subgraphs().empty()) continue;
    for (ir::Value* v : graph.ImplicitInputs(n)) {
      if (std::find(n->inputs().begin(), n->inputs().end(), v) == n->inputs().end()) state_.implicitly_used.insert(v);
    }
  }
  for (ir::Value* v : graph.inputs()) {
    ValuePlan p;
    p.orig = DeclaredType(v);
    if (v->initializer() && p.orig == DType::kUndefined) p.orig = v->initializer()->dtype();
    p.actual = p.prop = p.orig;
    if (top && p.orig == DType::kFloat32) {
      p.prop = target;
      p.actual = state_.options.keep_io_types ? DType::kFloat32 : target;
    }
    state_.values[v] = p;
  }
  for (ir::Value* v : graph.initializers()) {
    if (v->is_graph_input()) continue;
    ValuePlan p;
    p.orig = p.actual = p.prop = v->initializer()->dtype();
    p.weak = IsConvertible(p.orig);
    state_.values[v] = p;
  }
  ONNXAMP_ASSIGN_OR_RETURN(std::vector<ir::Node*> order, graph.TopologicalOrder());
  for (ir::Node* n : order) ONNXAMP_RETURN_IF_ERROR(PlanNode(n));
  ResolveWeak(order);
  return Status::Ok();
}

void ClassifyPass::PlanBoundary(ir::Node* node, NodePlan& np, const std::string& reason) {
  np.boundary = true;
  np.compute = DType::kUndefined;
  if (np.decision.precision == Precision::kLow) np.fallback_reason = reason;
  for (size_t i = 0; i < node->inputs().size(); ++i) {
    const DType o = Orig(node->input(i));
    np.required[i] = IsConvertible(o) ? o : DType::kUndefined;
  }
  // If/Loop/Scan outputs: the type of the matching body output (Loop's body also returns the condition).
  const std::vector<ir::Graph*> subs = node->subgraphs();
  const size_t skip = node->op_type() == "Loop" ? 1 : 0;
  for (size_t j = 0; j < node->outputs().size(); ++j) {
    DType inferred = DType::kUndefined;
    if ((node->op_type() == "If" || node->op_type() == "Loop") && j + skip < subs[0]->outputs().size()) {
      inferred = DeclaredType(subs[0]->outputs()[j + skip]);
    }
    SetOutput(node->output(j), inferred, DType::kUndefined, false);
  }
}

Status ClassifyPass::PlanNode(ir::Node* node) {
  const int64_t types_opset = state_.options.bfloat16_types_opset;
  NodePlan& np = state_.nodes[node];
  np.decision = state_.options.policy.Decide(*node);
  np.required.assign(node->inputs().size(), DType::kUndefined);
  const std::string& op = node->op_type();
  const bool default_domain = ir::IsDefaultDomain(node->domain());
  const int64_t opset = state_.Opset(node->domain());
  const DType target = state_.options.target;

  if (!node->subgraphs().empty()) {
    PlanBoundary(node, np, op + " keeps its inputs and outputs; its subgraphs are converted");
    for (ir::Graph* sub : node->subgraphs()) ONNXAMP_RETURN_IF_ERROR(PlanGraph(*sub));
    return Status::Ok();
  }
  if (default_domain && op == "Constant") {
    const DType t = ConstantValueType(*node);
    SetOutput(node->output(0), t, t, /*weak=*/true);
    return Status::Ok();
  }
  if (default_domain && op == "ConstantOfShape") {
    const ir::Attribute* a = node->FindAttribute("value");
    const DType t = a && a->type() == ir::AttrType::kTensor ? a->t.dtype() : DType::kFloat32;
    SetOutput(node->output(0), t, t, /*weak=*/true);
    return Status::Ok();
  }
  if (default_domain && op == "Cast") {
    const auto to = DTypeFromCode(node->GetInt("to", 0)).value_or(DType::kUndefined);
    // Cast(to=FLOAT) of anything is a source whose type its consumers decide: an existing upcast feeding
    // low-precision consumers is retargeted rather than left in front of them.
    SetOutput(node->output(0), to, to, /*weak=*/to == DType::kFloat32);
    return Status::Ok();
  }
  if (default_domain && IsDtypeSource(op)) {
    const ir::Attribute* dtype = node->FindAttribute("dtype");
    if (dtype || node->inputs().empty()) {
      const DType t = dtype ? DTypeFromCode(dtype->i).value_or(DType::kUndefined) : DType::kFloat32;
      SetOutput(node->output(0), t, t, /*weak=*/true);
    } else {
      const ir::Value* in = node->input(0);
      const ValuePlan* ip = state_.FindValue(in);
      SetOutput(node->output(0), Orig(in), ip ? ip->actual : DType::kUndefined, ip && ip->weak);
    }
    // The input is read as it is where the schema allows the target type for it (Bernoulli and the *Like ops
    // have no bfloat16 input before opset 22); else it keeps its original type, and so does a typed-alike output.
    if (!node->inputs().empty() && node->input(0)) {
      const onnx::OpSchema* schema = FindSchema(*node, opset);
      const auto* f = schema ? Formal(schema->inputs(), 0) : nullptr;
      if (f && !SchemaAllows(*node, opset, f->GetTypeStr(), target, types_opset)) {
        const DType o = Orig(node->input(0));
        np.required[0] = IsConvertible(o) ? o : DType::kUndefined;
        if (!dtype) SetOutput(node->output(0), o, o, false);
      }
    }
    return Status::Ok();
  }

  const onnx::OpSchema* schema = FindSchema(*node, opset);
  if (!schema) {
    PlanBoundary(
        node, np,
        StrCat("no ONNX schema for ", node->domain().empty() ? "" : node->domain() + "::", op, " at opset ", opset));
    return Status::Ok();
  }
  // The float group: inputs and outputs tied to the type parameter of the first floating input.
  std::string group;
  for (size_t i = 0; i < node->inputs().size() && group.empty(); ++i) {
    const auto* f = Formal(schema->inputs(), i);
    if (!node->input(i) || !f || !Constraint(*schema, f->GetTypeStr())) continue;
    if (IsConvertible(Orig(node->input(i)))) group = f->GetTypeStr();
  }
  // Outputs: types tied to the group, to another input's parameter, or fixed by the schema.
  for (size_t j = 0; j < node->outputs().size(); ++j) {
    const auto* f = Formal(schema->outputs(), j);
    if (!f || !node->output(j)) continue;
    const std::string& ts = f->GetTypeStr();
    if (!group.empty() && ts == group) {
      np.group_outputs.push_back(static_cast<int>(j));
      continue;
    }
    const auto* c = Constraint(*schema, ts);
    bool tied = false;
    for (size_t i = 0; i < node->inputs().size() && c; ++i) {
      const auto* fi = Formal(schema->inputs(), i);
      if (fi && fi->GetTypeStr() == ts) tied = true;
    }
    const bool declared_float = IsConvertible(DeclaredType(node->output(j)));
    if (c && !tied && ConstraintHasFloat(*c) &&
        (declared_float || DeclaredType(node->output(j)) == DType::kUndefined)) {
      if (!group.empty()) {
        PlanBoundary(node, np, StrCat("output ", j, " of ", op, " has a type the inputs do not determine"));
        return Status::Ok();
      }
    }
  }
  // Sequences, maps and optionals next to the float group (SequenceInsert, SequenceConstruct, ...) carry the
  // group's element type inside them: such nodes keep their types.
  if (!group.empty()) {
    auto non_tensor = [&](const onnx::OpSchema::FormalParameter* f) {
      const auto* c = f ? Constraint(*schema, f->GetTypeStr()) : nullptr;
      if (!c || f->GetTypeStr() == group) return false;
      for (const auto& t : c->allowed_type_strs) {
        if (t.rfind("seq(", 0) == 0 || t.rfind("optional(", 0) == 0 || t.rfind("map(", 0) == 0) return true;
      }
      return false;
    };
    for (size_t i = 0; i < node->inputs().size(); ++i) {
      if (node->input(i) && non_tensor(Formal(schema->inputs(), i))) {
        PlanBoundary(node, np, op + " mixes sequences or optionals with its float tensors");
        return Status::Ok();
      }
    }
    for (size_t j = 0; j < node->outputs().size(); ++j) {
      if (node->output(j) && non_tensor(Formal(schema->outputs(), j))) {
        PlanBoundary(node, np, op + " mixes sequences or optionals with its float tensors");
        return Status::Ok();
      }
    }
  }
  for (size_t i = 0; i < node->inputs().size(); ++i) {
    const auto* f = Formal(schema->inputs(), i);
    if (!node->input(i) || !f) continue;
    if (!group.empty() && f->GetTypeStr() == group) {
      np.group_inputs.push_back(static_cast<int>(i));
    } else {
      const DType o = Orig(node->input(i));
      np.required[i] = IsConvertible(o) ? o : DType::kUndefined;  // pinned: keeps its original type
    }
  }

  DType group_orig = DType::kUndefined;
  bool all_weak = true;
  DType strong = DType::kUndefined, weak = DType::kUndefined;
  bool untouchable = false;
  for (int i : np.group_inputs) {
    const ir::Value* v = node->input(i);
    const DType o = Orig(v);
    if (!IsConvertible(o)) untouchable = true;  // float64 (or an unknown type) in the group: leave alone
    group_orig = Promote(group_orig, o);
    const ValuePlan* p = state_.FindValue(v);
    const DType prop = p ? p->prop : o;
    if (p && p->weak) {
      weak = Promote(weak, prop);
    } else {
      all_weak = false;
      strong = Promote(strong, prop);
    }
  }
  if (np.group_inputs.empty() || untouchable) {
    for (int i : np.group_inputs)
      np.required[i] = IsConvertible(Orig(node->input(i))) ? Orig(node->input(i)) : DType::kUndefined;
    for (size_t j = 0; j < node->outputs().size(); ++j) {
      const auto* f = Formal(schema->outputs(), j);
      DType inferred = f ? FixedType(f->GetTypeStr()) : DType::kUndefined;
      if (f && inferred == DType::kUndefined && !group.empty() && f->GetTypeStr() == group) inferred = group_orig;
      SetOutput(node->output(j), inferred, DType::kUndefined, false);
    }
    return Status::Ok();
  }

  // BatchNormalization from opset 15 types its statistics (T1, T2) apart from X (T): the keep-list's intent,
  // FP32 statistics, holds with X in low precision, so the node follows its input.
  if (default_domain && op == "BatchNormalization" && opset >= 15 && np.decision.precision == Precision::kKeep &&
      np.decision.reason == "op table: BatchNormalization") {
    np.decision = {Precision::kFollow, "op table: BatchNormalization (statistics stay float from opset 15)"};
  }
  DType compute = DType::kUndefined;
  switch (np.decision.precision) {
    case Precision::kLow:
      compute = target;
      break;
    case Precision::kKeep:
      compute = DType::kFloat32;
      break;
    case Precision::kFollow:
      compute = all_weak ? weak : strong;
      np.weak = all_weak;
      break;
  }
  if (compute != DType::kFloat32 && !SchemaAllows(*node, opset, group, compute, types_opset)) {
    const int64_t since = compute == DType::kBFloat16 ? BFloat16Since(*node) : INT64_MAX;
    np.fallback_reason =
        StrCat(op, "-", schema->since_version(), " has no ", DTypeName(compute), " (opset ", opset,
               since == INT64_MAX ? "" : StrCat("; ONNX added it at opset ", since), "): computes in float");
    compute = DType::kFloat32;
  }
  if (compute == DType::kFloat32 && !SchemaAllows(*node, opset, group, compute, types_opset)) compute = group_orig;
  np.compute = compute;
  // A single-input group with no float output (Shape, Size, IsNaN, ...) reads its input as it is.
  const bool reads_as_is =
      np.group_inputs.size() == 1 && np.group_outputs.empty() && np.decision.precision == Precision::kFollow &&
      SchemaAllows(*node, opset, group, state_.ActualType(node->input(np.group_inputs[0])), types_opset);
  for (int i : np.group_inputs) np.required[i] = reads_as_is ? DType::kUndefined : compute;
  for (size_t j = 0; j < node->outputs().size(); ++j) {
    ir::Value* out = node->output(j);
    if (!out) continue;
    if (std::find(np.group_outputs.begin(), np.group_outputs.end(), static_cast<int>(j)) != np.group_outputs.end()) {
      SetOutput(out, group_orig, compute, np.weak);
      continue;
    }
    const auto* f = Formal(schema->outputs(), j);
    DType inferred = f ? FixedType(f->GetTypeStr()) : DType::kUndefined;
    for (size_t i = 0; f && inferred == DType::kUndefined && i < node->inputs().size(); ++i) {
      const auto* fi = Formal(schema->inputs(), i);
      if (fi && node->input(i) && fi->GetTypeStr() == f->GetTypeStr()) inferred = Orig(node->input(i));
    }
    SetOutput(out, inferred, DType::kUndefined, false);
  }
  return Status::Ok();
}

std::vector<DType> ClassifyPass::Demands(const ir::Value* v, bool* pinned) {
  std::set<DType> types;
  *pinned = state_.implicitly_used.count(v) > 0;
  for (const ir::Use& u : v->uses()) {
    const NodePlan* cp = state_.FindNode(u.node);
    const DType req = cp && u.index < static_cast<int>(cp->required.size()) ? cp->required[u.index] : DType::kUndefined;
    if (req == DType::kUndefined) continue;
    types.insert(req);
  }
  const ir::Graph& g = *v->graph();
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    if (g.outputs()[i] == v) types.insert(state_.OutputRequired(g, i));
  }
  return {types.begin(), types.end()};
}

void ClassifyPass::ResolveWeak(const std::vector<ir::Node*>& order) {
  const int64_t types_opset = state_.options.bfloat16_types_opset;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    ir::Node* node = *it;
    NodePlan& np = state_.nodes[node];
    const std::string& op = node->op_type();
    const bool default_domain = ir::IsDefaultDomain(node->domain());
    const bool source =
        default_domain && (op == "Constant" || op == "ConstantOfShape" || op == "Cast" || IsDtypeSource(op));
    if (!source && !(np.weak && !np.group_outputs.empty())) continue;
    ir::Value* first = source ? node->output(0) : node->output(np.group_outputs[0]);
    ValuePlan* fp = first ? state_.FindValue(first) : nullptr;
    if (!fp || !fp->weak) continue;
    // Every weak output must be wanted in one and the same type.
    std::set<DType> wanted;
    bool pinned_any = false;
    std::vector<int> outs = source ? std::vector<int>{0} : np.group_outputs;
    for (int j : outs) {
      bool pinned = false;
      for (DType t : Demands(node->output(j), &pinned)) wanted.insert(t);
      pinned_any |= pinned;
    }
    if (pinned_any || wanted.size() != 1) continue;
    const DType t = *wanted.begin();
    if (t == fp->actual || !IsConvertible(t)) continue;
    if (source) {
      // The source must be able to produce `t` at this opset (ConstantOfShape has no bfloat16 before 20).
      const onnx::OpSchema* schema = FindSchema(*node, state_.Opset(node->domain()));
      const auto* f = schema ? Formal(schema->outputs(), 0) : nullptr;
      if (f && !SchemaAllows(*node, state_.Opset(node->domain()), f->GetTypeStr(), t, types_opset)) continue;
      np.retype = t;
      fp->actual = fp->prop = t;
      continue;
    }
    const int64_t opset = state_.Opset(node->domain());
    const onnx::OpSchema* schema = FindSchema(*node, opset);
    const auto* f = schema ? Formal(schema->inputs(), np.group_inputs[0]) : nullptr;
    if (f && !SchemaAllows(*node, opset, f->GetTypeStr(), t, types_opset)) continue;
    np.compute = t;
    for (int i : np.group_inputs) {
      if (np.required[i] != DType::kUndefined) np.required[i] = t;
    }
    for (int j : np.group_outputs) {
      if (ValuePlan* p = state_.FindValue(node->output(j))) p->actual = p->prop = t;
    }
  }
}

}  // namespace onnxamp::converter
