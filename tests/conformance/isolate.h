// Running test cases in other processes, so that a crash or a hang in one test cannot hide the others: a child
// forked per test (CPU runs), or persistent worker processes started with fork+exec (device runs).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tests/conformance/runner.h"

namespace onnxamp::conformance {

struct IsolateOptions {
  int jobs = 1;                  // processes running tests at once
  double timeout_seconds = 120;  // a test running longer is killed and fails
  // Empty: every test runs in a child forked from this process (cheap, and nothing one test does reaches another).
  // Otherwise the onnxamp_conformance executable to start (posix_spawn: a fresh process image, so nothing this
  // process did leaks into it) with WorkerArguments(options) as up to `jobs` persistent workers, each of which
  // initialises the device once and runs the tests it is sent one after another. A worker that dies during a test
  // or runs past the timeout (killed) fails that test; a new worker takes the following tests.
  std::string worker_program;
  // Called in this process about every 100 ms while tests run (progress reports); may be empty.
  std::function<void()> tick;
};

// Runs every test in another process (see IsolateOptions). A process that dies from a signal gives a failed result
// "crashed: signal N (<name>)"; one past the timeout, "timed out after S s (killed)". `done` is called in this
// process for each finished test with its index. In fork mode (no worker_program) it must be called before the
// process starts any thread.
void RunIsolated(const std::vector<TestCase>& tests, const RunOptions& options, const IsolateOptions& isolate,
                 const std::function<void(size_t, const TestResult&)>& done);

// ------------------------------------------------------------------ the worker's side

// The file descriptors on which a worker reads test cases and writes results. Its stdout and stderr are the
// parent's, for diagnostics.
inline constexpr int kWorkerRequestFd = 3;
inline constexpr int kWorkerResultFd = 4;

// The arguments (after the program name) that make onnxamp_conformance a worker running tests with `options`:
// "--worker --device cuda --device-index 0 --session-threads 1".
std::vector<std::string> WorkerArguments(const RunOptions& options);

// A worker's loop: reads test cases from kWorkerRequestFd until its end, runs each with `run` and writes the result to
// kWorkerResultFd. Returns the exit status for the worker: 0, or 1 when a channel failed or a request was garbled.
// The worker is killed when the process that started it dies.
int ServeTests(const std::function<TestResult(const TestCase&)>& run);

}  // namespace onnxamp::conformance
