// Round trip of every model of the ONNX backend test corpus (libonnx-testdata) and of models/ through the IR:
// import, export, and compare with the original proto; ONNX's checker and shape inference on the export.
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>
#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <exception>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "importer/model_io.h"
#include "importer/onnx_proto.h"
#include "runtime/common/file_util.h"
#include "tests/importer/proto_builders.h"

namespace onnxamp::importer {
namespace {

namespace fs = std::filesystem;

constexpr char kCorpusDir[] = "/usr/share/libonnx-testdata/data";
constexpr char kCorpusPackage[] = "libonnx-testdata";

std::string Serialize(const google::protobuf::MessageLite& m) {
  std::string s;
  m.SerializeToString(&s);
  return s;
}

template <typename T>
bool SameSerialized(const T& a, const T& b) {
  return Serialize(a) == Serialize(b);
}

// First difference between two repeated message fields compared as serialized protos, or "".
template <typename R>
std::string CompareRepeated(const R& a, const R& b, const std::string& what) {
  if (a.size() != b.size()) return what + " count " + std::to_string(a.size()) + " vs " + std::to_string(b.size());
  for (int i = 0; i < a.size(); ++i) {
    if (!SameSerialized(a[i], b[i])) {
      return what + " #" + std::to_string(i) + " differs:\n" + a[i].ShortDebugString().substr(0, 300) + "\nvs\n" +
             b[i].ShortDebugString().substr(0, 300);
    }
  }
  return "";
}

// Clears string fields that are present but empty, recursively. proto2 tells an explicit "" from an absent field,
// the IR (like ONNX's semantics) does not; everything else is compared exactly.
void ClearEmptyStrings(google::protobuf::Message* m) {
  const google::protobuf::Reflection* r = m->GetReflection();
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  r->ListFields(*m, &fields);
  for (const google::protobuf::FieldDescriptor* f : fields) {
    if (f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_STRING && !f->is_repeated()) {
      if (r->GetString(*m, f).empty()) r->ClearField(m, f);
    } else if (f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) {
      if (f->is_repeated()) {
        for (int i = 0; i < r->FieldSize(*m, f); ++i) ClearEmptyStrings(r->MutableRepeatedMessage(m, f, i));
      } else {
        ClearEmptyStrings(r->MutableMessage(m, f));
      }
    }
  }
}

// Attributes compared as serialized protos (after ClearEmptyStrings).
std::string CompareAttributes(const onnx::NodeProto& x, const onnx::NodeProto& y, const std::string& where) {
  if (x.attribute_size() != y.attribute_size()) return where + "attribute count";
  for (int i = 0; i < x.attribute_size(); ++i) {
    onnx::AttributeProto a = x.attribute(i), b = y.attribute(i);
    ClearEmptyStrings(&a);
    ClearEmptyStrings(&b);
    if (!SameSerialized(a, b)) {
      return where + "attribute '" + a.name() + "' differs:\n" + a.ShortDebugString().substr(0, 300) + "\nvs\n" +
             b.ShortDebugString().substr(0, 300);
    }
  }
  return "";
}

std::string CompareNodes(const google::protobuf::RepeatedPtrField<onnx::NodeProto>& a,
                         const google::protobuf::RepeatedPtrField<onnx::NodeProto>& b) {
  if (a.size() != b.size()) return "node count " + std::to_string(a.size()) + " vs " + std::to_string(b.size());
  for (int i = 0; i < a.size(); ++i) {
    const onnx::NodeProto& x = a[i];
    const onnx::NodeProto& y = b[i];
    const std::string where = "node #" + std::to_string(i) + " (" + x.op_type() + " '" + x.name() + "'): ";
    if (x.op_type() != y.op_type() || x.domain() != y.domain() || x.name() != y.name() ||
        x.doc_string() != y.doc_string()) {
      return where + "op_type/domain/name/doc_string differ";
    }
    if (!std::equal(x.input().begin(), x.input().end(), y.input().begin(), y.input().end())) return where + "inputs";
    if (!std::equal(x.output().begin(), x.output().end(), y.output().begin(), y.output().end())) {
      return where + "outputs";
    }
    std::string d = CompareAttributes(x, y, where);
    if (!d.empty()) return d;
  }
  return "";
}

// Decodes both initializer lists and compares names and contents.
std::string CompareInitializers(const onnx::GraphProto& a, const onnx::GraphProto& b, const std::string& dir) {
  if (a.initializer_size() != b.initializer_size()) return "initializer count";
  ExternalDataContext ext{dir, true};
  for (int i = 0; i < a.initializer_size(); ++i) {
    StatusOr<ir::Tensor> x = TensorFromProto(a.initializer(i), ext, "original");
    StatusOr<ir::Tensor> y = TensorFromProto(b.initializer(i), ext, "exported");
    if (!x.ok() || !y.ok()) return "initializer #" + std::to_string(i) + " does not decode";
    if (x->name() != y->name() || !x->SameContents(*y) || x->encoding() != y->encoding()) {
      return "initializer '" + x->name() + "' differs";
    }
  }
  return CompareRepeated(a.sparse_initializer(), b.sparse_initializer(), "sparse initializer");
}

// Opset imports compared by value: an absent domain and an explicit "" are the same import.
std::string CompareOpsets(const onnx::ModelProto& a, const onnx::ModelProto& b) {
  if (a.opset_import_size() != b.opset_import_size()) return "opset_import count";
  for (int i = 0; i < a.opset_import_size(); ++i) {
    if (a.opset_import(i).domain() != b.opset_import(i).domain() ||
        a.opset_import(i).version() != b.opset_import(i).version()) {
      return "opset_import #" + std::to_string(i) + " differs";
    }
  }
  return "";
}

bool DefaultOpsetAtMost(const onnx::ModelProto& m, int64_t max) {
  for (const auto& op : m.opset_import()) {
    if ((op.domain().empty() || op.domain() == "ai.onnx") && op.version() > max) return false;
  }
  return true;
}

bool PassesChecker(const onnx::ModelProto& m) {
  try {
    onnx::checker::check_model(m);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

// onnx::shape_inference with type checks and node-level errors thrown ("full check"), on a copy.
std::string FullCheckError(const onnx::ModelProto& m) {
  onnx::ModelProto copy = m;
  try {
    onnx::shape_inference::InferShapes(copy, onnx::OpSchemaRegistry::Instance(),
                                       onnx::ShapeInferenceOptions{true, 1, false});
    return "";
  } catch (const std::exception& e) {
    return std::string(e.what()).substr(0, 300);
  }
}

struct Counts {
  int found = 0;
  int imported = 0;
  int same_nodes = 0;
  int same_initializers = 0;
  int same_io = 0;
  int checker_eligible = 0;
  int checker_passed = 0;
  int full_check_eligible = 0;
  int full_check_passed = 0;
  int identical_protos = 0;
  int identical_saves = 0;  // of the models holding raw_data somewhere
  std::vector<std::string> failures;
};

// True when a TensorProto with raw_data occurs anywhere in `m`.
bool HoldsRawData(const google::protobuf::Message& m) {
  if (const auto* t = dynamic_cast<const onnx::TensorProto*>(&m); t && t->has_raw_data()) return true;
  const google::protobuf::Reflection* r = m.GetReflection();
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  r->ListFields(m, &fields);
  for (const google::protobuf::FieldDescriptor* f : fields) {
    if (f->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) continue;
    if (!f->is_repeated()) {
      if (HoldsRawData(r->GetMessage(m, f))) return true;
      continue;
    }
    for (int i = 0; i < r->FieldSize(m, f); ++i) {
      if (HoldsRawData(r->GetRepeatedMessage(m, f, i))) return true;
    }
  }
  return false;
}

// SaveModel streams the tensors' bytes from the IR instead of serializing a full proto; its file must hold exactly
// the bytes of the serialized export.
std::string CompareSaved(const ir::Model& model, const onnx::ModelProto& exported) {
  testing::ScratchDir dir;
  const std::string path = dir.File("saved.onnx");
  SaveOptions options;
  options.external_data = ExternalDataMode::kNever;
  Status saved = SaveModel(model, path, options);
  if (!saved.ok()) return "SaveModel failed: " + saved.message();
  StatusOr<std::string> bytes = ReadFile(path);
  if (!bytes.ok() || *bytes != testing::SerializeDeterministic(exported))
    return "SaveModel's file differs from the export";
  return "";
}

void RoundTrip(const fs::path& path, Counts* counts) {
  ++counts->found;
  const std::string name = path.string();
  auto fail = [&](const std::string& why) { counts->failures.push_back(name + ": " + why); };
  StatusOr<std::string> bytes = ReadFile(name);
  if (!bytes.ok()) return fail(bytes.status().message());
  onnx::ModelProto original;
  if (!original.ParseFromString(*bytes)) return fail("does not parse as a ModelProto");
  StatusOr<ir::Model> model = LoadModel(name);
  if (!model.ok()) return fail("import failed: " + model.status().message());
  ++counts->imported;
  onnx::ModelProto exported;
  ModelToProto(*model, &exported);

  const onnx::GraphProto& a = original.graph();
  const onnx::GraphProto& b = exported.graph();
  std::string diff = CompareNodes(a.node(), b.node());
  if (!diff.empty()) return fail(diff);
  ++counts->same_nodes;
  diff = CompareInitializers(a, b, path.parent_path().string());
  if (!diff.empty()) return fail(diff);
  ++counts->same_initializers;
  for (const std::string& d :
       {CompareRepeated(a.input(), b.input(), "graph input"), CompareRepeated(a.output(), b.output(), "graph output"),
        CompareRepeated(a.value_info(), b.value_info(), "value_info"), CompareOpsets(original, exported),
        CompareRepeated(original.functions(), exported.functions(), "function"),
        CompareRepeated(original.metadata_props(), exported.metadata_props(), "metadata"),
        CompareRepeated(original.training_info(), exported.training_info(), "training_info")}) {
    if (!d.empty()) return fail(d);
  }
  if (a.name() != b.name() || a.doc_string() != b.doc_string() || original.ir_version() != exported.ir_version() ||
      original.producer_name() != exported.producer_name() ||
      original.producer_version() != exported.producer_version() || original.domain() != exported.domain() ||
      original.model_version() != exported.model_version() || original.doc_string() != exported.doc_string()) {
    return fail("graph or model metadata differ");
  }
  ++counts->same_io;

  if (HoldsRawData(exported)) {  // otherwise SaveModel's writing is protobuf's own
    diff = CompareSaved(*model, exported);
    if (!diff.empty()) return fail(diff);
    ++counts->identical_saves;
  }

  if (google::protobuf::util::MessageDifferencer::Equals(original, exported)) ++counts->identical_protos;

  if (DefaultOpsetAtMost(original, 17) && PassesChecker(original)) {
    ++counts->checker_eligible;
    try {
      onnx::checker::check_model(exported);
      ++counts->checker_passed;
    } catch (const std::exception& e) {
      return fail(std::string("the original passes onnx::checker but the export does not: ") + e.what());
    }
    if (FullCheckError(original).empty()) {
      ++counts->full_check_eligible;
      const std::string err = FullCheckError(exported);
      if (!err.empty()) return fail("the original passes shape inference (full check) but the export does not: " + err);
      ++counts->full_check_passed;
    }
  }
}

std::vector<fs::path> FindFiles(const fs::path& dir, bool only_model_onnx) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file()) continue;
    const fs::path& p = it->path();
    if (only_model_onnx ? p.filename() == "model.onnx" : p.extension() == ".onnx") out.push_back(p);
  }
  std::sort(out.begin(), out.end());
  return out;
}

void Report(const char* label, const Counts& c) {
  std::cout << label << ": models found " << c.found << ", imported " << c.imported << ", identical nodes+attributes "
            << c.same_nodes << ", identical initializers " << c.same_initializers
            << ", identical inputs/outputs/value_info/metadata " << c.same_io << ", onnx::checker passed "
            << c.checker_passed << "/" << c.checker_eligible << ", full check passed " << c.full_check_passed << "/"
            << c.full_check_eligible << ", byte-identical protos (MessageDifferencer::Equals) " << c.identical_protos
            << ", SaveModel files identical to the serialized export " << c.identical_saves << ", failures "
            << c.failures.size() << "\n";
  for (const std::string& f : c.failures) std::cout << "  FAILED " << f << "\n";
}

TEST(CorpusRoundTrip, OnnxBackendTestData) {
  if (!fs::is_directory(kCorpusDir)) {
    GTEST_SKIP() << kCorpusDir << " is missing; install the " << kCorpusPackage << " package";
  }
  Counts counts;
  for (const fs::path& p : FindFiles(kCorpusDir, true)) RoundTrip(p, &counts);
  Report(kCorpusPackage, counts);
  EXPECT_GT(counts.found, 1000) << "expected the whole backend test corpus under " << kCorpusDir;
  EXPECT_EQ(counts.imported, counts.found);
  EXPECT_TRUE(counts.failures.empty()) << counts.failures.size()
                                       << " models do not round trip; first: " << counts.failures.front();
}

TEST(CorpusRoundTrip, ReferenceModels) {
  const fs::path dir = fs::path(ONNXAMP_SOURCE_DIR) / "models";
  Counts counts;
  for (const fs::path& p : FindFiles(dir, false)) RoundTrip(p, &counts);
  Report("models/", counts);
  EXPECT_TRUE(counts.failures.empty()) << counts.failures.size()
                                       << " models do not round trip; first: " << counts.failures.front();
}

}  // namespace
}  // namespace onnxamp::importer
