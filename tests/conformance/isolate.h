// Running test cases in child processes, so that a crash or a hang in one test cannot hide the others.
#pragma once

#include <functional>
#include <vector>

#include "tests/conformance/runner.h"

namespace onnxamp::conformance {

// Runs every test in a forked child, at most `jobs` at once. A child that dies from a signal or runs past
// `timeout_seconds` (killed) gives a failed result saying so. `done` is called in the parent for each finished
// test with its index. Must be called before the process starts any thread.
void RunIsolated(const std::vector<TestCase>& tests, const RunOptions& options, int jobs, double timeout_seconds,
                 const std::function<void(size_t, const TestResult&)>& done);

}  // namespace onnxamp::conformance
