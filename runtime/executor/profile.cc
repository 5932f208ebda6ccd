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
  size_t own = 0;
  for (const NodeTime& n : nodes) {
    if (!n.within.empty()) continue;
    ++own;
    OpTotal& t = by_op[n.op_type];
    ++t.count;
    t.seconds += n.seconds;
    t.on_device += n.on_device;
    sum += n.seconds;
  }
  std::vector<std::pair<std::string, OpTotal>> ops(by_op.begin(), by_op.end());
  std::stable_sort(ops.begin(), ops.end(),
                   [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
  std::string s = StrCat("profile: ", own, " nodes, ", FormatMs(sum), " ms in nodes\n");
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
  for (const NodeTime& n : nodes) {
    if (n.within.empty()) slowest.push_back(&n);
  }
  std::stable_sort(slowest.begin(), slowest.end(),
                   [](const NodeTime* a, const NodeTime* b) { return a->seconds > b->seconds; });
  if (slowest.size() > top) slowest.resize(top);
  if (!slowest.empty()) s += StrCat("  slowest nodes:\n");
  for (const NodeTime* n : slowest) {
    std::snprintf(line, sizeof line, "    %10s ms %7s  %s%s\n", FormatMs(n->seconds).c_str(),
                  FormatShare(n->seconds, sum).c_str(), n->node.c_str(), n->on_device ? "" : " (cpu)");
    s += line;
  }
  SubgraphProfile subgraphs;
  subgraphs.Add(nodes);
  s += subgraphs.Format(0);
  return s;
}

void SubgraphProfile::Add(const std::vector<NodeTime>& nodes) {
  for (const NodeTime& n : nodes) {
    Total& t = nodes_[n.within.empty() ? n.node : StrCat(n.within, " > ", n.node)];
    ++t.calls;
    t.seconds += n.seconds;
    if (n.within.empty()) continue;
    Total& op = by_op_[n.within][n.op_type];
    ++op.calls;
    op.seconds += n.seconds;
  }
}

std::string SubgraphProfile::Format(int64_t steps, size_t blocks) const {
  if (by_op_.empty()) return "";
  auto time_of = [&](const std::string& path) {
    auto it = nodes_.find(path);
    return it == nodes_.end() ? 0.0 : it->second.seconds;
  };
  std::vector<const std::string*> enclosing;
  for (const auto& [within, ops] : by_op_) enclosing.push_back(&within);
  std::stable_sort(enclosing.begin(), enclosing.end(),
                   [&](const std::string* a, const std::string* b) { return time_of(*a) > time_of(*b); });
  const bool per_run = steps <= 0;
  const double per = per_run ? 1.0 : 1.0 / static_cast<double>(steps);
  std::string s = StrCat("  inside subgraphs (If, Loop and Scan bodies; every iteration counts as a call):\n");
  char line[512];
  for (size_t k = 0; k < enclosing.size() && k < blocks; ++k) {
    const std::string& within = *enclosing[k];
    const double total = time_of(within);
    s += StrCat("  ", within, ": ", FormatMs(total * per), per_run ? " ms\n" : " ms per step\n");
    std::vector<std::pair<std::string, Total>> ops(by_op_.at(within).begin(), by_op_.at(within).end());
    std::stable_sort(ops.begin(), ops.end(),
                     [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
    for (const auto& [op, t] : ops) {
      const std::string per_step = per_run ? "" : StrCat(FormatMs(t.seconds * per), " ms/step");
      std::snprintf(line, sizeof line, "    %-30s %8lld calls %10s ms %17s %7s\n", op.c_str(),
                    static_cast<long long>(t.calls), FormatMs(t.seconds).c_str(), per_step.c_str(),
                    FormatShare(t.seconds, total).c_str());
      s += line;
    }
  }
  if (enclosing.size() > blocks) s += StrCat("  (", enclosing.size() - blocks, " more subgraph nodes not shown)\n");
  return s;
}

}  // namespace onnxamp::exec
