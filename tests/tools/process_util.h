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

// A process started with stdin from /dev/null and stdout/stderr captured through files in a temporary folder.
class CapturedProcess {
 public:
  explicit CapturedProcess(const std::vector<std::string>& argv) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    if (posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), environ) != 0) {
      pid_ = 0;
      spawn_error_ = "posix_spawn failed for " + argv[0];
    }
    posix_spawn_file_actions_destroy(&actions);
  }
  ~CapturedProcess() {
    if (pid_ != 0 && !done_) waitpid(pid_, &status_, 0);
  }
  CapturedProcess(const CapturedProcess&) = delete;
  CapturedProcess& operator=(const CapturedProcess&) = delete;

  // True once the process has ended (not waiting for it); false while it runs.
  bool Exited() {
    if (pid_ == 0 || done_) return true;
    done_ = waitpid(pid_, &status_, WNOHANG) == pid_;
    return done_;
  }
  std::string StderrSoFar() const { return ReadWholeFile(err_path_); }
  void Signal(int signal) const {
    if (pid_ != 0) kill(pid_, signal);
  }

  // Waits for the process and returns what it wrote and its exit status.
  ProcessResult Wait() {
    ProcessResult result;
    if (pid_ == 0) {
      result.err = spawn_error_;
      return result;
    }
    while (!done_ && waitpid(pid_, &status_, 0) < 0) {
      if (errno != EINTR) return result;
    }
    done_ = true;
    if (WIFEXITED(status_)) result.exit_code = WEXITSTATUS(status_);
    result.out = ReadWholeFile(out_path_);
    result.err = ReadWholeFile(err_path_);
    return result;
  }

 private:
  TempDir capture_;
  const std::string out_path_ = capture_ / "stdout";
  const std::string err_path_ = capture_ / "stderr";
  pid_t pid_ = 0;
  int status_ = 0;
  bool done_ = false;
  std::string spawn_error_;
};

// Runs `argv` (argv[0] is the program path) with stdin from /dev/null and stdout/stderr captured, and waits for it.
inline ProcessResult RunProcess(const std::vector<std::string>& argv) { return CapturedProcess(argv).Wait(); }

// Like RunProcess, but sends `signal` to the process once its stderr holds `after` (checked every millisecond, for at
// most a minute), then waits for it. exit_code is -1 when the signal killed it.
inline ProcessResult RunProcessSignalled(const std::vector<std::string>& argv, int signal, const std::string& after) {
  CapturedProcess p(argv);
  for (int ms = 0; ms < 60000 && !p.Exited(); ++ms) {
    if (p.StderrSoFar().find(after) != std::string::npos) {
      p.Signal(signal);
      break;
    }
    usleep(1000);
  }
  return p.Wait();
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
