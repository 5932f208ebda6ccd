// File helpers: bounded reads, and writes that never leave a half-written file behind.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/common/status.h"

namespace onnxamp {

// Reads a whole file. Fails (naming the path) if it cannot be opened, is not a regular file, or is larger
// than `max_bytes`.
StatusOr<std::string> ReadFile(const std::string& path, uint64_t max_bytes = UINT64_MAX);

// Writes `data` to a temporary file in the same folder, flushes it, and renames it over `path`. On any
// failure (a full disk included) the temporary file is removed and `path` is left as it was.
Status WriteFileAtomic(const std::string& path, std::string_view data);

// Like WriteFileAtomic, for several files that must appear together (a model and its external data): all
// are written to temporaries first, then renamed; if any write fails none is renamed.
struct PendingFile {
  std::string path;
  std::string_view data;
};
Status WriteFilesAtomic(const std::vector<PendingFile>& files);

}  // namespace onnxamp
