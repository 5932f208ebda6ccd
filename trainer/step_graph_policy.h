// When a device training step is captured as a CUDA Graph, replayed, re-captured or run eagerly
// (TrainerOptions::cuda_graph; docs/training.md, "CUDA Graphs"). Plain host logic, kept apart from the CUDA code so
// that the CPU tests check it without a GPU; trainer/cuda/cuda_training.cc drives it.
//
// A captured step bakes in the batch shapes (the rows of each micro-batch) and every device address and constant its
// kernels were launched with; the device side sums the latter up in a generation number that changes whenever one
// of them changes. The policy:
//   - a step of shapes that were run eagerly `warmup` times just before, each fully on the session's memory plan (so
//     that the plan, the library workspaces and the kernels' cached tables are settled), is captured;
//   - a step whose shapes and generation are the graph's replays it;
//   - any other step (a partial last batch, a step that cannot be captured) runs eagerly and drops the graph: an eager
//     run may change what the graph reads (the kernels' cached tables), so the steps after it warm up and capture
//     anew; a generation change with the same shapes re-captures at once;
//   - a capture that fails is reported once as a notice, and after `max_failures` failures every later step runs
//     eagerly.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "runtime/common/status.h"

namespace onnxamp::trainer {

// kOn: capture where possible, with a notice when a step cannot be captured or a capture fails; kAuto: the same,
// noticing only failed captures; kOff: every step eager.
enum class CudaGraphMode { kOff, kOn, kAuto };
StatusOr<CudaGraphMode> CudaGraphModeFromName(const std::string& name);  // "off", "on", "auto"
const char* CudaGraphModeName(CudaGraphMode mode);

// What the device steps did (DeviceTraining::graph_stats).
struct DeviceGraphStats {
  int64_t eager_steps = 0;      // steps run kernel by kernel
  int64_t captures = 0;         // graphs captured and instantiated
  int64_t replays = 0;          // steps run by launching a graph (the capturing step included)
  int64_t failed_captures = 0;  // captures that failed (the step then ran eagerly)
  std::string last_failure;     // why the last capture failed ("" when none did)
};

// What a captured step bakes in.
struct StepGraphKey {
  std::vector<int64_t> rows;  // per micro-batch
  uint64_t generation = 0;
  bool operator==(const StepGraphKey& o) const { return rows == o.rows && generation == o.generation; }
  bool operator!=(const StepGraphKey& o) const { return !(*this == o); }
};

enum class StepGraphAction { kEager, kCapture, kReplay };

class StepGraphPolicy {
 public:
  // One planned eager step of the same shapes just before: the first run with new shapes makes the memory plan (and
  // is not planned), the next runs on it with the workspaces grown and the kernels' tables uploaded for those shapes.
  static constexpr int kDefaultWarmup = 1;
  static constexpr int kDefaultMaxFailures = 3;

  // warmup >= 1, max_failures >= 1.
  explicit StepGraphPolicy(CudaGraphMode mode, int warmup = kDefaultWarmup, int max_failures = kDefaultMaxFailures);

  // What to do with the next step of `key`. `blocker`: why this step cannot be captured at all ("" when it can: e.g.
  // "a profiled step", "micro-batches of different sizes in one step"); under kOn each distinct blocker is noticed
  // once.
  StepGraphAction Next(const StepGraphKey& key, const std::string& blocker);
  // Reports what the step did: ran eagerly (`planned`: every run of it used the session's memory plan and allocated
  // nothing outside it), was captured (and launched), failed to capture (`why`, one line; the step then runs
  // eagerly and is reported with RanEager too), or replayed the graph.
  void RanEager(const StepGraphKey& key, bool planned);
  void Captured(const StepGraphKey& key);
  void CaptureFailed(const std::string& why);
  void Replayed();

  // Whether a graph is held for `key`'s shapes and generation (false after anything that dropped it).
  bool HasGraphFor(const StepGraphKey& key) const { return has_graph_ && graph_key_ == key; }
  bool has_graph() const { return has_graph_; }
  bool gave_up() const { return gave_up_; }
  const DeviceGraphStats& stats() const { return stats_; }
  // One-line notices for the user since the last call ("cuda graph: ..."), oldest first.
  std::vector<std::string> TakeNotices();

 private:
  CudaGraphMode mode_;
  int warmup_;
  int max_failures_;
  bool has_graph_ = false;
  StepGraphKey graph_key_;
  std::vector<int64_t> streak_rows_;  // the shapes of the planned eager steps just before
  int streak_ = 0;                    // how many there were in a row
  bool gave_up_ = false;
  std::set<std::string> noticed_;  // blockers already noticed
  std::vector<std::string> notices_;
  DeviceGraphStats stats_;
};

}  // namespace onnxamp::trainer
