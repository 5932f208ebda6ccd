// Exit codes and the one-line error messages every onnxamp subcommand prints on stderr.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

#include "runtime/common/status.h"

namespace onnxamp::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// `message` folded onto one line: line breaks and tabs become "; " and " ", other control bytes (a terminal escape
// sequence in a hostile model's names, a NUL) are written as \xNN, trailing blanks are dropped.
inline std::string OneLine(std::string_view message) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(message.size());
  for (char c : message) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n' || c == '\r') {
      if (!out.empty() && out.back() != ' ') out += "; ";
    } else if (c == '\t') {
      out += ' ';
    } else if (u < 0x20 || u == 0x7f) {
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    } else {
      out += c;
    }
  }
  while (!out.empty() && (out.back() == ' ' || out.back() == ';')) out.pop_back();
  return out;
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
