// File helpers: bounded reads, and writes that never leave a half-written file behind.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/common/status.h"

namespace onnxamp {

// A file open for reading; the descriptor is closed on destruction.
class InputFile {
 public:
  // Opens `path`. Fails (naming the path) if it cannot be opened, is not a regular file, or is larger than
  // `max_bytes`.
  static StatusOr<InputFile> Open(const std::string& path, uint64_t max_bytes = UINT64_MAX);
  InputFile(InputFile&& other) noexcept : fd_(other.fd_), size_(other.size_) { other.fd_ = -1; }
  InputFile& operator=(InputFile&& other) noexcept;
  ~InputFile();

  int fd() const { return fd_; }
  // The size when the file was opened.
  uint64_t size() const { return size_; }

 private:
  InputFile(int fd, uint64_t size) : fd_(fd), size_(size) {}
  int fd_ = -1;
  uint64_t size_ = 0;
};

// Reads a whole file. Fails (naming the path) if it cannot be opened, is not a regular file, or is larger
// than `max_bytes`.
StatusOr<std::string> ReadFile(const std::string& path, uint64_t max_bytes = UINT64_MAX);

// Writes all of `data` to `fd`, retrying short writes. Errors name `path`.
Status WriteAll(int fd, std::string_view data, const std::string& path);

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

// Like WriteFilesAtomic, for files too large to build in memory first: `write` gets the descriptor of the
// temporary file (which it must not close) and writes the contents through it, e.g. a model tensor by tensor.
struct StreamedFile {
  std::string path;
  std::function<Status(int fd)> write;
};
Status WriteStreamedFilesAtomic(const std::vector<StreamedFile>& files);

// This process's peak resident set so far (VmHWM of /proc/self/status), in bytes; 0 where that cannot be read.
// Not getrusage's ru_maxrss: Linux carries that across execve, so a process started by a large parent reports at
// least the parent's peak.
uint64_t PeakResidentBytes();

// Checks made before a long run that ends by writing its results, so that a path it could never write fails at
// once rather than after the work. CheckWritableFile: `path` is not a folder and its folder exists and takes a new
// file (one is created and removed at once: permissions, a read-only mount and a full inode table all show).
// CheckWritableFolder: `path` is a folder that takes a new file, or does not exist yet and its nearest existing
// ancestor is a folder that takes one (nothing is created). Errors name the path.
Status CheckWritableFile(const std::string& path);
Status CheckWritableFolder(const std::string& path);

}  // namespace onnxamp
