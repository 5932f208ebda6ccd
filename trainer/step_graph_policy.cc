#include "trainer/step_graph_policy.h"

#include <algorithm>
#include <utility>

namespace onnxamp::trainer {

StatusOr<CudaGraphMode> CudaGraphModeFromName(const std::string& name) {
  if (name == "off") return CudaGraphMode::kOff;
  if (name == "on") return CudaGraphMode::kOn;
  if (name == "auto") return CudaGraphMode::kAuto;
  return InvalidArgument("--cuda-graph ", name, ": expected on, off or auto");
}

const char* CudaGraphModeName(CudaGraphMode mode) {
  switch (mode) {
    case CudaGraphMode::kOff:
      return "off";
    case CudaGraphMode::kOn:
      return "on";
    case CudaGraphMode::kAuto:
      break;
  }
  return "auto";
}

StepGraphPolicy::StepGraphPolicy(CudaGraphMode mode, int warmup, int max_failures)
    : mode_(mode), warmup_(std::max(warmup, 1)), max_failures_(std::max(max_failures, 1)) {}

StepGraphAction StepGraphPolicy::Next(const StepGraphKey& key, const std::string& blocker) {
  if (mode_ == CudaGraphMode::kOff || gave_up_) return StepGraphAction::kEager;
  if (!blocker.empty()) {
    if (mode_ == CudaGraphMode::kOn && noticed_.insert(blocker).second) {
      notices_.push_back(StrCat("cuda graph: not captured (", blocker, "); these steps run eagerly"));
    }
    return StepGraphAction::kEager;
  }
  if (HasGraphFor(key)) return StepGraphAction::kReplay;
  if (streak_ >= warmup_ && streak_rows_ == key.rows) return StepGraphAction::kCapture;
  return StepGraphAction::kEager;
}

void StepGraphPolicy::RanEager(const StepGraphKey& key, bool planned) {
  ++stats_.eager_steps;
  has_graph_ = false;  // the eager run may have changed what the graph reads
  if (!planned) {
    streak_rows_ = key.rows;
    streak_ = 0;
    return;
  }
  if (streak_rows_ == key.rows) {
    ++streak_;
  } else {
    streak_rows_ = key.rows;
    streak_ = 1;
  }
}

void StepGraphPolicy::Captured(const StepGraphKey& key) {
  ++stats_.captures;
  has_graph_ = true;
  graph_key_ = key;
}

void StepGraphPolicy::CaptureFailed(const std::string& why) {
  ++stats_.failed_captures;
  stats_.last_failure = why;
  has_graph_ = false;
  streak_ = 0;  // warm up again before the next try
  if (stats_.failed_captures >= max_failures_) {
    gave_up_ = true;
    notices_.push_back(StrCat("cuda graph: capture failed (", why, "); after ", stats_.failed_captures,
                              " failures every later step runs eagerly"));
  } else {
    notices_.push_back(StrCat("cuda graph: capture failed (", why, "); the step ran eagerly"));
  }
}

void StepGraphPolicy::Replayed() { ++stats_.replays; }

std::vector<std::string> StepGraphPolicy::TakeNotices() {
  std::vector<std::string> out = std::move(notices_);
  notices_.clear();
  return out;
}

}  // namespace onnxamp::trainer
