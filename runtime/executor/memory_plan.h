// Static memory plan: offsets in one arena for values whose lifetimes are known, reusing memory between
// values that are never alive at the same time.
#pragma once

#include <cstdint>
#include <vector>

namespace onnxamp::exec {

struct PlanRequest {
  uint64_t bytes = 0;
  int first_step = 0;  // step that writes the value
  int last_step = 0;   // last step that reads it (inclusive)
};

struct MemoryPlan {
  std::vector<uint64_t> offsets;  // one per request, aligned to the requested alignment
  uint64_t arena_bytes = 0;
};

// Places every request so that two values alive at a common step never overlap. Greedy: largest first, each
// at the lowest offset that fits among the already placed values it overlaps in time. `alignment` (a power of two)
// applies to every offset: 64 for host arenas (cache lines), 256 for device arenas.
MemoryPlan PlanMemory(const std::vector<PlanRequest>& requests, uint64_t alignment = 64);

}  // namespace onnxamp::exec
