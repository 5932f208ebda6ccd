// onnxamp_conformance: runs the ONNX backend test suite (libonnx-testdata) through the CPU runtime or the CUDA
// backend (--device cuda), prints passed / failed / unsupported counts per suite, and checks the failures against
// a checked-in list.
//
// Exit status: 0 when the run matches expectations (or, without --expected, when nothing failed); 1 otherwise;
// 2 on a usage error; 77 when the test data folder does not exist, or --device cuda finds no usable device (CTest's
// skip code for these tests).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/common/file_util.h"
#include "tests/conformance/expected.h"
#include "tests/conformance/isolate.h"
#include "tests/conformance/runner.h"

namespace onnxamp::conformance {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;
constexpr int kExitSkip = 77;

constexpr const char* kDefaultRoot = "/usr/share/libonnx-testdata/data";

// Device runs with --isolate: worker processes started by default (they share one GPU; --threads overrides).
constexpr int kDefaultDeviceWorkers = 4;

// Without --verbose, the least time between two progress lines.
constexpr double kProgressSeconds = 10;

struct Args {
  std::string root;  // --root / --data-dir, else $ONNXAMP_TESTDATA_DIR, else kDefaultRoot
  std::string device = "cpu";
  int device_index = 0;
  std::vector<std::string> suites = {"node", "pytorch-converted", "pytorch-operator", "simple"};
  std::string filter;
  bool verbose = false;
  bool list_failures = false;
  bool list_unsupported = false;
  std::string expected;
  bool update_expected = false;
  int threads = 0;
  int session_threads = 1;
  bool isolate = false;
  double timeout = 120;
  bool worker = false;  // hidden: serve tests to a parent run (isolate.h)
};

// ------------------------------------------------------------------ crash report (in-process mode)

// The test each worker is running, for the message printed when the process dies from a signal.
constexpr int kMaxWorkers = 256;
std::atomic<const char*> g_current[kMaxWorkers];

void WriteStr(const char* s) {
  if (write(STDERR_FILENO, s, std::strlen(s)) < 0) return;
}

void OnFatalSignal(int sig) {
  WriteStr("\nonnxamp_conformance: crashed (");
  WriteStr(strsignal(sig));
  WriteStr(") while running:");
  for (auto& c : g_current) {
    const char* id = c.load();
    if (id) {
      WriteStr(" ");
      WriteStr(id);
    }
  }
  WriteStr("\nonnxamp_conformance: rerun with --isolate to run each test in its own process\n");
  signal(sig, SIG_DFL);
  raise(sig);
}

void InstallCrashReport() {
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) signal(sig, OnFatalSignal);
}

// ------------------------------------------------------------------ reporting

struct Counts {
  int passed = 0, failed = 0, unsupported = 0;
  void Add(Outcome o) { (o == Outcome::kPassed ? passed : o == Outcome::kFailed ? failed : unsupported) += 1; }
  int total() const { return passed + failed + unsupported; }
};

std::string Line(const char* label, const Counts& c) {
  char buf[200];
  std::snprintf(buf, sizeof buf, "  %-20s %7d %7d %12d %7d", label, c.passed, c.failed, c.unsupported, c.total());
  return buf;
}

void PrintSummary(const std::vector<TestCase>& tests, const std::vector<TestResult>& results, double seconds) {
  std::map<std::string, Counts> per_suite;
  std::vector<std::string> order;
  Counts total;
  for (size_t i = 0; i < tests.size(); ++i) {
    if (!per_suite.count(tests[i].suite)) order.push_back(tests[i].suite);
    per_suite[tests[i].suite].Add(results[i].outcome);
    total.Add(results[i].outcome);
  }
  std::printf("  %-20s %7s %7s %12s %7s\n", "suite", "passed", "failed", "unsupported", "total");
  for (const std::string& s : order) std::printf("%s\n", Line(s.c_str(), per_suite[s]).c_str());
  std::printf("%d passed, %d failed, %d unsupported (%d tests, %.1f s)\n", total.passed, total.failed,
              total.unsupported, total.total(), seconds);
}

// Failing tests grouped by the op they are attributed to.
void PrintFailures(const std::vector<TestCase>& tests, const std::vector<TestResult>& results) {
  std::map<std::string, std::vector<size_t>> by_op;
  for (size_t i = 0; i < tests.size(); ++i) {
    if (results[i].outcome == Outcome::kFailed) by_op[results[i].culprit].push_back(i);
  }
  if (by_op.empty()) return;
  std::printf("failures by op:\n");
  for (const auto& [op, idx] : by_op) {
    std::printf("  %s (%zu)\n", op.c_str(), idx.size());
    for (size_t i : idx) std::printf("    %s: %s\n", tests[i].id().c_str(), results[i].reason.c_str());
  }
}

// Unsupported tests grouped by what puts them out of scope.
void PrintUnsupported(const std::vector<TestCase>& tests, const std::vector<TestResult>& results) {
  std::map<std::string, std::vector<size_t>> by_item;
  for (size_t i = 0; i < tests.size(); ++i) {
    if (results[i].outcome != Outcome::kUnsupported) continue;
    for (const std::string& item : results[i].out_of_scope) by_item[item].push_back(i);
  }
  if (by_item.empty()) return;
  std::vector<std::pair<std::string, std::vector<size_t>>> sorted(by_item.begin(), by_item.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.second.size() > b.second.size(); });
  std::printf("unsupported, by what the tests use outside the runtime's scope:\n");
  for (const auto& [item, idx] : sorted) {
    std::string names;
    for (size_t k = 0; k < idx.size() && k < 4; ++k) {
      if (k) names += ", ";
      names += tests[idx[k]].id();
    }
    if (idx.size() > 4) names += ", ...";
    std::printf("  %-28s %4zu  %s\n", item.c_str(), idx.size(), names.c_str());
  }
}

void PrintResultLine(const TestCase& t, const TestResult& r) {
  const char* tag = r.outcome == Outcome::kPassed ? "PASS" : r.outcome == Outcome::kFailed ? "FAIL" : "UNSUPPORTED";
  const std::string on_cpu = r.cpu_nodes > 0 ? StrCat(" [", r.cpu_nodes, " nodes on the CPU]") : "";
  std::printf("%-11s %s (%.0f ms)%s%s%s\n", tag, t.id().c_str(), r.seconds * 1000, on_cpu.c_str(),
              r.reason.empty() ? "" : ": ", r.reason.c_str());
  std::fflush(stdout);
}

// Device runs: how many tests ran wholly on the device, and which ran some nodes on the CPU (ops without a device
// kernel, shape computations kept on the host).
void PrintPlacement(const std::vector<TestCase>& tests, const std::vector<TestResult>& results, bool list) {
  int on_device = 0, mixed = 0;
  for (const TestResult& r : results) {
    on_device += r.cpu_nodes == 0;
    mixed += r.cpu_nodes > 0;
  }
  std::printf("placement: %d tests ran every node on the device, %d ran some nodes on the CPU\n", on_device, mixed);
  if (!list || mixed == 0) return;
  for (size_t i = 0; i < tests.size(); ++i) {
    if (results[i].cpu_nodes > 0)
      std::printf("  %s: %d nodes on the CPU\n", tests[i].id().c_str(), results[i].cpu_nodes);
  }
}

// Whether `device` is usable: `ok`, and the devices (or why there is none) in `text`. Asked in a forked child when
// `in_child`, so that this process never initialises CUDA before it forks the test processes (a child forked after
// its parent initialised CUDA cannot use it).
struct DeviceProbe {
  bool ok = false;
  std::string text;
};

DeviceProbe ProbeDevice(exec::Device device, bool in_child) {
  auto probe = [device] {
    Status st = PrepareDevice(device);
    return DeviceProbe{st.ok(), st.ok() ? DescribeDevices() : st.message()};
  };
  if (!in_child) return probe();
  int fds[2];
  if (pipe(fds) != 0) return {false, StrCat("pipe failed: ", std::strerror(errno))};
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    const DeviceProbe p = probe();
    if (!p.text.empty() && write(fds[1], p.text.data(), p.text.size()) < 0) _exit(2);
    _exit(p.ok ? 0 : 1);
  }
  close(fds[1]);
  if (pid < 0) {
    close(fds[0]);
    return {false, StrCat("fork failed: ", std::strerror(errno))};
  }
  std::string text;
  char buf[512];
  for (;;) {
    const ssize_t n = read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (!ok && text.empty()) text = StrCat("the device probe process failed (wait status ", status, ")");
  return {ok, text};
}

// "conformance: 412 of 1312 tests done, 37 s" on stderr, at most every kProgressSeconds, so that a long run never
// looks hung.
class Progress {
 public:
  Progress(size_t total, bool enabled) : total_(total), enabled_(enabled), start_(Clock::now()), last_(start_) {}

  // One more test done (from any thread).
  void Done() {
    std::lock_guard<std::mutex> lock(mu_);
    ++done_;
    MaybePrint();
  }
  void Tick() {
    std::lock_guard<std::mutex> lock(mu_);
    MaybePrint();
  }

 private:
  using Clock = std::chrono::steady_clock;
  void MaybePrint() {
    const auto now = Clock::now();
    if (!enabled_ || done_ == total_ || std::chrono::duration<double>(now - last_).count() < kProgressSeconds) return;
    last_ = now;
    std::fprintf(stderr, "conformance: %zu of %zu tests done, %.0f s\n", done_, total_,
                 std::chrono::duration<double>(now - start_).count());
  }

  std::mutex mu_;
  const size_t total_;
  const bool enabled_;
  size_t done_ = 0;
  const Clock::time_point start_;
  Clock::time_point last_;
};

// This executable's path, for starting it again as a worker.
StatusOr<std::string> SelfPath() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return FailedPrecondition("cannot find this executable (/proc/self/exe): ", ec.message());
  return self.string();
}

// ------------------------------------------------------------------ main

int Run(Args args) {
  if (args.root.empty()) {
    const char* env = std::getenv("ONNXAMP_TESTDATA_DIR");
    args.root = env && *env ? env : kDefaultRoot;
  }
  std::error_code ec;
  if (!std::filesystem::is_directory(args.root, ec)) {
    std::printf(
        "onnxamp_conformance: test data folder %s not found (install libonnx-testdata, or give --data-dir); "
        "skipping\n",
        args.root.c_str());
    return kExitSkip;
  }
  const exec::Device device = args.device == "cuda" ? exec::Device::kCuda : exec::Device::kCpu;
  if (device != exec::Device::kCpu) {
    const DeviceProbe probe = ProbeDevice(device, args.isolate);
    if (!probe.ok) {
      std::printf("onnxamp_conformance: %s; skipping\n", probe.text.c_str());
      return kExitSkip;
    }
    std::printf("device: %s (sessions on cuda:%d)\n", probe.text.c_str(), args.device_index);
  }
  ExpectedFailures expected;
  if (!args.expected.empty()) {
    StatusOr<ExpectedFailures> e = ReadExpected(args.expected);
    if (!e.ok()) {
      if (!(args.update_expected && e.status().code() == StatusCode::kNotFound)) {
        std::fprintf(stderr, "error: %s\n", e.status().message().c_str());
        return kExitFailure;
      }
    } else {
      expected = std::move(e).value();
    }
  }

  std::vector<TestCase> tests = FindTests(args.root, args.suites);
  if (!args.filter.empty()) {
    std::regex re;
    try {
      re = std::regex(args.filter);
    } catch (const std::regex_error& e) {
      std::fprintf(stderr, "error: --filter '%s': not a valid regular expression: %s\n", args.filter.c_str(), e.what());
      return kExitUsage;
    }
    std::erase_if(tests, [&](const TestCase& t) { return !std::regex_search(t.id(), re); });
  }
  if (tests.empty()) {
    std::fprintf(stderr, "error: no test found under %s%s\n", args.root.c_str(),
                 args.filter.empty() ? "" : (" matching '" + args.filter + "'").c_str());
    return kExitFailure;
  }

  RunOptions options;
  options.device = device;
  options.device_index = args.device_index;
  options.session_threads = args.session_threads;
  int jobs = args.threads > 0 ? args.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // Device runs with --isolate start worker processes, each with its own CUDA context on the one device.
  const bool use_workers = args.isolate && device != exec::Device::kCpu;
  if (use_workers && args.threads == 0) jobs = std::min(jobs, kDefaultDeviceWorkers);
  jobs = std::min<int>({jobs, kMaxWorkers, static_cast<int>(tests.size())});

  std::vector<TestResult> results(tests.size());
  std::vector<std::string> ids;
  for (const TestCase& t : tests) ids.push_back(t.id());
  std::mutex print_mu;
  Progress progress(tests.size(), !args.verbose);
  auto done = [&](size_t i, const TestResult& r) {
    results[i] = r;
    if (args.verbose) {
      std::lock_guard<std::mutex> lock(print_mu);
      PrintResultLine(tests[i], r);
    }
    progress.Done();
  };

  const auto start = std::chrono::steady_clock::now();
  if (args.isolate) {
    IsolateOptions isolate;
    isolate.jobs = jobs;
    isolate.timeout_seconds = args.timeout;
    isolate.tick = [&progress] { progress.Tick(); };
    if (use_workers) {
      StatusOr<std::string> self = SelfPath();
      if (!self.ok()) {
        std::fprintf(stderr, "error: %s\n", self.status().message().c_str());
        return kExitFailure;
      }
      isolate.worker_program = *self;
    }
    RunIsolated(tests, options, isolate, done);
  } else {
    InstallCrashReport();
    std::atomic<size_t> next{0};
    auto worker = [&](int w) {
      for (size_t i = next++; i < tests.size(); i = next++) {
        g_current[w].store(ids[i].c_str());
        done(i, RunTest(tests[i], options));
        g_current[w].store(nullptr);
      }
    };
    std::vector<std::thread> pool;
    for (int w = 1; w < jobs; ++w) pool.emplace_back(worker, w);
    worker(0);
    for (std::thread& t : pool) t.join();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  if (args.list_failures) PrintFailures(tests, results);
  if (args.list_unsupported) PrintUnsupported(tests, results);
  if (device != exec::Device::kCpu) PrintPlacement(tests, results, args.verbose);
  PrintSummary(tests, results, seconds);

  if (args.update_expected) {
    const ExpectedFailures updated = Updated(ids, results, expected);
    Status st = WriteFileAtomic(
        args.expected, FormatExpected(updated, device == exec::Device::kCpu ? "the CPU runtime" : "the CUDA backend"));
    if (!st.ok()) {
      std::fprintf(stderr, "error: %s\n", st.message().c_str());
      return kExitFailure;
    }
    std::printf("wrote %s: %zu expected failures (was %zu)\n", args.expected.c_str(), updated.size(), expected.size());
    return kExitOk;
  }
  if (args.expected.empty()) {
    int failed = 0;
    for (const TestResult& r : results) failed += r.outcome == Outcome::kFailed;
    return failed == 0 ? kExitOk : kExitFailure;
  }
  const Deviations d = Compare(ids, results, expected);
  for (const auto* list : {&d.unexpected_failures, &d.unexpected_passes, &d.unexpected_other}) {
    for (const std::string& line : *list) std::printf("%s\n", line.c_str());
  }
  if (d.empty()) {
    std::printf("as expected (%s)\n", args.expected.c_str());
    return kExitOk;
  }
  std::printf(
      "%zu unexpected failures, %zu unexpected passes, %zu now unsupported, against %s "
      "(rerun with --update-expected to accept)\n",
      d.unexpected_failures.size(), d.unexpected_passes.size(), d.unexpected_other.size(), args.expected.c_str());
  return kExitFailure;
}

int Main(int argc, char** argv) {
  Args args;
  CLI::App app{"Runs the ONNX backend test suite through the onnxamp CPU runtime or CUDA backend",
               "onnxamp_conformance"};
  app.add_option("--root,--data-dir", args.root,
                 StrCat("Test data folder (holding node/, simple/, ...; or one suite's tests); default "
                        "$ONNXAMP_TESTDATA_DIR, else ",
                        kDefaultRoot));
  app.add_option("--device", args.device,
                 "Run the sessions on the CPU runtime or the CUDA backend (exit 77 when "
                 "there is no usable device)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--device-index", args.device_index, "With --device cuda: which CUDA device")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--suite", args.suites, "Suites to run (default: node pytorch-converted pytorch-operator simple)")
      ->delimiter(',');
  app.add_option("--filter", args.filter, "Run only tests whose '<suite>/<test>' id matches this regex");
  app.add_flag("-v,--verbose", args.verbose, "Print one line per test with its result and reason");
  app.add_flag("--list-failures", args.list_failures, "List failing tests grouped by op");
  app.add_flag("--list-unsupported", args.list_unsupported, "List unsupported tests grouped by what they use");
  app.add_option("--expected", args.expected, "List of expected failures to check the run against");
  app.add_flag("--update-expected", args.update_expected, "Rewrite the --expected list from this run")
      ->needs(app.get_option("--expected"));
  app.add_option("--threads", args.threads, "Tests run at once (default: one per hardware thread)")
      ->check(CLI::Range(1, kMaxWorkers));
  app.add_option("--session-threads", args.session_threads, "Threads of each session (default 1)")
      ->check(CLI::Range(1, 256));
  app.add_flag("--isolate", args.isolate,
               "Run each test in a child process (a crash fails that test only); with --device cuda, in worker "
               "processes (4 unless --threads) that each initialise CUDA once");
  app.add_option("--timeout", args.timeout, "With --isolate: seconds before a test is killed (default 120)")
      ->check(CLI::PositiveNumber);
  // Hidden: the worker mode of --isolate --device cuda, started by the run itself (isolate.h).
  app.add_flag("--worker", args.worker, "Serve tests to a parent run on file descriptors 3 and 4")->group("");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "error: %s (see 'onnxamp_conformance --help')\n", e.what());
    return kExitUsage;
  }
  if (args.worker) {
    RunOptions options;
    options.device = args.device == "cuda" ? exec::Device::kCuda : exec::Device::kCpu;
    options.device_index = args.device_index;
    options.session_threads = args.session_threads;
    return ServeTests([&options](const TestCase& test) { return RunTest(test, options); });
  }
  return Run(args);
}

}  // namespace
}  // namespace onnxamp::conformance

int main(int argc, char** argv) { return onnxamp::conformance::Main(argc, argv); }
