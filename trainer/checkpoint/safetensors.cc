// safetensors: serialisation, and a strict parser of untrusted bytes.
#include "trainer/checkpoint/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

namespace onnxamp::trainer {
namespace {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

constexpr std::string_view kMetadataKey = "__metadata__";

struct DTypeNameEntry {
  DType dtype;
  std::string_view name;
};
constexpr DTypeNameEntry kDTypeNames[] = {
    {DType::kFloat32, "F32"}, {DType::kFloat16, "F16"}, {DType::kBFloat16, "BF16"}, {DType::kFloat64, "F64"},
    {DType::kInt64, "I64"},   {DType::kInt32, "I32"},   {DType::kInt16, "I16"},     {DType::kInt8, "I8"},
    {DType::kUint64, "U64"},  {DType::kUint32, "U32"},  {DType::kUint16, "U16"},    {DType::kUint8, "U8"},
    {DType::kBool, "BOOL"},
};

std::optional<DType> DTypeFromSafetensorsName(std::string_view name) {
  for (const DTypeNameEntry& e : kDTypeNames) {
    if (e.name == name) return e.dtype;
  }
  return std::nullopt;
}

// A non-negative integer that fits int64 (JSON numbers may be negative, fractional or beyond 2^64).
std::optional<uint64_t> Unsigned(const nlohmann::json& j) {
  if (j.is_number_unsigned()) return j.get<uint64_t>();
  if (j.is_number_integer() && j.get<int64_t>() >= 0) return static_cast<uint64_t>(j.get<int64_t>());
  return std::nullopt;
}

struct Entry {
  std::string name;
  DType dtype = DType::kUndefined;
  std::vector<int64_t> dims;
  uint64_t begin = 0;
  uint64_t end = 0;
};

StatusOr<Entry> ParseEntry(const std::string& name, const nlohmann::json& j, const std::string& what) {
  auto bad = [&](const std::string& why) { return InvalidArgument(what, ": tensor '", name, "': ", why); };
  if (!j.is_object()) return bad("the header entry is not an object");
  if (j.size() != 3 || !j.contains("dtype") || !j.contains("shape") || !j.contains("data_offsets")) {
    return bad("the header entry must have exactly the keys dtype, shape and data_offsets");
  }
  Entry e;
  e.name = name;
  const nlohmann::json& dtype = j["dtype"];
  if (!dtype.is_string()) return bad("dtype is not a string");
  const std::optional<DType> dt = DTypeFromSafetensorsName(dtype.get<std::string>());
  if (!dt) return bad(StrCat("unsupported dtype '", dtype.get<std::string>(), "'"));
  e.dtype = *dt;
  const nlohmann::json& shape = j["shape"];
  if (!shape.is_array() || shape.size() > 64) return bad("shape is not an array of at most 64 dims");
  for (const nlohmann::json& d : shape) {
    const std::optional<uint64_t> v = Unsigned(d);
    if (!v || *v > static_cast<uint64_t>(INT64_MAX)) return bad("shape holds a value that is not a dim");
    e.dims.push_back(static_cast<int64_t>(*v));
  }
  const nlohmann::json& offsets = j["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2) return bad("data_offsets is not [begin, end]");
  const std::optional<uint64_t> begin = Unsigned(offsets[0]);
  const std::optional<uint64_t> end = Unsigned(offsets[1]);
  if (!begin || !end || *begin > *end) return bad("data_offsets is not [begin, end] with 0 <= begin <= end");
  e.begin = *begin;
  e.end = *end;
  StatusOr<size_t> bytes = ir::Tensor::ComputeByteSize(e.dtype, e.dims);
  if (!bytes.ok()) return bad(StrCat("shape is too large: ", bytes.status().message()));
  if (*bytes != e.end - e.begin) {
    return bad(StrCat("data_offsets [", e.begin, ", ", e.end, "] span ", e.end - e.begin,
                      " bytes, the dtype and shape ", *bytes));
  }
  return e;
}

}  // namespace

std::string_view SafetensorsDTypeName(DType dtype) {
  for (const DTypeNameEntry& e : kDTypeNames) {
    if (e.dtype == dtype) return e.name;
  }
  return {};
}

Status WriteSafetensors(const std::vector<ir::Tensor>& tensors, const std::map<std::string, std::string>& metadata,
                        const std::function<Status(std::string_view)>& sink) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    header[std::string(kMetadataKey)] = std::move(meta);
  }
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const ir::Tensor& t : tensors) {
    if (t.name().empty() || t.name() == kMetadataKey)
      return InvalidArgument("safetensors: invalid tensor name '", t.name(), "'");
    if (!names.insert(t.name()).second) return InvalidArgument("safetensors: tensor '", t.name(), "' appears twice");
    const std::string_view dtype = SafetensorsDTypeName(t.dtype());
    if (dtype.empty()) {
      return InvalidArgument("safetensors: tensor '", t.name(), "' has type ", DTypeName(t.dtype()),
                             ", which safetensors cannot store");
    }
    ONNXAMP_ASSIGN_OR_RETURN(size_t bytes, ir::Tensor::ComputeByteSize(t.dtype(), t.dims()));
    if (bytes > 0 && (!t.has_data() || !t.on_host() || t.nbytes() < bytes)) {
      return InvalidArgument("safetensors: tensor '", t.name(), "' has no host data");
    }
    nlohmann::ordered_json entry = nlohmann::ordered_json::object();
    entry["dtype"] = std::string(dtype);
    entry["shape"] = t.dims();
    entry["data_offsets"] = {offset, offset + bytes};
    header[t.name()] = std::move(entry);
    offset += bytes;
  }
  std::string json = header.dump();
  // Spaces up to where the data start 16-byte aligned (the length stays a multiple of 8, as the reference writer's),
  // so that a mapped file's tensors can be used in place.
  json.append((16 - (8 + json.size()) % 16) % 16, ' ');
  std::string head;
  head.reserve(8 + json.size());
  const uint64_t n = json.size();
  for (int b = 0; b < 8; ++b) head.push_back(static_cast<char>((n >> (8 * b)) & 0xff));
  head += json;
  ONNXAMP_RETURN_IF_ERROR(sink(head));
  for (const ir::Tensor& t : tensors) {
    const size_t bytes = *ir::Tensor::ComputeByteSize(t.dtype(), t.dims());
    if (bytes > 0) ONNXAMP_RETURN_IF_ERROR(sink(std::string_view(reinterpret_cast<const char*>(t.data()), bytes)));
  }
  return Status::Ok();
}

StatusOr<std::string> SerializeSafetensors(const std::vector<ir::Tensor>& tensors,
                                           const std::map<std::string, std::string>& metadata) {
  std::string out;
  ONNXAMP_RETURN_IF_ERROR(WriteSafetensors(tensors, metadata, [&](std::string_view piece) {
    out.append(piece);
    return Status::Ok();
  }));
  return out;
}

StatusOr<SafetensorsFile> ParseSafetensors(std::string_view bytes, const std::string& what,
                                           std::shared_ptr<void> keep_alive) {
  if (bytes.size() < 8) return InvalidArgument(what, ": ", bytes.size(), " bytes, too short for a safetensors file");
  uint64_t n = 0;
  for (int b = 0; b < 8; ++b) n |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[b])) << (8 * b);
  if (n > kSafetensorsMaxHeaderBytes) {
    return InvalidArgument(what, ": the header length ", n, " exceeds the limit of ", kSafetensorsMaxHeaderBytes,
                           " bytes");
  }
  if (n > bytes.size() - 8) {
    return InvalidArgument(what, ": the header length ", n, " runs past the end of the ", bytes.size(), "-byte file");
  }
  const std::string_view text = bytes.substr(8, n);
  if (text.empty() || text[0] != '{') return InvalidArgument(what, ": the header is not a JSON object");
  // Repeated keys of the top-level object are refused (nlohmann would keep the last one silently).
  int depth = 0;
  bool repeated = false;
  std::string repeated_name;
  std::set<std::string> seen;
  nlohmann::json::parser_callback_t cb = [&](int d, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    (void)d;
    if (event == nlohmann::json::parse_event_t::object_start) ++depth;
    if (event == nlohmann::json::parse_event_t::object_end) --depth;
    if (event == nlohmann::json::parse_event_t::key && depth == 1 && parsed.is_string()) {
      if (!seen.insert(parsed.get<std::string>()).second && !repeated) {
        repeated = true;
        repeated_name = parsed.get<std::string>();
      }
    }
    return true;
  };
  const nlohmann::json header = nlohmann::json::parse(text.begin(), text.end(), cb, /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object()) return InvalidArgument(what, ": the header is not valid JSON");
  if (repeated) return InvalidArgument(what, ": the header names '", repeated_name, "' twice");

  SafetensorsFile file;
  std::vector<Entry> entries;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == kMetadataKey) {
      if (!it.value().is_object()) return InvalidArgument(what, ": __metadata__ is not an object");
      for (auto m = it.value().begin(); m != it.value().end(); ++m) {
        if (!m.value().is_string())
          return InvalidArgument(what, ": __metadata__ value '", m.key(), "' is not a string");
        file.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    ONNXAMP_ASSIGN_OR_RETURN(Entry e, ParseEntry(it.key(), it.value(), what));
    entries.push_back(std::move(e));
  }
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  const uint64_t data_size = bytes.size() - 8 - n;
  uint64_t expected = 0;
  for (const Entry& e : entries) {
    if (e.begin != expected) {
      return InvalidArgument(what, ": tensor '", e.name, "' starts at byte ", e.begin, " of the data, expected ",
                             expected, e.begin < expected ? " (overlapping tensors)" : " (a gap)");
    }
    if (e.end > data_size) {
      return InvalidArgument(what, ": tensor '", e.name, "' ends at byte ", e.end, ", past the ", data_size,
                             " bytes of data (truncated file?)");
    }
    expected = e.end;
  }
  if (expected != data_size) {
    return InvalidArgument(what, ": the tensors cover ", expected, " of the ", data_size, " data bytes");
  }
  const char* data = bytes.data() + 8 + n;
  for (const Entry& e : entries) {
    const auto* begin = reinterpret_cast<const std::byte*>(data + e.begin);
    const auto size = static_cast<size_t>(e.end - e.begin);
    ir::Tensor t;
    if (keep_alive && size > 0 && reinterpret_cast<uintptr_t>(begin) % 16 == 0) {
      // A view: the tensor's buffer points into `bytes` (read-only by contract: the caller's mapping). Data that do
      // not start 16-byte aligned (what ir::Buffer promises) are copied.
      auto buffer = std::make_shared<ir::Buffer>(const_cast<std::byte*>(begin), size, keep_alive);
      t = ir::Tensor::FromBuffer(e.dtype, e.dims, std::move(buffer));
    } else {
      ONNXAMP_ASSIGN_OR_RETURN(t, ir::Tensor::FromBytes(e.dtype, e.dims, std::span<const std::byte>(begin, size)));
    }
    t.set_name(e.name);
    file.tensors.push_back(std::move(t));
  }
  return file;
}

}  // namespace onnxamp::trainer
