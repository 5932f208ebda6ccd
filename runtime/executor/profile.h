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

// The pieces of the profile tables: seconds as milliseconds with three decimals ("1.250"), and `part` as a share of
// `whole` with one decimal ("12.5%"; "0.0%" when whole is 0).
std::string FormatMs(double seconds);
std::string FormatShare(double part, double whole);

}  // namespace onnxamp::exec
