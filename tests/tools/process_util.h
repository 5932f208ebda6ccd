// Test helpers for the tools tests: run a built binary as a subprocess, temporary folders, file access.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace onnxamp::tools_test {

// The binary folder the tests were configured with (CTest also sets ONNXAMP_BINARY_DIR in the environment).
inline std::string BinaryDir() {
  const char* env = std::getenv("ONNXAMP_BINARY_DIR");
  return env && *env ? std::string(env) : std::string(ONNXAMP_BINARY_DIR);
}
inline std::string OnnxampBinary() { return BinaryDir() + "/tools/onnxamp"; }
inline std::string GenModelsBinary() { return BinaryDir() + "/tools/onnxamp_gen_models"; }
inline std::string ModelsDir() { return std::string(ONNXAMP_SOURCE_DIR) + "/models"; }

inline std::string ReadWholeFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void WriteWholeFile(const std::filesystem::path& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
}

// A fresh folder under the system temp folder, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "onnxamp_tools_test_XXXXXX").string();
    if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

  // Names of the entries in the folder, sorted.
  std::vector<std::string> List() const {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(path_)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  std::filesystem::path path_;
};

struct ProcessResult {
  int exit_code = -1;  // -1 when the process could not be started or did not exit normally
  std::string out;
  std::string err;
};

// Runs `argv` (argv[0] is the program path) with stdin from /dev/null and stdout/stderr captured through
// files in a temporary folder, and waits for it.
inline ProcessResult RunProcess(const std::vector<std::string>& argv) {
  ProcessResult result;
  TempDir capture;
  const std::string out_path = capture / "stdout";
  const std::string err_path = capture / "stderr";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    result.err = "posix_spawn failed for " + argv[0];
    return result;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return result;
  }
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  result.out = ReadWholeFile(out_path);
  result.err = ReadWholeFile(err_path);
  return result;
}

// Like RunProcess, but sends `signal` to the process once its stderr holds `after` (checked every millisecond, for at
// most a minute), then waits for it. exit_code is -1 when the signal killed it.
inline ProcessResult RunProcessSignalled(const std::vector<std::string>& argv, int signal, const std::string& after) {
  ProcessResult result;
  TempDir capture;
  const std::string out_path = capture / "stdout";
  const std::string err_path = capture / "stderr";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    result.err = "posix_spawn failed for " + argv[0];
    return result;
  }
  int status = 0;
  bool exited = false;
  for (int ms = 0; ms < 60000; ++ms) {
    if (waitpid(pid, &status, WNOHANG) == pid) {
      exited = true;
      break;
    }
    if (ReadWholeFile(err_path).find(after) != std::string::npos) break;
    usleep(1000);
  }
  if (!exited) {
    kill(pid, signal);
    while (waitpid(pid, &status, 0) < 0) {
      if (errno != EINTR) return result;
    }
  }
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  result.out = ReadWholeFile(out_path);
  result.err = ReadWholeFile(err_path);
  return result;
}

// Runs the onnxamp binary with `args`.
inline ProcessResult RunOnnxamp(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {OnnxampBinary()};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunProcess(argv);
}

// Lines of `text` (a final newline does not start another line).
inline std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace onnxamp::tools_test
