// LoadModel / SaveModel: file-level errors (a table of bad files, one named test each), verification, external data
// in and out.
#include <google/protobuf/util/message_differencer.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <random>

#include "importer/model_io.h"
#include "importer/onnx_proto.h"
#include "proto_builders.h"

namespace onnxamp::importer {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::ScratchDir;
using testing::Serialize;
using ::testing::StartsWith;

// A float tensor whose data live in `location`.
onnx::TensorProto ExternalTensor(const std::string& name, int64_t n, const std::string& location, int64_t offset = 0,
                                 std::optional<int64_t> length = std::nullopt) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(onnx::TensorProto::FLOAT);
  t.add_dims(n);
  t.set_data_location(onnx::TensorProto::EXTERNAL);
  auto add = [&](const std::string& k, const std::string& v) {
    auto* kv = t.add_external_data();
    kv->set_key(k);
    kv->set_value(v);
  };
  add("location", location);
  if (offset) add("offset", std::to_string(offset));
  if (length) add("length", std::to_string(*length));
  return t;
}

std::string FloatBytes(int64_t n, float start) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = start + static_cast<float>(i);
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

// y = x + w, with w (4 floats) read from `location` in the model's folder.
onnx::ModelProto MakeExternalModel(const std::string& location, int64_t offset = 0,
                                   std::optional<int64_t> length = std::nullopt) {
  onnx::ModelProto m = testing::MakeAddModel(4);
  *m.mutable_graph()->mutable_initializer(0) = ExternalTensor("w", 4, location, offset, length);
  return m;
}

// y = (x + w1) * w2 with two initializers of `n` floats.
onnx::ModelProto MakeTwoWeightModel(int64_t n) {
  onnx::ModelProto m = testing::MakeModel();
  auto* g = m.mutable_graph();
  testing::AddInput(g, "x", 1, {n});
  *g->add_initializer() = testing::FloatTensor("w1", {n}, std::vector<float>(static_cast<size_t>(n), 1.5f));
  *g->add_initializer() = testing::FloatTensor("w2", {n}, std::vector<float>(static_cast<size_t>(n), -2.0f));
  testing::AddNode(g, "Add", {"x", "w1"}, {"t"});
  testing::AddNode(g, "Mul", {"t", "w2"}, {"y"});
  testing::AddOutput(g, "y", 1, {n});
  return m;
}

Status LoadError(const std::string& path, bool load_external_data = true) {
  LoadOptions options;
  options.load_external_data = load_external_data;
  StatusOr<ir::Model> model = LoadModel(path, options);
  return model.ok() ? Status::Ok() : model.status();
}

// ---------------------------------------------------------------- loading

TEST(LoadModel, ValidModelLoadsAndVerifies) {
  ScratchDir dir;
  const std::string path = dir.Write("add.onnx", Serialize(testing::MakeAddModel()));
  StatusOr<ir::Model> model = LoadModel(path);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ(model->graph->num_nodes(), 1u);
  EXPECT_EQ(model->graph->initializers()[0]->initializer()->values<float>()[3], 1.5f);
}

TEST(LoadModel, MissingFile) {
  ScratchDir dir;
  Status s = LoadError(dir.File("nope.onnx"));
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr(dir.File("nope.onnx")));
}

TEST(LoadModel, FileOverTwoGiBIsRefusedBeforeReading) {
  ScratchDir dir;
  const std::string path = dir.File("huge.onnx");
  { std::ofstream f(path); }
  fs::resize_file(path, (uint64_t{2} << 30) + 1);  // sparse: no disk space used, nothing read
  Status s = LoadError(path);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), StartsWith(path + ": file is 2147483649 bytes, more than the limit"));
}

// A file LoadModel must refuse, and the message it must give: "<path>: " then `message` (all of it when `exact`,
// else as a prefix), containing each of `also`.
struct BadFileCase {
  const char* name;
  std::function<std::string()> bytes;
  std::string message;
  bool exact;
  std::vector<std::string> also;
};

void PrintTo(const BadFileCase& c, std::ostream* os) { *os << c.name; }

std::string RandomBytes() {
  std::mt19937 rng(1234);
  std::string bytes(4096, '\0');
  for (char& c : bytes) c = static_cast<char>(rng() & 0xff);
  return bytes;
}

// `m` serialized after `edit` changed it.
std::function<std::string()> Edited(onnx::ModelProto m, std::function<void(onnx::ModelProto*)> edit) {
  return [m, edit]() mutable {
    edit(&m);
    return Serialize(m);
  };
}

const BadFileCase kBadFiles[] = {
    {"EmptyFile", [] { return std::string(); }, "empty file", false, {}},
    {"RandomBytes", RandomBytes, "", false, {"not a protobuf"}},
    {"TextIsNotAProtobuf",
     [] { return std::string("ir_version: 8\ngraph { name: 'g' }\n"); },
     "",
     false,
     {"not a protobuf"}},
    {"TruncatedProtobuf",
     [] {
       const std::string full = Serialize(MakeTwoWeightModel(64));
       return full.substr(0, full.size() / 2);
     },
     "truncated",
     false,
     {}},
    {"ValidProtobufThatIsNotAModel",
     [] {
       return Serialize(testing::FloatTensor("", {2, 2}, {1, 2, 3, 4}));
     },
     "not an ONNX model: the ModelProto has no graph",
     true,
     {}},
    {"UnsupportedIrVersion",
     Edited(testing::MakeReluModel(), [](onnx::ModelProto* m) { m->set_ir_version(kMaxIrVersion + 1); }),
     "unsupported IR version " + std::to_string(kMaxIrVersion + 1),
     false,
     {}},
    {"UnsupportedDefaultOpset",
     Edited(testing::MakeReluModel(),
            [](onnx::ModelProto* m) { m->mutable_opset_import(0)->set_version(kMaxDefaultOpset + 1); }),
     "unsupported default-domain opset",
     false,
     {}},
    {"NodeInputNothingProduces",
     Edited(testing::MakeReluModel(),
            [](onnx::ModelProto* m) { m->mutable_graph()->mutable_node(0)->set_input(0, "x_typo"); }),
     "node 'relu' (Relu): input 'x_typo' is not produced by any node, graph input or initializer",
     true,
     {}},
    {"GraphCycleFailsVerification",
     Edited(testing::MakeModel(),
            [](onnx::ModelProto* m) {
              auto* g = m->mutable_graph();
              testing::AddInput(g, "x");
              testing::AddNode(g, "Add", {"x", "b"}, {"a"}, "first");
              testing::AddNode(g, "Relu", {"a"}, {"b"}, "second");
              testing::AddOutput(g, "b");
            }),
     "",
     false,
     {"cycle", "'first'"}},
    {"TwoProducersOfOneValue",
     Edited(testing::MakeReluModel(),
            [](onnx::ModelProto* m) { testing::AddNode(m->mutable_graph(), "Neg", {"x"}, {"y"}, "neg"); }),
     "node 'neg' (Neg): output 'y' is already defined by node 'relu'",
     false,
     {}},
    {"InitializerSizeDisagreesWithShape",
     Edited(testing::MakeAddModel(4),
            [](onnx::ModelProto* m) {
              m->mutable_graph()->mutable_initializer(0)->clear_dims();
              m->mutable_graph()->mutable_initializer(0)->add_dims(5);
            }),
     "initializer 'w': raw_data has 16 bytes, expected 20 for float dims [5]",
     true,
     {}},
    {"NegativeDims",
     Edited(testing::MakeAddModel(4),
            [](onnx::ModelProto* m) { m->mutable_graph()->mutable_initializer(0)->set_dims(0, -4); }),
     "initializer 'w': dims [-4]",
     false,
     {"negative"}},
    {"AbsurdDimsWithFourBytesOfData",
     Edited(testing::MakeAddModel(1),
            [](onnx::ModelProto* m) {
              auto* w = m->mutable_graph()->mutable_initializer(0);
              w->clear_dims();
              w->add_dims(int64_t{1} << 40);
              w->add_dims(int64_t{1} << 40);
            }),
     "initializer 'w': dims [1099511627776,1099511627776]",
     false,
     {}},
    {"UnknownDataType",
     Edited(testing::MakeAddModel(1),
            [](onnx::ModelProto* m) { m->mutable_graph()->mutable_initializer(0)->set_data_type(kMaxDTypeCode + 1); }),
     "initializer 'w': unknown data_type code " + std::to_string(kMaxDTypeCode + 1),
     true,
     {}},
};

class LoadModelRefuses : public ::testing::TestWithParam<BadFileCase> {};

TEST_P(LoadModelRefuses, WithAMessageNamingTheFile) {
  const BadFileCase& c = GetParam();
  ScratchDir dir;
  const std::string path = dir.Write(std::string(c.name) + ".onnx", c.bytes());
  Status s = LoadError(path);
  ASSERT_FALSE(s.ok());
  if (c.exact) {
    EXPECT_EQ(s.message(), path + ": " + c.message);
  } else {
    EXPECT_THAT(s.message(), StartsWith(path + ": " + c.message));
  }
  for (const std::string& part : c.also) EXPECT_THAT(s.message(), HasSubstr(part));
}

INSTANTIATE_TEST_SUITE_P(BadFiles, LoadModelRefuses, ::testing::ValuesIn(kBadFiles),
                         [](const ::testing::TestParamInfo<BadFileCase>& info) { return info.param.name; });

TEST(LoadModel, FromBytesWithoutFolderRefusesExternalData) {
  StatusOr<ir::Model> model = LoadModelFromBytes(Serialize(MakeExternalModel("w.bin")), "", "memory");
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(), StartsWith("memory: initializer 'w': external data 'w.bin' refused"));
}

// ---------------------------------------------------------------- external data: loading

TEST(ExternalData, LoadsAndRemembersWhereTheDataCameFrom) {
  ScratchDir dir;
  dir.Write("w.bin", std::string(8, 'x') + FloatBytes(4, 10));
  const std::string path = dir.Write("m.onnx", Serialize(MakeExternalModel("w.bin", 8, 16)));
  StatusOr<ir::Model> model = LoadModel(path);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const ir::Tensor& w = *model->graph->initializers()[0]->initializer();
  EXPECT_EQ(w.values<float>()[0], 10.0f);
  EXPECT_EQ(w.values<float>()[3], 13.0f);
  ASSERT_TRUE(w.external().has_value());
  EXPECT_EQ(w.external()->location, "w.bin");
  EXPECT_EQ(w.external()->offset, 8);
  EXPECT_EQ(w.external()->length, 16);
}

TEST(ExternalData, SubfolderAndSymlinkInsideTheFolderAreAllowed) {
  ScratchDir dir;
  fs::create_directory(dir.File("weights"));
  dir.Write("weights/w.bin", FloatBytes(4, 1));
  fs::create_symlink("weights/w.bin", dir.File("link.bin"));
  for (const char* location : {"weights/w.bin", "./weights/w.bin", "link.bin"}) {
    const std::string path = dir.Write("m.onnx", Serialize(MakeExternalModel(location)));
    StatusOr<ir::Model> model = LoadModel(path);
    ASSERT_TRUE(model.ok()) << location << ": " << model.status().ToString();
  }
}

TEST(ExternalData, WithoutLoadingKeepsTheReferenceOnly) {
  ScratchDir dir;
  dir.Write("w.bin", FloatBytes(4, 1));
  const std::string path = dir.Write("m.onnx", Serialize(MakeExternalModel("w.bin")));
  LoadOptions options;
  options.load_external_data = false;
  StatusOr<ir::Model> model = LoadModel(path, options);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const ir::Tensor& w = *model->graph->initializers()[0]->initializer();
  EXPECT_FALSE(w.has_data());
  EXPECT_EQ(w.dims(), std::vector<int64_t>{4});
  EXPECT_EQ(w.external()->location, "w.bin");
  // Export writes the reference back; saving refuses, since the data were never read.
  onnx::ModelProto back;
  ModelToProto(*model, &back);
  EXPECT_EQ(back.graph().initializer(0).data_location(), onnx::TensorProto::EXTERNAL);
  Status saved = SaveModel(*model, dir.File("copy.onnx"));
  ASSERT_FALSE(saved.ok());
  EXPECT_THAT(saved.message(), HasSubstr("tensor 'w' was loaded without its external data"));
  EXPECT_FALSE(fs::exists(dir.File("copy.onnx")));
}

// Loading without the data (what `onnxamp inspect` does) checks every reference exactly as loading does: the same
// refusals, with the same messages, for each way a reference can be bad.
TEST(ExternalData, WithoutLoadingBadReferencesAreRefusedAlike) {
  ScratchDir outside;
  const std::string secret = outside.Write("secret.bin", FloatBytes(4, 1));
  ScratchDir dir;
  dir.Write("w.bin", FloatBytes(4, 1));
  dir.Write("w8.bin", FloatBytes(8, 1));
  fs::create_symlink(secret, dir.File("escape.bin"));
  fs::create_directory(dir.File("folder.bin"));
  struct Case {
    std::string name;
    onnx::ModelProto model;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"missing", MakeExternalModel("gone.bin"), "gone.bin' does not exist"},
      {"symlink_out", MakeExternalModel("escape.bin"), "outside the model folder"},
      {"offset_past_end", MakeExternalModel("w.bin", 17), "external data offset 17 is past the end of '"},
      {"length_past_end", MakeExternalModel("w.bin", 4, 16), "external data offset 4 + length 16 is past the end"},
      {"length_disagrees", MakeExternalModel("w8.bin", 0, 20), "external data length 20 for 'w8.bin' disagrees"},
      {"rest_disagrees", MakeExternalModel("w8.bin", 0), "has 32 bytes at offset 0 (to the end of the file)"},
      {"not_a_file", MakeExternalModel("folder.bin"), "is not a regular file"},
      {"absolute", MakeExternalModel(secret), "is an absolute path"},
      {"dot_dot", MakeExternalModel("../w.bin"), "contains '..'"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = dir.Write(c.name + ".onnx", Serialize(c.model));
    const Status loaded = LoadError(path, /*load_external_data=*/true);
    const Status checked = LoadError(path, /*load_external_data=*/false);
    ASSERT_FALSE(checked.ok());
    EXPECT_THAT(checked.message(), StartsWith(path + ": initializer 'w': "));
    EXPECT_THAT(checked.message(), HasSubstr(c.says));
    EXPECT_EQ(checked.code(), loaded.code());
    EXPECT_EQ(checked.message(), loaded.message());
  }
  // A good reference (with a symlink that stays inside the folder) passes both ways.
  fs::create_symlink("w.bin", dir.File("inside.bin"));
  const std::string good = dir.Write("good.onnx", Serialize(MakeExternalModel("inside.bin", 0, 16)));
  EXPECT_TRUE(LoadError(good, true).ok());
  EXPECT_TRUE(LoadError(good, false).ok());
}

TEST(ExternalData, DotDotIsRefused) {
  ScratchDir dir;
  fs::create_directory(dir.File("model"));
  dir.Write("x", FloatBytes(4, 1));
  const std::string path = dir.Write("model/m.onnx", Serialize(MakeExternalModel("../x")));
  Status s = LoadError(path);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), path +
                             ": initializer 'w': external data location '../x' contains '..'; only paths inside the "
                             "model folder are allowed");
  const std::string inner = dir.Write("model/m2.onnx", Serialize(MakeExternalModel("sub/../../x")));
  EXPECT_THAT(LoadError(inner).message(), HasSubstr("'sub/../../x' contains '..'"));
}

TEST(ExternalData, AbsolutePathIsRefused) {
  ScratchDir dir;
  const std::string data = dir.Write("w.bin", FloatBytes(4, 1));
  const std::string path = dir.Write("m.onnx", Serialize(MakeExternalModel(data)));
  Status s = LoadError(path);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(),
              StartsWith(path + ": initializer 'w': external data location '" + data + "' is an absolute path"));
}

TEST(ExternalData, SymlinkLeavingTheFolderIsRefused) {
  ScratchDir outside;
  const std::string secret = outside.Write("secret.bin", FloatBytes(4, 1));
  ScratchDir dir;
  fs::create_symlink(secret, dir.File("w.bin"));
  const std::string path = dir.Write("m.onnx", Serialize(MakeExternalModel("w.bin")));
  Status s = LoadError(path);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), StartsWith(path + ": initializer 'w': external data file 'w.bin' resolves to '"));
  EXPECT_THAT(s.message(), HasSubstr("outside the model folder"));
  // A symlinked folder on the way is the same escape.
  fs::create_directory_symlink(outside.path(), dir.File("linked"));
  const std::string path2 = dir.Write("m2.onnx", Serialize(MakeExternalModel("linked/secret.bin")));
  EXPECT_THAT(LoadError(path2).message(), HasSubstr("outside the model folder"));
}

TEST(ExternalData, OffsetPastEndOfFileIsRefused) {
  ScratchDir dir;
  dir.Write("w.bin", FloatBytes(4, 1));
  const std::string path = dir.Write("m.onnx", Serialize(MakeExternalModel("w.bin", 17)));
  Status s = LoadError(path);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), StartsWith(path + ": initializer 'w': external data offset 17 is past the end of '"));
  EXPECT_THAT(s.message(), HasSubstr("w.bin' (16 bytes)"));
}

TEST(ExternalData, LengthPastEndOfFileIsRefused) {
  ScratchDir dir;
  dir.Write("w.bin", FloatBytes(4, 1));
  const std::string path = dir.Write("m.onnx", Serialize(MakeExternalModel("w.bin", 4, 16)));
  Status s = LoadError(path);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), StartsWith(path + ": initializer 'w': external data offset 4 + length 16 is past the end"));
}

TEST(ExternalData, LengthDisagreeingWithShapeIsRefused) {
  ScratchDir dir;
  dir.Write("w.bin", FloatBytes(8, 1));
  const std::string path = dir.Write("m.onnx", Serialize(MakeExternalModel("w.bin", 0, 20)));
  Status s = LoadError(path);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), StartsWith(path + ": initializer 'w': external data length 20 for 'w.bin' disagrees with "
                                             "16 bytes for float dims [4]"));
  // Without a length the data run to the end of the file, which must then hold exactly the tensor.
  const std::string path2 = dir.Write("m2.onnx", Serialize(MakeExternalModel("w.bin", 0)));
  EXPECT_THAT(LoadError(path2).message(), HasSubstr("has 32 bytes at offset 0 (to the end of the file), expected 16"));
}

TEST(ExternalData, MissingFileIsRefused) {
  ScratchDir dir;
  const std::string path = dir.Write("m.onnx", Serialize(MakeExternalModel("gone.bin")));
  Status s = LoadError(path);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), StartsWith(path + ": initializer 'w': external data file '"));
  EXPECT_THAT(s.message(), HasSubstr("gone.bin' does not exist"));
}

TEST(ExternalData, AbsurdDimsAreRefusedBeforeReading) {
  ScratchDir dir;
  dir.Write("w.bin", FloatBytes(4, 1));
  onnx::ModelProto m = MakeExternalModel("w.bin");
  m.mutable_graph()->mutable_initializer(0)->set_dims(0, int64_t{1} << 40);
  m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->clear_shape();
  m.mutable_graph()->mutable_output(0)->mutable_type()->mutable_tensor_type()->clear_shape();
  const std::string path = dir.Write("m.onnx", Serialize(m));
  Status s = LoadError(path);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), StartsWith(path + ": initializer 'w': external data in '"));
  EXPECT_THAT(s.message(), HasSubstr("expected 4398046511104"));
}

// ---------------------------------------------------------------- saving

// Reads the external_data entries of initializer `i` of the model at `path`.
std::map<std::string, std::string> ExternalEntries(const std::string& path, int i) {
  onnx::ModelProto m;
  StatusOr<std::string> bytes = ReadFile(path);
  EXPECT_TRUE(bytes.ok() && m.ParseFromString(*bytes)) << path;
  std::map<std::string, std::string> out;
  if (i >= m.graph().initializer_size()) return out;
  for (const auto& kv : m.graph().initializer(i).external_data()) out[kv.key()] = kv.value();
  return out;
}

void ExpectSameInitializers(const ir::Model& a, const ir::Model& b) {
  ASSERT_EQ(a.graph->initializers().size(), b.graph->initializers().size());
  for (size_t i = 0; i < a.graph->initializers().size(); ++i) {
    EXPECT_TRUE(a.graph->initializers()[i]->initializer()->SameContents(*b.graph->initializers()[i]->initializer()))
        << a.graph->initializers()[i]->name();
  }
}

TEST(SaveModel, InlineRoundTripIsDeterministic) {
  ScratchDir dir;
  StatusOr<ir::Model> model = LoadModelFromBytes(Serialize(MakeTwoWeightModel(8)), "", "two");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  ASSERT_TRUE(SaveModel(*model, dir.File("a.onnx")).ok());
  ASSERT_TRUE(SaveModel(*model, dir.File("b.onnx")).ok());
  EXPECT_EQ(*ReadFile(dir.File("a.onnx")), *ReadFile(dir.File("b.onnx")));
  EXPECT_EQ(dir.List(), (std::vector<std::string>{"a.onnx", "b.onnx"}));  // no data file, no temporaries
  StatusOr<ir::Model> back = LoadModel(dir.File("a.onnx"));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ExpectSameInitializers(*model, *back);
}

TEST(SaveModel, AlwaysExternalWritesAlignedDataAndLoadsBack) {
  ScratchDir dir;
  StatusOr<ir::Model> model = LoadModelFromBytes(Serialize(MakeTwoWeightModel(3)), "", "two");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  SaveOptions options;
  options.external_data = ExternalDataMode::kAlways;
  options.external_threshold_bytes = 0;
  const std::string path = dir.File("small.onnx");
  ASSERT_TRUE(SaveModel(*model, path, options).ok());
  EXPECT_EQ(dir.List(), (std::vector<std::string>{"small.onnx", "small.onnx.data"}));
  auto w1 = ExternalEntries(path, 0);
  auto w2 = ExternalEntries(path, 1);
  EXPECT_EQ(w1["location"], "small.onnx.data");
  EXPECT_EQ(w1["offset"], "0");
  EXPECT_EQ(w1["length"], "12");
  EXPECT_EQ(w2["offset"], "4096");
  EXPECT_EQ(w2["length"], "12");
  EXPECT_EQ(fs::file_size(dir.File("small.onnx.data")), 4096u + 12u);
  StatusOr<ir::Model> back = LoadModel(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ExpectSameInitializers(*model, *back);
  EXPECT_EQ(back->graph->initializers()[1]->initializer()->external()->offset, 4096);
}

// An external data file named like the model itself (`repack -o m.onnx --external-data-file m.onnx`) is refused
// before anything is written: the model renamed over its data would name itself as its data. An earlier m.onnx stays.
TEST(SaveModel, ExternalDataFileThatIsTheModelItselfIsRefused) {
  ScratchDir dir;
  StatusOr<ir::Model> model = LoadModelFromBytes(Serialize(MakeTwoWeightModel(3)), "", "two");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const std::string path = dir.File("m.onnx");
  ASSERT_TRUE(SaveModel(*model, path).ok());
  const std::string before = *ReadFile(path);
  SaveOptions options;
  options.external_data = ExternalDataMode::kAlways;
  options.external_threshold_bytes = 0;
  for (const std::string& name : {std::string("m.onnx"), std::string("./m.onnx")}) {
    options.external_data_file = name;
    const Status s = SaveModel(*model, path, options);
    ASSERT_FALSE(s.ok()) << name;
    EXPECT_THAT(s.message(), HasSubstr("the external data file '" + name + "' is the model file itself"));
  }
  EXPECT_EQ(*ReadFile(path), before);
  EXPECT_EQ(dir.List(), (std::vector<std::string>{"m.onnx"}));
}

// A FIFO (or other non-regular file) given as a model or as its external data is refused at once; opening one for
// reading would otherwise wait for a writer forever.
TEST(LoadModel, AFifoIsRefusedWithoutWaiting) {
  ScratchDir dir;
  ASSERT_EQ(::mkfifo(dir.File("pipe.onnx").c_str(), 0600), 0);
  Status s = LoadError(dir.File("pipe.onnx"));
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("not a regular file"));
  ASSERT_EQ(::mkfifo(dir.File("pipe.bin").c_str(), 0600), 0);
  const std::string path = dir.Write("fifo_data.onnx", Serialize(MakeExternalModel("pipe.bin")));
  for (bool load : {true, false}) {
    s = LoadError(path, load);
    ASSERT_FALSE(s.ok());
    EXPECT_THAT(s.message(), HasSubstr("is not a regular file"));
  }
}

TEST(SaveModel, ThresholdKeepsSmallTensorsInline) {
  ScratchDir dir;
  onnx::ModelProto m = MakeTwoWeightModel(300);  // 1200 bytes each, over the default threshold of 1024
  *m.mutable_graph()->add_initializer() = testing::FloatTensor("tiny", {1}, {7});
  testing::AddNode(m.mutable_graph(), "Add", {"y", "tiny"}, {"z"});
  StatusOr<ir::Model> model = LoadModelFromBytes(Serialize(m), "", "m");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  SaveOptions options;
  options.external_data = ExternalDataMode::kAlways;
  options.external_data_file = "weights.bin";
  ASSERT_TRUE(SaveModel(*model, dir.File("m.onnx"), options).ok());
  EXPECT_EQ(ExternalEntries(dir.File("m.onnx"), 0)["location"], "weights.bin");
  EXPECT_EQ(ExternalEntries(dir.File("m.onnx"), 1)["location"], "weights.bin");
  EXPECT_TRUE(ExternalEntries(dir.File("m.onnx"), 2).empty());
  StatusOr<ir::Model> back = LoadModel(dir.File("m.onnx"));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ExpectSameInitializers(*model, *back);
}

TEST(SaveModel, AutoKeepsExternalTensorsExternalAndNeverInlinesThem) {
  ScratchDir dir;
  dir.Write("w.bin", FloatBytes(4, 3));
  StatusOr<ir::Model> model = LoadModel(dir.Write("m.onnx", Serialize(MakeExternalModel("w.bin"))));
  ASSERT_TRUE(model.ok()) << model.status().ToString();

  ASSERT_TRUE(SaveModel(*model, dir.File("auto.onnx")).ok());
  EXPECT_EQ(ExternalEntries(dir.File("auto.onnx"), 0)["location"], "auto.onnx.data");
  StatusOr<ir::Model> back = LoadModel(dir.File("auto.onnx"));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ExpectSameInitializers(*model, *back);

  SaveOptions never;
  never.external_data = ExternalDataMode::kNever;
  ASSERT_TRUE(SaveModel(*model, dir.File("inline.onnx"), never).ok());
  EXPECT_TRUE(ExternalEntries(dir.File("inline.onnx"), 0).empty());
  EXPECT_FALSE(fs::exists(dir.File("inline.onnx.data")));
  back = LoadModel(dir.File("inline.onnx"));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ExpectSameInitializers(*model, *back);
}

TEST(SaveModel, ModelReferencingAnotherModelsDataFile) {
  ScratchDir dir;
  StatusOr<ir::Model> model = LoadModelFromBytes(Serialize(MakeTwoWeightModel(16)), "", "two");
  ASSERT_TRUE(model.ok());
  SaveOptions options;
  options.external_data = ExternalDataMode::kAlways;
  options.external_threshold_bytes = 0;
  ASSERT_TRUE(SaveModel(*model, dir.File("base.onnx"), options).ok());
  // A second model file in the same folder that points into base.onnx.data.
  const std::string other = dir.Write("other.onnx", *ReadFile(dir.File("base.onnx")));
  StatusOr<ir::Model> loaded = LoadModel(other);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->graph->initializers()[0]->initializer()->external()->location, "base.onnx.data");
  ExpectSameInitializers(*model, *loaded);
  // Saving it (kAuto) writes its own data file; the shared one is left alone.
  ASSERT_TRUE(SaveModel(*loaded, other).ok());
  EXPECT_EQ(ExternalEntries(other, 1)["location"], "other.onnx.data");
  EXPECT_TRUE(fs::exists(dir.File("base.onnx.data")));
  StatusOr<ir::Model> again = LoadModel(other);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  ExpectSameInitializers(*model, *again);
}

TEST(SaveModel, MissingFolderFailsAndLeavesNothing) {
  ScratchDir dir;
  StatusOr<ir::Model> model = LoadModelFromBytes(Serialize(testing::MakeAddModel()), "", "add");
  ASSERT_TRUE(model.ok());
  const std::string path = dir.File("no/such/folder/m.onnx");
  Status s = SaveModel(*model, path);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr(path));
  SaveOptions options;
  options.external_data = ExternalDataMode::kAlways;
  options.external_threshold_bytes = 0;
  EXPECT_FALSE(SaveModel(*model, path, options).ok());
  EXPECT_TRUE(dir.List().empty());
}

TEST(SaveModel, FailureOfTheDataFileLeavesNoModelFile) {
  ScratchDir dir;
  StatusOr<ir::Model> model = LoadModelFromBytes(Serialize(testing::MakeAddModel()), "", "add");
  ASSERT_TRUE(model.ok());
  SaveOptions options;
  options.external_data = ExternalDataMode::kAlways;
  options.external_threshold_bytes = 0;
  options.external_data_file = "missing_subfolder/w.data";
  Status s = SaveModel(*model, dir.File("m.onnx"), options);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("missing_subfolder/w.data"));
  EXPECT_TRUE(dir.List().empty());
}

TEST(SaveModel, DataFileNameMustStayInTheFolder) {
  ScratchDir dir;
  StatusOr<ir::Model> model = LoadModelFromBytes(Serialize(testing::MakeAddModel()), "", "add");
  ASSERT_TRUE(model.ok());
  SaveOptions options;
  options.external_data = ExternalDataMode::kAlways;
  options.external_threshold_bytes = 0;
  options.external_data_file = "../escape.data";
  Status s = SaveModel(*model, dir.File("m.onnx"), options);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("'../escape.data' contains '..'"));
  EXPECT_TRUE(dir.List().empty());
}

}  // namespace
}  // namespace onnxamp::importer
