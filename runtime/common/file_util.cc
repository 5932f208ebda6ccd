// Bounded file reads and atomic (temporary file + rename) writes.
#include "runtime/common/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace onnxamp {
namespace {

std::string ErrnoText(int err) { return std::strerror(err); }

// Writes all of `data` to `fd`, retrying short writes.
Status WriteAll(int fd, std::string_view data, const std::string& path) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return IoError(path, ": write failed: ", ErrnoText(errno));
    }
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

// Creates a unique temporary file beside `path` and writes `data` to it; returns its name.
StatusOr<std::string> WriteTemporary(const std::string& path, std::string_view data) {
  std::string tmpl = path + ".tmp.XXXXXX";
  int fd = ::mkstemp(tmpl.data());
  if (fd < 0) return IoError(path, ": cannot create a temporary file beside it: ", ErrnoText(errno));
  Status st = WriteAll(fd, data, path);
  if (st.ok() && ::fsync(fd) != 0) st = IoError(path, ": flush failed: ", ErrnoText(errno));
  // mkstemp creates 0600; give the file the permissions an ordinary create would.
  mode_t mask = ::umask(0);
  ::umask(mask);
  ::fchmod(fd, 0666 & ~mask);
  if (::close(fd) != 0 && st.ok()) st = IoError(path, ": close failed: ", ErrnoText(errno));
  if (!st.ok()) {
    ::unlink(tmpl.c_str());
    return st;
  }
  return tmpl;
}

}  // namespace

StatusOr<std::string> ReadFile(const std::string& path, uint64_t max_bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return IoError(path, ": cannot open: ", ErrnoText(errno));
  struct stat sb;
  if (::fstat(fd, &sb) != 0) {
    int err = errno;
    ::close(fd);
    return IoError(path, ": cannot stat: ", ErrnoText(err));
  }
  if (!S_ISREG(sb.st_mode)) {
    ::close(fd);
    return InvalidArgument(path, ": not a regular file");
  }
  if (static_cast<uint64_t>(sb.st_size) > max_bytes) {
    ::close(fd);
    return OutOfRange(path, ": file is ", sb.st_size, " bytes, more than the limit of ", max_bytes);
  }
  std::string data(static_cast<size_t>(sb.st_size), '\0');
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::read(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return IoError(path, ": read failed: ", ErrnoText(err));
    }
    if (n == 0) break;  // the file shrank while we read it
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  data.resize(done);
  return data;
}

Status WriteFileAtomic(const std::string& path, std::string_view data) { return WriteFilesAtomic({{path, data}}); }

Status WriteFilesAtomic(const std::vector<PendingFile>& files) {
  std::vector<std::string> temps;
  auto cleanup = [&] {
    for (const std::string& t : temps) ::unlink(t.c_str());
  };
  for (const PendingFile& f : files) {
    StatusOr<std::string> tmp = WriteTemporary(f.path, f.data);
    if (!tmp.ok()) {
      cleanup();
      return tmp.status();
    }
    temps.push_back(*tmp);
  }
  for (size_t i = 0; i < files.size(); ++i) {
    if (::rename(temps[i].c_str(), files[i].path.c_str()) != 0) {
      int err = errno;
      for (size_t j = i; j < temps.size(); ++j) ::unlink(temps[j].c_str());
      return IoError(files[i].path, ": cannot rename the temporary file into place: ", ErrnoText(err));
    }
  }
  return Status::Ok();
}

}  // namespace onnxamp
