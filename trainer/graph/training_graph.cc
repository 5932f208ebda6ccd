// BuildTrainingGraphs: parameter selection, the AMP conversion with FP32 master weights, the training-mode rewrite,
// the FP32 loss, parameters and buffers as inputs, and the backward pass.
#include "trainer/graph/training_graph.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "converter/convert.h"
#include "converter/model_clone.h"
#include "runtime/common/file_util.h"
#include "runtime/common/half.h"
#include "runtime/executor/graph_match.h"
#include "runtime/executor/graph_optimizer.h"
#include "runtime/executor/kernel.h"
#include "runtime/executor/lower_sequences.h"
#include "runtime/ir/verify.h"
#include "runtime/ops/common/broadcast.h"
#include "runtime/ops/gradient_ops.h"
#include "runtime/ops/op_info.h"
#include "trainer/autodiff/autodiff.h"
#include "trainer/autodiff/element_types.h"
#include "trainer/autodiff/gradient_op.h"
#include "trainer/graph/fake_quantize.h"
#include "trainer/graph/loss.h"
#include "trainer/graph/passes.h"

namespace onnxamp::trainer {
namespace {

bool IsFloat(DType t) { return IsDifferentiableType(t); }

ir::ValueType TensorType(const ir::Tensor& t) {
  ir::Shape shape;
  for (int64_t d : t.dims()) shape.push_back(ir::Dim::Value(d));
  return ir::ValueType::Tensor(t.dtype(), shape);
}

// The running statistics of BatchNormalization nodes (inputs 3 and 4) that are initializers.
std::set<std::string> BatchNormStatistics(const ir::Graph& g) {
  std::set<std::string> names;
  for (const ir::Node* n : g.nodes()) {
    if (n->op_type() != "BatchNormalization" || !n->domain().empty()) continue;
    for (size_t i : {3u, 4u}) {
      const ir::Value* v = n->input(i);
      if (v && v->initializer()) names.insert(v->name());
    }
  }
  return names;
}

// A float tensor's FP32 copy (parameters and buffers are FP32 whatever the model stored).
StatusOr<ir::Tensor> ToFloat32(const ir::Tensor& t, const std::string& name) {
  if (t.dtype() == DType::kFloat32) return t;
  ir::Tensor out(DType::kFloat32, t.dims());
  auto dst = out.mutable_values<float>();
  switch (t.dtype()) {
    case DType::kFloat16:
      for (size_t i = 0; i < dst.size(); ++i) dst[i] = static_cast<float>(t.values<Float16>()[i]);
      break;
    case DType::kBFloat16:
      for (size_t i = 0; i < dst.size(); ++i) dst[i] = static_cast<float>(t.values<BFloat16>()[i]);
      break;
    case DType::kFloat64:
      for (size_t i = 0; i < dst.size(); ++i) dst[i] = static_cast<float>(t.values<double>()[i]);
      break;
    default:
      return InvalidArgument("initializer '", name, "' has type ", DTypeName(t.dtype()), ", not a float type");
  }
  out.set_name(name);
  return out;
}

const char* ShortTypeName(DType t) { return t == DType::kBFloat16 ? "bf16" : "fp16"; }

// After ConvertModel: every parameter back to its FP32 master value, with one Cast feeding the low-precision copy to
// the consumers the converter gave a converted initializer (converted in place, or a duplicate for mixed users).
void RestoreMasterWeights(ir::Model& model, const std::vector<Parameter>& params,
                          const std::unordered_set<std::string>& original_initializers, DType low) {
  ir::Graph& g = *model.graph;
  ir::Node* first = g.num_nodes() ? *g.nodes().begin() : nullptr;
  for (const Parameter& p : params) {
    ir::Value* v = g.FindValue(p.name);
    if (!v || !v->initializer()) continue;
    std::vector<ir::Value*> low_copies;
    if (v->initializer()->dtype() != DType::kFloat32) low_copies.push_back(v);
    const std::string prefix = p.name + "_" + ShortTypeName(low);
    for (ir::Value* c : g.initializers()) {
      if (!original_initializers.count(c->name()) && c->name().rfind(prefix, 0) == 0 &&
          c->initializer()->dtype() == low) {
        low_copies.push_back(c);
      }
    }
    if (low_copies.empty()) continue;
    ir::Value* cast = g.CreateValue(g.UniqueName(prefix));
    cast->set_type(ir::ValueType::Tensor(low, TensorType(p.initial).shape()));
    ir::Node* node = g.InsertNode(first, "Cast", {v}, {cast}, g.UniqueName(prefix + "_cast"));
    node->SetAttribute(ir::Attribute::Int("to", static_cast<int64_t>(low)));
    for (ir::Value* c : low_copies) {
      const std::vector<ir::Use> uses = c->uses();
      for (const ir::Use& u : uses) {
        if (u.node != node) u.node->SetInput(u.index, cast);
      }
      if (c != v) {
        g.RemoveInitializer(c);
        g.RemoveValue(c);
      }
    }
    g.SetInitializer(v, p.initial);
    v->set_type(TensorType(p.initial));
  }
}

// The names of the nodes of `g`: node names, unlike value names, are not kept unique by the graph, and a conversion
// keeps nodes in FP32 by name.
std::unordered_set<std::string> NodeNames(const ir::Graph& g) {
  std::unordered_set<std::string> names;
  for (const ir::Node* n : g.nodes()) names.insert(n->name());
  return names;
}

// `base`, or `base_<k>` for the first k that is not in `taken`; added to it.
std::string UniqueNodeName(std::unordered_set<std::string>& taken, const std::string& base) {
  std::string name = base;
  for (int k = 1; taken.count(name); ++k) name = StrCat(base, "_", k);
  taken.insert(name);
  return name;
}

// Dropout `n` of graph `g` in training mode: from opset 12 its training_mode input a true constant of `g`; before,
// its is_test attribute 0 (Dropout-6's, which the kernels also read at opsets 7-11: runtime/ops/dropout/dropout.h).
void SetDropoutTraining(ir::Graph& g, ir::Node* n, int64_t opset) {
  if (opset < 12) {
    n->SetAttribute(ir::Attribute::Int("is_test", 0));
    return;
  }
  ir::Tensor on(DType::kBool, {});
  on.mutable_values<bool>()[0] = true;
  ir::Value* training = g.CreateValue(g.UniqueName(n->name().empty() ? "dropout_training" : n->name() + "_training"));
  training->set_type(ir::ValueType::Tensor(DType::kBool, ir::Shape{}));
  g.SetInitializer(training, std::move(on));
  while (n->inputs().size() < 2) n->AddInput(nullptr);
  if (n->inputs().size() < 3) {
    n->AddInput(training);
  } else {
    n->SetInput(2, training);
  }
}

// Training mode inside If branches and loop bodies: Dropout drops there too; a BatchNormalization there is refused,
// since its batch statistics would have to leave the subgraph as outputs to update the running ones.
Status UseTrainingModeInSubgraphs(const ir::Model& model, ir::Graph& g) {
  for (ir::Node* n : g.nodes()) {
    for (ir::Graph* sub : n->subgraphs()) {
      for (ir::Node* m : sub->nodes()) {
        if (!m->domain().empty()) continue;
        if (m->op_type() == "BatchNormalization") {
          return Unimplemented("node ", m->Describe(), " in a subgraph of ", n->Describe(),
                               ": BatchNormalization inside If, Loop or Scan cannot train (its running statistics "
                               "would not be updated)");
        }
        if (m->op_type() == "Dropout") SetDropoutTraining(*sub, m, model.OpsetVersion(""));
      }
      ONNXAMP_RETURN_IF_ERROR(UseTrainingModeInSubgraphs(model, *sub));
    }
  }
  return Status::Ok();
}

// BatchNormalization -> com.onnxamp BatchNormTraining (batch statistics, running statistics updated as PyTorch
// does), each new running statistic an output named after the buffer.
Status UseTrainingMode(ir::Model& model, std::vector<Buffer>& buffers) {
  ir::Graph& g = *model.graph;
  std::vector<ir::Node*> nodes;
  for (ir::Node* n : g.nodes()) nodes.push_back(n);
  std::unordered_set<std::string> node_names = NodeNames(g);
  bool internal = false;
  for (size_t k = 0; k < nodes.size(); ++k) {
    ir::Node* n = nodes[k];
    if (!n->domain().empty()) continue;
    if (n->op_type() == "BatchNormalization") {
      ir::Value* mean = n->input(3);
      ir::Value* var = n->input(4);
      if (!mean || !var) return InvalidArgument("node ", n->Describe(), ": running mean and variance are missing");
      auto buffer_of = [&](ir::Value* v) -> Buffer* {
        for (Buffer& b : buffers) {
          if (b.name == v->name()) return &b;
        }
        return nullptr;
      };
      Buffer* bm = buffer_of(mean);
      Buffer* bv = buffer_of(var);
      if (!bm || !bv) {
        return Unimplemented("node ", n->Describe(), ": the running statistics are computed in the graph, not stored");
      }
      if (!bm->updated.empty() || !bv->updated.empty()) {
        return Unimplemented("node ", n->Describe(), ": running statistics shared by two BatchNormalization nodes");
      }
      ir::Value* y = n->output(0);
      std::vector<ir::Value*> inputs = n->inputs();
      std::vector<ir::Attribute> attrs;
      attrs.push_back(ir::Attribute::Float("epsilon", n->GetFloat("epsilon", 1e-5f)));
      attrs.push_back(ir::Attribute::Float("momentum", n->GetFloat("momentum", 0.9f)));
      // Named, so that a conversion can keep it in FP32 by name (a model with Gradient nodes converts after this).
      const std::string name = n->name().empty() ? UniqueNodeName(node_names, "BatchNormalization") : n->name();
      ir::Node* before = k + 1 < nodes.size() ? nodes[k + 1] : nullptr;
      g.RemoveNode(n);
      ir::Value* new_mean = g.CreateValue(g.UniqueName(mean->name() + "_updated"));
      ir::Value* new_var = g.CreateValue(g.UniqueName(var->name() + "_updated"));
      ir::Value* saved_mean = g.CreateValue(g.UniqueName(name + "_saved_mean"));
      ir::Value* saved_inv_std = g.CreateValue(g.UniqueName(name + "_saved_inv_std"));
      for (ir::Value* v : {new_mean, new_var, saved_mean, saved_inv_std}) {
        v->set_type(ir::ValueType::Tensor(DType::kFloat32));
      }
      ir::Node* bn = g.InsertNode(before, ops::kBatchNormTrainingOp, inputs,
                                  {y, new_mean, new_var, saved_mean, saved_inv_std}, name, exec::kInternalDomain);
      for (ir::Attribute& a : attrs) bn->SetAttribute(std::move(a));
      g.AddOutput(new_mean);
      g.AddOutput(new_var);
      bm->updated = new_mean->name();
      bv->updated = new_var->name();
      internal = true;
    } else if (n->op_type() == "Dropout") {
      SetDropoutTraining(g, n, model.OpsetVersion(""));
    }
  }
  ONNXAMP_RETURN_IF_ERROR(UseTrainingModeInSubgraphs(model, g));
  if (internal && model.OpsetVersion(exec::kInternalDomain) == 0) model.SetOpsetVersion(exec::kInternalDomain, 1);
  return Status::Ok();
}

// The nodes that compute with the values named in `gradients` (the outputs of Gradient nodes), and those computing
// with theirs in turn, kept in FP32 by `policy` (unnamed ones get a name). A gradient's magnitude is not its
// activation's (the gradient of a loss that is a mean over the batch is 1/B of it), and a penalty squares it: in fp16
// the square of 1e-4 is subnormal. PyTorch computes such a penalty from FP32 gradients too. The walk stops at ops
// whose outputs no longer carry the gradient's magnitude (Sign, comparisons, shapes): an adversarial example
// x + eps * Sign(dx) and the forward pass through it convert as usual.
void KeepGradientConsumers(ir::Graph& g, const std::vector<std::string>& gradients,
                           converter::PrecisionPolicy& policy) {
  static const std::unordered_set<std::string> kMagnitudeFree = {
      "Sign", "Equal", "Greater", "Less",  "GreaterOrEqual", "LessOrEqual", "Not",    "And",    "Or",
      "Xor",  "IsNaN", "IsInf",   "Shape", "Size",           "ArgMax",      "ArgMin", "NonZero"};
  std::vector<const ir::Value*> work;
  for (const std::string& name : gradients) {
    if (const ir::Value* v = g.FindValue(name)) work.push_back(v);
  }
  std::unordered_set<const ir::Node*> kept;
  std::unordered_set<std::string> node_names = NodeNames(g);
  while (!work.empty()) {
    const ir::Value* v = work.back();
    work.pop_back();
    for (const ir::Use& use : v->uses()) {
      if (use.node->domain().empty() && kMagnitudeFree.count(use.node->op_type())) continue;
      if (!kept.insert(use.node).second) continue;
      if (use.node->name().empty()) use.node->set_name(UniqueNodeName(node_names, "gradient_consumer"));
      policy.AddKeepNodeName(use.node->name());
      for (const ir::Value* out : use.node->outputs()) {
        if (out) work.push_back(out);
      }
    }
  }
}

// Parameters and buffers: initializers -> graph inputs without defaults, FP32.
void MakeInputs(ir::Graph& g, const std::vector<Parameter>& params, const std::vector<Buffer>& buffers) {
  auto lift = [&](const std::string& name, const ir::Tensor& initial) {
    ir::Value* v = g.FindValue(name);
    if (!v) return;
    if (v->initializer()) g.RemoveInitializer(v);
    v->set_type(TensorType(initial));
    if (!v->is_graph_input()) g.AddInput(v);
  };
  for (const Parameter& p : params) lift(p.name, p.initial);
  for (const Buffer& b : buffers) lift(b.name, b.initial);
}

// The values `loss` depends on (through node inputs and what subgraphs read).
std::unordered_set<const ir::Value*> LossDependsOn(const ir::Graph& g, const ir::Value* loss) {
  std::unordered_set<const ir::Value*> deps = {loss};
  std::vector<const ir::Value*> stack = {loss};
  while (!stack.empty()) {
    const ir::Value* v = stack.back();
    stack.pop_back();
    const ir::Node* n = v->producer();
    if (!n) continue;
    for (const ir::Value* in : g.ImplicitInputs(n)) {
      if (deps.insert(in).second) stack.push_back(in);
    }
  }
  return deps;
}

// Whether a gradient flows from `loss` back to `param` (a path of floating values through inputs that take gradients;
// `deps`: LossDependsOn(loss), `types`: InferElementTypes of the graph). When none does, *why (optional) says where
// the first path stops, breadth first from the parameter: the node, or a general reason.
bool GradientReaches(const ir::Value* param, const ir::Value* loss, const std::unordered_set<const ir::Value*>& deps,
                     const ElementTypes& types, std::string* why) {
  auto floating = [&](const ir::Value* v) {
    auto it = types.find(v);
    return it == types.end() || it->second == DType::kUndefined || IsDifferentiableType(it->second);
  };
  std::string first;
  std::vector<const ir::Value*> queue = {param};
  std::unordered_set<const ir::Value*> seen = {param};
  for (size_t k = 0; k < queue.size(); ++k) {
    if (queue[k] == loss) return true;
    for (const ir::Use& use : queue[k]->uses()) {
      const ir::Node* n = use.node;
      bool reaches = false;
      for (const ir::Value* out : n->outputs()) reaches = reaches || (out && deps.count(out));
      if (!reaches) continue;
      const ops::OpInfo* info = ops::OpInfoRegistry::Global().Find(n->domain(), n->op_type());
      if (use.index >= 0 && info && info->NoGradientInput(static_cast<size_t>(use.index))) {
        if (first.empty()) {
          first = StrCat("it is input ", use.index, " of ", n->Describe(), ", which takes no gradient (",
                         info->no_gradient_inputs_reason, ")");
        }
        continue;
      }
      bool through = false;
      for (const ir::Value* out : n->outputs()) {
        if (!out || !deps.count(out) || !floating(out)) continue;
        through = true;
        if (seen.insert(out).second) queue.push_back(out);
      }
      if (!through && first.empty()) {
        first = StrCat(n->Describe(), " makes no floating value of it, so no gradient flows back");
      }
    }
  }
  if (why) *why = first.empty() ? "no gradient flows back to it" : first;
  return false;
}

// The normalisation nodes of one op that read initializer `name` as their scale or bias, directly or through
// Identity nodes (torch.onnx.export in eval mode merges initializers of equal value and leaves an Identity per merged
// name: `blocks.1.ln1.weight = Identity(blocks.0.ln1.weight)`).
TrainingGraphs::SharedNormWeight NormReads(const ir::Graph& g, const std::string& name) {
  static const std::set<std::string> kNorms = {"LayerNormalization", "BatchNormalization", "InstanceNormalization",
                                               "GroupNormalization"};
  TrainingGraphs::SharedNormWeight reads{name, "", 0};
  std::vector<const ir::Value*> values = {g.FindValue(name)};
  for (size_t k = 0; k < values.size(); ++k) {
    for (const ir::Use& u : values[k]->uses()) {
      const ir::Node* n = u.node;
      if (!n->domain().empty()) continue;
      if (n->op_type() == "Identity" && n->output(0)) values.push_back(n->output(0));
      if (!kNorms.count(n->op_type()) || (u.index != 1 && u.index != 2)) continue;
      if (!reads.op_type.empty() && reads.op_type != n->op_type()) continue;
      reads.op_type = n->op_type();
      ++reads.nodes;
    }
  }
  return reads;
}

// Keeps the outputs named in `keep` (in that order) and removes the others.
// Parameter p's gradient with `rows` of its first dim zeroed (--padding-idx): a Mul by a constant mask, 0 at those rows
// and 1 elsewhere, of p's rank with unit dims but the first (FP32, as the gradient). Returns the masked gradient's
// name.
StatusOr<std::string> MaskGradientRows(ir::Graph& g, const Parameter& p, const std::vector<int64_t>& rows) {
  const std::vector<int64_t>& dims = p.initial.dims();
  if (dims.empty()) return InvalidArgument("--padding-idx ", p.name, ": a scalar has no rows");
  const int64_t n = dims[0];
  std::vector<int64_t> mask_dims(dims.size(), 1);
  mask_dims[0] = n;
  ir::Tensor mask(DType::kFloat32, mask_dims);
  auto values = mask.mutable_values<float>();
  std::fill(values.begin(), values.end(), 1.0f);
  for (int64_t row : rows) {
    const int64_t r = row < 0 ? row + n : row;
    if (r < 0 || r >= n) {
      return InvalidArgument("--padding-idx ", p.name, "=", row, ": outside [", -n, ", ", n, "), the rows of ",
                             ops::ShapeToString(dims));
    }
    values[static_cast<size_t>(r)] = 0.0f;
  }
  ir::Value* gradient = g.FindValue(p.gradient);
  if (!gradient) return Internal("the gradient '", p.gradient, "' of '", p.name, "' is not in the train graph");
  ir::Value* m = g.CreateValue(g.UniqueName(p.name + "_gradient_row_mask"));
  g.SetInitializer(m, std::move(mask));
  ir::Value* masked = g.CreateValue(g.UniqueName(p.gradient + "_rows_masked"));
  masked->set_type(gradient->type());
  g.AddNode("Mul", {gradient, m}, {masked}, g.UniqueName(p.name + "_gradient_rows"));
  g.AddOutput(masked);  // in place of the gradient, which KeepOutputs then drops
  return masked->name();
}

void KeepOutputs(ir::Graph& g, const std::vector<std::string>& keep) {
  for (size_t i = g.outputs().size(); i-- > 0;) {
    const std::string& name = g.outputs()[i]->name();
    if (std::find(keep.begin(), keep.end(), name) == keep.end()) g.RemoveOutput(i);
  }
}

}  // namespace

int UseFusedGelu(ir::Model& model) {
  ir::Graph& graph = *model.graph;
  // Matches never share a node, and a pattern's output (the one value a rewrite keeps) may be another's x: all are
  // found first, then rewritten.
  std::vector<exec::GeluPattern> found;
  std::unordered_set<const ir::Node*> claimed;  // a pattern is found once (the tanh form's from x or from its Cast)
  for (ir::Value* x : graph.values()) {
    std::optional<exec::GeluPattern> m = exec::MatchGelu(x);
    if (!m || std::any_of(m->nodes.begin(), m->nodes.end(), [&](const ir::Node* n) { return claimed.count(n); })) {
      continue;
    }
    claimed.insert(m->nodes.begin(), m->nodes.end());
    found.push_back(std::move(*m));
  }
  for (const exec::GeluPattern& m : found) {
    std::vector<ir::Value*> intermediates;
    for (ir::Node* n : m.nodes) {
      if (n->output(0) != m.out) intermediates.push_back(n->output(0));
    }
    // In the place of the pattern's first node (which reads x, and which every reader of the output follows); the
    // output's producer goes first, since a node is inserted with its outputs.
    ir::Node* first = m.nodes[0];
    // The Erf's or Tanh's name: profiles count the node with the model's forward.
    std::string name;
    for (const ir::Node* n : m.nodes) {
      if (n->op_type() == "Erf" || n->op_type() == "Tanh") name = n->name();
    }
    for (size_t i = 1; i < m.nodes.size(); ++i) graph.RemoveNode(m.nodes[i]);
    ir::Node* gelu = graph.InsertNode(first, ops::kGeluOp, {m.in}, {m.out}, name, exec::kInternalDomain);
    if (m.tanh) gelu->SetAttribute(ir::Attribute::String("approximate", "tanh"));
    graph.RemoveNode(first);
    for (ir::Value* v : intermediates) graph.RemoveValue(v);
    // Different values (sqrt 2 or sqrt 1/2, 1 and 1/2; 3, 0.044715, sqrt(2 / pi), 1 and 1/2), each removed once.
    for (ir::Value* c : m.constants) exec::RemoveIfUnused(graph, c);
  }
  if (!found.empty() && model.OpsetVersion(exec::kInternalDomain) == 0) model.SetOpsetVersion(exec::kInternalDomain, 1);
  return static_cast<int>(found.size());
}

Status CheckRaisedForward(const ir::Model& model, const ir::Model& raised, const std::vector<ir::Tensor>& batch,
                          int threads) {
  // At the batch's size, which a batch dim the model fixes at export need not be.
  ir::Model a = converter::CloneModel(model), b = converter::CloneModel(raised);
  for (ir::Model* m : {&a, &b}) ONNXAMP_RETURN_IF_ERROR(MakeBatchDimSymbolic(*m, GraphDataInputs(*m->graph)));
  return converter::CompareForward(std::move(a), std::move(b), batch, "the first batch", threads);
}

InferenceModeReport UseInferenceMode(ir::Graph& g, int64_t opset) {
  InferenceModeReport report;
  std::vector<ir::Value*> unused;  // training-mode constants no longer read, removed after the walk
  for (ir::Node* n : g.nodes()) {
    for (ir::Graph* sub : n->subgraphs()) {
      const InferenceModeReport r = UseInferenceMode(*sub, opset);
      report.batch_norms += r.batch_norms;
      report.dropouts += r.dropouts;
    }
    if (!n->domain().empty()) continue;
    if (n->op_type() == "BatchNormalization" && n->GetInt("training_mode", 0) != 0) {
      bool read = false;
      for (size_t i = 1; i < n->outputs().size(); ++i) {
        const ir::Value* v = n->output(i);
        read = read || (v && (!v->uses().empty() || v->is_graph_output()));
      }
      if (read) continue;
      n->SetAttribute(ir::Attribute::Int("training_mode", 0));
      for (size_t i = 1; i < n->outputs().size(); ++i) {
        ir::Value* v = n->output(i);
        if (!v) continue;
        n->SetOutput(i, nullptr);
        g.RemoveValue(v);
      }
      n->DropTrailingOmittedOutputs();  // inference mode has one output (ONNX's checker refuses empty ones after it)
      ++report.batch_norms;
    } else if (n->op_type() == "Dropout") {
      if (opset >= 12) {
        ir::Value* mode = n->inputs().size() > 2 ? n->input(2) : nullptr;
        const ir::Tensor* t = mode ? exec::ConstantOf(mode) : nullptr;
        if (!t || t->dtype() != DType::kBool || t->num_elements() != 1 || !t->values<bool>()[0]) continue;
        n->RemoveInput(2);  // absent: inference
        if (std::find(unused.begin(), unused.end(), mode) == unused.end()) unused.push_back(mode);
        ++report.dropouts;
      } else if (n->GetInt("is_test", opset < 7 ? 0 : 1) == 0) {
        n->SetAttribute(ir::Attribute::Int("is_test", 1));
        ++report.dropouts;
      }
    }
  }
  for (ir::Value* v : unused) exec::RemoveIfUnused(g, v);
  return report;
}

namespace {

// A --trainable or --freeze value: an ECMAScript regex searched in each name, or @FILE, whole names one per line
// (surrounding white space trimmed; blank lines and lines starting with # skipped).
class NameChoice {
 public:
  static StatusOr<NameChoice> Parse(const char* flag, const std::string& text) {
    NameChoice c;
    if (text.empty()) return c;
    if (text[0] == '@') {
      const std::string path = text.substr(1);
      StatusOr<std::string> contents = ReadFile(path, 256u << 20);
      if (!contents.ok()) return InvalidArgument(flag, " ", text, ": ", contents.status().message());
      size_t begin = 0;
      while (begin < contents->size()) {
        size_t end = contents->find('\n', begin);
        if (end == std::string::npos) end = contents->size();
        std::string_view line(contents->data() + begin, end - begin);
        begin = end + 1;
        while (!line.empty() && std::isspace(static_cast<unsigned char>(line.front()))) line.remove_prefix(1);
        while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.remove_suffix(1);
        if (line.empty() || line.front() == '#') continue;
        if (c.names_.emplace(line).second) c.listed_.emplace_back(line);
      }
      if (c.listed_.empty()) {
        return InvalidArgument(flag, " ", text, ": '", path, "' lists no name (one initializer name per line)");
      }
      return c;
    }
    try {
      c.regex_.emplace(text, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      return InvalidArgument(flag, " '", text, "': not a valid regular expression: ", e.what());
    }
    return c;
  }

  bool given() const { return regex_.has_value() || !listed_.empty(); }
  bool Matches(const std::string& name) const {
    return regex_ ? std::regex_search(name, *regex_) : names_.count(name) > 0;
  }
  // The names a file lists, in file order (none for a regex).
  const std::vector<std::string>& listed() const { return listed_; }

 private:
  std::optional<std::regex> regex_;
  std::unordered_set<std::string> names_;
  std::vector<std::string> listed_;
};

// A --trainable or --freeze value in a message: @FILE as given, a regex in quotes.
std::string FlagValue(const std::string& text) { return text[0] == '@' ? text : StrCat("'", text, "'"); }

// Names `choice` lists that are no initializer of `g`, as a report entry of `flag` (none: nothing added).
void AddUnknown(const ir::Graph& g, const char* flag, const NameChoice& choice, ParameterChoiceReport* report) {
  ParameterChoiceReport::Unknown unknown{flag, {}};
  for (const std::string& name : choice.listed()) {
    const ir::Value* v = g.FindValue(name);
    if (!v || !v->initializer()) unknown.names.push_back(name);
  }
  if (!unknown.names.empty()) report->unknown.push_back(std::move(unknown));
}

}  // namespace

StatusOr<std::vector<std::string>> SelectParameters(const ir::Model& model, const std::string& freeze,
                                                    const std::string& trainable, ParameterChoiceReport* report) {
  ONNXAMP_ASSIGN_OR_RETURN(const NameChoice frozen, NameChoice::Parse("--freeze", freeze));
  ONNXAMP_ASSIGN_OR_RETURN(const NameChoice chosen, NameChoice::Parse("--trainable", trainable));
  const ir::Graph& g = *model.graph;
  const std::set<std::string> stats = BatchNormStatistics(g);
  // A file's names must be ones that can train.
  for (const std::string& name : chosen.listed()) {
    const ir::Value* v = g.FindValue(name);
    if (!v || !v->initializer()) continue;
    const DType type = v->initializer()->dtype();
    if (!IsFloat(type)) {
      return InvalidArgument("--trainable ", trainable, ": '", name, "' holds ", DTypeName(type),
                             "; only floating-point initializers train");
    }
    if (stats.count(name)) {
      return InvalidArgument("--trainable ", trainable, ": '", name,
                             "' is a BatchNormalization running statistic, which the forward pass updates (it takes "
                             "no gradient)");
    }
  }
  if (report) {
    AddUnknown(g, "--trainable", chosen, report);
    AddUnknown(g, "--freeze", frozen, report);
  }
  // Read inside an If branch or a Loop or Scan body: trained through the backward If or loop (not Scan-8's batched
  // form, which has no gradient: a weight only its body reads stays as it is).
  std::set<const ir::Value*> read_below;
  for (const ir::Node* n : g.nodes()) {
    if (n->op_type() == "Scan" && model.OpsetVersion("") < 9) continue;
    for (const ir::Value* v : exec::SubgraphReads(*n)) read_below.insert(v);
  }
  // A PRelu's slope is a learned weight whatever its size (torch's nn.PReLU() has one).
  std::set<const ir::Value*> slopes;
  for (const ir::Node* n : g.nodes()) {
    if (n->op_type() == "PRelu" && n->domain().empty() && n->inputs().size() > 1 && n->input(1)) {
      slopes.insert(n->input(1));
    }
  }
  using LeftOut = ParameterChoiceReport::LeftOut;
  auto leave = [&](const ir::Value* v, LeftOut why) {
    if (report) report->left_out.emplace_back(v->name(), why);
  };
  std::vector<std::string> names;
  for (const ir::Value* v : g.initializers()) {
    const ir::Tensor& t = *v->initializer();
    if (!IsFloat(t.dtype()) || t.num_elements() == 0 || stats.count(v->name())) continue;
    if (v->uses().empty() && !read_below.count(v)) {
      leave(v, LeftOut::kUnread);
    } else if (frozen.given() && frozen.Matches(v->name())) {
      leave(v, LeftOut::kFrozen);
    } else if (chosen.given() && !chosen.Matches(v->name())) {
      const bool by_default = t.num_elements() > 1 || slopes.count(v);
      if (report && by_default && !chosen.listed().empty()) report->unlisted.push_back(v->name());
      leave(v, LeftOut::kNotNamed);
    } else if (!chosen.given() && t.num_elements() == 1 && !slopes.count(v)) {
      if (report) report->one_element.push_back(v->name());
      leave(v, LeftOut::kOneElement);
    } else {
      names.push_back(v->name());
    }
  }
  return names;
}

namespace {

// StoredLowPrecision over the chosen parameters `names` of `g`.
StatusOr<DType> LowPrecisionOf(const ir::Graph& g, const std::vector<std::string>& names, std::string* example,
                               int* count) {
  DType low = DType::kUndefined;
  std::string first;
  int n = 0;
  for (const std::string& name : names) {
    const DType t = g.FindValue(name)->initializer()->dtype();
    if (t != DType::kFloat16 && t != DType::kBFloat16) continue;
    if (low != DType::kUndefined && t != low) {
      return InvalidArgument("parameter '", first, "' is stored in ", DTypeName(low), " and '", name, "' in ",
                             DTypeName(t), ": one model trains in one low-precision type");
    }
    if (first.empty()) first = name;
    low = t;
    ++n;
  }
  if (example) *example = first;
  if (count) *count = n;
  return low;
}

}  // namespace

StatusOr<std::vector<InitializerRole>> DescribeInitializers(const ir::Model& model, const TrainingGraphOptions& options,
                                                            const TrainingGraphs& graphs) {
  using Role = InitializerRole::Role;
  using LeftOut = ParameterChoiceReport::LeftOut;
  const ir::Graph& g = *model.graph;
  std::set<std::string> trained, buffers;
  for (const Parameter& p : graphs.params) trained.insert(p.name);
  for (const Buffer& b : graphs.buffers) buffers.insert(b.name);
  const std::unordered_map<std::string, LeftOut> left_out(graphs.choice.left_out.begin(), graphs.choice.left_out.end());
  std::unordered_map<std::string, std::string> adapted;  // weight -> its adapters
  for (const LoraAdapter& a : graphs.lora) adapted[a.weight] = StrCat("'", a.a, "' and '", a.b, "'");
  // Why SelectParameters left it out, in words.
  auto left_out_role = [&](LeftOut why, InitializerRole& r) {
    switch (why) {
      case LeftOut::kUnread:
        r.role = Role::kUnread;
        r.why = "no node reads it";
        break;
      case LeftOut::kFrozen:
        r.role = Role::kFrozen;
        r.why = options.freeze[0] == '@' ? StrCat("listed in --freeze ", options.freeze)
                                         : StrCat("matches --freeze '", options.freeze, "'");
        break;
      case LeftOut::kNotNamed:
        r.why = options.trainable[0] == '@' ? StrCat("not listed in --trainable ", options.trainable)
                                            : StrCat("not matched by --trainable '", options.trainable, "'");
        break;
      case LeftOut::kOneElement:
        r.why = "one element, taken for a constant (--trainable trains what it names)";
        break;
    }
  };
  std::vector<InitializerRole> roles;
  for (const ir::Value* v : g.initializers()) {
    const ir::Tensor& t = *v->initializer();
    if (!IsFloat(t.dtype())) continue;
    InitializerRole r{v->name(), t.dtype(), t.dims(), Role::kConstant, ""};
    auto untrained = std::find_if(graphs.untrained.begin(), graphs.untrained.end(),
                                  [&](const TrainingGraphs::Untrained& u) { return u.name == v->name(); });
    if (trained.count(v->name())) {
      r.role = Role::kTrained;
    } else if (buffers.count(v->name())) {
      r.role = Role::kBuffer;
      r.why = "a BatchNormalization running statistic: the forward pass updates it";
    } else if (untrained != graphs.untrained.end()) {
      r.why = StrCat("the loss depends on it, but ", untrained->why);
    } else if (auto it = left_out.find(v->name()); it != left_out.end()) {
      left_out_role(it->second, r);
    } else if (auto a = adapted.find(v->name()); a != adapted.end()) {
      r.role = Role::kFrozen;
      r.why = StrCat("LoRA adapters ", a->second, " train beside it");
    } else if (options.lora.enabled()) {
      r.why = "LoRA trains the adapters, and what --lora-train names";
    } else {
      r.why = "not trained";
    }
    roles.push_back(std::move(r));
  }
  for (const Parameter& p : graphs.params) {
    const ir::Value* v = g.FindValue(p.name);
    if (v && v->initializer()) continue;
    auto adapter = std::find_if(graphs.lora.begin(), graphs.lora.end(),
                                [&](const LoraAdapter& a) { return a.a == p.name || a.b == p.name; });
    roles.push_back({p.name, p.initial.dtype(), p.initial.dims(), Role::kTrained,
                     adapter != graphs.lora.end() ? StrCat("LoRA adapter of '", adapter->weight, "'") : ""});
  }
  return roles;
}

StatusOr<DType> StoredLowPrecision(const ir::Model& model, const std::string& freeze, const std::string& trainable,
                                   std::string* example, int* count) {
  ONNXAMP_ASSIGN_OR_RETURN(std::vector<std::string> names, SelectParameters(model, freeze, trainable));
  return LowPrecisionOf(*model.graph, names, example, count);
}

namespace {

// BuildTrainingGraphs at the model's own opset. *gradients_failed tells whether an error came from the gradients.
StatusOr<TrainingGraphs> BuildAtModelOpset(const ir::Model& given, const TrainingGraphOptions& options,
                                           bool* gradients_failed) {
  TrainingGraphs out;
  if (options.lora.enabled() && !options.trainable.empty()) {
    return InvalidArgument(
        "--trainable does not combine with LoRA, whose adapters train: --lora-train names what "
        "trains beside them");
  }
  // LoRA: the graphs are built from the model with its adapters, which are then the parameters.
  ir::Model adapted;
  converter::PrecisionPolicy policy = options.policy;
  if (options.lora.enabled()) {
    ONNXAMP_ASSIGN_OR_RETURN(LoraPlan plan, PlanLora(given, options.lora));
    adapted = converter::CloneModel(given);
    std::vector<LoraPath> paths;
    ONNXAMP_RETURN_IF_ERROR(AddLoraAdapters(adapted, options.lora, plan, &paths));
    // Under AMP: the multiplication by the scale in FP32 (as torch multiplies a half tensor by a Python float in
    // float), so that training uses the scale the merge does; and a layer kept in FP32 keeps its adapters' path too.
    for (const LoraPath& p : paths) {
      policy.AddKeepNodeName(p.scale);
      if (policy.Decide(*p.reader).precision == converter::Precision::kKeep) {
        for (const std::string& name : p.nodes) policy.AddKeepNodeName(name);
      }
    }
    out.lora = std::move(plan.adapters);
    out.lora_skipped = std::move(plan.skipped);
  }
  const ir::Model& model = options.lora.enabled() ? adapted : given;
  ONNXAMP_ASSIGN_OR_RETURN(std::vector<std::string> names,
                           SelectParameters(model, options.freeze, options.trainable, &out.choice));
  if (options.lora.enabled()) {
    out.choice.one_element.clear();  // the adapters alone train
    std::optional<std::regex> also;
    if (!options.lora.train.empty()) {
      try {
        also.emplace(options.lora.train, std::regex::ECMAScript);
      } catch (const std::regex_error& e) {
        return InvalidArgument("--lora-train '", options.lora.train, "': not a valid regular expression: ", e.what());
      }
    }
    std::set<std::string> adapters, adapted_weights;
    for (const LoraAdapter& a : out.lora) {
      adapters.insert(a.a);
      adapters.insert(a.b);
      adapted_weights.insert(a.weight);
    }
    std::vector<std::string> kept;
    bool also_matched = false;
    for (std::string& name : names) {
      const bool extra = also && std::regex_search(name, *also);
      if (extra && adapted_weights.count(name)) {
        return InvalidArgument("--lora-train '", options.lora.train, "' matches '", name,
                               "', which has adapters and stays frozen (leave it out of --lora-targets to train it)");
      }
      also_matched |= extra;
      if (adapters.count(name) || extra) kept.push_back(std::move(name));
    }
    if (also && !also_matched) {
      return InvalidArgument("--lora-train '", options.lora.train, "' matches no trainable initializer",
                             options.freeze.empty() ? "" : " not matching --freeze");
    }
    names = std::move(kept);
    for (const std::string& adapter : adapters) {
      if (std::find(names.begin(), names.end(), adapter) == names.end()) {
        return InvalidArgument("--freeze '", options.freeze, "' matches the LoRA adapter '", adapter,
                               "': every adapter trains (leave its weight out of --lora-targets instead)");
      }
    }
  }
  if (names.empty() && !options.trainable.empty()) {
    return InvalidArgument("--trainable ", FlagValue(options.trainable),
                           " names no float initializer that a node reads",
                           options.freeze.empty() ? "" : " and --freeze leaves");
  }
  if (names.empty()) {
    return InvalidArgument("the model has no trainable parameter (float initializers with more than one element",
                           options.freeze.empty() ? "" : ", not matching --freeze", "; --trainable names others)");
  }
  // FP32 master weights: a graph computing in float64 would read them as float32 (and round its weights).
  for (const std::string& name : names) {
    if (model.graph->FindValue(name)->initializer()->dtype() == DType::kFloat64) {
      return InvalidArgument("parameter '", name,
                             "' is stored in float64: onnxamp trains FP32 master weights, "
                             "which a float64 graph cannot read; write the model in float32 (torch: model.float() "
                             "before torch.onnx.export)");
    }
  }
  if (options.amp == DType::kUndefined) {
    // The parameters as chosen (with LoRA: the adapters, which are float32, and what --lora-train adds).
    std::string example;
    ONNXAMP_ASSIGN_OR_RETURN(const DType low, LowPrecisionOf(*model.graph, names, &example, nullptr));
    if (low != DType::kUndefined) {
      const char* flag = low == DType::kFloat16 ? "fp16" : "bf16";
      return InvalidArgument("parameter '", example, "' is stored in ", DTypeName(low), ", so the model computes in ",
                             DTypeName(low), ": train it with --amp ", flag,
                             " (FP32 master weights and dynamic loss scaling)");
    }
  }
  for (const std::string& name : names) {
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor initial, ToFloat32(*model.graph->FindValue(name)->initializer(), name));
    out.params.push_back({name, std::move(initial), ""});
    TrainingGraphs::SharedNormWeight shared = NormReads(*model.graph, name);
    if (shared.nodes > 1) out.shared_norm_weights.push_back(std::move(shared));
  }
  for (const std::string& name : BatchNormStatistics(*model.graph)) {
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor initial, ToFloat32(*model.graph->FindValue(name)->initializer(), name));
    out.buffers.push_back({name, std::move(initial), ""});
  }
  out.data_inputs = GraphDataInputs(*model.graph);
  // The output the loss reads, named before the training-mode rewrite adds outputs (the conversion keeps the names
  // of the model's outputs).
  LossOptions loss_options = options.loss;
  if (loss_options.output.empty() && model.graph->outputs().size() == 1) {
    loss_options.output = model.graph->outputs()[0]->name();
  }

  // Three pipelines, each pass checked by ir::Verify: the rewrites both graphs share, then the train graph's and the
  // eval graph's own. Pass state (what the loss pass attached, the gradients) lives in these locals.
  passes::PassContext ctx;
  ctx.training = true;
  AttachedLoss train_loss, eval_loss;
  GradientResult grads;

  // The rewrites both graphs share. ONNX's Gradient operator (ai.onnx.preview.training) becomes the backward pass it
  // stands for, which the train graph then differentiates like any other nodes (a gradient penalty in the loss is a
  // second derivative). That backward pass must see each graph's mode: in the train graph the Dropout masks and the
  // BatchNormalization batch statistics the forward uses (as PyTorch's double backward in train() mode does), in the
  // eval graph the inference forms. So with Gradient nodes the train graph turns training mode on before expanding
  // them, and each graph runs these passes on its own copy.
  const bool gradient_ops = HasGradientOps(model);
  // The outputs of the main graph's Gradient nodes: after the expansion, the values their backward passes write.
  std::vector<std::string> gradient_outputs;
  for (const ir::Node* n : model.graph->nodes()) {
    if (n->op_type() != "Gradient" || n->domain() != kGradientOpDomain) continue;
    for (const ir::Value* v : n->outputs()) {
      if (v) gradient_outputs.push_back(v->name());
    }
  }
  auto training_mode = [&](ir::Model& m, const passes::PassContext&, bool* changed) {
    ONNXAMP_RETURN_IF_ERROR(UseTrainingMode(m, out.buffers));
    *changed = true;
    return Status::Ok();
  };
  BatchDimReport eval_batch_dim;
  auto add_shared = [&](passes::PassPipeline& p, bool train_graph) {
    // Models of IR version 3 list their initializers as graph inputs too (defaults a caller may override). The trainer
    // never feeds them, so here they are initializers alone, as in the model's IR 4 form: the conversion then treats
    // them as weights, not as activations arriving in low precision. Parameters and buffers become inputs again below.
    if (std::any_of(model.graph->inputs().begin(), model.graph->inputs().end(),
                    [](const ir::Value* v) { return v->initializer() != nullptr; })) {
      p.Add("initializers_not_inputs", [](ir::Model& m, const passes::PassContext&, bool* changed) {
        *changed = false;
        for (size_t i = m.graph->inputs().size(); i-- > 0;) {
          ir::Value* v = m.graph->inputs()[i];
          if (!v->initializer()) continue;
          m.graph->RemoveInput(v);
          *changed = true;
        }
        return Status::Ok();
      });
    }
    // Lists (sequence values) whose elements the graph fixes become tensors, so that the autodiff sees tensor ops.
    if (exec::HasSequenceOps(*model.graph)) {
      p.Add("lower_sequences",
            [](ir::Model& m, const passes::PassContext&, bool* changed) { return exec::LowerSequences(m, changed); });
    }
    if (gradient_ops) {
      if (train_graph) p.Add("use_training_mode", training_mode);
      p.Add("expand_gradient_ops", [&](ir::Model& m, const passes::PassContext&, bool* changed) {
        ONNXAMP_ASSIGN_OR_RETURN(int expanded, ExpandGradientOps(m));
        *changed = expanded > 0;
        return Status::Ok();
      });
    }
    // A batch size fixed at export becomes symbolic before the conversion, so that both graphs run at any batch size.
    // The report is the train graph's (the eval graph's, made on its own copy, goes to a local).
    p.Add("make_batch_dim_symbolic", [&, train_graph](ir::Model& m, const passes::PassContext&, bool* changed) {
      BatchDimReport* report = train_graph ? &out.batch_dim : &eval_batch_dim;
      ONNXAMP_RETURN_IF_ERROR(MakeBatchDimSymbolic(m, out.data_inputs, report));
      *changed = report->inputs > 0;
      return Status::Ok();
    });
    if (options.amp == DType::kUndefined) return;
    // Mixed precision: exactly `onnxamp convert --keep-io-types`, then the master weights back in FP32.
    auto originals = std::make_shared<std::unordered_set<std::string>>();
    p.Add(StrCat("convert_to_", ShortTypeName(options.amp)),
          [&, originals, train_graph](ir::Model& m, const passes::PassContext&, bool* changed) {
            for (const ir::Value* v : m.graph->initializers()) originals->insert(v->name());
            converter::ConvertOptions convert;
            convert.target = options.amp;
            convert.policy = policy;
            // Training mode on already (Gradient nodes): a BatchNormTraining stays in FP32, as the
            // BatchNormalization it replaces does by the op table.
            for (const ir::Node* n : m.graph->nodes()) {
              if (n->domain() == exec::kInternalDomain && n->op_type() == ops::kBatchNormTrainingOp) {
                convert.policy.AddKeepNodeName(n->name());
              }
            }
            KeepGradientConsumers(*m.graph, gradient_outputs, convert.policy);
            convert.keep_io_types = true;
            convert.bfloat16_types_opset = options.bfloat16_types_opset;
            // A raise checked on the first batch; with Gradient nodes in the eval graph's copy only, which is not in
            // training mode.
            convert.upgrade_check.enabled = !options.raise_check_batch.empty() && !(gradient_ops && train_graph);
            convert.upgrade_check.inputs = options.raise_check_batch;
            convert.upgrade_check.inputs_are = "the first batch";
            convert.upgrade_check.threads = options.raise_check_threads;
            converter::ConvertReport report;
            ONNXAMP_RETURN_IF_ERROR(converter::ConvertModel(m, convert, &report));
            if (train_graph) {
              out.converted_nodes = static_cast<int>(report.nodes_low);
              for (const converter::KeptNode& k : report.kept_fp32) {
                auto same = [&](const TrainingGraphs::KeptFloat& g) {
                  return g.op_type == k.op_type && g.reason == k.reason;
                };
                auto it = std::find_if(out.kept_float.begin(), out.kept_float.end(), same);
                if (it == out.kept_float.end()) it = out.kept_float.insert(it, {k.op_type, k.reason, 0});
                ++it->nodes;
              }
            }
            *changed = true;
            return Status::Ok();
          });
    p.Add("restore_master_weights", [&, originals](ir::Model& m, const passes::PassContext&, bool* changed) {
      RestoreMasterWeights(m, out.params, *originals, options.amp);
      *changed = true;
      return Status::Ok();
    });
  };
  passes::PassPipeline shared, eval_shared;
  add_shared(shared, /*train_graph=*/true);
  if (gradient_ops) add_shared(eval_shared, /*train_graph=*/false);

  passes::PassPipeline train;
  if (!gradient_ops) train.Add("use_training_mode", training_mode);
  train.Add("use_fused_gelu", [&](ir::Model& m, const passes::PassContext&, bool* changed) {
    *changed = UseFusedGelu(m) > 0;
    return Status::Ok();
  });
  train.Add("use_fake_quantize", [&](ir::Model& m, const passes::PassContext&, bool* changed) {
    *changed = UseFakeQuantize(m) > 0;
    return Status::Ok();
  });
  train.Add(MakeAttachLossPass(loss_options, &train_loss));
  train.Add("parameters_as_inputs", [&](ir::Model& m, const passes::PassContext&, bool* changed) {
    MakeInputs(*m.graph, out.params, out.buffers);
    *changed = true;
    return Status::Ok();
  });
  train.Add("loss_scale_input", [&](ir::Model& m, const passes::PassContext&, bool* changed) {
    out.loss_scale = m.graph->UniqueName("loss_scale");
    ir::Value* scale = m.graph->CreateValue(out.loss_scale);
    scale->set_type(ir::ValueType::Tensor(DType::kFloat32, ir::Shape{}));
    m.graph->AddInput(scale);
    *changed = true;
    return Status::Ok();
  });
  train.Add("build_gradients", [&](ir::Model& m, const passes::PassContext&, bool* changed) {
    GradientRequest request;
    request.loss = train_loss.loss;
    request.seed = out.loss_scale;
    for (const Parameter& p : out.params) request.wrt.push_back(p.name);
    StatusOr<GradientResult> built = BuildGradients(m, request);
    if (!built.ok()) {
      *gradients_failed = true;
      return built.status();
    }
    grads = std::move(built).value();
    *changed = grads.nodes_added > 0;
    return Status::Ok();
  });
  train.Add("select_train_outputs", [&](ir::Model& m, const passes::PassContext&, bool* changed) {
    std::vector<std::string> keep = {train_loss.loss, train_loss.prediction};
    // A weight the loss depends on only where no gradient flows (a causal mask through a comparison, Resize's
    // scales) is a constant to the loss, as a registered buffer is to PyTorch: it becomes an initializer again and is
    // not trained. One the loss does not depend on at all is an error (a head --output does not select).
    const ir::Value* loss = m.graph->FindValue(train_loss.loss);
    const std::unordered_set<const ir::Value*> deps = LossDependsOn(*m.graph, loss);
    const ElementTypes types = InferElementTypes(*m.graph);
    std::vector<Parameter> trained;
    for (size_t i = 0; i < out.params.size(); ++i) {
      Parameter& p = out.params[i];
      if (grads.gradients[i].empty()) {
        ir::Value* v = m.graph->FindValue(p.name);
        if (!v || !deps.count(v)) {
          return InvalidArgument("parameter '", p.name,
                                 "' does not affect the loss (freeze it with --freeze, or check --output)");
        }
        std::string why;
        GradientReaches(v, loss, deps, types, &why);
        out.untrained.push_back({p.name, std::move(why)});
        m.graph->RemoveInput(v);
        m.graph->SetInitializer(v, std::move(p.initial));
        continue;
      }
      p.gradient = grads.gradients[i];
      if (auto rows = options.zero_gradient_rows.find(p.name); rows != options.zero_gradient_rows.end()) {
        ONNXAMP_ASSIGN_OR_RETURN(p.gradient, MaskGradientRows(*m.graph, p, rows->second));
      }
      keep.push_back(p.gradient);
      trained.push_back(std::move(p));
    }
    for (const auto& [name, rows] : options.zero_gradient_rows) {
      if (std::none_of(trained.begin(), trained.end(), [&](const Parameter& p) { return p.name == name; })) {
        return InvalidArgument("--padding-idx ", name, ": no parameter of that name trains");
      }
    }
    if (trained.empty()) {
      return InvalidArgument("no gradient reaches any parameter: '", out.untrained[0].name,
                             "': ", out.untrained[0].why);
    }
    out.params = std::move(trained);
    // The initializers left constant that the default would train: only those a gradient would reach are worth a word.
    auto reached = [&](std::vector<std::string>& names) {
      std::vector<std::string> kept;
      for (std::string& name : names) {
        const ir::Value* v = m.graph->FindValue(name);
        if (v && deps.count(v) && GradientReaches(v, loss, deps, types, nullptr)) kept.push_back(std::move(name));
      }
      names = std::move(kept);
    };
    reached(out.choice.one_element);
    reached(out.choice.unlisted);
    for (const Buffer& b : out.buffers) {
      if (!b.updated.empty()) keep.push_back(b.updated);
    }
    KeepOutputs(*m.graph, keep);
    *changed = true;
    return Status::Ok();
  });

  passes::PassPipeline eval;
  eval.Add("use_inference_mode", [&](ir::Model& m, const passes::PassContext&, bool* changed) {
    out.eval_inference_mode = UseInferenceMode(*m.graph, m.OpsetVersion(""));
    *changed = out.eval_inference_mode.batch_norms + out.eval_inference_mode.dropouts > 0;
    return Status::Ok();
  });
  eval.Add(MakeAttachLossPass(loss_options, &eval_loss));
  eval.Add("parameters_as_inputs", [&](ir::Model& m, const passes::PassContext&, bool* changed) {
    MakeInputs(*m.graph, out.params, out.buffers);
    *changed = true;
    return Status::Ok();
  });
  eval.Add("select_eval_outputs", [&](ir::Model& m, const passes::PassContext&, bool* changed) {
    KeepOutputs(*m.graph, {eval_loss.loss, eval_loss.prediction});
    *changed = true;
    return Status::Ok();
  });

  ir::Model work = converter::CloneModel(model);
  ir::Model eval_model = gradient_ops ? converter::CloneModel(model) : ir::Model();
  ONNXAMP_RETURN_IF_ERROR(shared.Run(work, ctx));
  if (gradient_ops) {
    ONNXAMP_RETURN_IF_ERROR(eval_shared.Run(eval_model, ctx));
  } else {
    eval_model = converter::CloneModel(work);
  }
  ONNXAMP_RETURN_IF_ERROR(train.Run(work, ctx));
  ONNXAMP_RETURN_IF_ERROR(eval.Run(eval_model, ctx));
  if (eval_loss.loss != train_loss.loss || eval_loss.prediction != train_loss.prediction ||
      eval_loss.labels != train_loss.labels) {
    return Internal("the train and eval graphs name their loss differently ('", train_loss.loss, "', '", eval_loss.loss,
                    "')");
  }
  out.loss = train_loss.loss;
  out.labels = train_loss.labels;
  out.prediction = train_loss.prediction;
  out.scores = train_loss.scores;
  out.train_passes = shared.names();
  out.eval_passes = gradient_ops ? eval_shared.names() : shared.names();
  for (const std::string& name : train.names()) out.train_passes.push_back(name);
  for (const std::string& name : eval.names()) out.eval_passes.push_back(name);
  out.train = std::move(work);
  out.eval = std::move(eval_model);
  return out;
}

}  // namespace

StatusOr<TrainingGraphs> BuildTrainingGraphs(const ir::Model& model, const TrainingGraphOptions& options) {
  if (!model.graph) return InvalidArgument("the model has no graph");
  const int64_t opset = model.OpsetVersion("");
  // `model` raised to kTrainingOpsetFloor, checked on the first batch, and the graphs built from there. Its
  // initializers keep their names and values, so the trained values are written back into the model as it was (the
  // export keeps its opset). `why` is what the model's own opset could not do; `fail` gives an error the context.
  auto build_raised = [&](std::string why,
                          const std::function<Status(const char*, const Status&)>& fail) -> StatusOr<TrainingGraphs> {
    StatusOr<ir::Model> raised = converter::UpgradeOpset(model, kTrainingOpsetFloor);
    if (!raised.ok()) return fail("raising the model to opset ", raised.status());
    if (!options.raise_check_batch.empty()) {
      ONNXAMP_RETURN_IF_ERROR(
          CheckRaisedForward(model, *raised, options.raise_check_batch, options.raise_check_threads));
    }
    bool again_failed = false;
    StatusOr<TrainingGraphs> again = BuildAtModelOpset(*raised, options, &again_failed);
    if (!again.ok()) return fail("raised to opset ", again.status());
    again->raised_opset = {opset, kTrainingOpsetFloor, std::move(why)};
    return again;
  };
  // BF16 needs opset 13 (converter::ConvertModel raises the model itself). When ops of the model changed in between,
  // the raise happens here, before anything else: ONNX's adapters need the dims the model declares (its Gemm adapter
  // from opset 6 every dim of the inputs), and the graphs are made to run at any batch size before the conversion.
  if (options.amp == DType::kBFloat16 && opset < kTrainingOpsetFloor) {
    if (const ir::Node* n = converter::FirstChangedOp(*model.graph, opset, kTrainingOpsetFloor)) {
      const std::string why =
          StrCat("bfloat16 needs opset ", kTrainingOpsetFloor, ", and ", n->Describe(), " changed in between");
      return build_raised(why, [&](const char* what, const Status& st) {
        return Status(st.code(), StrCat(why, "; ", what, kTrainingOpsetFloor, ": ", st.message()));
      });
    }
  }
  bool gradients_failed = false;
  StatusOr<TrainingGraphs> built = BuildAtModelOpset(model, options, &gradients_failed);
  if (built.ok() || !gradients_failed || opset >= kTrainingOpsetFloor) return built;
  // Gradients of older opsets that need ops those opsets lack (Expand, Where, Slice with inputs). Either failure of
  // the raise is reported after the error at the model's own opset, which names the node.
  return build_raised(std::string(built.status().message()), [&](const char* what, const Status& st) {
    return Status(built.status().code(), StrCat(built.status().message(), " (at opset ", opset, "; ", what,
                                                kTrainingOpsetFloor, ": ", st.message(), ")"));
  });
}

StatusOr<BatchStatisticsModel> MakeBatchStatisticsModel(const ir::Model& model) {
  if (!model.graph) return InvalidArgument("the model has no graph");
  BatchStatisticsModel out;
  out.model = converter::CloneModel(model);
  ir::Graph& g = *out.model.graph;
  std::vector<Buffer> buffers;
  for (const std::string& name : BatchNormStatistics(g)) buffers.push_back({name, ir::Tensor(), ""});
  if (buffers.empty()) return InvalidArgument("the model has no BatchNormalization statistics");
  // reset_running_stats(): mean 0, variance 1, so that a stale (or non-finite) statistic cannot reach the result
  // through the op's momentum * running term.
  for (const ir::Node* n : g.nodes()) {
    if (n->op_type() != "BatchNormalization" || !n->domain().empty()) continue;
    for (size_t i : {3u, 4u}) {
      ir::Value* v = n->input(i);
      if (!v || !v->initializer()) continue;
      ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor reset, ToFloat32(*v->initializer(), v->name()));
      for (float& x : reset.mutable_values<float>()) x = i == 3 ? 0.0f : 1.0f;
      g.SetInitializer(v, std::move(reset));
      v->set_type(TensorType(*v->initializer()));
    }
  }
  ONNXAMP_RETURN_IF_ERROR(MakeBatchDimSymbolic(out.model, GraphDataInputs(g)));
  ONNXAMP_RETURN_IF_ERROR(UseTrainingMode(out.model, buffers));
  // Momentum 0: each node's running-statistic outputs are the batch's mean and unbiased variance.
  for (ir::Node* n : g.nodes()) {
    if (n->domain() == exec::kInternalDomain && n->op_type() == ops::kBatchNormTrainingOp) {
      n->SetAttribute(ir::Attribute::Float("momentum", 0.0f));
    }
  }
  std::vector<std::string> keep;
  for (const Buffer& b : buffers) keep.push_back(b.updated);
  KeepOutputs(g, keep);
  // KeepOutputs keeps the graph's order of outputs: the buffers in the order the graph lists them.
  for (const ir::Value* v : g.outputs()) {
    for (const Buffer& b : buffers) {
      if (b.updated == v->name()) out.buffers.push_back(b.name);
    }
  }
  ONNXAMP_RETURN_IF_ERROR(ir::Verify(out.model));
  return out;
}

}  // namespace onnxamp::trainer
