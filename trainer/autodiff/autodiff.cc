// BuildGradients: which nodes lie between the wrt values and the loss, then a reverse walk calling each node's
// gradient builder, summing the gradients of values read more than once in a fixed order.
#include "trainer/autodiff/autodiff.h"

#include <algorithm>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "converter/model_clone.h"
#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/ir/verify.h"
#include "runtime/ops/gradient.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/op_info.h"
#include "trainer/autodiff/decompose.h"
#include "trainer/autodiff/element_types.h"
#include "trainer/autodiff/if_gradient.h"
#include "trainer/autodiff/loop_gradient.h"
#include "trainer/autodiff/shapes.h"

namespace onnxamp::trainer {
namespace {

class Autodiff;

// The builder's view of one forward node.
class NodeContext : public ops::GradContext {
 public:
  NodeContext(Autodiff& ad, ir::Node& node, int64_t opset, std::vector<ir::Value*> dys, std::vector<bool> needs)
      : ad_(ad), node_(node), opset_(opset), dys_(std::move(dys)), needs_(std::move(needs)), set_(needs_.size()) {}

  const ir::Node& node() const override { return node_; }
  int64_t opset() const override { return opset_; }
  int64_t onnx_opset() const override;
  ir::Value* dY(size_t i) const override { return i < dys_.size() ? dys_[i] : nullptr; }
  bool NeedsDX(size_t i) const override { return i < needs_.size() && needs_[i]; }
  Status SetDX(size_t i, ir::Value* grad) override;
  DType TypeOf(const ir::Value* v) const override;
  int64_t RankOf(const ir::Value* v) const override;
  std::vector<ir::Value*> Emit(const std::string& op_type, const std::vector<ir::Value*>& inputs, size_t num_outputs,
                               std::vector<ir::Attribute> attributes, const std::string& domain,
                               DType output_type) override;
  std::vector<ir::Value*> EmitAfterForward(const std::string& op_type, const std::vector<ir::Value*>& inputs,
                                           size_t num_outputs, std::vector<ir::Attribute> attributes,
                                           const std::string& domain) override;
  ir::Value* ForwardOutput(size_t i) override;
  ir::Value* Constant(ir::Tensor value) override;
  ir::Value* ShapeOf(ir::Value* x) override;
  ir::Value* SumToShape(ir::Value* grad, ir::Value* x) override;

  // The first input that needed a gradient and did not get one, or -1.
  int MissingGradient() const {
    for (size_t i = 0; i < needs_.size(); ++i) {
      if (needs_[i] && !set_[i]) return static_cast<int>(i);
    }
    return -1;
  }

 private:
  Autodiff& ad_;
  ir::Node& node_;
  int64_t opset_;
  std::vector<ir::Value*> dys_;
  std::vector<bool> needs_;
  std::vector<bool> set_;
};

class Autodiff {
 public:
  Autodiff(ir::Model& model, ElementTypes types, Shapes shapes)
      : model_(model), g_(*model.graph), types_(std::move(types)), partial_shapes_(std::move(shapes)) {}

  StatusOr<GradientResult> Run(const GradientRequest& request);
  // The backward If of If node `n` (trainer/autodiff/if_gradient.h): the gradients of `reads` from `dys`.
  Status EmitIfGradient(const ir::Node& n, const std::vector<ir::Value*>& reads, const std::vector<ir::Value*>& dys);
  // The trace and backward loop of Scan or Loop node `n` (trainer/autodiff/loop_gradient.h).
  Status EmitLoopGradient(const ir::Node& n, const std::vector<bool>& needs, const std::vector<ir::Value*>& reads,
                          const std::vector<ir::Value*>& dys);

  ir::Graph& graph() { return g_; }
  const ElementTypes& types() const { return types_; }
  const Shapes& partial_shapes() const { return partial_shapes_; }
  // The inferred rank of `v`; -1 when unknown (or v null).
  int64_t RankOf(const ir::Value* v) const {
    if (!v) return -1;
    auto it = partial_shapes_.find(v);
    return it == partial_shapes_.end() ? -1 : static_cast<int64_t>(it->second.size());
  }
  int64_t Opset(const std::string& domain) const { return model_.OpsetVersion(domain); }

  void AddContribution(ir::Value* v, ir::Value* grad) { grads_[v].push_back(grad); }

  std::string FreshName(const std::string& base) { return g_.UniqueName(base); }

  // Inserts a node before `before` (null: appends it; a backward node when `backward`, else a stash).
  std::vector<ir::Value*> Emit(ir::Node* before, bool backward, const std::string& base, const std::string& op_type,
                               const std::vector<ir::Value*>& inputs, size_t num_outputs,
                               std::vector<ir::Attribute> attributes, const std::string& domain, DType output_type) {
    std::vector<ir::Value*> outs;
    for (size_t i = 0; i < num_outputs; ++i) {
      ir::Value* v = g_.CreateValue(FreshName(base));
      if (output_type != DType::kUndefined) {
        v->set_type(ir::ValueType::Tensor(output_type));
        types_[v] = output_type;
      }
      outs.push_back(v);
    }
    ir::Node* n = g_.InsertNode(before, op_type, inputs, outs, FreshNodeName(base), domain);
    for (ir::Attribute& a : attributes) n->SetAttribute(std::move(a));
    if (domain == exec::kInternalDomain) uses_internal_ = true;
    if (backward && !first_backward_) first_backward_ = n;
    added_.push_back(n);
    return outs;
  }

  // Emits in the backward section (appended at the end).
  std::vector<ir::Value*> EmitBackward(const std::string& base, const std::string& op_type,
                                       const std::vector<ir::Value*>& inputs, size_t num_outputs,
                                       std::vector<ir::Attribute> attributes, const std::string& domain,
                                       DType output_type) {
    return Emit(nullptr, true, base, op_type, inputs, num_outputs, std::move(attributes), domain, output_type);
  }

  // Emits right after `node` (a forward node), or before the first forward node when `node` is null.
  std::vector<ir::Value*> EmitAfter(const ir::Node* node, const std::string& base, const std::string& op_type,
                                    const std::vector<ir::Value*>& inputs, size_t num_outputs,
                                    std::vector<ir::Attribute> attributes, const std::string& domain) {
    ir::Node* before = nullptr;
    if (!node) {
      before = forward_.empty() ? first_backward_ : forward_.front();
    } else {
      auto it = next_.find(node);
      before = it != next_.end() && it->second ? it->second : first_backward_;
    }
    // Emitting before `before` with before == null appends: only right while no backward node exists yet.
    return Emit(before, false, base, op_type, inputs, num_outputs, std::move(attributes), domain, DType::kUndefined);
  }

  ir::Value* AddConstant(ir::Tensor t, const std::string& base) {
    ir::Value* v = g_.CreateValue(FreshName(base));
    const DType dtype = t.dtype();
    ir::Shape shape;
    for (int64_t d : t.dims()) shape.push_back(ir::Dim::Value(d));
    v->set_type(ir::ValueType::Tensor(dtype, shape));
    g_.SetInitializer(v, std::move(t));
    types_[v] = dtype;
    return v;
  }

  ir::Value* ShapeOf(ir::Value* x) {
    auto it = shapes_.find(x);
    if (it != shapes_.end()) return it->second;
    ir::Value* s = EmitAfter(x->producer(), x->name() + "_shape", "Shape", {x}, 1, {}, "")[0];
    s->set_type(ir::ValueType::Tensor(DType::kInt64));
    types_[s] = DType::kInt64;
    shapes_[x] = s;
    return s;
  }

 private:
  std::string FreshNodeName(const std::string& base) {
    std::string name = base;
    for (int k = 1; node_names_.count(name); ++k) name = StrCat(base, "_", k);
    node_names_.insert(name);
    return name;
  }

  // The sum of the contributions to `v`'s gradient, in the order they were made (null when none).
  ir::Value* Accumulated(ir::Value* v) {
    auto it = grads_.find(v);
    if (it == grads_.end() || it->second.empty()) return nullptr;
    std::vector<ir::Value*>& parts = it->second;
    ir::Value* sum = parts[0];
    for (size_t k = 1; k < parts.size(); ++k) {
      sum = EmitBackward(v->name() + "_grad_sum", "Add", {sum, parts[k]}, 1, {}, "", TypeOrUndefined(v))[0];
    }
    parts.assign(1, sum);
    return sum;
  }

  DType TypeOrUndefined(const ir::Value* v) const {
    auto it = types_.find(v);
    return it == types_.end() ? DType::kUndefined : it->second;
  }

  // Removes backward nodes none of whose outputs is read or a graph output (builders may emit terms for inputs
  // that turn out not to need them), repeatedly.
  // Moves each node of `nodes` (which nothing reads) to right after the last producer of its inputs. The node that
  // finishes a weight's gradient (under AMP the Cast of the FP16 gradient to FP32) is emitted last, since the
  // forward pass's weight Casts come first; run there, it kept every layer's low-precision weight gradient alive to
  // the end of the backward pass, and in the memory plan at once.
  void HoistToInputs(const std::vector<ir::Node*>& nodes) {
    std::unordered_map<const ir::Node*, size_t> position;
    for (ir::Node* n : g_.nodes()) position.emplace(n, position.size());
    for (ir::Node* n : nodes) {
      if (!position.count(n) || !n->subgraphs().empty()) continue;  // removed as dead; reads outer values
      const ir::Node* last = nullptr;
      for (const ir::Value* in : n->inputs()) {
        const ir::Node* p = in ? in->producer() : nullptr;
        if (p && position.count(p) && (!last || position[p] > position[last])) last = p;
      }
      if (!last) continue;
      // No node reads a hoisted node's outputs, so the positions of the others stay in order for the next ones.
      ir::Node* after = nullptr;
      bool found = false;
      for (ir::Node* m : g_.nodes()) {
        if (found) {
          after = m;
          break;
        }
        found = m == last;
      }
      if (after && after != n) g_.MoveNodeBefore(n, after);
    }
  }

  void RemoveDeadNodes() {
    bool changed = true;
    while (changed) {
      changed = false;
      // Values a subgraph reads (the incoming gradients of a backward If) have no uses but are live.
      std::unordered_set<const ir::Value*> read_below;
      for (const ir::Node* n : g_.nodes()) {
        for (const ir::Value* v : exec::SubgraphReads(*n)) read_below.insert(v);
      }
      for (size_t k = added_.size(); k-- > 0;) {
        ir::Node* n = added_[k];
        if (!n) continue;
        bool live = false;
        for (ir::Value* out : n->outputs()) {
          live = live || (out && (!out->uses().empty() || out->is_graph_output() || read_below.count(out)));
        }
        if (live) continue;
        std::vector<ir::Value*> outs = n->outputs();
        g_.RemoveNode(n);
        for (ir::Value* out : outs) {
          if (out) {
            shapes_erase(out);
            g_.RemoveValue(out);
          }
        }
        added_[k] = nullptr;
        changed = true;
      }
    }
  }

  void shapes_erase(ir::Value* v) {
    for (auto it = shapes_.begin(); it != shapes_.end(); ++it) {
      if (it->second == v) {
        shapes_.erase(it);
        return;
      }
    }
  }

  ir::Model& model_;
  ir::Graph& g_;
  ElementTypes types_;
  Shapes partial_shapes_;
  std::vector<ir::Node*> forward_;                                 // the forward nodes, in order
  std::unordered_map<const ir::Node*, ir::Node*> next_;            // forward node -> the forward node after it
  ir::Node* first_backward_ = nullptr;                             // the first node appended after the forward pass
  std::unordered_map<ir::Value*, std::vector<ir::Value*>> grads_;  // contributions, in order
  std::unordered_map<const ir::Value*, ir::Value*> shapes_;        // ShapeOf cache
  std::unordered_set<std::string> node_names_;
  std::vector<ir::Node*> added_;
  bool uses_internal_ = false;
};

int64_t NodeContext::onnx_opset() const { return ad_.Opset(""); }

Status NodeContext::SetDX(size_t i, ir::Value* grad) {
  if (!grad) return Internal("node ", node_.Describe(), ": the gradient of input ", i, " is null");
  if (i >= needs_.size()) return Internal("node ", node_.Describe(), ": no input ", i);
  if (!needs_[i]) return Status::Ok();  // nobody reads it: the dead nodes that made it are removed at the end
  if (set_[i]) return Internal("node ", node_.Describe(), ": the gradient of input ", i, " was set twice");
  set_[i] = true;
  const DType want = TypeOf(X(i));
  if (want != DType::kUndefined && !grad->type().defined()) grad->set_type(ir::ValueType::Tensor(want));
  ad_.AddContribution(X(i), grad);
  return Status::Ok();
}

DType NodeContext::TypeOf(const ir::Value* v) const {
  if (!v) return DType::kUndefined;
  auto it = ad_.types().find(v);
  return it == ad_.types().end() ? DType::kUndefined : it->second;
}

int64_t NodeContext::RankOf(const ir::Value* v) const { return ad_.RankOf(v); }

std::string BaseName(const ir::Node& node) {
  if (!node.name().empty()) return node.name() + "_grad";
  for (const ir::Value* v : node.outputs()) {
    if (v) return v->name() + "_grad";
  }
  return node.op_type() + "_grad";
}

// A constant scalar (GradContext::Scalar's values).
bool IsIf(const ir::Node& n) { return n.op_type() == "If" && (n.domain().empty() || n.domain() == "ai.onnx"); }

Status Autodiff::EmitIfGradient(const ir::Node& n, const std::vector<ir::Value*>& reads,
                                const std::vector<ir::Value*>& dys) {
  const std::string base = BaseName(n) + "_grad";
  auto type_of = [this](const ir::Value* v) { return TypeOrUndefined(v); };
  std::vector<ir::Attribute> branches;
  for (const char* attribute : {"then_branch", "else_branch"}) {
    bool internal = false;
    StatusOr<std::unique_ptr<ir::Graph>> branch =
        IfBranchGradient(model_, n, attribute, reads, dys, type_of, StrCat(base, "/", attribute, "/"), &internal);
    if (!branch.ok()) return branch.status().WithContext(StrCat("'", attribute, "'"));
    uses_internal_ = uses_internal_ || internal;
    branches.push_back(ir::Attribute::GraphValue(attribute, std::move(branch).value()));
  }
  branches.push_back(ir::Attribute::String("seed_from", exec::SeedName(n)));
  std::vector<ir::Value*> outs =
      EmitBackward(base, "If", {n.input(0)}, reads.size(), std::move(branches), "", DType::kUndefined);
  for (size_t j = 0; j < reads.size(); ++j) {
    const DType t = TypeOrUndefined(reads[j]);
    outs[j]->set_type(ir::ValueType::Tensor(t));
    types_[outs[j]] = t;
    AddContribution(reads[j], outs[j]);
  }
  return Status::Ok();
}

bool IsLoopOrScan(const ir::Node& n) {
  return (n.op_type() == "Scan" || n.op_type() == "Loop") && (n.domain().empty() || n.domain() == "ai.onnx");
}

Status Autodiff::EmitLoopGradient(const ir::Node& n, const std::vector<bool>& needs,
                                  const std::vector<ir::Value*>& reads, const std::vector<ir::Value*>& dys) {
  const std::string base = BaseName(n) + "_grad";
  auto type_of = [this](const ir::Value* v) { return TypeOrUndefined(v); };
  LoopEmitter emitter;
  emitter.emit = [&](const std::string& op_type, const std::vector<ir::Value*>& inputs,
                     const std::vector<DType>& output_types, std::vector<ir::Attribute> attributes,
                     const std::string& domain) {
    std::vector<ir::Value*> outs =
        EmitBackward(base, op_type, inputs, output_types.size(), std::move(attributes), domain, DType::kUndefined);
    for (size_t k = 0; k < outs.size(); ++k) {
      outs[k]->set_type(ir::ValueType::Tensor(output_types[k]));
      types_[outs[k]] = output_types[k];
    }
    return outs;
  };
  emitter.zeros_like = [&](ir::Value* x, DType t) {
    return EmitBackward(base + "_zeros", "ConstantOfShape", {ShapeOf(x)}, 1,
                        {ir::Attribute::TensorValue("value", ir::Tensor(t, {1}))}, "", t)[0];
  };
  emitter.rank_of = [this](const ir::Value* v) { return RankOf(v); };
  const std::string prefix = StrCat(base, "/");
  StatusOr<LoopGradients> grads = n.op_type() == "Scan"
                                      ? ScanGradient(model_, n, needs, reads, dys, type_of, prefix, emitter)
                                      : LoopGradient(model_, n, needs, reads, dys, type_of, prefix, emitter);
  if (!grads.ok()) return grads.status();
  uses_internal_ = uses_internal_ || grads->uses_internal;
  for (size_t i = 0; i < grads->inputs.size(); ++i) {
    if (grads->inputs[i]) AddContribution(n.input(i), grads->inputs[i]);
  }
  for (size_t q = 0; q < reads.size(); ++q) {
    if (grads->reads[q]) AddContribution(reads[q], grads->reads[q]);
  }
  return Status::Ok();
}

bool IsScalarConstant(const ir::Value* v) {
  const ir::Tensor* t = v ? v->initializer() : nullptr;
  return t && t->rank() == 0;
}

std::vector<ir::Value*> NodeContext::Emit(const std::string& op_type, const std::vector<ir::Value*>& inputs,
                                          size_t num_outputs, std::vector<ir::Attribute> attributes,
                                          const std::string& domain, DType output_type) {
  // Before opset 7 binary arithmetic, comparisons and logic broadcast only input B, and only with broadcast = 1: a
  // builder's scalar constant gets the attribute, as B (operands swapped or the op rewritten where it is A).
  static const std::unordered_set<std::string> kLegacy = {"Add",     "Sub",  "Mul", "Div", "Equal",
                                                          "Greater", "Less", "And", "Or",  "Xor"};
  if (domain.empty() && onnx_opset() < 7 && inputs.size() == 2 && kLegacy.count(op_type) &&
      IsScalarConstant(inputs[0]) != IsScalarConstant(inputs[1])) {
    attributes.push_back(ir::Attribute::Int("broadcast", 1));
    if (IsScalarConstant(inputs[1])) {
      return ad_.EmitBackward(BaseName(node_), op_type, inputs, num_outputs, std::move(attributes), domain,
                              output_type);
    }
    ir::Value* s = inputs[0];
    ir::Value* x = inputs[1];
    std::string op = op_type;
    if (op == "Greater" || op == "Less") {
      op = op == "Greater" ? "Less" : "Greater";
    } else if (op == "Sub") {  // s - x = (-x) + s
      op = "Add";
      x = Emit1("Neg", {x});
    } else if (op == "Div") {  // s / x = (1 / x) * s
      op = "Mul";
      x = Emit1("Reciprocal", {x});
    }
    return ad_.EmitBackward(BaseName(node_), op, {x, s}, num_outputs, std::move(attributes), domain, output_type);
  }
  return ad_.EmitBackward(BaseName(node_), op_type, inputs, num_outputs, std::move(attributes), domain, output_type);
}

std::vector<ir::Value*> NodeContext::EmitAfterForward(const std::string& op_type, const std::vector<ir::Value*>& inputs,
                                                      size_t num_outputs, std::vector<ir::Attribute> attributes,
                                                      const std::string& domain) {
  return ad_.EmitAfter(&node_, BaseName(node_) + "_stash", op_type, inputs, num_outputs, std::move(attributes), domain);
}

ir::Value* NodeContext::ForwardOutput(size_t i) {
  if (ir::Value* v = node_.output(i)) return v;
  while (node_.outputs().size() < i) node_.SetOutput(node_.outputs().size(), nullptr);
  const std::string base = node_.name().empty() ? node_.op_type() : node_.name();
  ir::Value* v = ad_.graph().CreateValue(ad_.FreshName(StrCat(base, "_output_", i)));
  node_.SetOutput(i, v);
  return v;
}

ir::Value* NodeContext::Constant(ir::Tensor value) {
  return ad_.AddConstant(std::move(value), BaseName(node_) + "_const");
}

ir::Value* NodeContext::ShapeOf(ir::Value* x) { return ad_.ShapeOf(x); }

// Whether two declared shapes are the same: equal rank and each dim the same number or the same symbol.
bool SameStaticShape(const ir::Value* a, const ir::Value* b) {
  if (!a || !b || !a->type().is_tensor() || !b->type().is_tensor()) return false;
  const std::optional<ir::Shape>& sa = a->type().shape();
  const std::optional<ir::Shape>& sb = b->type().shape();
  if (!sa || !sb || sa->size() != sb->size()) return false;
  for (size_t d = 0; d < sa->size(); ++d) {
    const ir::Dim& x = (*sa)[d];
    const ir::Dim& y = (*sb)[d];
    if (x.is_value() && y.is_value() && x.value == y.value) continue;
    if (x.is_param() && y.is_param() && x.param == y.param) continue;
    return false;
  }
  return true;
}

ir::Value* NodeContext::SumToShape(ir::Value* grad, ir::Value* x) {
  // dY of an output known to have x's shape needs no reduction. Neither does the gradient a broadcasting op's builder
  // passes (of the output's shape) when no other input broadcasts x (a Linear's Add of its bias to the product).
  for (size_t i = 0; i < dys_.size(); ++i) {
    if (grad == dys_[i] && SameStaticShape(x, node_.output(i))) return grad;
  }
  if (BroadcastKeepsShape(node_, x, ad_.partial_shapes())) return grad;
  ir::Value* shape = ShapeOf(x);
  return Emit(ops::kSumToShapeOp, {grad, shape}, 1, {}, exec::kInternalDomain, TypeOf(x))[0];
}

StatusOr<GradientResult> Autodiff::Run(const GradientRequest& request) {
  ir::Value* loss = nullptr;
  DType loss_type = DType::kUndefined;
  std::vector<std::pair<ir::Value*, ir::Value*>> seeded;  // request.output_gradients
  if (request.loss.empty() && !request.output_gradients.empty()) {
    for (const auto& [name, grad_name] : request.output_gradients) {
      ir::Value* v = g_.FindValue(name);
      ir::Value* grad = g_.FindValue(grad_name);
      if (!v) return NotFound("'", name, "' is not a value of the graph");
      if (!grad || !grad->is_graph_input()) return NotFound("gradient '", grad_name, "' is not a graph input");
      if (!IsDifferentiableType(TypeOrUndefined(v))) {
        return InvalidArgument("'", name, "' is not a floating tensor: it takes no gradient");
      }
      seeded.emplace_back(v, grad);
    }
  } else {
    loss = g_.FindValue(request.loss);
    if (!loss) return NotFound("loss '", request.loss, "' is not a value of the graph");
    loss_type = TypeOrUndefined(loss);
    if (!IsDifferentiableType(loss_type)) {
      return InvalidArgument("loss '", request.loss, "' is not a floating tensor (",
                             loss_type == DType::kUndefined ? "its type is unknown" : DTypeName(loss_type), ")");
    }
  }
  std::vector<ir::Value*> wrt;
  for (const std::string& name : request.wrt) {
    ir::Value* v = g_.FindValue(name);
    if (!v) return NotFound("'", name, "' is not a value of the graph");
    if (!IsDifferentiableType(TypeOrUndefined(v))) {
      return InvalidArgument("'", name, "' is not a floating tensor: it has no gradient");
    }
    wrt.push_back(v);
  }
  ir::Value* seed = nullptr;
  if (!request.seed.empty()) {
    seed = g_.FindValue(request.seed);
    if (!seed || !seed->is_graph_input()) return NotFound("seed '", request.seed, "' is not a graph input");
  }

  ONNXAMP_RETURN_IF_ERROR(g_.SortTopologically());
  for (ir::Node* n : g_.nodes()) forward_.push_back(n);
  for (size_t k = 0; k < forward_.size(); ++k) {
    next_[forward_[k]] = k + 1 < forward_.size() ? forward_[k + 1] : nullptr;
    node_names_.insert(forward_[k]->name());
  }

  // Values depending on a wrt value (through floating values, not through inputs that take no gradient), and values
  // the loss depends on.
  std::unordered_set<const ir::Value*> from_wrt(wrt.begin(), wrt.end());
  const ops::OpInfoRegistry& infos = ops::OpInfoRegistry::Global();
  auto takes_gradient = [&](const ir::Node& n, size_t i) { return infos.TakesGradient(n.domain(), n.op_type(), i); };
  // A node with subgraphs (If, Loop, Scan) also reads what its subgraphs read from this graph.
  for (const ir::Node* n : forward_) {
    bool reached = false;
    for (size_t i = 0; i < n->inputs().size(); ++i) {
      reached = reached || (from_wrt.count(n->input(i)) && takes_gradient(*n, i));
    }
    for (const ir::Value* v : g_.SubgraphReads(n)) reached = reached || from_wrt.count(v);
    if (!reached) continue;
    for (const ir::Value* v : n->outputs()) {
      if (v && IsDifferentiableType(TypeOrUndefined(v))) from_wrt.insert(v);
    }
  }
  std::unordered_set<const ir::Value*> to_loss;
  if (loss) to_loss.insert(loss);
  for (const auto& [v, grad] : seeded) to_loss.insert(v);
  for (size_t k = forward_.size(); k-- > 0;) {
    const ir::Node* n = forward_[k];
    bool reaches = false;
    for (const ir::Value* v : n->outputs()) reaches = reaches || (v && to_loss.count(v));
    if (!reaches) continue;
    for (const ir::Value* v : g_.ImplicitInputs(n)) to_loss.insert(v);
  }
  auto active = [&](const ir::Value* v) {
    return v && from_wrt.count(v) && to_loss.count(v) && IsDifferentiableType(TypeOrUndefined(v));
  };

  for (const auto& [v, grad] : seeded) AddContribution(v, grad);
  // The seed: dLoss = seed (the loss scale) or 1, shaped like the loss.
  ir::Value* dloss = seed;
  if (loss && !dloss) {
    dloss = AddConstant(ops::ScalarTensor(loss_type, 1.0), request.loss + "_grad_seed");
  }
  // Shaped like the loss (one element): Reshape, which every opset has (Expand needs opset 8).
  if (loss) {
    dloss = EmitBackward(request.loss + "_grad", "Reshape", {dloss, ShapeOf(loss)}, 1, {}, "", loss_type)[0];
    AddContribution(loss, dloss);
  }

  const ops::GradientRegistry& registry = ops::GradientRegistry::Global();
  for (size_t k = forward_.size(); k-- > 0;) {
    ir::Node* n = forward_[k];
    std::vector<bool> needs(n->inputs().size(), false);
    bool any_need = false;
    for (size_t i = 0; i < n->inputs().size(); ++i) {
      needs[i] = active(n->input(i)) && takes_gradient(*n, i);
      any_need = any_need || needs[i];
    }
    // If: the gradients of what its branches read (the autodiff of each branch, in a backward If).
    // Loop and Scan: the same, in a backward loop (and the gradients of their inputs).
    std::vector<ir::Value*> reads;
    for (ir::Value* v : g_.SubgraphReads(n)) {
      if (active(v)) reads.push_back(v);
    }
    any_need = any_need || !reads.empty();
    if (!any_need) continue;
    std::vector<ir::Value*> dys;
    bool any_dy = false;
    for (ir::Value* out : n->outputs()) {
      ir::Value* dy = out && active(out) ? Accumulated(out) : nullptr;
      dys.push_back(dy);
      any_dy = any_dy || dy;
    }
    if (!any_dy) continue;
    if (IsIf(*n)) {
      if (reads.empty()) continue;
      Status st = EmitIfGradient(*n, reads, dys);
      if (!st.ok()) return st.WithContext(StrCat("gradient of node ", n->Describe()));
      continue;
    }
    if (IsLoopOrScan(*n)) {
      Status st = EmitLoopGradient(*n, needs, reads, dys);
      if (!st.ok()) return st.WithContext(StrCat("gradient of node ", n->Describe()));
      continue;
    }
    const int64_t opset = model_.OpsetVersion(n->domain());
    StatusOr<const ops::GradientDef*> def = registry.Find(n->op_type(), n->domain(), opset);
    if (!def.ok()) {
      return Unimplemented("node ", n->Describe(), ": ", def.status().message(),
                           ", and it lies between the trained parameters and the loss");
    }
    NodeContext ctx(*this, *n, opset, std::move(dys), std::move(needs));
    Status st = (*def)->build(ctx);
    if (!st.ok()) return st.WithContext(StrCat("gradient of node ", n->Describe()));
    if (int missing = ctx.MissingGradient(); missing >= 0) {
      return Internal("node ", n->Describe(), ": the gradient builder of ", n->op_type(), " set no gradient for input ",
                      missing, " '", n->input(missing)->name(), "'");
    }
  }

  GradientResult result;
  std::vector<ir::Node*> hoist;  // the producers of gradients that became outputs themselves
  for (ir::Value* v : wrt) {
    ir::Value* grad = Accumulated(v);
    if (!grad) {
      result.gradients.emplace_back();
      continue;
    }
    // A gradient the backward pass computed and nothing reads becomes the output itself, renamed; any other (a value
    // shared with another output or read by a node) gets an Identity. An executor copies the output of an Identity
    // whose input lies in its memory plan's arena, so the Identity would cost a second copy of every gradient.
    ir::Value* out = nullptr;
    if (grad->producer() && grad->uses().empty() && !grad->is_graph_output() && !grad->is_graph_input() &&
        std::find(added_.begin(), added_.end(), grad->producer()) != added_.end()) {
      ONNXAMP_RETURN_IF_ERROR(g_.RenameValue(grad, FreshName(v->name() + "_grad")));
      out = grad;
      hoist.push_back(grad->producer());
    } else {
      out = EmitBackward(v->name() + "_grad", "Identity", {grad}, 1, {}, "", TypeOrUndefined(v))[0];
    }
    if (v->type().is_tensor() && v->type().shape()) out->set_type(v->type());
    g_.AddOutput(out);
    result.gradients.push_back(out->name());
  }
  RemoveDeadNodes();
  HoistToInputs(hoist);
  for (ir::Node* n : added_) result.nodes_added += n != nullptr;
  if (uses_internal_ && model_.OpsetVersion(exec::kInternalDomain) == 0) {
    model_.SetOpsetVersion(exec::kInternalDomain, 1);
  }
  return result;
}

}  // namespace

StatusOr<GradientResult> BuildGradients(ir::Model& model, const GradientRequest& request) {
  if (!model.graph) return InvalidArgument("the model has no graph");
  ir::Model work = converter::CloneModel(model);
  // Backward ops on the path (second derivatives) whose own gradients come from their decompositions.
  std::vector<std::string> targets;
  if (!request.loss.empty()) targets.push_back(request.loss);
  for (const auto& [value, grad] : request.output_gradients) targets.push_back(value);
  ONNXAMP_RETURN_IF_ERROR(DecomposeForGradients(work, request.wrt, targets).status());
  Autodiff ad(work, InferElementTypes(*work.graph), InferShapes(*work.graph));
  ONNXAMP_ASSIGN_OR_RETURN(GradientResult result, ad.Run(request));
  model = std::move(work);
  return result;
}

}  // namespace onnxamp::trainer
