// The checked-in list of expected conformance failures, and the check of a run against it.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "runtime/common/status.h"
#include "tests/conformance/runner.h"

namespace onnxamp::conformance {

// Test id ("node/test_abs") -> the short reason written next to it.
using ExpectedFailures = std::map<std::string, std::string>;

// Parses the list: one test id per line, optionally followed by whitespace and a reason; blank lines and lines
// starting with '#' are ignored. A test listed twice is an error naming the line.
StatusOr<ExpectedFailures> ParseExpected(const std::string& text, const std::string& display_name);
StatusOr<ExpectedFailures> ReadExpected(const std::string& path);

// The file text for `failures`, with a header saying what the file is (the failures under `runtime`), sorted by id.
std::string FormatExpected(const ExpectedFailures& failures, const std::string& runtime = "the CPU runtime");

// A run compared with the list: each entry is one line for the user.
struct Deviations {
  std::vector<std::string> unexpected_failures;  // failed, not listed
  std::vector<std::string> unexpected_passes;    // listed, passed
  std::vector<std::string> unexpected_other;     // listed, now unsupported
  bool empty() const { return unexpected_failures.empty() && unexpected_passes.empty() && unexpected_other.empty(); }
};

// Compares the results of the tests that ran (ids[i] with results[i]) against `expected`. Listed tests that
// did not run are not judged.
Deviations Compare(const std::vector<std::string>& ids, const std::vector<TestResult>& results,
                   const ExpectedFailures& expected);

// `expected` updated with this run: tests that ran and did not fail are removed; failures not listed yet are
// added with a short reason from the run; listed failures keep the reason written in the list (often a
// hand-written explanation); entries of tests that did not run are kept.
ExpectedFailures Updated(const std::vector<std::string>& ids, const std::vector<TestResult>& results,
                         const ExpectedFailures& expected);

}  // namespace onnxamp::conformance
