// ModelProto <-> ir::Model: metadata, types, every attribute kind, subgraphs with outer-scope references,
// functions, optional inputs, and the graph-structure errors the importer catches itself.
#include <google/protobuf/util/message_differencer.h>

#include "importer/model_io.h"
#include "importer/onnx_proto.h"
#include "proto_builders.h"
#include "runtime/ir/verify.h"

namespace onnxamp::importer {
namespace {

using testing::AddInput;
using testing::AddNode;
using testing::AddOutput;
using ::testing::HasSubstr;
using testing::MakeModel;

const ExternalDataContext kNoExternal{};

// Imports `proto`, exports it again, and expects the very same message.
void ExpectRoundTrip(const onnx::ModelProto& proto) {
  StatusOr<ir::Model> model = ModelFromProto(proto, kNoExternal);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_TRUE(ir::Verify(*model).ok()) << ir::Verify(*model).ToString();
  onnx::ModelProto back;
  ModelToProto(*model, &back);
  std::string diff;
  google::protobuf::util::MessageDifferencer differ;
  differ.ReportDifferencesToString(&diff);
  EXPECT_TRUE(differ.Compare(proto, back)) << diff;
}

TEST(ModelProto, MetadataAndOpsetsRoundTrip) {
  onnx::ModelProto m = testing::MakeReluModel();
  m.set_ir_version(9);
  auto* custom = m.add_opset_import();
  custom->set_domain("com.example");
  custom->set_version(3);
  auto* ml = m.add_opset_import();
  ml->set_domain("ai.onnx.ml");
  ml->set_version(4);
  m.set_producer_name("producer");
  m.set_producer_version("1.2.3");
  m.set_domain("org.example");
  m.set_model_version(42);
  m.set_doc_string("a model");
  for (const char* k : {"zeta", "alpha", "mid"}) {
    auto* kv = m.add_metadata_props();
    kv->set_key(k);
    kv->set_value(std::string(k) + "_value");
  }
  m.mutable_graph()->set_doc_string("the graph");
  m.mutable_graph()->mutable_input(0)->set_doc_string("input doc");
  auto* ti = m.add_training_info();
  ti->mutable_algorithm()->set_name("step");
  auto* bind = ti->add_update_binding();
  bind->set_key("w");
  bind->set_value("w_new");

  StatusOr<ir::Model> model = ModelFromProto(m, kNoExternal);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ(model->ir_version, 9);
  ASSERT_EQ(model->opset_imports.size(), 3u);
  EXPECT_EQ(model->opset_imports[1], (ir::OpsetImport{"com.example", 3}));
  EXPECT_EQ(model->OpsetVersion("ai.onnx.ml"), 4);
  EXPECT_EQ(model->metadata_props[0].first, "zeta");
  EXPECT_EQ(model->graph->name(), "main");
  EXPECT_EQ(model->graph->inputs()[0]->doc_string(), "input doc");
  ASSERT_EQ(model->training_info.size(), 1u);
  ExpectRoundTrip(m);
}

TEST(ModelProto, ValueTypesRoundTrip) {
  onnx::ModelProto m = MakeModel();
  auto* g = m.mutable_graph();
  // tensor with symbolic, unknown and denoted dims and a type denotation
  auto* x = g->add_input();
  x->set_name("x");
  auto* tt = x->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT16);
  tt->mutable_shape()->add_dim()->set_dim_param("batch");
  tt->mutable_shape()->add_dim();
  auto* d = tt->mutable_shape()->add_dim();
  d->set_dim_value(3);
  d->set_denotation("DATA_CHANNEL");
  x->mutable_type()->set_denotation("IMAGE");
  // scalar (shape present, no dims) and unknown rank (no shape)
  AddInput(g, "scalar", onnx::TensorProto::INT64, {});
  g->add_input()->set_name("unknown_rank");
  g->mutable_input(2)->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::BOOL);
  // sequence of tensors, map of int64 -> tensor, optional of sequence, sparse tensor, no type at all
  auto* seq = g->add_input();
  seq->set_name("seq");
  seq->mutable_type()->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(1);
  auto* map = g->add_input();
  map->set_name("map");
  map->mutable_type()->mutable_map_type()->set_key_type(onnx::TensorProto::INT64);
  testing::SetTensorType(map->mutable_type()->mutable_map_type()->mutable_value_type(), 1, {4});
  auto* opt = g->add_input();
  opt->set_name("opt");
  opt->mutable_type()
      ->mutable_optional_type()
      ->mutable_elem_type()
      ->mutable_sequence_type()
      ->mutable_elem_type()
      ->mutable_tensor_type()
      ->set_elem_type(onnx::TensorProto::BFLOAT16);
  auto* sparse = g->add_input();
  sparse->set_name("sparse");
  sparse->mutable_type()->mutable_sparse_tensor_type()->set_elem_type(1);
  sparse->mutable_type()->mutable_sparse_tensor_type()->mutable_shape()->add_dim()->set_dim_value(10);
  g->add_input()->set_name("untyped");
  AddNode(g, "Identity", {"x"}, {"t"});
  AddNode(g, "Identity", {"t"}, {"y"});
  AddOutput(g, "y", onnx::TensorProto::FLOAT16, {});
  auto* vi = g->add_value_info();
  vi->set_name("t");
  testing::SetTensorType(vi->mutable_type(), onnx::TensorProto::FLOAT16, {7});

  StatusOr<ir::Model> model = ModelFromProto(m, kNoExternal);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const auto& in = model->graph->inputs();
  ASSERT_EQ(in.size(), 8u);
  EXPECT_EQ(in[0]->type().ToString(), "tensor(float16)[batch,?,3]");
  EXPECT_EQ(in[0]->type().denotation(), "IMAGE");
  EXPECT_EQ((*in[0]->type().shape())[2].denotation, "DATA_CHANNEL");
  EXPECT_EQ(in[1]->type().ToString(), "tensor(int64)[]");
  EXPECT_FALSE(in[2]->type().shape().has_value());
  EXPECT_EQ(in[3]->type().ToString(), "seq(tensor(float)[*])");
  EXPECT_EQ(in[4]->type().ToString(), "map(int64,tensor(float)[4])");
  EXPECT_EQ(in[5]->type().ToString(), "optional(seq(tensor(bfloat16)[*]))");
  EXPECT_EQ(in[6]->type().ToString(), "sparse_tensor(float)[10]");
  EXPECT_FALSE(in[7]->type().defined());
  ExpectRoundTrip(m);
}

TEST(ModelProto, UnknownElementTypeIsRefused) {
  onnx::ModelProto m = testing::MakeReluModel();
  m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(99);
  StatusOr<ir::Model> model = ModelFromProto(m, kNoExternal);
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(), HasSubstr("graph input 'x': unknown data_type code 99"));
}

// One node carrying every attribute kind.
onnx::ModelProto MakeAllAttributesModel() {
  onnx::ModelProto m = MakeModel();
  auto* dom = m.add_opset_import();
  dom->set_domain("test.attrs");
  dom->set_version(1);
  auto* g = m.mutable_graph();
  AddInput(g, "x");
  auto* n = AddNode(g, "Everything", {"x"}, {"y"}, "all");
  n->set_domain("test.attrs");
  n->set_doc_string("every attribute kind");
  auto add = [&](const char* name, onnx::AttributeProto::AttributeType type) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(type);
    return a;
  };
  add("f", onnx::AttributeProto::FLOAT)->set_f(-0.25f);
  add("i", onnx::AttributeProto::INT)->set_i(-7);
  add("s", onnx::AttributeProto::STRING)->set_s(std::string("bytes\0\xfe", 7));
  *add("t", onnx::AttributeProto::TENSOR)->mutable_t() = testing::FloatTensor("tv", {2}, {1, 2});
  {
    auto* body = add("g", onnx::AttributeProto::GRAPH)->mutable_g();
    body->set_name("sub");
    AddNode(body, "Neg", {"x"}, {"nx"});
    AddOutput(body, "nx");
  }
  auto* floats = add("floats", onnx::AttributeProto::FLOATS);
  floats->add_floats(1.5f);
  floats->add_floats(-2);
  auto* ints = add("ints", onnx::AttributeProto::INTS);
  ints->add_ints(1);
  ints->add_ints(-1);
  ints->add_ints(INT64_MAX);
  auto* strings = add("strings", onnx::AttributeProto::STRINGS);
  strings->add_strings("a");
  strings->add_strings("");
  auto* tensors = add("tensors", onnx::AttributeProto::TENSORS);
  *tensors->add_tensors() = testing::FloatTensor("", {1}, {3});
  auto* typed = tensors->add_tensors();
  typed->set_data_type(onnx::TensorProto::INT64);
  typed->add_int64_data(5);
  auto* graphs = add("graphs", onnx::AttributeProto::GRAPHS);
  for (const char* op : {"Abs", "Sqrt"}) {
    auto* sg = graphs->add_graphs();
    AddInput(sg, "in");
    AddNode(sg, op, {"in"}, {"out"});
    AddOutput(sg, "out");
  }
  auto make_sparse = [](onnx::SparseTensorProto* sp) {
    *sp->mutable_values() = testing::FloatTensor("sv", {2}, {4, 5});
    sp->mutable_indices()->set_data_type(onnx::TensorProto::INT64);
    sp->mutable_indices()->add_dims(2);
    sp->mutable_indices()->add_int64_data(1);
    sp->mutable_indices()->add_int64_data(3);
    sp->add_dims(6);
  };
  make_sparse(add("sparse", onnx::AttributeProto::SPARSE_TENSOR)->mutable_sparse_tensor());
  auto* sparses = add("sparses", onnx::AttributeProto::SPARSE_TENSORS);
  make_sparse(sparses->add_sparse_tensors());
  make_sparse(sparses->add_sparse_tensors());
  testing::SetTensorType(add("tp", onnx::AttributeProto::TYPE_PROTO)->mutable_tp(), 10, {2, 3});
  auto* tps = add("tps", onnx::AttributeProto::TYPE_PROTOS);
  testing::SetTensorType(tps->add_type_protos(), 1, {});
  tps->add_type_protos()->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(7);
  auto* documented = add("documented", onnx::AttributeProto::INT);
  documented->set_i(1);
  documented->set_doc_string("attribute doc");
  AddOutput(g, "y");
  return m;
}

TEST(ModelProto, EveryAttributeKindRoundTrips) {
  onnx::ModelProto m = MakeAllAttributesModel();
  StatusOr<ir::Model> model = ModelFromProto(m, kNoExternal);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const ir::Node* n = *model->graph->nodes().begin();
  EXPECT_EQ(n->domain(), "test.attrs");
  EXPECT_EQ(n->doc_string(), "every attribute kind");
  ASSERT_EQ(n->attributes().size(), 15u);
  EXPECT_EQ(n->GetFloat("f", 0), -0.25f);
  EXPECT_EQ(n->GetInt("i", 0), -7);
  EXPECT_EQ(n->GetString("s", ""), std::string("bytes\0\xfe", 7));
  EXPECT_EQ(n->FindAttribute("t")->t.values<float>()[1], 2.0f);
  const ir::Graph* sub = n->FindAttribute("g")->g.get();
  ASSERT_NE(sub, nullptr);
  EXPECT_EQ(sub->parent_node(), n);
  EXPECT_EQ(n->FindAttribute("floats")->floats, (std::vector<float>{1.5f, -2}));
  EXPECT_EQ(n->GetInts("ints"), (std::vector<int64_t>{1, -1, INT64_MAX}));
  EXPECT_EQ(n->FindAttribute("strings")->strings, (std::vector<std::string>{"a", ""}));
  EXPECT_EQ(n->FindAttribute("tensors")->tensors[1].encoding(), ir::TensorEncoding::kTyped);
  EXPECT_EQ(n->FindAttribute("graphs")->graphs.size(), 2u);
  EXPECT_EQ(n->FindAttribute("sparse")->sparse_tensor.dims, (std::vector<int64_t>{6}));
  EXPECT_EQ(n->FindAttribute("sparses")->sparse_tensors.size(), 2u);
  EXPECT_EQ(n->FindAttribute("tp")->tp.ToString(), "tensor(float16)[2,3]");
  EXPECT_EQ(n->FindAttribute("tps")->type_protos[1].ToString(), "seq(tensor(int64)[*])");
  EXPECT_EQ(n->FindAttribute("documented")->doc_string(), "attribute doc");
  ExpectRoundTrip(m);
}

TEST(ModelProto, AttributeWithoutTypeOrTwiceIsRefused) {
  onnx::ModelProto m = testing::MakeReluModel();
  auto* a = m.mutable_graph()->mutable_node(0)->add_attribute();
  a->set_name("alpha");
  a->set_f(1);
  StatusOr<ir::Model> model = ModelFromProto(m, kNoExternal);
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(), HasSubstr("node 'relu' (Relu) attribute 'alpha': attribute has no type"));
  a->set_type(onnx::AttributeProto::FLOAT);
  *m.mutable_graph()->mutable_node(0)->add_attribute() = *a;
  model = ModelFromProto(m, kNoExternal);
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(), HasSubstr("node 'relu' (Relu): attribute 'alpha' appears more than once"));
}

TEST(ModelProto, InitializersSparseInitializersAndAnnotationsKeepFileOrder) {
  onnx::ModelProto m = MakeModel(17, 3);  // IR 3: initializers are also listed as inputs
  auto* g = m.mutable_graph();
  AddInput(g, "b", 1, {2});
  AddInput(g, "a", 1, {2});
  *g->add_initializer() = testing::FloatTensor("b", {2}, {1, 2});
  *g->add_initializer() = testing::FloatTensor("a", {2}, {3, 4});
  auto* sp = g->add_sparse_initializer();
  *sp->mutable_values() = testing::FloatTensor("s", {1}, {9});
  sp->mutable_indices()->set_data_type(onnx::TensorProto::INT64);
  sp->mutable_indices()->add_dims(1);
  sp->mutable_indices()->add_int64_data(1);
  sp->add_dims(2);
  AddNode(g, "Add", {"a", "b"}, {"c"});
  AddNode(g, "Add", {"c", "s"}, {"d"});
  AddOutput(g, "d");
  auto* qa = g->add_quantization_annotation();
  qa->set_tensor_name("c");
  auto* kv = qa->add_quant_parameter_tensor_names();
  kv->set_key("SCALE_TENSOR");
  kv->set_value("a");
  StatusOr<ir::Model> model = ModelFromProto(m, kNoExternal);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  ASSERT_EQ(model->graph->initializers().size(), 2u);
  EXPECT_EQ(model->graph->initializers()[0]->name(), "b");
  EXPECT_TRUE(model->graph->initializers()[0]->is_graph_input());
  ASSERT_EQ(model->graph->sparse_initializers().size(), 1u);
  EXPECT_EQ(model->graph->quantization_annotation()[0].quant_parameter_tensor_names[0].first, "SCALE_TENSOR");
  ExpectRoundTrip(m);
}

TEST(ModelProto, OmittedOptionalInputsAndOutputsAreNull) {
  onnx::ModelProto m = MakeModel();
  auto* g = m.mutable_graph();
  AddInput(g, "x");
  AddNode(g, "Clip", {"x", "", "hi"}, {"y"});
  *g->add_initializer() = testing::FloatTensor("hi", {}, {6});
  AddNode(g, "Dropout", {"y"}, {"z", ""});
  AddOutput(g, "z");
  StatusOr<ir::Model> model = ModelFromProto(m, kNoExternal);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const ir::Node* clip = *model->graph->nodes().begin();
  ASSERT_EQ(clip->inputs().size(), 3u);
  EXPECT_EQ(clip->input(1), nullptr);
  EXPECT_EQ(clip->input(2)->name(), "hi");
  const ir::Node* dropout = *++model->graph->nodes().begin();
  ASSERT_EQ(dropout->outputs().size(), 2u);
  EXPECT_EQ(dropout->output(1), nullptr);
  ExpectRoundTrip(m);
}

TEST(ModelProto, UseBeforeDefinitionImportsAndKeepsFileOrder) {
  onnx::ModelProto m = MakeModel();
  auto* g = m.mutable_graph();
  AddInput(g, "x");
  AddNode(g, "Neg", {"t"}, {"y"}, "uses_t");  // t comes from the next node
  AddNode(g, "Relu", {"x"}, {"t"}, "defines_t");
  AddOutput(g, "y");
  StatusOr<ir::Model> model = ModelFromProto(m, kNoExternal);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const ir::Node* first = *model->graph->nodes().begin();
  EXPECT_EQ(first->name(), "uses_t");
  EXPECT_EQ(first->input(0)->producer()->name(), "defines_t");
  EXPECT_TRUE(ir::Verify(*model).ok());  // out of order, but acyclic
  ExpectRoundTrip(m);
}

// x, w at the top level; an If whose branches read them from the outer scope, the else branch through a nested
// Loop whose body reads x two levels up.
onnx::ModelProto MakeOuterScopeModel() {
  onnx::ModelProto m = MakeModel();
  auto* g = m.mutable_graph();
  AddInput(g, "x");
  AddInput(g, "cond", onnx::TensorProto::BOOL, {});
  *g->add_initializer() = testing::FloatTensor("w", {2}, {1, 2});
  auto* if_node = AddNode(g, "If", {"cond"}, {"y"}, "if");
  auto* then_attr = if_node->add_attribute();
  then_attr->set_name("then_branch");
  then_attr->set_type(onnx::AttributeProto::GRAPH);
  auto* then_g = then_attr->mutable_g();
  then_g->set_name("then");
  AddNode(then_g, "Add", {"x", "w"}, {"then_out"});
  AddOutput(then_g, "then_out");
  auto* else_attr = if_node->add_attribute();
  else_attr->set_name("else_branch");
  else_attr->set_type(onnx::AttributeProto::GRAPH);
  auto* else_g = else_attr->mutable_g();
  else_g->set_name("else");
  auto* loop = AddNode(else_g, "Loop", {"", "cond"}, {"loop_out"}, "loop");
  auto* body_attr = loop->add_attribute();
  body_attr->set_name("body");
  body_attr->set_type(onnx::AttributeProto::GRAPH);
  auto* body = body_attr->mutable_g();
  body->set_name("body");
  AddInput(body, "iter", onnx::TensorProto::INT64, {});
  AddInput(body, "cond_in", onnx::TensorProto::BOOL, {});
  AddNode(body, "Identity", {"cond_in"}, {"cond_out"});
  AddNode(body, "Neg", {"x"}, {"scan_out"});
  AddOutput(body, "cond_out", onnx::TensorProto::BOOL, {});
  AddOutput(body, "scan_out");
  AddOutput(else_g, "loop_out");
  AddOutput(g, "y");
  return m;
}

TEST(ModelProto, SubgraphsReferenceOuterScopeValues) {
  onnx::ModelProto m = MakeOuterScopeModel();
  StatusOr<ir::Model> model = ModelFromProto(m, kNoExternal);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  ASSERT_TRUE(ir::Verify(*model).ok()) << ir::Verify(*model).ToString();
  ir::Graph& top = *model->graph;
  const ir::Node* if_node = *top.nodes().begin();
  ASSERT_EQ(if_node->subgraphs().size(), 2u);
  const ir::Graph* then_g = if_node->subgraphs()[0];
  const ir::Value* outer_x = then_g->FindValue("x");
  ASSERT_NE(outer_x, nullptr);
  EXPECT_TRUE(outer_x->is_outer_scope());
  EXPECT_EQ(then_g->ResolveValue("w"), top.FindValue("w"));
  const ir::Graph* else_g = if_node->subgraphs()[1];
  EXPECT_EQ(else_g->FindValue("x"), nullptr);  // only the Loop body reads x
  const ir::Graph* body = (*else_g->nodes().begin())->subgraphs()[0];
  ASSERT_NE(body->FindValue("x"), nullptr);
  EXPECT_TRUE(body->FindValue("x")->is_outer_scope());
  EXPECT_EQ(body->ResolveValue("x"), top.FindValue("x"));
  std::vector<ir::Value*> implicit = top.ImplicitInputs(if_node);
  EXPECT_EQ(implicit.size(), 3u);  // cond, plus x and w from the branches
  ExpectRoundTrip(m);
}

TEST(ModelProto, SubgraphReferenceToAnUndefinedNameIsRefused) {
  onnx::ModelProto m = MakeOuterScopeModel();
  auto* body = m.mutable_graph()
                   ->mutable_node(0)
                   ->mutable_attribute(1)
                   ->mutable_g()
                   ->mutable_node(0)
                   ->mutable_attribute(0)
                   ->mutable_g();
  body->mutable_node(1)->set_input(0, "nowhere");
  StatusOr<ir::Model> model = ModelFromProto(m, kNoExternal);
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(), HasSubstr("node 'if' (If) attribute 'else_branch': node 'loop' (Loop) "
                                                  "attribute 'body': node #1 (Neg, output 'scan_out'): input "
                                                  "'nowhere' is not produced by any node, graph input or initializer"));
}

TEST(ModelProto, SubgraphCannotReadAValueOfASiblingBranch) {
  onnx::ModelProto m = MakeOuterScopeModel();
  // The else branch reads "then_out", which only the then branch defines.
  m.mutable_graph()->mutable_node(0)->mutable_attribute(1)->mutable_g()->mutable_output(0)->set_name("then_out");
  StatusOr<ir::Model> model = ModelFromProto(m, kNoExternal);
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(), HasSubstr("graph output 'then_out'"));
}

// A model-local function Scale(x) = Mul(x, Constant(value_float = @alpha)), called from the graph.
onnx::ModelProto MakeFunctionModel() {
  onnx::ModelProto m = MakeModel();
  auto* local = m.add_opset_import();
  local->set_domain("local");
  local->set_version(1);
  auto* f = m.add_functions();
  f->set_name("Scale");
  f->set_domain("local");
  f->set_doc_string("multiplies by alpha");
  f->add_input("X");
  f->add_output("Y");
  f->add_attribute("alpha");
  auto* fop = f->add_opset_import();
  fop->set_domain("");
  fop->set_version(17);
  auto* c = f->add_node();
  c->set_op_type("Constant");
  c->add_output("A");
  auto* ref = c->add_attribute();
  ref->set_name("value_float");
  ref->set_type(onnx::AttributeProto::FLOAT);
  ref->set_ref_attr_name("alpha");
  auto* mul = f->add_node();
  mul->set_op_type("Mul");
  mul->add_input("X");
  mul->add_input("A");
  mul->add_output("Y");
  auto* g = m.mutable_graph();
  AddInput(g, "x");
  auto* call = AddNode(g, "Scale", {"x"}, {"y"}, "call");
  call->set_domain("local");
  auto* alpha = call->add_attribute();
  alpha->set_name("alpha");
  alpha->set_type(onnx::AttributeProto::FLOAT);
  alpha->set_f(2);
  AddOutput(g, "y");
  return m;
}

TEST(ModelProto, FunctionsRoundTrip) {
  onnx::ModelProto m = MakeFunctionModel();
  StatusOr<ir::Model> model = ModelFromProto(m, kNoExternal);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  ASSERT_EQ(model->functions.size(), 1u);
  const ir::Function& f = model->functions[0];
  EXPECT_EQ(f.name, "Scale");
  EXPECT_EQ(f.domain, "local");
  EXPECT_EQ(f.attributes, std::vector<std::string>{"alpha"});
  EXPECT_EQ(f.opset_imports[0], (ir::OpsetImport{"", 17}));
  ASSERT_EQ(f.body->inputs().size(), 1u);
  EXPECT_FALSE(f.body->inputs()[0]->type().defined());
  EXPECT_EQ(f.body->outputs()[0]->producer()->op_type(), "Mul");
  const ir::Attribute* ref = (*f.body->nodes().begin())->FindAttribute("value_float");
  ASSERT_NE(ref, nullptr);
  EXPECT_EQ(ref->ref_attr_name(), "alpha");
  EXPECT_TRUE(ir::Verify(*model).ok()) << ir::Verify(*model).ToString();
  ExpectRoundTrip(m);
}

TEST(ModelProto, FunctionBodyErrorsNameTheFunction) {
  onnx::ModelProto m = MakeFunctionModel();
  m.mutable_functions(0)->mutable_node(1)->set_input(1, "B");
  StatusOr<ir::Model> model = ModelFromProto(m, kNoExternal);
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(), HasSubstr("function 'local:Scale': node #1 (Mul, output 'Y'): input 'B'"));
}

TEST(ModelProto, ModelWithoutGraphIsNotAModel) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  StatusOr<ir::Model> model = ModelFromProto(m, kNoExternal);
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(), HasSubstr("no graph"));
}

TEST(ModelProto, IrVersionAndOpsetLimits) {
  for (int64_t ir : {int64_t{0}, int64_t{2}, kMaxIrVersion + 1}) {
    onnx::ModelProto m = testing::MakeReluModel();
    m.set_ir_version(ir);
    StatusOr<ir::Model> model = ModelFromProto(m, kNoExternal);
    ASSERT_FALSE(model.ok()) << ir;
    EXPECT_THAT(model.status().message(), HasSubstr("unsupported IR version " + std::to_string(ir)));
  }
  for (int64_t ir = kMinIrVersion; ir <= kMaxIrVersion; ++ir) {
    onnx::ModelProto m = testing::MakeReluModel();
    m.set_ir_version(ir);
    EXPECT_TRUE(ModelFromProto(m, kNoExternal).ok()) << ir;
  }
  onnx::ModelProto m = testing::MakeReluModel();
  m.mutable_opset_import(0)->set_version(kMaxDefaultOpset + 1);
  StatusOr<ir::Model> model = ModelFromProto(m, kNoExternal);
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(), HasSubstr("default-domain opset " + std::to_string(kMaxDefaultOpset + 1)));
  m.mutable_opset_import(0)->set_domain("ai.onnx");
  EXPECT_FALSE(ModelFromProto(m, kNoExternal).ok());
  m.mutable_opset_import(0)->set_version(kMaxDefaultOpset);
  EXPECT_TRUE(ModelFromProto(m, kNoExternal).ok());
  m.clear_opset_import();
  EXPECT_THAT(ModelFromProto(m, kNoExternal).status().message(), HasSubstr("imports no opset"));
}

TEST(ModelProto, NodeInputNothingProducesIsRefused) {
  onnx::ModelProto m = testing::MakeReluModel();
  m.mutable_graph()->mutable_node(0)->set_input(0, "ghost");
  StatusOr<ir::Model> model = ModelFromProto(m, kNoExternal);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().message(),
            "node 'relu' (Relu): input 'ghost' is not produced by any node, graph input or initializer");
}

TEST(ModelProto, NodeOutputDefinedTwiceIsRefused) {
  onnx::ModelProto m = testing::MakeReluModel();
  AddNode(m.mutable_graph(), "Neg", {"x"}, {"y"}, "neg");
  StatusOr<ir::Model> model = ModelFromProto(m, kNoExternal);
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(), HasSubstr("node 'neg' (Neg): output 'y' is already defined by node 'relu'"));
}

TEST(ModelProto, NodeOutputThatIsAGraphInputIsRefused) {
  onnx::ModelProto m = testing::MakeReluModel();
  AddNode(m.mutable_graph(), "Neg", {"y"}, {"x"}, "neg");
  StatusOr<ir::Model> model = ModelFromProto(m, kNoExternal);
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(), HasSubstr("node 'neg' (Neg): output 'x' is already defined by a graph input"));
}

TEST(ModelProto, NodeOutputThatIsAnInitializerIsRefused) {
  onnx::ModelProto m = testing::MakeAddModel();
  AddNode(m.mutable_graph(), "Neg", {"x"}, {"w"}, "neg");
  StatusOr<ir::Model> model = ModelFromProto(m, kNoExternal);
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(), HasSubstr("node 'neg' (Neg): output 'w' is already defined by an initializer"));
}

TEST(ModelProto, SameOutputTwiceInOneNodeIsRefused) {
  onnx::ModelProto m = testing::MakeReluModel();
  AddNode(m.mutable_graph(), "Split", {"x"}, {"a", "a"}, "split");
  StatusOr<ir::Model> model = ModelFromProto(m, kNoExternal);
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(), HasSubstr("node 'split' (Split): output 'a' is already defined by this node"));
}

TEST(ModelProto, DuplicateInitializerAndInputAreRefused) {
  onnx::ModelProto m = testing::MakeAddModel();
  *m.mutable_graph()->add_initializer() = testing::FloatTensor("w", {4}, {0, 0, 0, 0});
  StatusOr<ir::Model> model = ModelFromProto(m, kNoExternal);
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(), HasSubstr("initializer 'w': is defined twice"));
  m = testing::MakeReluModel();
  AddInput(m.mutable_graph(), "x");
  model = ModelFromProto(m, kNoExternal);
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(), HasSubstr("graph input 'x': is listed twice"));
}

TEST(ModelProto, GraphOutputAndValueInfoMustNameValues) {
  onnx::ModelProto m = testing::MakeReluModel();
  m.mutable_graph()->mutable_output(0)->set_name("missing");
  StatusOr<ir::Model> model = ModelFromProto(m, kNoExternal);
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(), HasSubstr("graph output 'missing': is not produced"));
  m = testing::MakeReluModel();
  m.mutable_graph()->add_value_info()->set_name("stray");
  model = ModelFromProto(m, kNoExternal);
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(), HasSubstr("value_info 'stray'"));
}

TEST(ModelProto, InitializerErrorsNameTheInitializer) {
  onnx::ModelProto m = testing::MakeAddModel(4);
  m.mutable_graph()->mutable_initializer(0)->mutable_raw_data()->resize(12);
  StatusOr<ir::Model> model = ModelFromProto(m, kNoExternal);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().message(), "initializer 'w': raw_data has 12 bytes, expected 16 for float dims [4]");
}

TEST(ModelProto, CycleImportsButFailsVerification) {
  onnx::ModelProto m = MakeModel();
  auto* g = m.mutable_graph();
  AddInput(g, "x");
  AddNode(g, "Add", {"x", "b"}, {"a"}, "first");
  AddNode(g, "Relu", {"a"}, {"b"}, "second");
  AddOutput(g, "b");
  StatusOr<ir::Model> model = ModelFromProto(m, kNoExternal);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  Status verified = ir::Verify(*model);
  ASSERT_FALSE(verified.ok());
  EXPECT_THAT(verified.message(), HasSubstr("cycle"));
}

}  // namespace
}  // namespace onnxamp::importer
