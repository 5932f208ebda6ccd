// Per-node profiles of a run (RunOptions::profile) as text: time by op type and the slowest nodes, for
// `onnxamp run --profile` and the benchmark driver.
#pragma once

#include <string>
#include <vector>

#include "runtime/executor/session.h"

namespace onnxamp::exec {

// A table of the run's node times: one line per op type (nodes, total ms, share of the sum), most expensive first,
// then the `top` slowest nodes. Device nodes give device time, CPU nodes host time; the device column says which.
std::string FormatProfile(const std::vector<NodeTime>& nodes, size_t top = 10);

}  // namespace onnxamp::exec
