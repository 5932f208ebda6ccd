// Per-node profiles of a run (RunOptions::profile) as text: time by op type and the slowest nodes, for
// `onnxamp run --profile` and the benchmark driver.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runtime/executor/session.h"

namespace onnxamp::exec {

// A table of the run's node times: one line per op type (nodes, total ms, share of the sum), most expensive first,
// then the `top` slowest nodes. Device nodes give device time, CPU nodes host time; the device column says which.
// Subgraph nodes (NodeTime::within) are left out of those (their enclosing node's time holds theirs) and shown after
// them, by SubgraphProfile.
std::string FormatProfile(const std::vector<NodeTime>& nodes, size_t top = 10);

// Where the time of If, Loop and Scan nodes goes: the times of their subgraphs' nodes summed per enclosing node and
// op type, over one or more profiled runs.
class SubgraphProfile {
 public:
  // Adds a profiled run's nodes: those with `within` to the sums, the others as the enclosing nodes' own times.
  void Add(const std::vector<NodeTime>& nodes);
  bool empty() const { return by_op_.empty(); }
  // One block per enclosing node, the most expensive first (at most `blocks`): its time, then its subgraphs' op types
  // by time (calls, total ms, share of the enclosing node's time). With `steps` > 0 the sums are over that many
  // training steps, and ms per step are shown too; 0: one run. Empty when no subgraph node ran.
  std::string Format(int64_t steps, size_t blocks = 8) const;

 private:
  struct Total {
    int64_t calls = 0;
    double seconds = 0;
  };
  std::map<std::string, Total> nodes_;                         // "within > node" (or node): every node's time
  std::map<std::string, std::map<std::string, Total>> by_op_;  // within -> op type -> time
};

// The pieces of the profile tables: seconds as milliseconds with three decimals ("1.250"), and `part` as a share of
// `whole` with one decimal ("12.5%"; "0.0%" when whole is 0).
std::string FormatMs(double seconds);
std::string FormatShare(double part, double whole);

}  // namespace onnxamp::exec
