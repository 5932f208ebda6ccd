// DeferredRawDataWriter: reflection-driven serialization of the messages that hold deferred raw_data.
#include "importer/model_writer.h"

#include <google/protobuf/wire_format.h>
#include <google/protobuf/wire_format_lite.h>

#include <algorithm>
#include <climits>
#include <vector>

namespace onnxamp::importer::internal {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;
using google::protobuf::internal::WireFormat;
using google::protobuf::internal::WireFormatLite;
using google::protobuf::io::CodedOutputStream;

constexpr int kRawDataField = onnx::TensorProto::kRawDataFieldNumber;

uint32_t LengthDelimitedTag(int field_number) {
  return WireFormatLite::MakeTag(field_number, WireFormatLite::WIRETYPE_LENGTH_DELIMITED);
}

size_t LengthDelimitedSize(int field_number, size_t payload) {
  return CodedOutputStream::VarintSize32(LengthDelimitedTag(field_number)) + CodedOutputStream::VarintSize64(payload) +
         payload;
}

std::vector<const FieldDescriptor*> SetFields(const Message& m) {
  std::vector<const FieldDescriptor*> fields;
  m.GetReflection()->ListFields(m, &fields);  // in field number order, the order protobuf writes them in
  return fields;
}

// Calls `fn` on each message held by message field `f` of `m`.
template <typename Fn>
void ForEachSubmessage(const Message& m, const FieldDescriptor* f, Fn fn) {
  const Reflection* r = m.GetReflection();
  if (f->is_repeated()) {
    const int n = r->FieldSize(m, f);
    for (int i = 0; i < n; ++i) fn(r->GetRepeatedMessage(m, f, i));
  } else {
    fn(r->GetMessage(m, f));
  }
}

}  // namespace

void DeferredRawDataWriter::Defer(const onnx::TensorProto* tensor, std::span<const std::byte> bytes) {
  ONNXAMP_CHECK(!tensor->has_raw_data(), "a deferred tensor must not carry raw_data itself");
  deferred_[tensor] = bytes;
}

size_t DeferredRawDataWriter::ByteSize(const Message& root) {
  sizes_.clear();
  return Measure(root);
}

size_t DeferredRawDataWriter::Measure(const Message& m) {
  size_t total = 0;
  auto it = deferred_.find(&m);
  bool holds_deferred = it != deferred_.end();
  if (holds_deferred) total += LengthDelimitedSize(kRawDataField, it->second.size());
  for (const FieldDescriptor* f : SetFields(m)) {
    if (f->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) {
      total += WireFormat::FieldByteSize(f, m);
      continue;
    }
    ONNXAMP_CHECK(f->type() == FieldDescriptor::TYPE_MESSAGE, "group fields are not used by ONNX");
    ForEachSubmessage(m, f, [&](const Message& sub) {
      total += LengthDelimitedSize(f->number(), Measure(sub));
      holds_deferred |= sizes_.count(&sub) > 0;
    });
  }
  total += WireFormat::ComputeUnknownFieldsSize(m.GetReflection()->GetUnknownFields(m));
  if (holds_deferred) sizes_[&m] = total;
  return total;
}

void DeferredRawDataWriter::Write(const Message& root, CodedOutputStream* out) const {
  if (sizes_.count(&root)) {
    WriteMessage(root, out);
  } else {
    root.ByteSizeLong();  // caches the sizes SerializeWithCachedSizes needs
    root.SerializeWithCachedSizes(out);
  }
}

void DeferredRawDataWriter::WriteMessage(const Message& m, CodedOutputStream* out) const {
  auto it = deferred_.find(&m);
  bool raw_pending = it != deferred_.end();
  auto write_raw = [&] {
    const std::span<const std::byte> bytes = it->second;
    out->WriteTag(LengthDelimitedTag(kRawDataField));
    out->WriteVarint64(bytes.size());
    for (size_t done = 0; done < bytes.size();) {
      const size_t chunk = std::min<size_t>(bytes.size() - done, size_t{1} << 30);
      out->WriteRaw(bytes.data() + done, static_cast<int>(chunk));
      done += chunk;
    }
    raw_pending = false;
  };
  for (const FieldDescriptor* f : SetFields(m)) {
    if (raw_pending && f->number() > kRawDataField) write_raw();
    WriteField(m, f, out);
  }
  if (raw_pending) write_raw();
  WireFormat::SerializeUnknownFields(m.GetReflection()->GetUnknownFields(m), out);
}

void DeferredRawDataWriter::WriteField(const Message& m, const FieldDescriptor* f, CodedOutputStream* out) const {
  if (f->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) {
    WireFormat::SerializeFieldWithCachedSizes(f, m, out);
    return;
  }
  ForEachSubmessage(m, f, [&](const Message& sub) {
    out->WriteTag(LengthDelimitedTag(f->number()));
    auto it = sizes_.find(&sub);
    if (it != sizes_.end()) {
      out->WriteVarint64(it->second);
      WriteMessage(sub, out);
    } else {
      out->WriteVarint64(sub.ByteSizeLong());  // also caches the sizes SerializeWithCachedSizes needs
      sub.SerializeWithCachedSizes(out);
    }
  });
}

}  // namespace onnxamp::importer::internal
