// Running test cases in child processes (see isolate.h).
#include "tests/conformance/isolate.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <sstream>
#include <string>

namespace onnxamp::conformance {
namespace {

using Clock = std::chrono::steady_clock;

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

struct Child {
  pid_t pid = -1;
  int fd = -1;
  size_t index = 0;
  Clock::time_point start;
  std::string data;
  bool killed = false;
};

void WriteAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = write(fd, s.data() + off, s.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

TestResult Finish(Child& c, const TestCase& test, double timeout_seconds) {
  int status = 0;
  while (waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - c.start).count();
  TestResult r;
  if (c.killed) {
    r.reason = StrCat("timed out after ", timeout_seconds, " s (killed)");
  } else if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    r.reason = StrCat("crashed: signal ", sig, " (", strsignal(sig), ")");
  } else if (!Deserialize(c.data, &r)) {
    r = TestResult();
    r.reason = StrCat("the child process exited with status ", WIFEXITED(status) ? WEXITSTATUS(status) : -1,
                      " without a result");
  }
  if (r.ops.empty()) DescribeModel(test, &r);
  r.seconds = seconds;
  return r;
}

}  // namespace

void RunIsolated(const std::vector<TestCase>& tests, const RunOptions& options, int jobs, double timeout_seconds,
                 const std::function<void(size_t, const TestResult&)>& done) {
  if (jobs < 1) jobs = 1;
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
    const auto now = Clock::now();
    for (size_t i = running.size(); i-- > 0;) {
      Child& c = running[i];
      bool eof = false;
      if (pfds[i].revents & (POLLIN | POLLHUP | POLLERR)) {
        char buf[4096];
        const ssize_t n = read(c.fd, buf, sizeof buf);
        if (n > 0) {
          c.data.append(buf, static_cast<size_t>(n));
        } else if (n == 0 || errno != EINTR) {
          eof = true;
        }
      }
      if (!eof && !c.killed && std::chrono::duration<double>(now - c.start).count() > timeout_seconds) {
        kill(c.pid, SIGKILL);
        c.killed = true;
      }
      if (eof) {
        close(c.fd);
        const TestResult r = Finish(c, tests[c.index], timeout_seconds);
        const size_t index = c.index;
        running.erase(running.begin() + static_cast<std::ptrdiff_t>(i));
        done(index, r);
      }
    }
  }
}

}  // namespace onnxamp::conformance
