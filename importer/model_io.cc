// Loading and saving model files: bounded protobuf parsing, verification, external data placement on save.
#include "importer/model_io.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>

#include <climits>
#include <cstring>
#include <filesystem>

#include "importer/model_writer.h"
#include "importer/onnx_proto.h"
#include "importer/proto_internal.h"
#include "runtime/common/file_util.h"
#include "runtime/ir/onnx_schema.h"
#include "runtime/ir/verify.h"

namespace onnxamp::importer {
namespace {

// The protobuf limit: a serialized message cannot exceed 2 GiB.
constexpr uint64_t kMaxProtoBytes = uint64_t{INT_MAX};
// Nesting depth protobuf allows while parsing (graph -> node -> attribute -> graph is 3 levels per subgraph).
constexpr int kRecursionLimit = 200;
// External data offsets are aligned to this, so the data can be memory-mapped page by page.
constexpr size_t kExternalAlignment = 4096;
// Buffer sizes for streaming a model file in and out.
constexpr int kStreamBlockBytes = 1 << 20;
// The largest model file LoadModel opens (anything over kMaxProtoBytes is then refused with a clearer message).
constexpr uint64_t kMaxModelFileBytes = uint64_t{2} << 30;

// Reads a varint at `*pos`; false if the bytes end first or it is longer than 10 bytes.
bool ReadVarint(std::string_view bytes, size_t* pos, uint64_t* value) {
  *value = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    if (*pos >= bytes.size()) return false;
    const uint8_t b = static_cast<uint8_t>(bytes[(*pos)++]);
    *value |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) return true;
  }
  return false;
}

// Explains why `bytes` did not parse as a ModelProto by walking the top-level wire format: a field that runs past
// the end means a truncated file, an impossible tag means the data are not a protobuf at all.
std::string DiagnoseParseFailure(std::string_view bytes) {
  size_t pos = 0;
  while (pos < bytes.size()) {
    const size_t field_start = pos;
    uint64_t tag = 0;
    if (!ReadVarint(bytes, &pos, &tag)) {
      return StrCat("truncated: the data end inside a field tag at byte ", field_start);
    }
    const uint64_t field = tag >> 3;
    const int wire_type = static_cast<int>(tag & 7);
    if (field == 0 || field > 536870911 || wire_type == 3 || wire_type == 4 || wire_type > 5) {
      return StrCat("not a protobuf: invalid field tag ", tag, " at byte ", field_start);
    }
    uint64_t skip = 0;
    switch (wire_type) {
      case 0: {
        uint64_t v;
        if (!ReadVarint(bytes, &pos, &v)) return StrCat("truncated: the data end inside field ", field);
        continue;
      }
      case 1:
        skip = 8;
        break;
      case 5:
        skip = 4;
        break;
      case 2:
        if (!ReadVarint(bytes, &pos, &skip)) return StrCat("truncated: the data end inside field ", field);
        break;
    }
    if (skip > bytes.size() - pos) {
      return StrCat("truncated: field ", field, " at byte ", field_start, " needs ", skip, " bytes but only ",
                    bytes.size() - pos, " remain (file is ", bytes.size(), " bytes)");
    }
    pos += skip;
  }
  return StrCat(
      "not an ONNX model: the data are a protobuf but not a valid ModelProto (a field has the wrong type, or "
      "messages nest deeper than ",
      kRecursionLimit, " levels)");
}

std::string Prefix(const std::string& display_name, std::string_view what) {
  return display_name.empty() ? std::string(what) : StrCat(display_name, ": ", what);
}

std::string Basename(const std::string& path) { return std::filesystem::path(path).filename().string(); }

std::string FolderOf(const std::string& path) {
  std::string parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? std::string(".") : parent;
}

// Limits every model parse shares.
void LimitParse(google::protobuf::io::CodedInputStream* coded) {
  coded->SetTotalBytesLimit(static_cast<int>(kMaxProtoBytes));
  coded->SetRecursionLimit(kRecursionLimit);
}

// Checks a model file's or buffer's size before parsing.
Status CheckModelSize(uint64_t size, const std::string& display_name) {
  if (size == 0) return InvalidArgument(Prefix(display_name, "empty file (0 bytes), not an ONNX model"));
  if (size > kMaxProtoBytes) {
    return OutOfRange(Prefix(display_name, StrCat("model is ", size, " bytes, over the 2 GiB limit")));
  }
  return Status::Ok();
}

// Converts a parsed model (taking the tensor data out of `proto`) and verifies it.
StatusOr<ir::Model> ModelFromParsed(onnx::ModelProto&& proto, const std::string& base_dir,
                                    const std::string& display_name, const LoadOptions& options) {
  ExternalDataContext ext{base_dir, options.load_external_data};
  StatusOr<ir::Model> model = ModelFromProto(std::move(proto), ext);
  if (!model.ok()) return Status(model.status().code(), Prefix(display_name, model.status().message()));
  Status verified = ir::Verify(*model);
  if (!verified.ok()) return Status(verified.code(), Prefix(display_name, verified.message()));
  // What onnx.checker finds from the ops' schemas: arity, required and unknown attributes, ops the opset lacks.
  for (const ir::Finding& f : ir::CheckOnnxSchemas(*model)) {
    if (f.is_error()) return InvalidArgument(Prefix(display_name, f.ToString()));
  }
  return model;
}

// Writes `proto` (with the writer's deferred raw data; ByteSize was called) to `fd`, deterministically.
Status WriteModelProto(const onnx::ModelProto& proto, const internal::DeferredRawDataWriter& writer, int fd,
                       const std::string& path) {
  google::protobuf::io::FileOutputStream stream(fd, kStreamBlockBytes);
  bool coded_error = false;
  {
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    writer.Write(proto, &coded);
    coded_error = coded.HadError();
  }
  if (!stream.Flush() || coded_error) {
    return IoError(path, ": write failed: ", stream.GetErrno() ? std::strerror(stream.GetErrno()) : "stream error");
  }
  return Status::Ok();
}

// Writes `tensors` to `fd` at their offsets (ascending), zero bytes in between.
Status WriteExternalData(const std::vector<std::pair<size_t, const ir::Tensor*>>& tensors, int fd,
                         const std::string& path) {
  static const std::string kZeros(kExternalAlignment, '\0');
  size_t pos = 0;
  for (const auto& [offset, t] : tensors) {
    ONNXAMP_CHECK(offset >= pos && offset - pos < kExternalAlignment, "external data offsets out of order");
    ONNXAMP_RETURN_IF_ERROR(WriteAll(fd, std::string_view(kZeros.data(), offset - pos), path));
    ONNXAMP_RETURN_IF_ERROR(
        WriteAll(fd, std::string_view(reinterpret_cast<const char*>(t->data()), t->nbytes()), path));
    pos = offset + t->nbytes();
  }
  return Status::Ok();
}

void SetExternalReference(onnx::TensorProto* tp, const std::string& location, size_t offset, size_t length) {
  tp->clear_raw_data();
  tp->clear_float_data();
  tp->clear_double_data();
  tp->clear_int32_data();
  tp->clear_int64_data();
  tp->clear_uint64_data();
  tp->clear_external_data();
  tp->set_data_location(onnx::TensorProto::EXTERNAL);
  auto add = [&](const char* k, const std::string& v) {
    auto* kv = tp->add_external_data();
    kv->set_key(k);
    kv->set_value(v);
  };
  add("location", location);
  add("offset", std::to_string(offset));
  add("length", std::to_string(length));
}

}  // namespace

StatusOr<ir::Model> LoadModelFromBytes(std::string_view bytes, const std::string& base_dir,
                                       const std::string& display_name, const LoadOptions& options) {
  ONNXAMP_RETURN_IF_ERROR(CheckModelSize(bytes.size(), display_name));
  onnx::ModelProto proto;
  {
    google::protobuf::io::CodedInputStream coded(reinterpret_cast<const uint8_t*>(bytes.data()),
                                                 static_cast<int>(bytes.size()));
    LimitParse(&coded);
    if (!proto.ParseFromCodedStream(&coded) || !coded.ConsumedEntireMessage()) {
      return InvalidArgument(Prefix(display_name, DiagnoseParseFailure(bytes)));
    }
  }
  return ModelFromParsed(std::move(proto), base_dir, display_name, options);
}

StatusOr<ir::Model> LoadModel(const std::string& path, const LoadOptions& options) {
  // Parsed straight from the file: the file's bytes are never held in memory next to the parsed model, whose
  // tensor data then move into the IR (peak memory about the size of the weights, not three times it).
  ONNXAMP_ASSIGN_OR_RETURN(InputFile file, InputFile::Open(path, kMaxModelFileBytes));
  ONNXAMP_RETURN_IF_ERROR(CheckModelSize(file.size(), path));
  onnx::ModelProto proto;
  bool parsed = false;
  int read_errno = 0;
  {
    google::protobuf::io::FileInputStream stream(file.fd(), kStreamBlockBytes);
    google::protobuf::io::CodedInputStream coded(&stream);
    LimitParse(&coded);
    parsed = proto.ParseFromCodedStream(&coded) && coded.ConsumedEntireMessage();
    read_errno = stream.GetErrno();
  }
  if (read_errno != 0) return IoError(path, ": read failed: ", std::strerror(read_errno));
  if (!parsed) {
    // Only on this failure path are the bytes read whole, to say what is wrong with them.
    ONNXAMP_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path, kMaxModelFileBytes));
    return InvalidArgument(Prefix(path, DiagnoseParseFailure(bytes)));
  }
  return ModelFromParsed(std::move(proto), FolderOf(path), path, options);
}

Status SaveModel(const ir::Model& model, const std::string& path, const SaveOptions& options) {
  if (!model.graph) return FailedPrecondition(path, ": the model has no graph");
  // The proto is built without the tensors' raw_data, which are streamed from the IR tensors into the file(s):
  // saving needs little memory beyond the model itself.
  onnx::ModelProto proto;
  std::vector<internal::ExportedTensor> tensors;
  internal::ModelToProtoCollect(model, &proto, &tensors, /*defer_raw_data=*/true);
  internal::DeferredRawDataWriter writer;
  for (const internal::ExportedTensor& et : tensors) {
    if (et.raw_data_left_out) writer.Defer(et.proto, et.tensor->bytes());
  }

  // Tensors loaded without their (external) data cannot be written: there is nothing to write.
  for (const internal::ExportedTensor& et : tensors) {
    if (!et.tensor->has_data() && et.tensor->external()) {
      return FailedPrecondition(path, ": tensor '", et.proto->name(),
                                "' was loaded without its external data and cannot be saved");
    }
  }

  std::string data_name = options.external_data_file.empty() ? Basename(path) + ".data" : options.external_data_file;
  std::vector<bool> external(tensors.size(), false);
  bool any_external = false;
  if (options.external_data != ExternalDataMode::kNever) {
    const bool all_large = options.external_data == ExternalDataMode::kAlways ||
                           static_cast<uint64_t>(writer.ByteSize(proto)) > kMaxProtoBytes;
    for (size_t i = 0; i < tensors.size(); ++i) {
      const ir::Tensor& t = *tensors[i].tensor;
      if (!tensors[i].may_be_external || !t.has_data()) continue;
      const bool from_external = options.external_data == ExternalDataMode::kAuto && t.external().has_value();
      external[i] = from_external || (all_large && t.nbytes() >= options.external_threshold_bytes);
      any_external |= external[i];
    }
  }
  if (any_external) {
    ONNXAMP_RETURN_IF_ERROR(internal::CheckExternalLocation(data_name, path));
    // The data written first and the model renamed over it would leave a model that names itself as its data.
    std::error_code ec;
    const std::filesystem::path model_path = std::filesystem::weakly_canonical(path, ec);
    const std::filesystem::path data_path =
        std::filesystem::weakly_canonical(std::filesystem::path(path).parent_path() / data_name, ec);
    if (!ec && model_path == data_path) {
      return InvalidArgument(path, ": the external data file '", data_name, "' is the model file itself");
    }
  }
  std::vector<std::pair<size_t, const ir::Tensor*>> placed;  // (offset in the data file, tensor)
  size_t data_size = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!external[i]) continue;
    const ir::Tensor& t = *tensors[i].tensor;
    const size_t offset = (data_size + kExternalAlignment - 1) / kExternalAlignment * kExternalAlignment;
    SetExternalReference(tensors[i].proto, data_name, offset, t.nbytes());
    writer.Undefer(tensors[i].proto);
    placed.emplace_back(offset, &t);
    data_size = offset + t.nbytes();
  }

  const size_t size = writer.ByteSize(proto);
  if (size > kMaxProtoBytes) {
    return OutOfRange(path, ": the model is ", size,
                      " bytes, over the 2 GiB protobuf limit; save it with external data");
  }
  StreamedFile model_file{path, [&](int fd) { return WriteModelProto(proto, writer, fd, path); }};
  if (!any_external) return WriteStreamedFilesAtomic({model_file});
  const std::string data_path = (std::filesystem::path(FolderOf(path)) / data_name).string();
  // The data file first: the model never appears without the data it points to.
  return WriteStreamedFilesAtomic(
      {{data_path, [&](int fd) { return WriteExternalData(placed, fd, data_path); }}, std::move(model_file)});
}

}  // namespace onnxamp::importer
