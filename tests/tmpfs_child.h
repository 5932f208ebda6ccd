// Test helper: runs code in a forked child that has a mount namespace of its own with a small tmpfs mounted in it, so
// that a test can fill a real file system (ENOSPC) without touching the machine's. The child reports key/value
// strings; the parent checks them.
#pragma once

#include <sched.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <string>

namespace onnxamp::tmpfs_child {

// What a child run by RunWithTmpfs reported.
struct TmpfsChildReport {
  std::string skip;     // why the child could not set up (not root, namespaces or tmpfs refused); empty when it ran
  std::string failure;  // the child crashed, timed out or exited with an error; empty when it ran to the end
  std::map<std::string, std::string> values;  // what its body reported
};

// Bytes in use on the file system at `path` (whole blocks), or 0 when statvfs fails.
inline uint64_t UsedBytes(const std::string& path) {
  struct statvfs st {};
  if (::statvfs(path.c_str(), &st) != 0) return 0;
  return static_cast<uint64_t>(st.f_blocks - st.f_bfree) * st.f_frsize;
}

// Resizes the tmpfs mounted at `mount_point` (child only) to `bytes` (rounded up to pages; at least what it holds).
// Returns the OS's reason on failure, else "".
inline std::string ResizeTmpfs(const std::string& mount_point, uint64_t bytes) {
  const std::string options = "size=" + std::to_string(bytes);
  if (::mount("tmpfs", mount_point.c_str(), "tmpfs", MS_REMOUNT | MS_NOSUID | MS_NODEV, options.c_str()) != 0) {
    return std::strerror(errno);
  }
  return "";
}

// Forks a child that enters a new mount namespace (unshare(CLONE_NEWNS), then / made private recursively so that
// nothing it mounts propagates), mounts a tmpfs of `bytes` at `mount_point` (an existing, empty folder) and calls
// body(report). The body must not use gtest assertions (a child's failures do not reach the parent): it fills `report`
// and the parent checks it. Values may hold any bytes but NUL. The child is killed after `timeout_s` seconds.
inline TmpfsChildReport RunWithTmpfs(const std::string& mount_point, uint64_t bytes,
                                     const std::function<void(std::map<std::string, std::string>& report)>& body,
                                     unsigned timeout_s = 120) {
  TmpfsChildReport result;
  if (::geteuid() != 0) {
    result.skip = "needs root (to unshare the mount namespace and mount a tmpfs)";
    return result;
  }
  int fds[2];
  if (::pipe(fds) != 0) {
    result.failure = std::string("pipe: ") + std::strerror(errno);
    return result;
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    result.failure = std::string("fork: ") + std::strerror(errno);
    ::close(fds[0]);
    ::close(fds[1]);
    return result;
  }
  if (pid == 0) {
    ::close(fds[0]);
    ::alarm(timeout_s);
    // Records are "key\0value\0"; a skip is the key "\x01skip".
    auto send = [&](const std::string& key, const std::string& value) {
      std::string record = key + '\0' + value + '\0';
      for (size_t done = 0; done < record.size();) {
        const ssize_t n = ::write(fds[1], record.data() + done, record.size() - done);
        if (n <= 0) ::_exit(3);
        done += static_cast<size_t>(n);
      }
    };
    auto refused = [&](const std::string& what) {
      send("\x01skip", what + ": " + std::strerror(errno));
      ::_exit(77);
    };
    if (::unshare(CLONE_NEWNS) != 0) refused("unshare(CLONE_NEWNS)");
    if (::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) refused("making / private");
    const std::string options = "size=" + std::to_string(bytes);
    if (::mount("tmpfs", mount_point.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, options.c_str()) != 0) {
      refused("mounting a tmpfs at " + mount_point);
    }
    std::map<std::string, std::string> report;
    body(report);
    for (const auto& [key, value] : report) send(key, value);
    ::_exit(0);  // no atexit handlers, no gtest teardown in the child
  }
  ::close(fds[1]);
  std::string data;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    data.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  for (size_t at = 0; at < data.size();) {
    const size_t key_end = data.find('\0', at);
    const size_t value_end = key_end == std::string::npos ? std::string::npos : data.find('\0', key_end + 1);
    if (value_end == std::string::npos) {
      result.failure = "a truncated report";
      break;
    }
    result.values[data.substr(at, key_end - at)] = data.substr(key_end + 1, value_end - key_end - 1);
    at = value_end + 1;
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
    result.skip = result.values["\x01skip"];
  } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    result.failure = WIFSIGNALED(status) ? "the child died of signal " + std::to_string(WTERMSIG(status))
                                         : "the child exited with status " + std::to_string(WEXITSTATUS(status));
  }
  return result;
}

}  // namespace onnxamp::tmpfs_child
