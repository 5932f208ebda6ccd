// Test helper that turns the session graph optimizations on or off for the sessions created in its scope and
// restores the previous setting when it ends.
#pragma once

#include "runtime/executor/graph_optimizer.h"

namespace onnxamp::testing {

// Turns graph optimization on or off for sessions created in its scope.
class ScopedGraphOptimization {
 public:
  explicit ScopedGraphOptimization(bool on) : saved_(exec::GraphOptimizationEnabled()) {
    exec::SetGraphOptimization(on);
  }
  ~ScopedGraphOptimization() { exec::SetGraphOptimization(saved_); }
  ScopedGraphOptimization(const ScopedGraphOptimization&) = delete;
  ScopedGraphOptimization& operator=(const ScopedGraphOptimization&) = delete;

 private:
  bool saved_;
};

}  // namespace onnxamp::testing
