// The conversion driver: checks the target and opset, runs the passes in order on a copy of the model, fills
// the report, and swaps the copy in only when every pass succeeded.
#include "converter/convert.h"

#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>
#include <onnx/version_converter/convert.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "converter/model_clone.h"
#include "converter/passes/passes.h"
#include "importer/onnx_proto.h"
#include "runtime/common/half.h"
#include "runtime/common/text.h"
#include "runtime/executor/session.h"
#include "runtime/ir/verify.h"
#include "runtime/ops/common/broadcast.h"

namespace onnxamp::converter {

namespace {

// Model metadata key listing the nodes kept FP32 by name or pattern, one name per line.
constexpr const char* kKeptNodesKey = "onnxamp.keep_fp32_nodes";

// Opset where most ops gained bfloat16 (and Cast can produce it).
constexpr int64_t kBFloat16Opset = 13;
// Cast takes a numeric `to` from opset 6 (Cast-1 takes a string); below that we refuse.
constexpr int64_t kMinOpset = 6;

// True when an op means the same at both schema versions: the same schema, or one that only gained types
// (same attributes, inputs and outputs). Softmax, LogSoftmax and Hardmax changed their axis semantics at 13
// without changing their signature.
bool SameSignature(const onnx::OpSchema* a, const onnx::OpSchema* b, const std::string& op) {
  if (a == b) return true;
  if (!a || !b || b->deprecated() || op == "Softmax" || op == "LogSoftmax" || op == "Hardmax") return false;
  auto names = [](const std::vector<onnx::OpSchema::FormalParameter>& fs) {
    std::vector<std::string> out;
    for (const auto& f : fs) out.push_back(f.GetName() + "/" + std::to_string(static_cast<int>(f.GetOption())));
    return out;
  };
  std::vector<std::string> attrs_a, attrs_b;
  for (const auto& [name, attr] : a->attributes()) attrs_a.push_back(name);
  for (const auto& [name, attr] : b->attributes()) attrs_b.push_back(name);
  return attrs_a == attrs_b && names(a->inputs()) == names(b->inputs()) && names(a->outputs()) == names(b->outputs());
}

// Names used anywhere in `g` (values and nodes, subgraphs included), so that added ones are new.
void CollectNames(const onnx::GraphProto& g, std::set<std::string>* names) {
  for (const auto& v : g.input()) names->insert(v.name());
  for (const auto& v : g.output()) names->insert(v.name());
  for (const auto& v : g.value_info()) names->insert(v.name());
  for (const auto& t : g.initializer()) names->insert(t.name());
  for (const auto& n : g.node()) {
    names->insert(n.name());
    for (const std::string& s : n.input()) names->insert(s);
    for (const std::string& s : n.output()) names->insert(s);
    for (const auto& a : n.attribute()) {
      if (a.has_g()) CollectNames(a.g(), names);
      for (const auto& sub : a.graphs()) CollectNames(sub, names);
    }
  }
}

// "Op 'name'", or "Op (unnamed, output 'y')", as ir::Node::Describe writes a node.
std::string Describe(const onnx::NodeProto& n) {
  if (!n.name().empty()) return StrCat(EscapeControlBytes(n.op_type()), " '", EscapeControlBytes(n.name()), "'");
  return StrCat(EscapeControlBytes(n.op_type()), " (unnamed, output '",
                EscapeControlBytes(n.output_size() > 0 ? n.output(0) : std::string()), "')");
}

std::string FreshName(const std::string& base, std::set<std::string>* names) {
  std::string name = base;
  for (int i = 1; names->count(name); ++i) name = base + "_" + std::to_string(i);
  names->insert(name);
  return name;
}

// What the model's or ONNX's inferred shapes say of a value.
struct KnownShape {
  int rank = 0;
  bool numbers = true;  // every dim a number
};

// Before opset 7 the binary ops (Add, Mul, Equal, ...) broadcast only with `broadcast = 1`, and then B's dims align
// with A's from `axis` on (default: the trailing dims, as numpy's). ONNX 1.12's adapter unsqueezes B by A's rank less
// B's, whatever the axis: Add(A [1, 4, 8, 8], b [4], axis 1) became A + b[4, 1, 1, 1], which broadcasts to [4, 4, 8, 8]
// and adds b along the batch (measured: a model trained at batch 4 without an error, and failed at batch 1). Here B
// gets the trailing 1-dims that align it from `axis` (an Unsqueeze, in the opset-6 form the converter raises), and
// the attributes go, so that numpy's broadcast of opset 7 reads it as the legacy one did.
Status RewriteLegacyBroadcast(onnx::NodeProto& n, int64_t from, const std::map<std::string, KnownShape>& ranks,
                              std::set<std::string>* names,
                              google::protobuf::RepeatedPtrField<onnx::NodeProto>* nodes) {
  auto* attrs = n.mutable_attribute();
  // Only the ops with a `broadcast` attribute (others' `axis` means something else: Softmax's, Concat's).
  if (std::none_of(attrs->begin(), attrs->end(), [](const auto& a) { return a.name() == "broadcast"; })) {
    return Status::Ok();
  }
  int64_t broadcast = 0;
  std::optional<int64_t> axis;
  for (auto it = attrs->begin(); it != attrs->end();) {
    if (it->name() == "broadcast" || it->name() == "axis") {
      (it->name() == "broadcast" ? broadcast : axis.emplace()) = it->i();
      it = attrs->erase(it);
    } else {
      ++it;
    }
  }
  if (broadcast == 0 || !axis || n.input_size() < 2) return Status::Ok();
  const auto a = ranks.find(n.input(0)), b = ranks.find(n.input(1));
  if (a == ranks.end() || b == ranks.end()) {
    return Unimplemented(Describe(n), " of opset ", from, " broadcasts '", EscapeControlBytes(n.input(1)),
                         "' from axis ", *axis, ": rewriting that for opset 7 needs the ranks of both inputs, and '",
                         EscapeControlBytes(n.input(a == ranks.end() ? 0 : 1)), "''s is not known");
  }
  const int64_t from_axis = *axis < 0 ? *axis + a->second.rank : *axis;
  const int64_t trailing = a->second.rank - from_axis - b->second.rank;
  if (from_axis < 0 || trailing < 0) {
    return InvalidArgument(Describe(n), ": axis ", *axis, " does not place '", EscapeControlBytes(n.input(1)),
                           "' (rank ", b->second.rank, ") inside '", EscapeControlBytes(n.input(0)), "' (rank ",
                           a->second.rank, ")");
  }
  if (trailing == 0) return Status::Ok();
  onnx::NodeProto* unsqueeze = nodes->Add();
  unsqueeze->set_op_type("Unsqueeze");
  unsqueeze->set_name(FreshName((n.name().empty() ? n.output(0) : n.name()) + "/align", names));
  unsqueeze->add_input(n.input(1));
  unsqueeze->add_output(FreshName(n.input(1) + "_aligned", names));
  onnx::AttributeProto* axes = unsqueeze->add_attribute();
  axes->set_name("axes");
  axes->set_type(onnx::AttributeProto::INTS);
  for (int64_t d = 0; d < trailing; ++d) axes->add_ints(b->second.rank + d);
  n.set_input(1, unsqueeze->output(0));
  return Status::Ok();
}

// The graph made ready for ONNX's version converter, where its adapters are wrong or would refuse without a name:
// - Softmax, LogSoftmax and Hardmax before opset 13 coerce their input to 2-D around `axis` (the dims before it make
//   the rows, the dims from it on the columns); from 13 they work along the one dim `axis`. They are rewritten in the
//   form both opsets read alike: an axis that is the input's last dim becomes -1; any other becomes Flatten(axis) ->
//   op(axis -1) -> Reshape(Shape(input)), which needs neither the rank nor the dims. ONNX's adapter needs the rank,
//   and writes the dims into the Reshape as constants: a symbolic dim becomes -1 there, so two of them (batch and
//   sequence) fail to reshape. After this ONNX's adapter finds axis -1 on each and keeps it. (ONNX 1.12 registers
//   Hardmax 12 -> 13 as compatible, which it is not.)
// - The legacy broadcast of opsets before 7 (RewriteLegacyBroadcast).
// - Refused by name: nodes the converter cannot look up (another domain, no schema, ConstantFill), and a Gemm before
//   opset 7 without every dim of its inputs as a number, which its adapter needs.
Status PrepareForVersionConverter(onnx::GraphProto* g, int64_t from, std::map<std::string, KnownShape> ranks,
                                  std::set<std::string>* names) {
  auto note = [&](const onnx::ValueInfoProto& v) {
    if (v.type().has_tensor_type() && v.type().tensor_type().has_shape()) {
      KnownShape& k = ranks[v.name()];
      k.rank = v.type().tensor_type().shape().dim_size();
      k.numbers = true;
      for (const auto& d : v.type().tensor_type().shape().dim()) k.numbers = k.numbers && d.has_dim_value();
    }
  };
  for (const auto& v : g->input()) note(v);
  for (const auto& v : g->output()) note(v);
  for (const auto& v : g->value_info()) note(v);
  for (const auto& t : g->initializer()) ranks[t.name()] = KnownShape{t.dims_size(), true};
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  for (onnx::NodeProto& n : *g->mutable_node()) {
    for (auto& a : *n.mutable_attribute()) {
      if (a.has_g()) ONNXAMP_RETURN_IF_ERROR(PrepareForVersionConverter(a.mutable_g(), from, ranks, names));
      for (auto& sub : *a.mutable_graphs()) {
        ONNXAMP_RETURN_IF_ERROR(PrepareForVersionConverter(&sub, from, ranks, names));
      }
    }
    // What ONNX 1.12's converter cannot take: it looks every node up by op name alone (another domain's op is an
    // unknown name, or an ONNX op it is not) and loops forever on the experimental ConstantFill.
    if (!n.domain().empty() && n.domain() != "ai.onnx") {
      return Unimplemented("node ", Describe(n), " of domain '", EscapeControlBytes(n.domain()),
                           "': ONNX's version converter raises models of the default "
                           "domain only");
    }
    if (n.op_type() == "ConstantFill" || !onnx::OpSchemaRegistry::Schema(n.op_type(), static_cast<int>(from), "")) {
      return Unimplemented("node ", Describe(n), ": no ONNX op of that name at opset ", from,
                           " for ONNX's version converter to raise");
    }
    if (from < 7 && n.op_type() != "Gemm")
      ONNXAMP_RETURN_IF_ERROR(RewriteLegacyBroadcast(n, from, ranks, names, &nodes));
    if (from < 7 && n.op_type() == "Gemm") {
      for (const std::string& in : n.input()) {
        const auto k = ranks.find(in);
        if (!in.empty() && (k == ranks.end() || !k->second.numbers)) {
          return Unimplemented(Describe(n), " of opset ", from,
                               ": ONNX's version converter needs every dim of its input '", EscapeControlBytes(in),
                               "' as a number, and ",
                               k == ranks.end() ? "its shape is not known" : "some are symbolic");
        }
      }
    }
    const bool coerced = from < 13 && n.input_size() == 1 && n.output_size() == 1 &&
                         (n.op_type() == "Softmax" || n.op_type() == "LogSoftmax" || n.op_type() == "Hardmax");
    if (!coerced) {
      *nodes.Add() = std::move(n);
      continue;
    }
    onnx::AttributeProto* axis_attr = nullptr;
    for (auto& a : *n.mutable_attribute()) {
      if (a.name() == "axis") axis_attr = &a;
    }
    int64_t axis = axis_attr ? axis_attr->i() : 1;  // the default before opset 13
    const auto rank = ranks.find(n.input(0));
    if (rank != ranks.end() && axis < 0) axis += rank->second.rank;
    if (!axis_attr) {
      axis_attr = n.add_attribute();
      axis_attr->set_name("axis");
      axis_attr->set_type(onnx::AttributeProto::INT);
    }
    if (axis == -1 || (rank != ranks.end() && axis == rank->second.rank - 1)) {
      axis_attr->set_i(-1);
      *nodes.Add() = std::move(n);
      continue;
    }
    const std::string x = n.input(0), y = n.output(0);
    const std::string base = n.name().empty() ? y : n.name();
    onnx::NodeProto* flatten = nodes.Add();
    flatten->set_op_type("Flatten");
    flatten->set_name(FreshName(base + "/flatten", names));
    flatten->add_input(x);
    flatten->add_output(FreshName(y + "_2d_in", names));
    onnx::AttributeProto* flatten_axis = flatten->add_attribute();
    flatten_axis->set_name("axis");
    flatten_axis->set_type(onnx::AttributeProto::INT);
    flatten_axis->set_i(axis);
    onnx::NodeProto* shape = nodes.Add();
    shape->set_op_type("Shape");
    shape->set_name(FreshName(base + "/shape", names));
    shape->add_input(x);
    shape->add_output(FreshName(y + "_shape", names));
    axis_attr->set_i(-1);
    n.set_input(0, flatten->output(0));
    n.set_output(0, FreshName(y + "_2d", names));
    onnx::NodeProto* reshape = nodes.Add();
    reshape->set_op_type("Reshape");
    reshape->set_name(FreshName(base + "/reshape", names));
    reshape->add_input(n.output(0));
    reshape->add_input(shape->output(0));
    reshape->add_output(y);
    *nodes.Add() = std::move(n);
    std::swap(*nodes.Mutable(nodes.size() - 1), *nodes.Mutable(nodes.size() - 2));  // the op before its Reshape
  }
  *g->mutable_node() = std::move(nodes);
  return Status::Ok();
}

}  // namespace

Status CompareForward(ir::Model model, ir::Model raised, const std::vector<ir::Tensor>& inputs, std::string_view on,
                      int threads) {
  const int64_t from = model.OpsetVersion(""), to = raised.OpsetVersion("");
  std::vector<std::string> names;
  for (const ir::Value* v : model.graph->outputs()) names.push_back(v->name());
  auto context = [&](const Status& st) {
    return st.WithContext(
        StrCat("checking the model raised from opset ", from, " to ", to, " against the model on ", on));
  };
  std::vector<std::vector<ir::Tensor>> outputs;
  for (ir::Model* m : {&model, &raised}) {
    exec::SessionOptions session;
    session.num_threads = threads;
    StatusOr<std::unique_ptr<exec::Session>> s = exec::Session::Create(std::move(*m), session);
    if (!s.ok()) return context(s.status());
    StatusOr<std::vector<ir::Tensor>> out = (*s)->Run(inputs);
    if (!out.ok()) return context(out.status());
    outputs.push_back(std::move(out).value());
  }
  for (size_t i = 0; i < outputs[0].size() && i < outputs[1].size(); ++i) {
    const ir::Tensor &want = outputs[0][i], &got = outputs[1][i];
    const std::string name = i < names.size() ? names[i] : std::to_string(i);
    auto differs = [&](const std::string& what) {
      return FailedPrecondition("the model raised from opset ", from, " to ", to,
                                " by ONNX's version converter computes another output '", EscapeControlBytes(name),
                                "' on ", on, " (", what, "); export the model at opset ", to, " or later instead");
    };
    if (got.dtype() != want.dtype() || got.dims() != want.dims()) {
      return differs(StrCat(DTypeName(got.dtype()), ops::ShapeToString(got.dims()), " against ",
                            DTypeName(want.dtype()), ops::ShapeToString(want.dims())));
    }
    const DType t = want.dtype();
    if (t == DType::kFloat32 || t == DType::kFloat64 || t == DType::kFloat16 || t == DType::kBFloat16) {
      // Summation order may differ (a fusion in one graph and not the other): a few units of the type's precision.
      const double rtol = t == DType::kFloat16 ? 4e-3 : t == DType::kBFloat16 ? 3e-2 : 1e-4;
      const double atol = t == DType::kFloat32 || t == DType::kFloat64 ? 1e-5 : 1e-3;
      auto at = [t](const ir::Tensor& x, int64_t k) -> double {
        if (t == DType::kFloat32) return x.values<float>()[k];
        if (t == DType::kFloat64) return x.values<double>()[k];
        const uint16_t bits = x.values<uint16_t>()[k];
        return t == DType::kFloat16 ? HalfBitsToFloat(bits) : BFloat16BitsToFloat(bits);
      };
      for (int64_t k = 0; k < want.num_elements(); ++k) {
        const double a = at(got, k), b = at(want, k);
        const bool same = (std::isnan(a) && std::isnan(b)) || a == b || std::abs(a - b) <= atol + rtol * std::abs(b);
        if (!same) return differs(StrCat("element ", k, ": ", a, " against ", b));
      }
    } else if (want.nbytes() != got.nbytes() || std::memcmp(want.data(), got.data(), want.nbytes()) != 0) {
      return differs("not the same values");
    }
  }
  return Status::Ok();
}

StatusOr<std::vector<ir::Tensor>> SyntheticInputs(const ir::Model& model, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<ir::Tensor> out;
  for (const ir::Value* v : model.graph->inputs()) {
    if (v->initializer()) continue;  // before IR 4 initializers are graph inputs too
    const ir::ValueType& type = v->type();
    if (!type.is_tensor() || !type.shape() || type.elem_type() == DType::kString) {
      return Unimplemented("input '", EscapeControlBytes(v->name()), "' (", type.ToString(),
                           ") has no shape or type to make an input of");
    }
    std::vector<int64_t> dims;
    for (const ir::Dim& d : *type.shape()) dims.push_back(d.is_value() ? d.value : 2);
    ir::Tensor t(type.elem_type(), dims);  // zeros
    const DType dt = t.dtype();
    for (int64_t i = 0; i < t.num_elements(); ++i) {
      const float x = uniform(gen);
      if (dt == DType::kFloat32) t.mutable_values<float>()[i] = x;
      if (dt == DType::kFloat64) t.mutable_values<double>()[i] = x;
      if (dt == DType::kFloat16) t.mutable_values<uint16_t>()[i] = FloatToHalfBits(x);
      if (dt == DType::kBFloat16) t.mutable_values<uint16_t>()[i] = FloatToBFloat16Bits(x);
    }
    t.set_name(v->name());
    out.push_back(std::move(t));
  }
  return out;
}

namespace {

Status CheckOpset(ir::Model& model, const ConvertOptions& options, ConvertReport* report, bool* changed) {
  const int64_t opset = model.OpsetVersion("");
  if (opset < kMinOpset) {
    return Unimplemented("model opset ", opset, " is below ", kMinOpset, ": Cast there cannot target ",
                         DTypeName(options.target), "; upgrade the model first");
  }
  if (options.target != DType::kBFloat16 || opset >= kBFloat16Opset) return Status::Ok();
  if (!options.allow_opset_upgrade) {
    return Unimplemented("bfloat16 needs opset ", kBFloat16Opset, " and the model has opset ", opset,
                         " (the opset upgrade is disabled)");
  }
  // Raising the opset import is only safe when no op of the model changed meaning in between; otherwise ONNX's
  // version converter rewrites the nodes that did.
  if (const ir::Node* n = FirstChangedOp(*model.graph, opset, kBFloat16Opset)) {
    const std::string changed_op = n->Describe();
    StatusOr<ir::Model> upgraded = UpgradeOpset(model, kBFloat16Opset);
    if (!upgraded.ok()) {
      return Unimplemented("bfloat16 needs opset ", kBFloat16Opset, " and the model has opset ", opset, "; ",
                           changed_op, " changed between the two, and ", upgraded.status().message());
    }
    if (const ConvertOptions::UpgradeCheck& check = options.upgrade_check; check.enabled) {
      const bool given = !check.inputs.empty();
      StatusOr<std::vector<ir::Tensor>> inputs = given ? check.inputs : SyntheticInputs(model, 1);
      const Status st = inputs.ok() ? CompareForward(CloneModel(model), CloneModel(*upgraded), *inputs,
                                                     given ? check.inputs_are : "random inputs", check.threads)
                                    : inputs.status();
      if (st.code() == StatusCode::kFailedPrecondition || (given && !st.ok())) return st;
      if (!st.ok())
        report->warnings.push_back(
            StrCat("the model raised to opset ", kBFloat16Opset, " was not checked against the model: ", st.message()));
    }
    model = std::move(upgraded).value();
    *changed = true;
    return Status::Ok();
  }
  model.SetOpsetVersion("", kBFloat16Opset);
  *changed = true;
  return Status::Ok();
}

int64_t InitializerBytes(const ir::Graph& g) {
  int64_t bytes = 0;
  for (const ir::Value* v : g.initializers()) bytes += static_cast<int64_t>(v->initializer()->nbytes());
  for (const ir::Node* n : g.nodes()) {
    for (const ir::Graph* sub : n->subgraphs()) bytes += InitializerBytes(*sub);
  }
  return bytes;
}

// Nodes kept FP32 by name or pattern (--keep-node, the auto mode), not by the op table: `out` gains their names.
void CollectForcedKeeps(const ir::Graph& g, ConversionState& state, std::set<std::string>* out) {
  for (const ir::Node* n : g.nodes()) {
    const NodePlan* np = state.FindNode(n);
    if (np && !n->name().empty() && np->decision.precision == Precision::kKeep &&
        np->decision.reason.rfind("op table", 0) != 0 && np->decision.reason != "default") {
      out->insert(n->name());
    }
    for (const ir::Graph* sub : n->subgraphs()) CollectForcedKeeps(*sub, state, out);
  }
}

// The names recorded under kKeptNodesKey, one per line.
std::vector<std::string> RecordedKeeps(const ir::Model& model) {
  std::vector<std::string> names;
  for (const auto& [key, value] : model.metadata_props) {
    if (key != kKeptNodesKey) continue;
    size_t start = 0;
    while (start <= value.size()) {
      const size_t end = std::min(value.find('\n', start), value.size());
      if (end > start) names.push_back(value.substr(start, end - start));
      start = end + 1;
    }
  }
  return names;
}

void RecordKeeps(ir::Model& model, const std::set<std::string>& names) {
  std::erase_if(model.metadata_props, [](const auto& kv) { return kv.first == kKeptNodesKey; });
  if (names.empty()) return;
  std::string value;
  for (const std::string& n : names) value += (value.empty() ? "" : "\n") + n;
  model.metadata_props.emplace_back(kKeptNodesKey, std::move(value));
}

void CountNodes(const ir::Graph& g, ConversionState& state, ConvertReport* r) {
  const DType target = state.options.target;
  for (const ir::Node* n : g.nodes()) {
    if (n->op_type() == "Cast" && ir::IsDefaultDomain(n->domain())) ++r->casts_final;
    const NodePlan* np = state.FindNode(n);
    if (np) {
      ++r->nodes_total;
      bool low = np->compute == target;
      for (const ir::Value* out : n->outputs()) {
        if (out && n->op_type() != "Cast" && out->type().is_tensor() && out->type().elem_type() == target &&
            np->compute == DType::kUndefined && !np->boundary) {
          low = true;
        }
      }
      if (low) ++r->nodes_low;
      const bool by_name = np->decision.reason.rfind("op table", 0) != 0 && np->decision.reason != "default" &&
                           np->decision.precision == Precision::kKeep;
      if (!np->fallback_reason.empty()) {
        r->kept_fp32.push_back({n->name().empty() ? n->Describe() : n->name(), n->op_type(), np->fallback_reason});
      } else if (by_name) {
        r->kept_fp32.push_back({n->name().empty() ? n->Describe() : n->name(), n->op_type(), np->decision.reason});
      }
    }
    for (const ir::Graph* sub : n->subgraphs()) CountNodes(*sub, state, r);
  }
}

// Runs every pass on `model`; `changed` says whether any of them changed something.
Status RunPasses(ir::Model& model, const ConvertOptions& options, ConvertReport* report, bool* changed) {
  *changed = false;
  if (options.target != DType::kFloat16 && options.target != DType::kBFloat16) {
    return InvalidArgument("conversion target must be float16 or bfloat16, got ", DTypeName(options.target));
  }
  if (!model.graph) return InvalidArgument("the model has no graph");
  report->target = options.target;
  report->opset_before = model.OpsetVersion("");
  report->bytes_before = InitializerBytes(*model.graph);
  ONNXAMP_RETURN_IF_ERROR(CheckOpset(model, options, report, changed));
  report->opset_after = model.OpsetVersion("");

  ConversionState state;
  state.options = options;
  // Nodes an earlier conversion kept FP32 by name (--keep-node, --auto) stay FP32: converting again changes nothing.
  for (const std::string& name : RecordedKeeps(model)) state.options.policy.AddKeepNodeName(name);
  state.report = report;
  state.model = &model;
  ir::Graph& g = *model.graph;
  bool c = false;
  ONNXAMP_RETURN_IF_ERROR(ConversionPasses(state).Run(model, passes::PassContext{}, &c));
  *changed |= c;
  report->bytes_after = InitializerBytes(g);
  CountNodes(g, state, report);
  std::set<std::string> forced;
  CollectForcedKeeps(g, state, &forced);
  RecordKeeps(model, forced);
  return Status::Ok();
}

}  // namespace

// ONNX's version converter rewrites the nodes whose op changed in between (Unsqueeze's and Squeeze's axes, Split's
// sizes, ...). Tensors whose data stayed in unloaded external files cannot make the trip.
const ir::Node* FirstChangedOp(const ir::Graph& g, int64_t from, int64_t to) {
  for (const ir::Node* n : g.nodes()) {
    if (ir::IsDefaultDomain(n->domain())) {
      const auto* a = onnx::OpSchemaRegistry::Schema(n->op_type(), static_cast<int>(from), "");
      const auto* b = onnx::OpSchemaRegistry::Schema(n->op_type(), static_cast<int>(to), "");
      if (!SameSignature(a, b, n->op_type())) return n;
    }
    for (const ir::Graph* sub : n->subgraphs()) {
      if (const ir::Node* c = FirstChangedOp(*sub, from, to)) return c;
    }
  }
  return nullptr;
}

StatusOr<ir::Model> UpgradeOpset(const ir::Model& model, int64_t opset) {
  onnx::ModelProto proto;
  importer::ModelToProto(model, &proto);
  // PrepareForVersionConverter and some adapters need ranks or dims: ONNX's shape inference first, computed shapes
  // included, best effort; the value types it adds are dropped again afterwards.
  std::set<std::string> declared;
  for (const onnx::ValueInfoProto& vi : proto.graph().value_info()) declared.insert(vi.name());
  try {
    onnx::shape_inference::InferShapes(proto, onnx::OpSchemaRegistry::Instance(),
                                       onnx::ShapeInferenceOptions(false, 0, /*data_prop_val=*/true));
  } catch (const std::exception&) {
  }
  std::set<std::string> names;
  CollectNames(proto.graph(), &names);
  ONNXAMP_RETURN_IF_ERROR(PrepareForVersionConverter(proto.mutable_graph(), model.OpsetVersion(""), {}, &names));
  onnx::ModelProto upgraded;
  try {
    upgraded = onnx::version_conversion::ConvertVersion(proto, static_cast<int>(opset));
  } catch (const std::exception& e) {
    return Unimplemented("ONNX's version converter: ", EscapeControlBytes(e.what()));
  }
  auto* infos = upgraded.mutable_graph()->mutable_value_info();
  infos->erase(std::remove_if(infos->begin(), infos->end(),
                              [&](const onnx::ValueInfoProto& vi) { return !declared.count(vi.name()); }),
               infos->end());
  StatusOr<ir::Model> out = importer::ModelFromProto(std::move(upgraded), importer::ExternalDataContext{});
  if (!out.ok()) return out.status().WithContext("the model ONNX's version converter wrote");
  // Opset 13 came with IR version 7; before IR 4 every initializer had to be a graph input, and the adapters add
  // initializers (Pad's pads, Unsqueeze's axes) that are not.
  out->ir_version = std::max<int64_t>(out->ir_version, 7);
  ONNXAMP_RETURN_IF_ERROR(ir::Verify(*out).WithContext("the model ONNX's version converter wrote"));
  // The model's contract stays: the same inputs and outputs, their types and declared dims (its Scan-8 adapter, for
  // one, drops the batch dim of the graph's inputs). What ONNX's shape inference filled in where the model declares
  // nothing is dropped: the declared types are the model's.
  auto fits = [](const ir::ValueType& was, const ir::ValueType& is) {
    if (was.kind() != is.kind() || was.elem_type() != is.elem_type()) return false;
    if (!was.shape()) return true;
    if (!is.shape() || is.shape()->size() != was.shape()->size()) return false;
    for (size_t d = 0; d < was.shape()->size(); ++d) {
      const ir::Dim& a = (*was.shape())[d];
      if (a.is_value() && !((*is.shape())[d] == a)) return false;
    }
    return true;
  };
  for (const bool inputs : {true, false}) {
    const auto& before = inputs ? model.graph->inputs() : model.graph->outputs();
    const auto& after = inputs ? out->graph->inputs() : out->graph->outputs();
    for (size_t i = 0; i < std::max(before.size(), after.size()); ++i) {
      if (i < before.size() && i < after.size() && before[i]->name() == after[i]->name() &&
          fits(before[i]->type(), after[i]->type())) {
        after[i]->set_type(before[i]->type());
        continue;
      }
      const ir::Value* v = i < before.size() ? before[i] : after[i];
      return Unimplemented("ONNX's version converter changed the graph's ", inputs ? "input '" : "output '", v->name(),
                           "' (", v->type().ToString(), i < after.size() ? " became " : " was removed",
                           i < after.size() ? after[i]->type().ToString() : std::string(), ")");
    }
  }
  return out;
}

Status ConvertModel(ir::Model& model, const ConvertOptions& options, ConvertReport* report) {
  ConvertReport local;
  ir::Model copy = CloneModel(model);
  bool changed = false;
  ONNXAMP_RETURN_IF_ERROR(RunPasses(copy, options, &local, &changed));
  model = std::move(copy);
  if (report) *report = std::move(local);
  return Status::Ok();
}

bool IsConverted(const ir::Model& model, const ConvertOptions& options) {
  ir::Model copy = CloneModel(model);
  ConvertReport report;
  bool changed = false;
  if (!RunPasses(copy, options, &report, &changed).ok()) return false;
  return !changed;
}

std::string ConvertReport::ToJson() const {
  nlohmann::json j;
  j["target"] = std::string(DTypeName(target));
  j["nodes_total"] = nodes_total;
  j["nodes_low"] = nodes_low;
  j["casts_inserted"] = casts_inserted;
  j["casts_folded"] = casts_folded;
  j["casts_final"] = casts_final;
  j["initializers_converted"] = initializers_converted;
  j["bytes_before"] = bytes_before;
  j["bytes_after"] = bytes_after;
  j["opset_before"] = opset_before;
  j["opset_after"] = opset_after;
  nlohmann::json jt = nlohmann::json::array();
  for (const TensorConversion& t : tensors) {
    jt.push_back({{"name", t.name},
                  {"elements", t.elements},
                  {"clamped", t.clamped},
                  {"flushed_to_zero", t.flushed_to_zero},
                  {"duplicated", t.duplicated}});
  }
  j["tensors"] = jt;
  nlohmann::json kept = nlohmann::json::array();
  for (const KeptNode& k : kept_fp32) kept.push_back({{"name", k.name}, {"op_type", k.op_type}, {"reason", k.reason}});
  j["kept_fp32"] = kept;
  j["warnings"] = warnings;
  return j.dump(2);
}

std::string ConvertReport::Summary() const {
  std::ostringstream os;
  os << "target " << DTypeName(target) << ": " << nodes_low << " / " << nodes_total << " nodes in " << DTypeName(target)
     << "\n";
  os << "casts: " << casts_inserted << " inserted, " << casts_folded << " folded, " << casts_final << " in the model\n";
  os << "initializers: " << initializers_converted << " converted, " << bytes_before << " -> " << bytes_after
     << " bytes\n";
  if (opset_after != opset_before) os << "opset: " << opset_before << " -> " << opset_after << "\n";
  int64_t clamped = 0, flushed = 0;
  for (const TensorConversion& t : tensors) {
    clamped += t.clamped;
    flushed += t.flushed_to_zero;
  }
  if (clamped || flushed) {
    os << "values: " << clamped << " clamped to the " << DTypeName(target) << " range, " << flushed
       << " flushed to zero\n";
    for (const TensorConversion& t : tensors) {
      if (t.clamped || t.flushed_to_zero) {
        os << "  " << t.name << ": " << t.clamped << " clamped, " << t.flushed_to_zero << " flushed of " << t.elements
           << "\n";
      }
    }
  }
  for (const KeptNode& k : kept_fp32) os << "kept float: " << k.name << " (" << k.op_type << "): " << k.reason << "\n";
  for (const std::string& w : warnings) os << "warning: " << w << "\n";
  return os.str();
}

}  // namespace onnxamp::converter
