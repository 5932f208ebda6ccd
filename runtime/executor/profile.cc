// FormatProfile: node times summed by op type, then the slowest nodes.
#include "runtime/executor/profile.h"

#include <algorithm>
#include <cstdio>
#include <map>

namespace onnxamp::exec {

std::string FormatMs(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", seconds * 1e3);
  return buf;
}

std::string FormatShare(double part, double whole) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%.1f%%", whole > 0 ? 100 * part / whole : 0.0);
  return buf;
}

std::string FormatProfile(const std::vector<NodeTime>& nodes, size_t top) {
  struct OpTotal {
    int count = 0;
    double seconds = 0;
    int on_device = 0;
  };
  std::map<std::string, OpTotal> by_op;
  double sum = 0;
  for (const NodeTime& n : nodes) {
    OpTotal& t = by_op[n.op_type];
    ++t.count;
    t.seconds += n.seconds;
    t.on_device += n.on_device;
    sum += n.seconds;
  }
  std::vector<std::pair<std::string, OpTotal>> ops(by_op.begin(), by_op.end());
  std::stable_sort(ops.begin(), ops.end(),
                   [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
  std::string s = StrCat("profile: ", nodes.size(), " nodes, ", FormatMs(sum), " ms in nodes\n");
  char line[256];
  std::snprintf(line, sizeof line, "  %-28s %6s %10s %7s  %s\n", "op", "nodes", "ms", "share", "where");
  s += line;
  for (const auto& [op, t] : ops) {
    const char* where = t.on_device == t.count ? "device" : t.on_device == 0 ? "cpu" : "mixed";
    std::snprintf(line, sizeof line, "  %-28s %6d %10s %7s  %s\n", op.c_str(), t.count, FormatMs(t.seconds).c_str(),
                  FormatShare(t.seconds, sum).c_str(), where);
    s += line;
  }
  std::vector<const NodeTime*> slowest;
  for (const NodeTime& n : nodes) slowest.push_back(&n);
  std::stable_sort(slowest.begin(), slowest.end(),
                   [](const NodeTime* a, const NodeTime* b) { return a->seconds > b->seconds; });
  if (slowest.size() > top) slowest.resize(top);
  if (!slowest.empty()) s += StrCat("  slowest nodes:\n");
  for (const NodeTime* n : slowest) {
    std::snprintf(line, sizeof line, "    %10s ms %7s  %s%s\n", FormatMs(n->seconds).c_str(),
                  FormatShare(n->seconds, sum).c_str(), n->node.c_str(), n->on_device ? "" : " (cpu)");
    s += line;
  }
  return s;
}

}  // namespace onnxamp::exec
