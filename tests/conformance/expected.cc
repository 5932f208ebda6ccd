// The checked-in list of expected conformance failures (see expected.h).
#include "tests/conformance/expected.h"

#include <set>

#include "runtime/common/file_util.h"

namespace onnxamp::conformance {
namespace {

std::string Trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  const size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

// The reason as written in the list: short, one line.
std::string ShortReason(const std::string& reason) {
  constexpr size_t kMax = 160;
  std::string r = reason;
  for (char& c : r) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  if (r.size() > kMax) r = r.substr(0, kMax - 3) + "...";
  return r;
}

}  // namespace

StatusOr<ExpectedFailures> ParseExpected(const std::string& text, const std::string& display_name) {
  ExpectedFailures out;
  size_t pos = 0;
  int line_no = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::string line = Trim(text.substr(pos, end - pos));
    ++line_no;
    pos = end + 1;
    if (line.empty() || line[0] == '#') continue;
    const size_t sp = line.find_first_of(" \t");
    const std::string id = line.substr(0, sp);
    const std::string reason = sp == std::string::npos ? "" : Trim(line.substr(sp));
    if (id.find('/') == std::string::npos) {
      return InvalidArgument(display_name, ":", line_no, ": expected '<suite>/<test> <reason>', got '", line, "'");
    }
    if (!out.emplace(id, reason).second) {
      return InvalidArgument(display_name, ":", line_no, ": test '", id, "' is listed twice");
    }
  }
  return out;
}

StatusOr<ExpectedFailures> ReadExpected(const std::string& path) {
  ONNXAMP_ASSIGN_OR_RETURN(std::string text, ReadFile(path, 64ull << 20));
  return ParseExpected(text, path);
}

std::string FormatExpected(const ExpectedFailures& failures, const std::string& runtime) {
  std::string s =
      "# Expected failures of the ONNX backend test suite under " + runtime +
      " (tests/conformance).\n"
      "# One test per line: <suite>/<test> <short reason>. onnxamp_conformance --expected FILE fails when a test\n"
      "# not listed here fails, or a listed test passes; --update-expected rewrites this file from a run.\n";
  for (const auto& [id, reason] : failures) s += reason.empty() ? id + "\n" : id + "  " + reason + "\n";
  return s;
}

Deviations Compare(const std::vector<std::string>& ids, const std::vector<TestResult>& results,
                   const ExpectedFailures& expected) {
  Deviations d;
  for (size_t i = 0; i < ids.size(); ++i) {
    const bool listed = expected.count(ids[i]) > 0;
    const TestResult& r = results[i];
    if (r.outcome == Outcome::kFailed && !listed) {
      d.unexpected_failures.push_back(StrCat("unexpected failure: ", ids[i], ": ", r.reason));
    } else if (r.outcome == Outcome::kPassed && listed) {
      d.unexpected_passes.push_back(StrCat("unexpected pass: ", ids[i], ": remove it from the list"));
    } else if (r.outcome == Outcome::kUnsupported && listed) {
      d.unexpected_other.push_back(
          StrCat("unexpected result: ", ids[i], " is now unsupported (remove it from the list): ", r.reason));
    }
  }
  return d;
}

ExpectedFailures Updated(const std::vector<std::string>& ids, const std::vector<TestResult>& results,
                         const ExpectedFailures& expected) {
  ExpectedFailures out = expected;
  for (size_t i = 0; i < ids.size(); ++i) {
    auto it = out.find(ids[i]);
    if (results[i].outcome != Outcome::kFailed) {
      if (it != out.end()) out.erase(it);
    } else if (it == out.end() || it->second.empty()) {
      out[ids[i]] = ShortReason(results[i].reason);
    }
  }
  return out;
}

}  // namespace onnxamp::conformance
