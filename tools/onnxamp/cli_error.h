// Exit codes and the one-line error messages every onnxamp subcommand prints on stderr.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

#include "runtime/common/status.h"
#include "runtime/common/text.h"

namespace onnxamp::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// `text` (several lines allowed) for the terminal, for reports that quote names from the model.
inline std::string TerminalSafe(std::string_view text) { return EscapeControlBytes(text, true); }

// `message` folded onto one line: line breaks and tabs become "; " and " ", other control bytes are written as \xNN,
// trailing blanks are dropped.
inline std::string OneLine(std::string_view message) {
  std::string out;
  out.reserve(message.size());
  for (char c : message) {
    if (c == '\n' || c == '\r') {
      if (!out.empty() && out.back() != ' ') out += "; ";
    } else if (c == '\t') {
      out += ' ';
    } else {
      out += c;
    }
  }
  while (!out.empty() && (out.back() == ' ' || out.back() == ';')) out.pop_back();
  return EscapeControlBytes(out, false);
}

// Prints "error: <message>" as one line on stderr and returns kExitFailure.
inline int PrintError(std::string_view message) {
  std::fprintf(stderr, "error: %s\n", OneLine(message).c_str());
  std::fflush(stderr);
  return kExitFailure;
}

// Prints a failed Status the same way. Statuses from the importer already start with the file they concern.
inline int PrintError(const Status& status) { return PrintError(status.message()); }

// Prints "error: <message> (see 'onnxamp <command> --help')" on one line and returns kExitUsage.
inline int PrintUsageError(std::string_view message, std::string_view command) {
  std::string hint = command.empty() ? std::string("onnxamp --help") : "onnxamp " + std::string(command) + " --help";
  std::fprintf(stderr, "error: %s (see '%s')\n", OneLine(message).c_str(), hint.c_str());
  std::fflush(stderr);
  return kExitUsage;
}

}  // namespace onnxamp::cli
