// CLI11 checks shared by the subcommands (commands.h): they read an option's text before CLI11 converts it, so that
// a value CLI11 would saturate (an integer past int64) or take as "not given" (a NaN) is a usage error instead.
#include <charconv>
#include <cmath>
#include <limits>
#include <string>

#include "runtime/common/status.h"
#include "tools/onnxamp/commands.h"

namespace onnxamp::cli {

CLI::Validator WholeNumber(int64_t min, int64_t max) {
  const std::string range =
      max == std::numeric_limits<int64_t>::max() ? StrCat(">= ", min) : StrCat("from ", min, " to ", max);
  return CLI::Validator(
      [min, max, range](std::string& text) -> std::string {
        int64_t v = 0;
        const char* end = text.data() + text.size();
        const auto [ptr, ec] = std::from_chars(text.data(), end, v);
        if (text.empty() || ptr != end || (ec != std::errc() && ec != std::errc::result_out_of_range)) {
          return "'" + text + "' is not a whole number";
        }
        if (ec == std::errc::result_out_of_range || v < min || v > max) {
          return StrCat("'", text, "' must be a whole number ", range);
        }
        return std::string();
      },
      "INT " + range);
}

CLI::Validator Unsigned64() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        uint64_t v = 0;
        const char* end = text.data() + text.size();
        const auto [ptr, ec] = std::from_chars(text.data(), end, v);
        if (text.empty() || ptr != end || ec != std::errc()) {
          return StrCat("'", text, "' must be a whole number from 0 to ", std::numeric_limits<uint64_t>::max());
        }
        return std::string();
      },
      "UINT64");
}

CLI::Validator FiniteNumber(double min, bool inclusive) {
  return CLI::Validator(
      [min, inclusive](std::string& text) -> std::string {
        double v = 0;
        try {
          size_t used = 0;
          v = std::stod(text, &used);
          if (used != text.size()) return "'" + text + "' is not a number";
        } catch (...) {
          return "'" + text + "' is not a number";
        }
        if (!std::isfinite(v) || v < min || (!inclusive && v == min)) {
          return StrCat("'", text, "' must be a finite number ", inclusive ? ">= " : "> ", min);
        }
        return std::string();
      },
      inclusive ? "NUMBER >= min" : "NUMBER > min");
}

void CheckWholeNumbers(CLI::App* cmd, std::initializer_list<WholeNumberOption> options) {
  for (const WholeNumberOption& o : options) cmd->get_option(o.name)->check(WholeNumber(o.min, o.max));
}

void RecordGivenOptions(CLI::App* cmd, std::set<std::string>& given) {
  cmd->final_callback([cmd, &given] {
    for (const CLI::Option* o : cmd->get_options()) {
      if (o->count() > 0) given.insert(o->get_name());
    }
  });
}

}  // namespace onnxamp::cli
