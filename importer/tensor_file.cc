// Tensor files: dispatch by extension (or content) to TensorProto (.pb), NumPy .npy and .npz readers and writers.
#include "importer/tensor_file.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <limits>

#include "importer/npy.h"
#include "importer/npz.h"
#include "importer/onnx_proto.h"
#include "runtime/common/file_util.h"

namespace onnxamp::importer {
namespace {

// Protocol Buffers cannot parse or write messages of 2 GiB or more.
constexpr uint64_t kMaxProtoBytes = std::numeric_limits<int32_t>::max();

enum class Format { kPb, kNpy, kNpz };

std::string LowerExtension(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext;
}

std::optional<Format> FormatFromExtension(const std::string& path) {
  const std::string ext = LowerExtension(path);
  if (ext == ".pb") return Format::kPb;
  if (ext == ".npy") return Format::kNpy;
  if (ext == ".npz") return Format::kNpz;
  return std::nullopt;
}

// The format of a file to read: by extension, else by its first bytes (NumPy magic, zip signature, else .pb).
StatusOr<Format> FormatForReading(const std::string& path) {
  if (std::optional<Format> f = FormatFromExtension(path)) return *f;
  std::error_code ec;
  if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec)) {
    return InvalidArgument(path, ": not a regular file");  // before the open, which would wait on a FIFO
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return IoError(path, ": cannot open");
  char head[6] = {};
  in.read(head, sizeof(head));
  const std::string_view prefix(head, static_cast<size_t>(in.gcount()));
  if (prefix == kNpyMagic) return Format::kNpy;
  if (prefix.starts_with("PK\x03\x04") || prefix.starts_with("PK\x05\x06")) return Format::kNpz;
  return Format::kPb;
}

StatusOr<ir::Tensor> ReadPb(const std::string& path) {
  ONNXAMP_ASSIGN_OR_RETURN(std::string data, ReadFile(path, kMaxProtoBytes));
  onnx::TensorProto proto;
  google::protobuf::io::ArrayInputStream input(data.data(), static_cast<int>(data.size()));
  google::protobuf::io::CodedInputStream coded(&input);
  coded.SetTotalBytesLimit(static_cast<int>(data.size()));
  if (!proto.ParseFromCodedStream(&coded) || !coded.ConsumedEntireMessage()) {
    return InvalidArgument(path, ": not a valid ONNX TensorProto (protobuf parse failed)");
  }
  const ExternalDataContext ext;  // empty base_dir: a lone tensor file may not point at other files
  return TensorFromProto(proto, ext, path);
}

StatusOr<ir::Tensor> ReadNpyFile(const std::string& path) {
  ONNXAMP_ASSIGN_OR_RETURN(std::string data, ReadFile(path));
  ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor tensor, ParseNpy(data, path));
  tensor.set_name(std::filesystem::path(path).stem().string());
  return tensor;
}

Status WritePb(const ir::Tensor& tensor, const std::string& path) {
  ir::Tensor copy = tensor;  // shares the bytes
  if (copy.dtype() != DType::kString) copy.set_encoding(ir::TensorEncoding::kRaw);
  copy.set_external(std::nullopt);
  onnx::TensorProto proto;
  TensorToProto(copy, &proto);
  const size_t size = proto.ByteSizeLong();
  if (size > kMaxProtoBytes) {
    return OutOfRange(path, ": tensor '", tensor.name(), "' needs ", size,
                      " bytes as a TensorProto, over protobuf's 2 GiB limit; write an .npy file instead");
  }
  std::string bytes;
  if (!proto.SerializeToString(&bytes)) return Internal(path, ": cannot serialise tensor '", tensor.name(), "'");
  return WriteFileAtomic(path, bytes);
}

}  // namespace

StatusOr<ir::Tensor> ReadTensorFile(const std::string& path) {
  ONNXAMP_ASSIGN_OR_RETURN(Format format, FormatForReading(path));
  switch (format) {
    case Format::kPb:
      return ReadPb(path);
    case Format::kNpy:
      return ReadNpyFile(path);
    case Format::kNpz: {
      ONNXAMP_ASSIGN_OR_RETURN(std::vector<ir::Tensor> tensors, ReadNpz(path));
      if (tensors.size() != 1) {
        return InvalidArgument(path, ": the .npz archive holds ", tensors.size(),
                               " arrays where one tensor was expected");
      }
      return std::move(tensors[0]);
    }
  }
  return Internal(path, ": unknown tensor file format");
}

StatusOr<std::vector<ir::Tensor>> ReadTensors(const std::string& path) {
  ONNXAMP_ASSIGN_OR_RETURN(Format format, FormatForReading(path));
  if (format == Format::kNpz) return ReadNpz(path);
  ONNXAMP_ASSIGN_OR_RETURN(ir::Tensor tensor, ReadTensorFile(path));
  std::vector<ir::Tensor> tensors;
  tensors.push_back(std::move(tensor));
  return tensors;
}

Status WriteTensorFile(const ir::Tensor& tensor, const std::string& path) {
  const std::optional<Format> format = FormatFromExtension(path);
  if (!format) {
    return InvalidArgument(path, ": unknown tensor file extension '", LowerExtension(path),
                           "' (expected .pb, .npy or .npz)");
  }
  switch (*format) {
    case Format::kPb:
      return WritePb(tensor, path);
    case Format::kNpy: {
      ONNXAMP_ASSIGN_OR_RETURN(std::string bytes, SerializeNpy(tensor, path));
      return WriteFileAtomic(path, bytes);
    }
    case Format::kNpz: {
      ir::Tensor named = tensor;  // shares the bytes
      if (named.name().empty()) named.set_name(std::filesystem::path(path).stem().string());
      return WriteNpz({named}, path);
    }
  }
  return Internal(path, ": unknown tensor file format");
}

Status WriteNpz(const std::vector<ir::Tensor>& tensors, const std::string& path) {
  ONNXAMP_ASSIGN_OR_RETURN(std::string bytes, SerializeNpz(tensors, path));
  return WriteFileAtomic(path, bytes);
}

}  // namespace onnxamp::importer
