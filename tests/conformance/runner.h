// Running one ONNX backend test case (a folder with model.onnx and test_data_set_*/) through the CPU runtime or a
// device backend (CUDA).
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/executor/kernel.h"
#include "tests/conformance/compare.h"

namespace onnxamp::conformance {

enum class Outcome { kPassed, kFailed, kUnsupported };
const char* OutcomeName(Outcome o);  // "passed", "failed", "unsupported"

// One test case found on disk.
struct TestCase {
  std::string suite;  // "node", "pytorch-converted", ...
  std::string name;   // "test_abs"
  std::string dir;    // the folder holding model.onnx
  std::string id() const { return suite + "/" + name; }
};

struct TestResult {
  Outcome outcome = Outcome::kFailed;
  std::string reason;                     // one line; empty when passed
  std::vector<std::string> ops;           // op types used by the model (subgraphs included), sorted
  std::vector<std::string> out_of_scope;  // what puts the test outside the runtime's scope (ops, types)
  std::string culprit;                    // the op a failure is attributed to, for grouping
  double seconds = 0;
  int cpu_nodes = -1;  // device runs: nodes the session placed on the CPU (-1: no session was made, or a CPU run)
};

struct RunOptions {
  exec::Device device = exec::Device::kCpu;
  int device_index = 0;
  int session_threads = 1;
  uint64_t memory_limit_bytes = 4ull << 30;
  Tolerance tolerance;
};

// The ops of the list: a test whose model uses only these (and only tensor values of non-string
// types) is in scope and must pass; others are "unsupported" when the runtime refuses them.
const std::set<std::string>& InScopeOps();

// The test cases under `root`. When `root` holds suite folders (node, pytorch-converted, ...) those named in
// `suites` are walked; otherwise `root` itself is taken as one suite. Sorted by suite, then name.
std::vector<TestCase> FindTests(const std::string& root, const std::vector<std::string>& suites);

// Fills `result`'s ops and out_of_scope from the test's model file, and its culprit (when empty) from the ops:
// the one op of a single-op model, else the ops joined with '+'. For results made without running the test in
// this process (a crashed child).
void DescribeModel(const TestCase& test, TestResult* result);

// Makes `device` usable in this process (registers its backend; nothing for the CPU). FailedPrecondition saying why
// when the build has no such backend or there is no usable device. With --isolate, call it only in the child
// processes: CUDA cannot be used in a process forked after its parent initialised it.
Status PrepareDevice(exec::Device device);

// Every CUDA device, or why there is none, in one line ("" for a build without the CUDA backend).
std::string DescribeDevices();

// Loads, runs and checks one test case (calling PrepareDevice first for a device run). Never throws; every error
// becomes part of the result.
TestResult RunTest(const TestCase& test, const RunOptions& options);

}  // namespace onnxamp::conformance
