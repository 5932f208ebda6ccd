// TFRecord framing: writing one record and reading a whole file back with its checksums checked.
#include "trainer/log/tfrecord.h"

#include <cstdint>

#include "trainer/log/crc32c.h"

namespace onnxamp::trainer {
namespace {

void AppendLe(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xffu));
}

uint64_t ReadLe(std::string_view bytes, size_t at, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
  return v;
}

}  // namespace

std::string FrameRecord(std::string_view data) {
  std::string out;
  out.reserve(data.size() + 16);
  AppendLe(out, data.size(), 8);
  AppendLe(out, MaskCrc32c(Crc32c(std::string_view(out.data(), 8))), 4);
  out.append(data);
  AppendLe(out, MaskCrc32c(Crc32c(data)), 4);
  return out;
}

StatusOr<std::vector<std::string>> ParseRecords(std::string_view bytes, const std::string& name) {
  std::vector<std::string> records;
  size_t at = 0;
  while (at < bytes.size()) {
    const size_t index = records.size();
    if (bytes.size() - at < 12) {
      return InvalidArgument(name, ": record ", index, " at byte ", at, ": truncated header (", bytes.size() - at,
                             " of 12 bytes)");
    }
    const uint64_t length = ReadLe(bytes, at, 8);
    if (MaskCrc32c(Crc32c(bytes.substr(at, 8))) != ReadLe(bytes, at + 8, 4)) {
      return InvalidArgument(name, ": record ", index, " at byte ", at, ": the length checksum does not match");
    }
    if (length > bytes.size() - at - 12 || bytes.size() - at - 12 - length < 4) {
      return InvalidArgument(name, ": record ", index, " at byte ", at, ": truncated (length ", length, ", ",
                             bytes.size() - at - 12, " bytes left)");
    }
    std::string_view data = bytes.substr(at + 12, length);
    if (MaskCrc32c(Crc32c(data)) != ReadLe(bytes, at + 12 + length, 4)) {
      return InvalidArgument(name, ": record ", index, " at byte ", at, ": the data checksum does not match");
    }
    records.emplace_back(data);
    at += 16 + length;
  }
  return records;
}

}  // namespace onnxamp::trainer
