// ModelProto <-> ir::Model: types, attributes, graphs (two-pass, with outer-scope references), functions.
#include "importer/onnx_proto.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <unordered_set>

#include "importer/model_io.h"
#include "importer/proto_internal.h"

namespace onnxamp::importer {
namespace {

using internal::Join;

// ---------------------------------------------------------------- types

StatusOr<DType> ElemTypeFromCode(int32_t code, const std::string& where) {
  if (code == 0) return DType::kUndefined;
  std::optional<DType> t = DTypeFromCode(code);
  if (!t) return InvalidArgument(where, ": unknown data_type code ", code);
  return *t;
}

ir::Shape ShapeFromProto(const onnx::TensorShapeProto& proto) {
  ir::Shape shape;
  shape.reserve(static_cast<size_t>(proto.dim_size()));
  for (const auto& d : proto.dim()) {
    ir::Dim dim;
    if (d.has_dim_value()) {
      dim = ir::Dim::Value(d.dim_value());
    } else if (d.has_dim_param()) {
      dim = ir::Dim::Param(d.dim_param());
    }
    dim.denotation = d.denotation();
    shape.push_back(std::move(dim));
  }
  return shape;
}

void ShapeToProto(const ir::Shape& shape, onnx::TensorShapeProto* proto) {
  for (const ir::Dim& d : shape) {
    auto* dim = proto->add_dim();
    if (d.is_value()) dim->set_dim_value(d.value);
    if (d.is_param()) dim->set_dim_param(d.param);
    if (!d.denotation.empty()) dim->set_denotation(d.denotation);
  }
}

// Writes the element type and shape shared by tensor and sparse tensor types.
template <typename P>
void TensorTypeToProto(const ir::ValueType& type, P* proto) {
  if (type.elem_type() != DType::kUndefined) proto->set_elem_type(static_cast<int32_t>(type.elem_type()));
  if (type.shape()) ShapeToProto(*type.shape(), proto->mutable_shape());
}

// ---------------------------------------------------------------- graphs

// The enclosing graphs a subgraph may read from, innermost first.
struct Scope {
  const ir::Graph* graph;
  const Scope* parent;
};

bool ResolvesInScope(const Scope* scope, const std::string& name) {
  for (; scope != nullptr; scope = scope->parent)
    if (scope->graph->FindValue(name)) return true;
  return false;
}

std::string DescribeNode(const onnx::NodeProto& n, int index) {
  if (!n.name().empty()) return StrCat("node '", n.name(), "' (", n.op_type(), ")");
  for (const std::string& out : n.output())
    if (!out.empty()) return StrCat("node #", index, " (", n.op_type(), ", output '", out, "')");
  return StrCat("node #", index, " (", n.op_type(), ")");
}

// What defines `v` so far in pass 1 of the import (for "defined twice" messages).
std::string DescribeDefinition(const ir::Value& v) {
  if (v.producer()) {
    const ir::Node& n = *v.producer();
    return n.name().empty() ? StrCat("an earlier ", n.op_type(), " node") : StrCat("node '", n.name(), "'");
  }
  if (v.initializer() || v.sparse_initializer()) return "an initializer";
  if (v.is_graph_input()) return "a graph input";
  return "another definition";
}

class Importer {
 public:
  // With `consume`, the tensors' data are moved out of the protos being imported (see ImportTensor).
  Importer(const ExternalDataContext& ext, bool consume) : ext_(ext), consume_(consume) {}

  Status ImportGraph(const onnx::GraphProto& gp, ir::Graph* g, const Scope* outer, const std::string& where);
  Status ImportFunction(const onnx::FunctionProto& fp, ir::Function* f, const std::string& where);

 private:
  Status DeclareNodes(const google::protobuf::RepeatedPtrField<onnx::NodeProto>& nodes, ir::Graph* g,
                      const std::string& where);
  Status ConnectNodes(const google::protobuf::RepeatedPtrField<onnx::NodeProto>& nodes, ir::Graph* g,
                      const Scope* outer, const std::string& where);
  StatusOr<ir::Attribute> ImportAttribute(const onnx::AttributeProto& ap, const Scope* scope, const std::string& where);
  StatusOr<std::unique_ptr<ir::Graph>> ImportSubgraph(const onnx::GraphProto& gp, const Scope* scope,
                                                      const std::string& where);
  // The value `name` of `g`, or a new outer-scope value when an enclosing graph defines it; null if neither.
  ir::Value* Resolve(ir::Graph* g, const Scope* outer, const std::string& name);
  Status ApplyValueInfo(const onnx::ValueInfoProto& vi, ir::Value* v, const std::string& where);
  StatusOr<ir::Tensor> ImportTensor(const onnx::TensorProto& tp, const std::string& where);

  const ExternalDataContext& ext_;
  const bool consume_;
};

StatusOr<ir::Tensor> Importer::ImportTensor(const onnx::TensorProto& tp, const std::string& where) {
  if (!consume_) return TensorFromProto(tp, ext_, where);
  // consume_ is set only by ModelFromProto(ModelProto&&): every proto this importer sees is part of that
  // non-const message, so taking its data is allowed.
  return internal::TensorFromProtoConsuming(const_cast<onnx::TensorProto*>(&tp), ext_, where);
}

ir::Value* Importer::Resolve(ir::Graph* g, const Scope* outer, const std::string& name) {
  if (ir::Value* v = g->FindValue(name)) return v;
  if (ResolvesInScope(outer, name)) return g->CreateOuterScopeValue(name);
  return nullptr;
}

Status Importer::ApplyValueInfo(const onnx::ValueInfoProto& vi, ir::Value* v, const std::string& where) {
  if (vi.has_type()) {
    ONNXAMP_ASSIGN_OR_RETURN(ir::ValueType type, internal::TypeFromProto(vi.type(), where));
    v->set_type(std::move(type));
  }
  if (!vi.doc_string().empty()) v->set_doc_string(vi.doc_string());
  return Status::Ok();
}

Status Importer::DeclareNodes(const google::protobuf::RepeatedPtrField<onnx::NodeProto>& nodes, ir::Graph* g,
                              const std::string& where) {
  for (int k = 0; k < nodes.size(); ++k) {
    const onnx::NodeProto& np = nodes[k];
    std::vector<ir::Value*> outputs;
    outputs.reserve(static_cast<size_t>(np.output_size()));
    for (const std::string& name : np.output()) {
      if (name.empty()) {
        outputs.push_back(nullptr);
        continue;
      }
      if (ir::Value* existing = g->FindValue(name)) {
        bool same_node = false;
        for (ir::Value* o : outputs) same_node |= o == existing;
        return InvalidArgument(Join(where, DescribeNode(np, k)), ": output '", name, "' is already defined by ",
                               same_node ? "this node" : DescribeDefinition(*existing),
                               " (a value must have exactly one producer)");
      }
      outputs.push_back(g->CreateValue(name));
    }
    ir::Node* n = g->AddNode(np.op_type(), {}, std::move(outputs), np.name(), np.domain());
    n->set_doc_string(np.doc_string());
  }
  return Status::Ok();
}

Status Importer::ConnectNodes(const google::protobuf::RepeatedPtrField<onnx::NodeProto>& nodes, ir::Graph* g,
                              const Scope* outer, const std::string& where) {
  const Scope scope{g, outer};
  int k = 0;
  for (ir::Node* n : g->nodes()) {
    const onnx::NodeProto& np = nodes[k];
    const std::string node_where = Join(where, DescribeNode(np, k));
    ++k;
    for (const std::string& name : np.input()) {
      if (name.empty()) {
        n->AddInput(nullptr);
        continue;
      }
      ir::Value* v = Resolve(g, outer, name);
      if (!v) {
        return InvalidArgument(node_where, ": input '", name,
                               "' is not produced by any node, graph input or initializer",
                               outer ? " of this graph or an enclosing one" : "");
      }
      n->AddInput(v);
    }
    std::unordered_set<std::string> seen;
    for (const onnx::AttributeProto& ap : np.attribute()) {
      if (!seen.insert(ap.name()).second) {
        return InvalidArgument(node_where, ": attribute '", ap.name(), "' appears more than once");
      }
      ONNXAMP_ASSIGN_OR_RETURN(ir::Attribute attr,
                               ImportAttribute(ap, &scope, StrCat(node_where, " attribute '", ap.name(), "'")));
      n->SetAttribute(std::move(attr));
    }
  }
  return Status::Ok();
}

Status Importer::ImportGraph(const onnx::GraphProto& gp, ir::Graph* g, const Scope* outer, const std::string& where) {
  g->set_name(gp.name());
  g->set_doc_string(gp.doc_string());

  // Pass 1: declare every name the graph defines (inputs, initializers, node outputs).
  for (int i = 0; i < gp.input_size(); ++i) {
    const onnx::ValueInfoProto& vi = gp.input(i);
    if (vi.name().empty()) return InvalidArgument(Join(where, StrCat("graph input #", i)), ": has no name");
    const std::string vwhere = Join(where, StrCat("graph input '", vi.name(), "'"));
    if (g->FindValue(vi.name())) return InvalidArgument(vwhere, ": is listed twice");
    ir::Value* v = g->CreateValue(vi.name());
    ONNXAMP_RETURN_IF_ERROR(ApplyValueInfo(vi, v, vwhere));
    g->AddInput(v);
  }
  auto declare_initializer = [&](const std::string& name, const std::string& iwhere) -> StatusOr<ir::Value*> {
    ir::Value* v = g->FindValue(name);
    if (v && (v->initializer() || v->sparse_initializer())) {
      return InvalidArgument(iwhere, ": is defined twice (a value must have exactly one producer)");
    }
    return v ? v : g->CreateValue(name);
  };
  for (int i = 0; i < gp.initializer_size(); ++i) {
    const onnx::TensorProto& tp = gp.initializer(i);
    if (tp.name().empty()) return InvalidArgument(Join(where, StrCat("initializer #", i)), ": has no name");
    const std::string iwhere = Join(where, StrCat("initializer '", tp.name(), "'"));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor t, ImportTensor(tp, iwhere));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Value * v, declare_initializer(tp.name(), iwhere));
    g->SetInitializer(v, std::move(t));
  }
  for (int i = 0; i < gp.sparse_initializer_size(); ++i) {
    const onnx::SparseTensorProto& sp = gp.sparse_initializer(i);
    const std::string& name = sp.values().name();
    if (name.empty()) return InvalidArgument(Join(where, StrCat("sparse initializer #", i)), ": has no name");
    const std::string iwhere = Join(where, StrCat("sparse initializer '", name, "'"));
    ONNXAMP_ASSIGN_OR_RETURN(ir::SparseTensor t, internal::SparseTensorFromProto(sp, ext_, iwhere));
    ONNXAMP_ASSIGN_OR_RETURN(ir::Value * v, declare_initializer(name, iwhere));
    g->SetSparseInitializer(v, std::move(t));
  }
  ONNXAMP_RETURN_IF_ERROR(DeclareNodes(gp.node(), g, where));

  // Pass 2: connect node inputs (a reference to a value defined later is fine here; Verify reports cycles),
  // import attributes and subgraphs, then the outputs and value_info.
  ONNXAMP_RETURN_IF_ERROR(ConnectNodes(gp.node(), g, outer, where));
  for (int i = 0; i < gp.output_size(); ++i) {
    const onnx::ValueInfoProto& vi = gp.output(i);
    if (vi.name().empty()) return InvalidArgument(Join(where, StrCat("graph output #", i)), ": has no name");
    const std::string vwhere = Join(where, StrCat("graph output '", vi.name(), "'"));
    ir::Value* v = Resolve(g, outer, vi.name());
    if (!v) return InvalidArgument(vwhere, ": is not produced by any node, graph input or initializer");
    ONNXAMP_RETURN_IF_ERROR(ApplyValueInfo(vi, v, vwhere));
    g->AddOutput(v);
  }
  for (int i = 0; i < gp.value_info_size(); ++i) {
    const onnx::ValueInfoProto& vi = gp.value_info(i);
    if (vi.name().empty()) return InvalidArgument(Join(where, StrCat("value_info #", i)), ": has no name");
    const std::string vwhere = Join(where, StrCat("value_info '", vi.name(), "'"));
    ir::Value* v = Resolve(g, outer, vi.name());
    if (!v) return InvalidArgument(vwhere, ": names a value that nothing in the graph defines");
    ONNXAMP_RETURN_IF_ERROR(ApplyValueInfo(vi, v, vwhere));
    g->AddValueInfo(v);
  }
  for (const onnx::TensorAnnotation& ta : gp.quantization_annotation()) {
    ir::TensorAnnotation a;
    a.tensor_name = ta.tensor_name();
    for (const auto& kv : ta.quant_parameter_tensor_names()) {
      a.quant_parameter_tensor_names.emplace_back(kv.key(), kv.value());
    }
    g->quantization_annotation().push_back(std::move(a));
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<ir::Graph>> Importer::ImportSubgraph(const onnx::GraphProto& gp, const Scope* scope,
                                                              const std::string& where) {
  auto g = std::make_unique<ir::Graph>();
  ONNXAMP_RETURN_IF_ERROR(ImportGraph(gp, g.get(), scope, where));
  return g;
}

Status Importer::ImportFunction(const onnx::FunctionProto& fp, ir::Function* f, const std::string& where) {
  f->name = fp.name();
  f->domain = fp.domain();
  f->doc_string = fp.doc_string();
  for (const auto& op : fp.opset_import()) f->opset_imports.push_back({op.domain(), op.version()});
  f->attributes.assign(fp.attribute().begin(), fp.attribute().end());
  f->body = std::make_unique<ir::Graph>(fp.name());
  ir::Graph* g = f->body.get();
  for (const std::string& name : fp.input()) {
    if (name.empty()) return InvalidArgument(where, ": has an input without a name");
    if (g->FindValue(name)) return InvalidArgument(where, ": input '", name, "' is listed twice");
    g->AddInput(g->CreateValue(name));
  }
  ONNXAMP_RETURN_IF_ERROR(DeclareNodes(fp.node(), g, where));
  ONNXAMP_RETURN_IF_ERROR(ConnectNodes(fp.node(), g, nullptr, where));
  for (const std::string& name : fp.output()) {
    ir::Value* v = name.empty() ? nullptr : g->FindValue(name);
    if (!v) return InvalidArgument(where, ": output '", name, "' is not produced by any node or input");
    g->AddOutput(v);
  }
  return Status::Ok();
}

// ---------------------------------------------------------------- attributes

StatusOr<ir::Attribute> Importer::ImportAttribute(const onnx::AttributeProto& ap, const Scope* scope,
                                                  const std::string& where) {
  if (ap.name().empty()) return InvalidArgument(where, ": attribute has no name");
  if (ap.type() == onnx::AttributeProto::UNDEFINED) return InvalidArgument(where, ": attribute has no type");
  ir::Attribute a(ap.name(), static_cast<ir::AttrType>(ap.type()));
  a.set_doc_string(ap.doc_string());
  a.set_ref_attr_name(ap.ref_attr_name());
  if (!ap.ref_attr_name().empty()) return a;  // a reference to the calling node's attribute carries no value
  switch (ap.type()) {
    case onnx::AttributeProto::FLOAT:
      a.f = ap.f();
      break;
    case onnx::AttributeProto::INT:
      a.i = ap.i();
      break;
    case onnx::AttributeProto::STRING:
      a.s = ap.s();
      break;
    case onnx::AttributeProto::TENSOR: {
      ONNXAMP_ASSIGN_OR_RETURN(a.t, ImportTensor(ap.t(), where));
      break;
    }
    case onnx::AttributeProto::GRAPH: {
      ONNXAMP_ASSIGN_OR_RETURN(a.g, ImportSubgraph(ap.g(), scope, where));
      break;
    }
    case onnx::AttributeProto::SPARSE_TENSOR: {
      ONNXAMP_ASSIGN_OR_RETURN(a.sparse_tensor, internal::SparseTensorFromProto(ap.sparse_tensor(), ext_, where));
      break;
    }
    case onnx::AttributeProto::TYPE_PROTO: {
      ONNXAMP_ASSIGN_OR_RETURN(a.tp, internal::TypeFromProto(ap.tp(), where));
      break;
    }
    case onnx::AttributeProto::FLOATS:
      a.floats.assign(ap.floats().begin(), ap.floats().end());
      break;
    case onnx::AttributeProto::INTS:
      a.ints.assign(ap.ints().begin(), ap.ints().end());
      break;
    case onnx::AttributeProto::STRINGS:
      a.strings.assign(ap.strings().begin(), ap.strings().end());
      break;
    case onnx::AttributeProto::TENSORS:
      for (int i = 0; i < ap.tensors_size(); ++i) {
        ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor t, ImportTensor(ap.tensors(i), StrCat(where, " tensor #", i)));
        a.tensors.push_back(std::move(t));
      }
      break;
    case onnx::AttributeProto::GRAPHS:
      for (int i = 0; i < ap.graphs_size(); ++i) {
        ONNXAMP_ASSIGN_OR_RETURN(std::unique_ptr<ir::Graph> g,
                                 ImportSubgraph(ap.graphs(i), scope, StrCat(where, " graph #", i)));
        a.graphs.push_back(std::move(g));
      }
      break;
    case onnx::AttributeProto::SPARSE_TENSORS:
      for (int i = 0; i < ap.sparse_tensors_size(); ++i) {
        ONNXAMP_ASSIGN_OR_RETURN(
            ir::SparseTensor t,
            internal::SparseTensorFromProto(ap.sparse_tensors(i), ext_, StrCat(where, " sparse tensor #", i)));
        a.sparse_tensors.push_back(std::move(t));
      }
      break;
    case onnx::AttributeProto::TYPE_PROTOS:
      for (int i = 0; i < ap.type_protos_size(); ++i) {
        ONNXAMP_ASSIGN_OR_RETURN(ir::ValueType t, internal::TypeFromProto(ap.type_protos(i), where));
        a.type_protos.push_back(std::move(t));
      }
      break;
    default:
      return InvalidArgument(where, ": unknown attribute type ", static_cast<int>(ap.type()));
  }
  return a;
}

// ---------------------------------------------------------------- export

class Exporter {
 public:
  // Lists the tensors it writes in `tensors` (when not null); with `defer_raw_data` it leaves their raw_data out.
  Exporter(std::vector<internal::ExportedTensor>* tensors, bool defer_raw_data)
      : tensors_(tensors), defer_raw_data_(defer_raw_data) {}

  void ExportGraph(const ir::Graph& g, onnx::GraphProto* gp);
  void ExportNodes(const ir::Graph& g, google::protobuf::RepeatedPtrField<onnx::NodeProto>* nodes);
  void ExportFunction(const ir::Function& f, onnx::FunctionProto* fp);

 private:
  void ExportAttribute(const ir::Attribute& a, onnx::AttributeProto* ap);
  void ExportTensor(const ir::Tensor& t, onnx::TensorProto* tp, bool may_be_external = true) {
    const bool defer = defer_raw_data_ && internal::WritesRawData(t);
    if (defer) {
      internal::TensorToProtoWithoutRawData(t, tp);
    } else {
      TensorToProto(t, tp);
    }
    if (tensors_ && t.dtype() != DType::kString) tensors_->push_back({tp, &t, may_be_external, defer});
  }
  void ExportSparseTensor(const ir::SparseTensor& t, onnx::SparseTensorProto* sp) {
    ExportTensor(t.values, sp->mutable_values(), false);
    ExportTensor(t.indices, sp->mutable_indices(), false);
    for (int64_t d : t.dims) sp->add_dims(d);
  }
  static void ExportValueInfo(const ir::Value& v, onnx::ValueInfoProto* vi) {
    vi->set_name(v.name());
    if (v.type().defined() || !v.type().denotation().empty()) internal::TypeToProto(v.type(), vi->mutable_type());
    if (!v.doc_string().empty()) vi->set_doc_string(v.doc_string());
  }

  std::vector<internal::ExportedTensor>* tensors_;
  const bool defer_raw_data_;
};

void Exporter::ExportNodes(const ir::Graph& g, google::protobuf::RepeatedPtrField<onnx::NodeProto>* nodes) {
  for (const ir::Node* n : g.nodes()) {
    onnx::NodeProto* np = nodes->Add();
    for (const ir::Value* v : n->inputs()) np->add_input(v ? v->name() : std::string());
    for (const ir::Value* v : n->outputs()) np->add_output(v ? v->name() : std::string());
    if (!n->name().empty()) np->set_name(n->name());
    np->set_op_type(n->op_type());
    if (!n->domain().empty()) np->set_domain(n->domain());
    if (!n->doc_string().empty()) np->set_doc_string(n->doc_string());
    for (const ir::Attribute& a : n->attributes()) ExportAttribute(a, np->add_attribute());
  }
}

void Exporter::ExportGraph(const ir::Graph& g, onnx::GraphProto* gp) {
  ExportNodes(g, gp->mutable_node());
  if (!g.name().empty()) gp->set_name(g.name());
  for (const ir::Value* v : g.initializers()) {
    onnx::TensorProto* tp = gp->add_initializer();
    ExportTensor(*v->initializer(), tp);
    tp->set_name(v->name());
  }
  for (const ir::Value* v : g.sparse_initializers()) {
    onnx::SparseTensorProto* sp = gp->add_sparse_initializer();
    ExportSparseTensor(*v->sparse_initializer(), sp);
    sp->mutable_values()->set_name(v->name());
  }
  if (!g.doc_string().empty()) gp->set_doc_string(g.doc_string());
  for (const ir::Value* v : g.inputs()) ExportValueInfo(*v, gp->add_input());
  for (const ir::Value* v : g.outputs()) ExportValueInfo(*v, gp->add_output());
  for (const ir::Value* v : g.value_info()) ExportValueInfo(*v, gp->add_value_info());
  for (const ir::TensorAnnotation& a : g.quantization_annotation()) {
    onnx::TensorAnnotation* ta = gp->add_quantization_annotation();
    ta->set_tensor_name(a.tensor_name);
    for (const auto& [k, v] : a.quant_parameter_tensor_names) {
      auto* kv = ta->add_quant_parameter_tensor_names();
      kv->set_key(k);
      kv->set_value(v);
    }
  }
}

void Exporter::ExportFunction(const ir::Function& f, onnx::FunctionProto* fp) {
  fp->set_name(f.name);
  if (f.body) {
    for (const ir::Value* v : f.body->inputs()) fp->add_input(v->name());
    for (const ir::Value* v : f.body->outputs()) fp->add_output(v->name());
  }
  for (const std::string& a : f.attributes) fp->add_attribute(a);
  if (f.body) ExportNodes(*f.body, fp->mutable_node());
  if (!f.doc_string.empty()) fp->set_doc_string(f.doc_string);
  for (const ir::OpsetImport& op : f.opset_imports) {
    auto* o = fp->add_opset_import();
    o->set_domain(op.domain);
    o->set_version(op.version);
  }
  if (!f.domain.empty()) fp->set_domain(f.domain);
}

void Exporter::ExportAttribute(const ir::Attribute& a, onnx::AttributeProto* ap) {
  ap->set_name(a.name());
  if (!a.ref_attr_name().empty()) ap->set_ref_attr_name(a.ref_attr_name());
  if (!a.doc_string().empty()) ap->set_doc_string(a.doc_string());
  ap->set_type(static_cast<onnx::AttributeProto::AttributeType>(a.type()));
  if (!a.ref_attr_name().empty()) return;
  switch (a.type()) {
    case ir::AttrType::kFloat:
      ap->set_f(a.f);
      break;
    case ir::AttrType::kInt:
      ap->set_i(a.i);
      break;
    case ir::AttrType::kString:
      ap->set_s(a.s);
      break;
    case ir::AttrType::kTensor:
      ExportTensor(a.t, ap->mutable_t());
      break;
    case ir::AttrType::kGraph:
      if (a.g) ExportGraph(*a.g, ap->mutable_g());
      break;
    case ir::AttrType::kSparseTensor:
      ExportSparseTensor(a.sparse_tensor, ap->mutable_sparse_tensor());
      break;
    case ir::AttrType::kTypeProto:
      internal::TypeToProto(a.tp, ap->mutable_tp());
      break;
    case ir::AttrType::kFloats:
      ap->mutable_floats()->Add(a.floats.begin(), a.floats.end());
      break;
    case ir::AttrType::kInts:
      ap->mutable_ints()->Add(a.ints.begin(), a.ints.end());
      break;
    case ir::AttrType::kStrings:
      for (const std::string& s : a.strings) ap->add_strings(s);
      break;
    case ir::AttrType::kTensors:
      for (const ir::Tensor& t : a.tensors) ExportTensor(t, ap->add_tensors());
      break;
    case ir::AttrType::kGraphs:
      for (const auto& g : a.graphs) {
        onnx::GraphProto* gp = ap->add_graphs();
        if (g) ExportGraph(*g, gp);
      }
      break;
    case ir::AttrType::kSparseTensors:
      for (const ir::SparseTensor& t : a.sparse_tensors) ExportSparseTensor(t, ap->add_sparse_tensors());
      break;
    case ir::AttrType::kTypeProtos:
      for (const ir::ValueType& t : a.type_protos) internal::TypeToProto(t, ap->add_type_protos());
      break;
    case ir::AttrType::kUndefined:
      break;
  }
}

}  // namespace

namespace internal {

StatusOr<ir::ValueType> TypeFromProto(const onnx::TypeProto& proto, const std::string& where) {
  ir::ValueType type;
  switch (proto.value_case()) {
    case onnx::TypeProto::kTensorType: {
      const auto& t = proto.tensor_type();
      ONNXAMP_ASSIGN_OR_RETURN(DType elem, ElemTypeFromCode(t.elem_type(), where));
      type = ir::ValueType::Tensor(elem, t.has_shape() ? std::optional(ShapeFromProto(t.shape())) : std::nullopt);
      break;
    }
    case onnx::TypeProto::kSparseTensorType: {
      const auto& t = proto.sparse_tensor_type();
      ONNXAMP_ASSIGN_OR_RETURN(DType elem, ElemTypeFromCode(t.elem_type(), where));
      type = ir::ValueType::SparseTensor(elem, t.has_shape() ? std::optional(ShapeFromProto(t.shape())) : std::nullopt);
      break;
    }
    case onnx::TypeProto::kSequenceType: {
      ir::ValueType inner;
      if (proto.sequence_type().has_elem_type()) {
        ONNXAMP_ASSIGN_OR_RETURN(inner, TypeFromProto(proto.sequence_type().elem_type(), where));
      }
      type = ir::ValueType::Sequence(std::move(inner));
      break;
    }
    case onnx::TypeProto::kOptionalType: {
      ir::ValueType inner;
      if (proto.optional_type().has_elem_type()) {
        ONNXAMP_ASSIGN_OR_RETURN(inner, TypeFromProto(proto.optional_type().elem_type(), where));
      }
      type = ir::ValueType::Optional(std::move(inner));
      break;
    }
    case onnx::TypeProto::kMapType: {
      const auto& m = proto.map_type();
      ONNXAMP_ASSIGN_OR_RETURN(DType key, ElemTypeFromCode(m.key_type(), where));
      ir::ValueType value;
      if (m.has_value_type()) {
        ONNXAMP_ASSIGN_OR_RETURN(value, TypeFromProto(m.value_type(), where));
      }
      type = ir::ValueType::Map(key, std::move(value));
      break;
    }
    case onnx::TypeProto::kOpaqueType:
      return Unimplemented(where, ": opaque types (domain '", proto.opaque_type().domain(), "', name '",
                           proto.opaque_type().name(), "') are not supported");
    case onnx::TypeProto::VALUE_NOT_SET:
      break;
  }
  type.set_denotation(proto.denotation());
  return type;
}

void TypeToProto(const ir::ValueType& type, onnx::TypeProto* proto) {
  auto inner_to_proto = [](const ir::ValueType* inner, auto* holder, auto mutable_fn) {
    if (inner && (inner->defined() || !inner->denotation().empty())) TypeToProto(*inner, (holder->*mutable_fn)());
  };
  switch (type.kind()) {
    case ir::ValueType::Kind::kTensor:
      TensorTypeToProto(type, proto->mutable_tensor_type());
      break;
    case ir::ValueType::Kind::kSparseTensor:
      TensorTypeToProto(type, proto->mutable_sparse_tensor_type());
      break;
    case ir::ValueType::Kind::kSequence:
      inner_to_proto(type.inner(), proto->mutable_sequence_type(), &onnx::TypeProto::Sequence::mutable_elem_type);
      break;
    case ir::ValueType::Kind::kOptional:
      inner_to_proto(type.inner(), proto->mutable_optional_type(), &onnx::TypeProto::Optional::mutable_elem_type);
      break;
    case ir::ValueType::Kind::kMap: {
      auto* m = proto->mutable_map_type();
      if (type.map_key_type() != DType::kUndefined) m->set_key_type(static_cast<int32_t>(type.map_key_type()));
      inner_to_proto(type.inner(), m, &onnx::TypeProto::Map::mutable_value_type);
      break;
    }
    case ir::ValueType::Kind::kUndefined:
      break;
  }
  if (!type.denotation().empty()) proto->set_denotation(type.denotation());
}

void ModelToProtoCollect(const ir::Model& model, onnx::ModelProto* proto, std::vector<ExportedTensor>* tensors,
                         bool defer_raw_data) {
  proto->Clear();
  proto->set_ir_version(model.ir_version);
  for (const ir::OpsetImport& op : model.opset_imports) {
    auto* o = proto->add_opset_import();
    o->set_domain(op.domain);
    o->set_version(op.version);
  }
  if (!model.producer_name.empty()) proto->set_producer_name(model.producer_name);
  if (!model.producer_version.empty()) proto->set_producer_version(model.producer_version);
  if (!model.domain.empty()) proto->set_domain(model.domain);
  if (model.model_version != 0) proto->set_model_version(model.model_version);
  if (!model.doc_string.empty()) proto->set_doc_string(model.doc_string);
  Exporter exporter(tensors, defer_raw_data);
  if (model.graph) exporter.ExportGraph(*model.graph, proto->mutable_graph());
  for (const auto& [k, v] : model.metadata_props) {
    auto* kv = proto->add_metadata_props();
    kv->set_key(k);
    kv->set_value(v);
  }
  for (const std::string& bytes : model.training_info) proto->add_training_info()->ParseFromString(bytes);
  for (const ir::Function& f : model.functions) exporter.ExportFunction(f, proto->add_functions());
}

}  // namespace internal

namespace {

// ModelFromProto; `consume` as for Importer.
StatusOr<ir::Model> ImportModel(const onnx::ModelProto& proto, const ExternalDataContext& ext, bool consume) {
  if (!proto.has_graph()) return InvalidArgument("not an ONNX model: the ModelProto has no graph");
  if (!proto.has_ir_version()) return InvalidArgument("the model has no ir_version");
  if (proto.ir_version() < kMinIrVersion || proto.ir_version() > kMaxIrVersion) {
    return Unimplemented("unsupported IR version ", proto.ir_version(), " (supported: ", kMinIrVersion, " to ",
                         kMaxIrVersion, ")");
  }
  if (proto.opset_import_size() == 0) {
    return InvalidArgument("the model imports no opset (opset_import is empty; is the file truncated?)");
  }
  ir::Model model;
  model.ir_version = proto.ir_version();
  for (const auto& op : proto.opset_import()) {
    if (ir::IsDefaultDomain(op.domain()) && (op.version() < 1 || op.version() > kMaxDefaultOpset)) {
      return Unimplemented("unsupported default-domain opset ", op.version(), " (supported: 1 to ", kMaxDefaultOpset,
                           ")");
    }
    model.opset_imports.push_back({op.domain(), op.version()});
  }
  model.producer_name = proto.producer_name();
  model.producer_version = proto.producer_version();
  model.domain = proto.domain();
  model.model_version = proto.model_version();
  model.doc_string = proto.doc_string();
  for (const auto& kv : proto.metadata_props()) model.metadata_props.emplace_back(kv.key(), kv.value());
  for (const auto& ti : proto.training_info()) {
    std::string bytes;
    google::protobuf::io::StringOutputStream stream(&bytes);
    {
      google::protobuf::io::CodedOutputStream coded(&stream);
      coded.SetSerializationDeterministic(true);
      ti.SerializeToCodedStream(&coded);
    }
    model.training_info.push_back(std::move(bytes));
  }
  Importer importer(ext, consume);
  model.graph = std::make_unique<ir::Graph>();
  ONNXAMP_RETURN_IF_ERROR(importer.ImportGraph(proto.graph(), model.graph.get(), nullptr, ""));
  for (int i = 0; i < proto.functions_size(); ++i) {
    const onnx::FunctionProto& fp = proto.functions(i);
    ir::Function f;
    ONNXAMP_RETURN_IF_ERROR(importer.ImportFunction(fp, &f, StrCat("function '", fp.domain(), ":", fp.name(), "'")));
    model.functions.push_back(std::move(f));
  }
  return model;
}

}  // namespace

StatusOr<ir::Model> ModelFromProto(const onnx::ModelProto& proto, const ExternalDataContext& ext) {
  return ImportModel(proto, ext, /*consume=*/false);
}

StatusOr<ir::Model> ModelFromProto(onnx::ModelProto&& proto, const ExternalDataContext& ext) {
  return ImportModel(proto, ext, /*consume=*/true);
}

void ModelToProto(const ir::Model& model, onnx::ModelProto* proto) {
  internal::ModelToProtoCollect(model, proto, nullptr);
}

}  // namespace onnxamp::importer
