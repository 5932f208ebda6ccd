// Greedy-by-size offset assignment for the static memory plan.
#include "runtime/executor/memory_plan.h"

#include <algorithm>
#include <numeric>

namespace onnxamp::exec {

MemoryPlan PlanMemory(const std::vector<PlanRequest>& requests, uint64_t alignment) {
  MemoryPlan plan;
  plan.offsets.assign(requests.size(), 0);
  std::vector<size_t> order(requests.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return requests[a].bytes > requests[b].bytes; });
  struct Placed {
    uint64_t begin, end;
    int first, last;
  };
  std::vector<Placed> placed;
  for (size_t idx : order) {
    const PlanRequest& r = requests[idx];
    const uint64_t size = (r.bytes + alignment - 1) / alignment * alignment;
    std::vector<std::pair<uint64_t, uint64_t>> busy;
    for (const Placed& p : placed) {
      if (p.first <= r.last_step && r.first_step <= p.last) busy.emplace_back(p.begin, p.end);
    }
    std::sort(busy.begin(), busy.end());
    uint64_t offset = 0;
    for (const auto& [b, e] : busy) {
      if (offset + size <= b) break;
      offset = std::max(offset, e);
    }
    plan.offsets[idx] = offset;
    placed.push_back({offset, offset + size, r.first_step, r.last_step});
    plan.arena_bytes = std::max(plan.arena_bytes, offset + size);
  }
  return plan;
}

}  // namespace onnxamp::exec
