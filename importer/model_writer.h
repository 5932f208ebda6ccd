// Serializing a ModelProto whose tensors' raw_data stay in the IR tensors: the bytes go straight to the file.
// Private to the importer (SaveModel).
#pragma once

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/message.h>
#include <onnx/onnx_pb.h>

#include <cstddef>
#include <span>
#include <unordered_map>

#include "runtime/common/status.h"

namespace onnxamp::importer::internal {

// Writes a message tree in which some TensorProtos have their raw_data left out ("deferred") while the bytes live
// elsewhere (an IR tensor). The output is byte for byte what deterministic protobuf serialization gives for the tree
// with those raw_data fields filled in, but no tensor's bytes are copied into the tree or into one large string: a
// model of N weight bytes is written with N bytes in memory, not 3N.
//
// Messages on the way from the root to a deferred tensor are written field by field through reflection (fields in
// number order, as protobuf does); every other submessage is written by protobuf itself.
class DeferredRawDataWriter {
 public:
  // `tensor` gets `bytes` as its raw_data when written. It must not have raw_data itself; the bytes must stay alive
  // and unchanged until Write returns.
  void Defer(const onnx::TensorProto* tensor, std::span<const std::byte> bytes);
  // Forgets a deferred tensor (its data went to an external file instead).
  void Undefer(const onnx::TensorProto* tensor) { deferred_.erase(tensor); }

  // The serialized size of `root` with the deferred data. Call again after changing the tree or the deferred set.
  size_t ByteSize(const google::protobuf::Message& root);

  // Writes `root` (after ByteSize, with nothing changed since) to `out`, which should be deterministic.
  void Write(const google::protobuf::Message& root, google::protobuf::io::CodedOutputStream* out) const;

 private:
  // Size of `m`; records it in `sizes_` when `m` holds a deferred tensor somewhere below it (or is one).
  size_t Measure(const google::protobuf::Message& m);
  void WriteMessage(const google::protobuf::Message& m, google::protobuf::io::CodedOutputStream* out) const;
  void WriteField(const google::protobuf::Message& m, const google::protobuf::FieldDescriptor* field,
                  google::protobuf::io::CodedOutputStream* out) const;

  std::unordered_map<const google::protobuf::Message*, std::span<const std::byte>> deferred_;
  // Sizes of the messages that hold deferred data (all others are written by protobuf with its cached sizes).
  std::unordered_map<const google::protobuf::Message*, size_t> sizes_;
};

}  // namespace onnxamp::importer::internal
