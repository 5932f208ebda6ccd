// TFRecord framing, the container of TensorBoard event files: each record is its length as a little-endian uint64,
// the masked CRC32C of those 8 bytes, the data, and the masked CRC32C of the data.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "runtime/common/status.h"

namespace onnxamp::trainer {

// The 16 + data.size() bytes of one record.
std::string FrameRecord(std::string_view data);

// The records of a whole TFRecord file, both checksums checked. Errors name `name`, the record and its byte offset
// (a truncated record, a length or data checksum that does not match).
StatusOr<std::vector<std::string>> ParseRecords(std::string_view bytes, const std::string& name);

}  // namespace onnxamp::trainer
