// Whole-record appends (see record_file.h).
#include "trainer/log/record_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace onnxamp::trainer {

StatusOr<std::unique_ptr<RecordFile>> RecordFile::Open(const std::string& path, Mode mode) {
  const int flags = O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NONBLOCK | (mode == Mode::kCreateNew ? O_EXCL : 0);
  const int fd = ::open(path.c_str(), flags, 0644);
  if (fd < 0) {
    return IoError(path, mode == Mode::kCreateNew ? ": cannot create the file: " : ": cannot open the file: ",
                   std::strerror(errno));
  }
  return std::unique_ptr<RecordFile>(new RecordFile(fd, path));
}

RecordFile::~RecordFile() {
  if (fd_ >= 0) ::close(fd_);
}

Status RecordFile::Append(std::string_view record) {
  const off_t before = ::lseek(fd_, 0, SEEK_END);
  size_t done = 0;
  while (done < record.size()) {
    const ssize_t n = ::write(fd_, record.data() + done, record.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : ENOSPC;
      // Whole records only: what reached the file of this one goes again.
      if (before >= 0 && done > 0) (void)::ftruncate(fd_, before);
      return IoError(path_, ": cannot write: ", std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

}  // namespace onnxamp::trainer
