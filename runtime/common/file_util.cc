// Bounded file reads and atomic (temporary file + rename) writes.
#include "runtime/common/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace onnxamp {
namespace {

std::string ErrnoText(int err) { return std::strerror(err); }

// Creates a unique temporary file beside `path` and has `write` fill it; returns its name.
StatusOr<std::string> WriteTemporary(const std::string& path, const std::function<Status(int fd)>& write) {
  std::string tmpl = path + ".tmp.XXXXXX";
  int fd = ::mkstemp(tmpl.data());
  if (fd < 0) return IoError(path, ": cannot create a temporary file beside it: ", ErrnoText(errno));
  Status st = write(fd);
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

StatusOr<InputFile> InputFile::Open(const std::string& path, uint64_t max_bytes) {
  // O_NONBLOCK: opening a FIFO for reading would wait for a writer before the check below could refuse it (reads of a
  // regular file ignore the flag).
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return IoError(path, ": cannot open: ", ErrnoText(errno));
  InputFile file(fd, 0);
  struct stat sb;
  if (::fstat(fd, &sb) != 0) return IoError(path, ": cannot stat: ", ErrnoText(errno));
  if (!S_ISREG(sb.st_mode)) return InvalidArgument(path, ": not a regular file");
  if (static_cast<uint64_t>(sb.st_size) > max_bytes) {
    return OutOfRange(path, ": file is ", sb.st_size, " bytes, more than the limit of ", max_bytes);
  }
  file.size_ = static_cast<uint64_t>(sb.st_size);
  return file;
}

InputFile& InputFile::operator=(InputFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    size_ = other.size_;
    other.fd_ = -1;
  }
  return *this;
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

StatusOr<std::string> ReadFile(const std::string& path, uint64_t max_bytes) {
  ONNXAMP_ASSIGN_OR_RETURN(InputFile file, InputFile::Open(path, max_bytes));
  std::string data(static_cast<size_t>(file.size()), '\0');
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::read(file.fd(), data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return IoError(path, ": read failed: ", ErrnoText(errno));
    }
    if (n == 0) break;  // the file shrank while we read it
    done += static_cast<size_t>(n);
  }
  data.resize(done);
  return data;
}

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

namespace {

// Creates and removes a file in folder `dir`; the error names `path` (what the caller will write) and `dir`.
Status ProbeFolder(const std::filesystem::path& dir, const std::string& path) {
  std::string probe = (dir / ".onnxamp-probe-XXXXXX").string();
  const int fd = ::mkstemp(probe.data());
  if (fd < 0) return IoError(path, ": cannot write in ", dir.string(), ": ", ErrnoText(errno));
  ::close(fd);
  ::unlink(probe.c_str());
  return Status::Ok();
}

}  // namespace

Status CheckWritableFile(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) return IoError(path, ": is a folder, not a file");
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  if (!fs::exists(dir, ec)) return IoError(path, ": the folder ", dir.string(), " does not exist");
  if (!fs::is_directory(dir, ec)) return IoError(path, ": ", dir.string(), " is not a folder");
  return ProbeFolder(dir, path);
}

Status CheckWritableFolder(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path dir = fs::absolute(path, ec);
  if (ec) return IoError(path, ": ", ec.message());
  while (!fs::exists(dir, ec)) {
    if (!dir.has_relative_path()) break;
    dir = dir.parent_path();
  }
  if (!fs::is_directory(dir, ec)) {
    return IoError(
        path, ": ",
        dir.string() == fs::absolute(path, ec).string() ? "is not a folder" : dir.string() + " is not a folder");
  }
  return ProbeFolder(dir, path);
}

Status WriteFileAtomic(const std::string& path, std::string_view data) { return WriteFilesAtomic({{path, data}}); }

Status WriteFilesAtomic(const std::vector<PendingFile>& files) {
  std::vector<StreamedFile> streamed;
  streamed.reserve(files.size());
  for (const PendingFile& f : files) {
    streamed.push_back({f.path, [&f](int fd) { return WriteAll(fd, f.data, f.path); }});
  }
  return WriteStreamedFilesAtomic(streamed);
}

Status WriteStreamedFilesAtomic(const std::vector<StreamedFile>& files) {
  std::vector<std::string> temps;
  auto cleanup = [&] {
    for (const std::string& t : temps) ::unlink(t.c_str());
  };
  for (const StreamedFile& f : files) {
    StatusOr<std::string> tmp = WriteTemporary(f.path, f.write);
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

uint64_t PeakResidentBytes() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmHWM:", 0) != 0) continue;
    char* end = nullptr;
    const unsigned long long kib = std::strtoull(line.c_str() + 6, &end, 10);  // "VmHWM:     1234 kB"
    return end == line.c_str() + 6 ? 0 : static_cast<uint64_t>(kib) * 1024;
  }
  return 0;
}

}  // namespace onnxamp
