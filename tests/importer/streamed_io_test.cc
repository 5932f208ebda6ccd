// Loading and saving without extra copies of the weights: tensor data moved out of the parsed proto into the IR,
// and SaveModel streaming the data into the file byte for byte as protobuf's own serialization would write them.
#include <sys/resource.h>

#include <csignal>
#include <functional>
#include <string>
#include <vector>

#include "importer/model_io.h"
#include "importer/onnx_proto.h"
#include "proto_builders.h"

namespace onnxamp::importer {
namespace {

using testing::AddInput;
using testing::AddNode;
using testing::AddOutput;
using testing::FloatTensor;
using testing::MakeModel;
using testing::ScratchDir;
using testing::Serialize;
using testing::SerializeDeterministic;

const ExternalDataContext kNoExternal{};

// Large tensors (at least 64 KiB of raw_data) are adopted by the IR without a copy; smaller ones are copied.
constexpr int64_t kLargeFloats = 32 * 1024;  // 128 KiB
constexpr int64_t kSmallFloats = 5;

std::vector<float> Ramp(int64_t n, float start) {
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = start + static_cast<float>(i % 1000) * 0.25f;
  return v;
}

// ---------------------------------------------------------------- moving data out of the proto

TEST(ModelFromConsumedProto, AdoptsLargeRawDataWithoutACopy) {
  onnx::ModelProto m = testing::MakeAddModel(kLargeFloats);
  *m.mutable_graph()->add_initializer() = FloatTensor("small", {kSmallFloats}, Ramp(kSmallFloats, 3));
  const void* large_bytes = m.graph().initializer(0).raw_data().data();
  const onnx::ModelProto original = m;

  StatusOr<ir::Model> model = ModelFromProto(std::move(m), kNoExternal);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const ir::Tensor& w = *model->graph->FindValue("w")->initializer();
  const ir::Tensor& small = *model->graph->FindValue("small")->initializer();
  EXPECT_EQ(static_cast<const void*>(w.data()), large_bytes);  // the very string protobuf parsed
  EXPECT_FALSE(w.buffer()->owns_memory());
  EXPECT_TRUE(small.buffer()->owns_memory());
  EXPECT_FALSE(m.graph().initializer(0).has_raw_data());  // NOLINT(bugprone-use-after-move): documented effect
  EXPECT_FALSE(m.graph().initializer(1).has_raw_data());  // NOLINT(bugprone-use-after-move)

  StatusOr<ir::Model> copied = ModelFromProto(original, kNoExternal);
  ASSERT_TRUE(copied.ok());
  EXPECT_TRUE(w.SameContents(*copied->graph->FindValue("w")->initializer()));
  EXPECT_TRUE(small.SameContents(*copied->graph->FindValue("small")->initializer()));
  EXPECT_EQ(w.values<float>()[kLargeFloats - 1], 0.5f * static_cast<float>(kLargeFloats - 1));
}

TEST(ModelFromConsumedProto, AdoptedDataAreCopiedOnWrite) {
  StatusOr<ir::Model> model = ModelFromProto(testing::MakeAddModel(kLargeFloats), kNoExternal);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  ir::Tensor& w = *model->graph->FindValue("w")->mutable_initializer();
  ir::Tensor copy = w;
  copy.mutable_values<float>()[1] = -7.0f;
  EXPECT_EQ(copy.values<float>()[1], -7.0f);
  EXPECT_EQ(w.values<float>()[1], 0.5f);
  w.mutable_values<float>()[2] = 9.0f;  // sole owner: written in place
  EXPECT_EQ(w.values<float>()[2], 9.0f);
}

TEST(ModelFromConsumedProto, TypedDataAreFreedAndAttributesConsumedToo) {
  onnx::ModelProto m = MakeModel();
  auto* g = m.mutable_graph();
  AddInput(g, "x", 1, {kSmallFloats});
  onnx::TensorProto typed;
  typed.set_name("typed");
  typed.set_data_type(onnx::TensorProto::FLOAT);
  typed.add_dims(kSmallFloats);
  for (float v : Ramp(kSmallFloats, 1)) typed.add_float_data(v);
  *g->add_initializer() = typed;
  auto* constant = AddNode(g, "Constant", {}, {"k"}, "k");
  auto* value = constant->add_attribute();
  value->set_name("value");
  value->set_type(onnx::AttributeProto::TENSOR);
  *value->mutable_t() = FloatTensor("", {kLargeFloats}, Ramp(kLargeFloats, 2));
  AddNode(g, "Add", {"x", "typed"}, {"s"});
  AddNode(g, "Mul", {"s", "k"}, {"y"});
  AddOutput(g, "y", 1, {kLargeFloats});
  const onnx::ModelProto original = m;

  StatusOr<ir::Model> consumed = ModelFromProto(std::move(m), kNoExternal);
  StatusOr<ir::Model> copied = ModelFromProto(original, kNoExternal);
  ASSERT_TRUE(consumed.ok()) << consumed.status().ToString();
  ASSERT_TRUE(copied.ok());
  EXPECT_EQ(m.graph().initializer(0).float_data_size(), 0);  // NOLINT(bugprone-use-after-move)
  EXPECT_FALSE(m.graph().node(0).attribute(0).t().has_raw_data());
  const ir::Tensor& t = *consumed->graph->FindValue("typed")->initializer();
  EXPECT_EQ(t.encoding(), ir::TensorEncoding::kTyped);
  EXPECT_TRUE(t.SameContents(*copied->graph->FindValue("typed")->initializer()));
  const ir::Tensor& k = (*consumed->graph->nodes().begin())->FindAttribute("value")->t;
  EXPECT_FALSE(k.buffer()->owns_memory());
  EXPECT_TRUE(k.SameContents((*copied->graph->nodes().begin())->FindAttribute("value")->t));
  // Exported, both give the original message.
  onnx::ModelProto a, b;
  ModelToProto(*consumed, &a);
  ModelToProto(*copied, &b);
  EXPECT_EQ(SerializeDeterministic(a), SerializeDeterministic(b));
}

TEST(ModelFromConsumedProto, BadTensorIsReportedAndKeepsItsData) {
  onnx::ModelProto m = testing::MakeAddModel(kLargeFloats);
  m.mutable_graph()->mutable_initializer(0)->set_dims(0, kLargeFloats + 1);
  StatusOr<ir::Model> model = ModelFromProto(std::move(m), kNoExternal);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().message(),
            "initializer 'w': raw_data has 131072 bytes, expected 131076 for float dims "
            "[32769]");
  EXPECT_EQ(m.graph().initializer(0).raw_data().size(), 131072u);  // NOLINT(bugprone-use-after-move)
}

TEST(LoadModel, LargeInitializersFromAFileAreAdopted) {
  ScratchDir dir;
  const std::string path = dir.Write("big.onnx", Serialize(testing::MakeAddModel(kLargeFloats)));
  StatusOr<ir::Model> model = LoadModel(path);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const ir::Tensor& w = *model->graph->FindValue("w")->initializer();
  EXPECT_FALSE(w.buffer()->owns_memory());
  ASSERT_EQ(w.num_elements(), kLargeFloats);
  EXPECT_EQ(w.values<float>()[0], 0.0f);
  EXPECT_EQ(w.values<float>()[kLargeFloats - 1], 0.5f * static_cast<float>(kLargeFloats - 1));
}

// ---------------------------------------------------------------- SaveModel streams what protobuf would write

TEST(SaveModel, WriteFailureMidwayLeavesTheOldFile) {
  // A file-size limit makes write() fail part way with EFBIG, as a full disk fails with ENOSPC.
  StatusOr<ir::Model> model = ModelFromProto(testing::MakeAddModel(kLargeFloats), kNoExternal);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  ScratchDir dir;
  const std::string path = dir.Write("m.onnx", "old");
  for (ExternalDataMode mode : {ExternalDataMode::kNever, ExternalDataMode::kAlways}) {
    SaveOptions options;
    options.external_data = mode;
    struct rlimit saved;
    ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
    auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
    struct rlimit small = saved;
    small.rlim_cur = 64 * 1024;
    ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
    Status st = SaveModel(*model, path, options);
    ::setrlimit(RLIMIT_FSIZE, &saved);
    std::signal(SIGXFSZ, old_handler);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.code(), StatusCode::kIoError);
    EXPECT_THAT(st.message(), ::testing::StartsWith(path + (mode == ExternalDataMode::kAlways ? ".data" : "") +
                                                    ": write failed: File too large"));
    EXPECT_EQ(*ReadFile(path), "old");
    EXPECT_EQ(dir.List(), std::vector<std::string>{"m.onnx"});  // no temporaries, no data file
  }
}

// Where the tensors of a model sit: each case builds a model with tensors of `n` floats at one kind of place.
struct PlacementCase {
  const char* name;
  std::function<onnx::ModelProto(int64_t n)> build;
};

onnx::AttributeProto TensorAttribute(const std::string& name, const onnx::TensorProto& t) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto::TENSOR);
  *a.mutable_t() = t;
  return a;
}

// A graph attribute holding a subgraph with an initializer and a Constant; `inner` more levels below it.
onnx::AttributeProto GraphAttribute(const std::string& name, int64_t n, int depth) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto::GRAPH);
  onnx::GraphProto* g = a.mutable_g();
  g->set_name(name + "_graph");
  *g->add_initializer() = FloatTensor(name + "_w", {n}, Ramp(n, 4));
  auto* c = AddNode(g, "Constant", {}, {name + "_c"});
  *c->add_attribute() = TensorAttribute("value", FloatTensor("", {n}, Ramp(n, 5)));
  auto* add = AddNode(g, "Add", {name + "_w", name + "_c"}, {name + "_out"});
  if (depth > 0) *add->add_attribute() = GraphAttribute(name + "_inner", n, depth - 1);
  AddOutput(g, name + "_out", 1, {n});
  return a;
}

const PlacementCase kPlacements[] = {
    {"Initializers",
     [](int64_t n) {
       onnx::ModelProto m = testing::MakeAddModel(n);
       *m.mutable_graph()->add_initializer() = FloatTensor("unused", {n}, Ramp(n, 1));
       return m;
     }},
    {"ConstantAndTensorsAttributes",
     [](int64_t n) {
       onnx::ModelProto m = MakeModel();
       auto* g = m.mutable_graph();
       auto* c = AddNode(g, "Constant", {}, {"c"}, "c");
       *c->add_attribute() = TensorAttribute("value", FloatTensor("", {n}, Ramp(n, 2)));
       auto* custom = AddNode(g, "Custom", {"c"}, {"y"}, "custom");
       custom->set_domain("test.domain");
       auto* list = custom->add_attribute();
       list->set_name("tensors");
       list->set_type(onnx::AttributeProto::TENSORS);
       *list->add_tensors() = FloatTensor("first", {n}, Ramp(n, 3));
       *list->add_tensors() = FloatTensor("second", {1}, {8});
       custom->add_attribute()->CopyFrom(TensorAttribute("after", FloatTensor("", {2}, {1, 2})));
       AddOutput(g, "y", 1, {n});
       return m;
     }},
    {"NestedSubgraphs",
     [](int64_t n) {
       onnx::ModelProto m = MakeModel();
       auto* g = m.mutable_graph();
       AddInput(g, "cond", onnx::TensorProto::BOOL, {});
       auto* if_node = AddNode(g, "If", {"cond"}, {"y"}, "if");
       *if_node->add_attribute() = GraphAttribute("else_branch", n, 0);
       *if_node->add_attribute() = GraphAttribute("then_branch", n, 2);
       AddOutput(g, "y", 1, {n});
       return m;
     }},
    {"SparseInitializerAndTypedData",
     [](int64_t n) {
       onnx::ModelProto m = testing::MakeAddModel(n);
       auto* sp = m.mutable_graph()->add_sparse_initializer();
       *sp->mutable_values() = FloatTensor("sparse", {3}, {1, 2, 3});
       onnx::TensorProto* idx = sp->mutable_indices();
       idx->set_data_type(onnx::TensorProto::INT64);
       idx->add_dims(3);
       const std::vector<int64_t> positions = {0, 4, n - 1};
       idx->set_raw_data(std::string(reinterpret_cast<const char*>(positions.data()), 3 * sizeof(int64_t)));
       sp->add_dims(n);
       onnx::TensorProto* typed = m.mutable_graph()->add_initializer();
       typed->set_name("typed");
       typed->set_data_type(onnx::TensorProto::INT32);
       typed->add_dims(4);
       for (int v : {-1, 0, 1, 1 << 20}) typed->add_int32_data(v);
       return m;
     }},
    {"FunctionsAndTrainingInfo",
     [](int64_t n) {
       onnx::ModelProto m = testing::MakeAddModel(n);
       auto* custom = m.add_opset_import();
       custom->set_domain("test.fn");
       custom->set_version(1);
       auto* f = m.add_functions();
       f->set_name("AddConst");
       f->set_domain("test.fn");
       f->add_input("a");
       f->add_output("b");
       auto* fc = f->add_node();
       fc->set_op_type("Constant");
       fc->add_output("k");
       *fc->add_attribute() = TensorAttribute("value", FloatTensor("", {n}, Ramp(n, 6)));
       auto* fadd = f->add_node();
       fadd->set_op_type("Add");
       fadd->add_input("a");
       fadd->add_input("k");
       fadd->add_output("b");
       auto* op = f->add_opset_import();
       op->set_domain("");
       op->set_version(17);
       // training_info is kept as bytes by the IR; its tensors are written back by protobuf itself.
       auto* ti = m.add_training_info();
       *ti->mutable_initialization()->add_initializer() = FloatTensor("init", {n}, Ramp(n, 7));
       ti->mutable_algorithm()->set_name("step");
       auto* kv = m.add_metadata_props();
       kv->set_key("k");
       kv->set_value("v");
       return m;
     }},
    {"EmptyAndStringTensors",
     [](int64_t n) {
       onnx::ModelProto m = testing::MakeAddModel(n);
       *m.mutable_graph()->add_initializer() = FloatTensor("empty", {0}, {});
       onnx::TensorProto* s = m.mutable_graph()->add_initializer();
       s->set_name("strings");
       s->set_data_type(onnx::TensorProto::STRING);
       s->add_dims(2);
       s->add_string_data("a");
       s->add_string_data(std::string(300, 'b'));
       return m;
     }},
};

struct SaveParam {
  PlacementCase placement;
  int64_t floats;
};

void PrintTo(const SaveParam& p, std::ostream* os) { *os << p.placement.name << " with " << p.floats << " floats"; }

class SaveMatchesSerialization : public ::testing::TestWithParam<SaveParam> {};

// SaveModel (inline) writes exactly the deterministic serialization of ModelToProto.
TEST_P(SaveMatchesSerialization, Inline) {
  const SaveParam& p = GetParam();
  StatusOr<ir::Model> model = ModelFromProto(p.placement.build(p.floats), kNoExternal);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  onnx::ModelProto exported;
  ModelToProto(*model, &exported);
  const std::string expected = SerializeDeterministic(exported);

  ScratchDir dir;
  SaveOptions options;
  options.external_data = ExternalDataMode::kNever;
  ASSERT_TRUE(SaveModel(*model, dir.File("m.onnx"), options).ok());
  StatusOr<std::string> written = ReadFile(dir.File("m.onnx"));
  ASSERT_TRUE(written.ok());
  ASSERT_EQ(written->size(), expected.size());
  EXPECT_TRUE(*written == expected) << "the streamed file differs from protobuf's serialization";

  // Parsed and imported again (taking the data out of the proto), it exports to the same bytes.
  onnx::ModelProto parsed;
  ASSERT_TRUE(parsed.ParseFromString(*written));
  StatusOr<ir::Model> back = ModelFromProto(std::move(parsed), kNoExternal);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  onnx::ModelProto again;
  ModelToProto(*back, &again);
  EXPECT_TRUE(SerializeDeterministic(again) == expected);
}

// With every tensor external, the model file is again what protobuf writes for the proto with references.
TEST_P(SaveMatchesSerialization, AllExternal) {
  const SaveParam& p = GetParam();
  StatusOr<ir::Model> model = ModelFromProto(p.placement.build(p.floats), kNoExternal);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  ScratchDir dir;
  SaveOptions options;
  options.external_data = ExternalDataMode::kAlways;
  options.external_threshold_bytes = 0;
  ASSERT_TRUE(SaveModel(*model, dir.File("m.onnx"), options).ok());
  onnx::ModelProto saved;
  StatusOr<std::string> written = ReadFile(dir.File("m.onnx"));
  ASSERT_TRUE(written.ok() && saved.ParseFromString(*written));
  EXPECT_EQ(*written, SerializeDeterministic(saved));
  // Every tensor the export wrote reads back from the data file with its contents.
  StatusOr<ir::Model> back = ModelFromProto(saved, ExternalDataContext{dir.path(), true});
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  onnx::ModelProto a, b;
  ModelToProto(*model, &a);
  ModelToProto(*back, &b);
  for (int i = 0; i < a.graph().initializer_size(); ++i) {
    StatusOr<ir::Tensor> x = TensorFromProto(a.graph().initializer(i), kNoExternal, "a");
    StatusOr<ir::Tensor> y = TensorFromProto(b.graph().initializer(i), ExternalDataContext{dir.path(), true}, "b");
    ASSERT_TRUE(x.ok() && y.ok()) << i;
    EXPECT_TRUE(x->SameContents(*y)) << a.graph().initializer(i).name();
  }
}

std::vector<SaveParam> SaveParams() {
  std::vector<SaveParam> out;
  for (const PlacementCase& c : kPlacements) {
    for (int64_t n : {kSmallFloats, kLargeFloats}) out.push_back({c, n});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Placements, SaveMatchesSerialization, ::testing::ValuesIn(SaveParams()),
                         [](const ::testing::TestParamInfo<SaveParam>& info) {
                           return std::string(info.param.placement.name) +
                                  (info.param.floats == kLargeFloats ? "_Large" : "_Small");
                         });

}  // namespace
}  // namespace onnxamp::importer
