// Files that grow by whole records: DIR/metrics.jsonl's lines and a TensorBoard event file's TFRecord-framed events.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "runtime/common/status.h"

namespace onnxamp::trainer {

// Each Append writes its bytes with as few system calls as the kernel allows and, when the disk fills or a write fails
// part-way, cuts off again what reached the file of them, so that a reader never finds a partial record at the end
// (TensorBoard stops reading an event file at a cut record; a JSON-lines reader fails on a cut line).
class RecordFile {
 public:
  // kAppend: appended to, created if missing (a resumed run continues metrics.jsonl); kCreateNew: a new file, which
  // must not exist. Errors name the file and the system's reason.
  enum class Mode { kAppend, kCreateNew };
  static StatusOr<std::unique_ptr<RecordFile>> Open(const std::string& path, Mode mode);
  ~RecordFile();
  RecordFile(const RecordFile&) = delete;
  RecordFile& operator=(const RecordFile&) = delete;

  // Appends `record` whole, or nothing of it. Errors name the file and the system's reason.
  Status Append(std::string_view record);
  const std::string& path() const { return path_; }

 private:
  RecordFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_;
  std::string path_;
};

}  // namespace onnxamp::trainer
