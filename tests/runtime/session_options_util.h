// Test helper: SessionOptions for CPU sessions with a given graph optimization level and linalg implementation
// (tests compare an optimized session against an unoptimized one on the reference kernels).
#pragma once

#include "runtime/executor/session.h"

namespace onnxamp::testing {

inline exec::SessionOptions CpuSession(int threads, exec::LinalgImpl linalg = exec::LinalgImpl::kOneDnn,
                                       exec::GraphOptimization level = exec::GraphOptimization::kAll) {
  exec::SessionOptions o;
  o.num_threads = threads;
  o.kernels.linalg = linalg;
  o.graph_optimization = level;
  return o;
}

}  // namespace onnxamp::testing
