// Running test cases in child processes or persistent worker processes (see isolate.h).
#include "tests/conformance/isolate.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>

extern char** environ;

namespace onnxamp::conformance {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// ------------------------------------------------------------------ messages

// A TestResult as lines: outcome, culprit, seconds, reason, ops (','-joined), out-of-scope items ('|'-joined),
// nodes on the CPU.
std::string Serialize(const TestResult& r) {
  auto join = [](const std::vector<std::string>& v, char sep) {
    std::string s;
    for (const std::string& x : v) {
      if (!s.empty()) s += sep;
      s += x;
    }
    return s;
  };
  std::ostringstream os;
  os << static_cast<int>(r.outcome) << '\n'
     << r.culprit << '\n'
     << r.seconds << '\n'
     << r.reason << '\n'
     << join(r.ops, ',') << '\n'
     << join(r.out_of_scope, '|') << '\n'
     << r.cpu_nodes << '\n';
  return os.str();
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  if (s.empty()) return out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

bool Deserialize(const std::string& text, TestResult* r) {
  std::vector<std::string> lines = Split(text, '\n');
  if (lines.size() < 7) return false;
  const int o = std::atoi(lines[0].c_str());
  if (o < 0 || o > 2) return false;
  r->outcome = static_cast<Outcome>(o);
  r->culprit = lines[1];
  r->seconds = std::atof(lines[2].c_str());
  r->reason = lines[3];
  r->ops = Split(lines[4], ',');
  r->out_of_scope = Split(lines[5], '|');
  r->cpu_nodes = std::atoi(lines[6].c_str());
  return true;
}

// Messages between the parent and a worker are frames: the payload's length in decimal, '\n', the payload. A request
// is the test case's suite, name and folder separated by '\0'; a reply is a Serialize()d result.
std::string Frame(const std::string& payload) { return StrCat(payload.size(), "\n", payload); }

enum class Take { kFrame, kIncomplete, kGarbled };

// Moves the first whole frame in `buf` to `payload`.
Take TakeFrame(std::string& buf, std::string* payload) {
  const size_t eol = buf.find('\n');
  if (eol == std::string::npos) return buf.size() > 20 ? Take::kGarbled : Take::kIncomplete;
  if (eol == 0 || eol > 20) return Take::kGarbled;
  size_t size = 0;
  for (size_t i = 0; i < eol; ++i) {
    if (buf[i] < '0' || buf[i] > '9') return Take::kGarbled;
    size = size * 10 + static_cast<size_t>(buf[i] - '0');
  }
  if (buf.size() - eol - 1 < size) return Take::kIncomplete;
  *payload = buf.substr(eol + 1, size);
  buf.erase(0, eol + 1 + size);
  return Take::kFrame;
}

bool WriteAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = write(fd, s.data() + off, s.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

// Reads what is there (after poll said so) onto `buf`; false at the end of the stream or on an error.
bool ReadSome(int fd, std::string& buf) {
  char chunk[4096];
  for (;;) {
    const ssize_t n = read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    buf.append(chunk, static_cast<size_t>(n));
    return true;
  }
}

int WaitFor(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

// The result of a test whose process ended without giving one.
TestResult Lost(const TestCase& test, bool killed, int status, double timeout_seconds, const char* process) {
  TestResult r;
  if (killed) {
    r.reason = StrCat("timed out after ", timeout_seconds, " s (killed)");
  } else if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    r.reason = StrCat("crashed: signal ", sig, " (", strsignal(sig), ")");
  } else {
    r.reason = StrCat("the ", process, " exited with status ", WIFEXITED(status) ? WEXITSTATUS(status) : -1,
                      " without a result");
  }
  DescribeModel(test, &r);
  return r;
}

// Ignores SIGPIPE while alive, so that writing to a worker that died is an error (EPIPE), not the parent's death.
class IgnoreSigpipe {
 public:
  IgnoreSigpipe() {
    sigaction(SIGPIPE, nullptr, &old_);
    signal(SIGPIPE, SIG_IGN);
  }
  ~IgnoreSigpipe() { sigaction(SIGPIPE, &old_, nullptr); }

 private:
  struct sigaction old_ = {};
};

// ------------------------------------------------------------------ a child forked per test

struct Child {
  pid_t pid = -1;
  int fd = -1;
  size_t index = 0;
  Clock::time_point start;
  std::string data;
  bool killed = false;
};

TestResult Finish(Child& c, const TestCase& test, double timeout_seconds) {
  const int status = WaitFor(c.pid);
  TestResult r;
  if (c.killed || WIFSIGNALED(status) || !Deserialize(c.data, &r)) {
    r = Lost(test, c.killed, status, timeout_seconds, "child process");
  } else if (r.ops.empty()) {
    DescribeModel(test, &r);
  }
  r.seconds = SecondsSince(c.start);
  return r;
}

void RunForked(const std::vector<TestCase>& tests, const RunOptions& options, const IsolateOptions& isolate,
               const std::function<void(size_t, const TestResult&)>& done) {
  const int jobs = std::max(1, isolate.jobs);
  std::vector<Child> running;
  size_t next = 0;
  while (next < tests.size() || !running.empty()) {
    while (next < tests.size() && static_cast<int>(running.size()) < jobs) {
      int fds[2];
      if (pipe(fds) != 0) {
        TestResult r;
        r.reason = StrCat("pipe failed: ", std::strerror(errno));
        done(next++, r);
        continue;
      }
      std::fflush(stdout);
      std::fflush(stderr);
      const pid_t pid = fork();
      if (pid == 0) {
        close(fds[0]);
        const TestResult r = RunTest(tests[next], options);
        WriteAll(fds[1], Serialize(r));
        close(fds[1]);
        _exit(0);
      }
      close(fds[1]);
      if (pid < 0) {
        close(fds[0]);
        TestResult r;
        r.reason = StrCat("fork failed: ", std::strerror(errno));
        done(next++, r);
        continue;
      }
      Child c;
      c.pid = pid;
      c.fd = fds[0];
      c.index = next++;
      c.start = Clock::now();
      running.push_back(std::move(c));
    }
    std::vector<pollfd> pfds;
    for (const Child& c : running) pfds.push_back({c.fd, POLLIN, 0});
    const int ready = poll(pfds.data(), pfds.size(), 100);
    if (ready < 0 && errno != EINTR) break;
    if (isolate.tick) isolate.tick();
    for (size_t i = running.size(); i-- > 0;) {
      Child& c = running[i];
      bool eof = false;
      if (pfds[i].revents & (POLLIN | POLLHUP | POLLERR)) eof = !ReadSome(c.fd, c.data);
      if (!eof && !c.killed && SecondsSince(c.start) > isolate.timeout_seconds) {
        kill(c.pid, SIGKILL);
        c.killed = true;
      }
      if (eof) {
        close(c.fd);
        const TestResult r = Finish(c, tests[c.index], isolate.timeout_seconds);
        const size_t index = c.index;
        running.erase(running.begin() + static_cast<std::ptrdiff_t>(i));
        done(index, r);
      }
    }
  }
}

// ------------------------------------------------------------------ persistent workers

struct Worker {
  pid_t pid = -1;
  int to = -1;    // requests (the worker's kWorkerRequestFd)
  int from = -1;  // results (the worker's kWorkerResultFd)
  bool busy = false;
  size_t index = 0;  // the test it runs, when busy
  Clock::time_point start;
  std::string data;
};

// Moves `fd` to a number of at least 10 (close-on-exec), so that the dup2s onto 3 and 4 in the worker cannot
// overwrite one another.
int AboveTen(int fd) {
  const int moved = fcntl(fd, F_DUPFD_CLOEXEC, 10);
  close(fd);
  return moved;
}

// Starts a worker: `program` with `args`, its request and result pipes on kWorkerRequestFd and kWorkerResultFd.
StatusOr<Worker> Spawn(const std::string& program, const std::vector<std::string>& args) {
  // Close-on-exec everywhere: a worker must not hold another worker's pipes, or that one's death would not end its
  // result stream.
  int req[2], res[2];
  if (pipe2(req, O_CLOEXEC) != 0) return Internal("pipe failed: ", std::strerror(errno));
  if (pipe2(res, O_CLOEXEC) != 0) {
    const int err = errno;
    close(req[0]);
    close(req[1]);
    return Internal("pipe failed: ", std::strerror(err));
  }
  const int child_in = AboveTen(req[0]);
  const int child_out = AboveTen(res[1]);
  std::vector<std::string> argv_strings = {program};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_strings) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, child_in, kWorkerRequestFd);
  posix_spawn_file_actions_adddup2(&actions, child_out, kWorkerResultFd);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t default_signals;
  sigemptyset(&default_signals);
  sigaddset(&default_signals, SIGPIPE);  // ignored here (IgnoreSigpipe); the worker gets the default back
  posix_spawnattr_setsigdefault(&attr, &default_signals);
  sigset_t no_signals;
  sigemptyset(&no_signals);
  posix_spawnattr_setsigmask(&attr, &no_signals);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  pid_t pid = -1;
  const int err = child_in < 0 || child_out < 0
                      ? EMFILE
                      : posix_spawn(&pid, program.c_str(), &actions, &attr, argv.data(), environ);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  for (int fd : {child_in, child_out}) {
    if (fd >= 0) close(fd);
  }
  if (err != 0) {
    close(req[1]);
    close(res[0]);
    return FailedPrecondition("cannot start the worker process ", program, ": ", std::strerror(err));
  }
  Worker w;
  w.pid = pid;
  w.to = req[1];
  w.from = res[0];
  return w;
}

// Ends the workers that are done: closing their requests makes them exit; one that has not within 10 s is killed.
void RetireAll(std::vector<Worker>& workers) {
  for (Worker& w : workers) {
    close(w.to);
    close(w.from);
  }
  const auto start = Clock::now();
  for (Worker& w : workers) {
    int status = 0;
    while (waitpid(w.pid, &status, WNOHANG) == 0) {
      if (SecondsSince(start) > 10) {
        kill(w.pid, SIGKILL);
        WaitFor(w.pid);
        break;
      }
      usleep(10000);
    }
  }
  workers.clear();
}

// Ends a worker that died or must die during its test, and gives that test's result.
TestResult Bury(Worker& w, const TestCase& test, bool kill_it, double timeout_seconds) {
  if (kill_it) kill(w.pid, SIGKILL);
  close(w.to);
  close(w.from);
  const int status = WaitFor(w.pid);
  TestResult r = Lost(test, kill_it, status, timeout_seconds, "worker process");
  r.seconds = SecondsSince(w.start);
  return r;
}

void RunInWorkers(const std::vector<TestCase>& tests, const RunOptions& options, const IsolateOptions& isolate,
                  const std::function<void(size_t, const TestResult&)>& done) {
  const IgnoreSigpipe ignore_sigpipe;
  const int jobs = std::max(1, isolate.jobs);
  const std::vector<std::string> args = WorkerArguments(options);
  std::vector<Worker> workers;
  size_t next = 0;
  auto any_busy = [&] {
    for (const Worker& w : workers) {
      if (w.busy) return true;
    }
    return false;
  };
  while (next < tests.size() || any_busy()) {
    // Hand out tests: to idle workers, then to new ones up to `jobs`.
    for (size_t i = 0; next < tests.size(); ++i) {
      if (i == workers.size()) {
        if (static_cast<int>(workers.size()) >= jobs) break;
        StatusOr<Worker> w = Spawn(isolate.worker_program, args);
        if (!w.ok()) {
          TestResult r;
          r.reason = w.status().message();
          DescribeModel(tests[next], &r);
          done(next++, r);
          --i;
          continue;
        }
        workers.push_back(std::move(w).value());
      }
      Worker& w = workers[i];
      if (w.busy) continue;
      const TestCase& t = tests[next];
      w.busy = true;
      w.index = next++;
      w.start = Clock::now();
      if (!WriteAll(w.to, Frame(StrCat(t.suite, std::string(1, '\0'), t.name, std::string(1, '\0'), t.dir)))) {
        // The worker died between two tests; its death is reported on this one.
        done(w.index, Bury(w, t, false, isolate.timeout_seconds));
        workers.erase(workers.begin() + static_cast<std::ptrdiff_t>(i--));
      }
    }
    std::vector<pollfd> pfds;
    for (const Worker& w : workers) pfds.push_back({w.from, static_cast<short>(w.busy ? POLLIN : 0), 0});
    const int ready = poll(pfds.data(), pfds.size(), 100);
    if (ready < 0 && errno != EINTR) break;
    if (isolate.tick) isolate.tick();
    for (size_t i = workers.size(); i-- > 0;) {
      Worker& w = workers[i];
      if (!w.busy) {
        if (pfds[i].revents & (POLLHUP | POLLERR)) {  // died while idle: the next test takes a new one
          std::vector<Worker> dead = {w};
          RetireAll(dead);
          workers.erase(workers.begin() + static_cast<std::ptrdiff_t>(i));
        }
        continue;
      }
      const TestCase& t = tests[w.index];
      bool lost = false, timed_out = false;
      if (pfds[i].revents & (POLLIN | POLLHUP | POLLERR)) lost = !ReadSome(w.from, w.data);
      std::string payload;
      const Take take = lost ? Take::kIncomplete : TakeFrame(w.data, &payload);
      if (take == Take::kFrame) {
        TestResult r;
        if (Deserialize(payload, &r)) {
          if (r.ops.empty()) DescribeModel(t, &r);
          r.seconds = SecondsSince(w.start);
          w.busy = false;
          done(w.index, r);
          continue;
        }
      }
      if (take == Take::kIncomplete && !lost) {
        timed_out = SecondsSince(w.start) > isolate.timeout_seconds;
        if (!timed_out) continue;
      }
      TestResult r = Bury(w, t, !lost, isolate.timeout_seconds);
      if (!lost && !timed_out) r.reason = "the worker process sent a garbled result (killed)";
      const size_t index = w.index;
      workers.erase(workers.begin() + static_cast<std::ptrdiff_t>(i));
      done(index, r);
    }
  }
  RetireAll(workers);
}

}  // namespace

void RunIsolated(const std::vector<TestCase>& tests, const RunOptions& options, const IsolateOptions& isolate,
                 const std::function<void(size_t, const TestResult&)>& done) {
  if (isolate.worker_program.empty()) {
    RunForked(tests, options, isolate, done);
  } else {
    RunInWorkers(tests, options, isolate, done);
  }
}

std::vector<std::string> WorkerArguments(const RunOptions& options) {
  return {"--worker",
          "--device",
          options.device == exec::Device::kCuda ? "cuda" : "cpu",
          "--device-index",
          std::to_string(options.device_index),
          "--session-threads",
          std::to_string(options.session_threads)};
}

int ServeTests(const std::function<TestResult(const TestCase&)>& run) {
  if (fcntl(kWorkerRequestFd, F_GETFD) < 0 || fcntl(kWorkerResultFd, F_GETFD) < 0) {
    std::fprintf(stderr, "--worker: file descriptors %d and %d must be the pipes of a parent run (--isolate)\n",
                 kWorkerRequestFd, kWorkerResultFd);
    return 1;
  }
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  std::string buf, payload;
  for (;;) {
    Take take;
    while ((take = TakeFrame(buf, &payload)) == Take::kIncomplete) {
      if (!ReadSome(kWorkerRequestFd, buf)) return buf.empty() ? 0 : 1;  // the parent has no more tests
    }
    if (take == Take::kGarbled) return 1;
    const std::vector<std::string> fields = Split(payload, '\0');
    if (fields.size() != 3) return 1;
    const TestResult r = run({fields[0], fields[1], fields[2]});
    if (!WriteAll(kWorkerResultFd, Frame(Serialize(r)))) return 1;
  }
}

}  // namespace onnxamp::conformance
